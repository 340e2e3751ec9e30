#!/usr/bin/env python3
"""Where one inference's instructions go, function by function.

    bench/mcu/profile.py ELF START_SYMBOL [--window N] [--top K]

Runs the bare-metal image under qemu-system-arm -M mps2-an386 with
`-d in_asm,exec,nochain` (as ../shared/mcu-anchor/mix.py does) and counts
the instructions executed in each function (qemu names the symbol of each
translation block) from the N-th entry into START_SYMBOL (default 1: the
first timed run of bench/mcu/main.c) until control is back in main. Build
the generated C with -fno-inline-functions-called-once (bench/mcu/run
--profile does) so that each kernel stays a function of its own.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
from collections import Counter

INSN = re.compile(r'^0x([0-9a-f]+):\s+[0-9a-f]{4}(?: [0-9a-f]{4})?\s{2,}\S+')


def profile(elf, start_sym, window):
    tmp = tempfile.mkdtemp(prefix='mcu-profile-')
    fifo = os.path.join(tmp, 'log')
    os.mkfifo(fifo)
    cmd = ['qemu-system-arm', '-M', 'mps2-an386', '-nographic', '-monitor', 'none', '-serial', 'none',
           '-semihosting', '-d', 'in_asm,exec,nochain', '-D', fifo, '-kernel', elf]
    q = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sizes = {}        # block start -> instructions
    block_pc = None
    block_n = 0
    per_sym = Counter()
    entries = -1
    inside = active = done = False
    with open(fifo, 'r', errors='replace') as f:
        for line in f:
            if line.startswith('Trace '):
                i = line.index('[')
                j = line.index(']', i)
                pc = int(line[i + 1:j].split('/')[1], 16)
                sym = line[j + 1:].strip()
                if sym == 'main':
                    if inside and active:
                        done = True
                        break
                    inside = False
                    continue
                if not inside and sym == start_sym:
                    inside = True
                    entries += 1
                    active = entries == window
                if active:
                    per_sym[sym or hex(pc)] += sizes.get(pc, 0)
            elif line.startswith('IN:'):
                block_pc, block_n = None, 0
            else:
                m = INSN.match(line)
                if m:
                    if block_pc is None:
                        block_pc = int(m.group(1), 16)
                    block_n += 1
                elif not line.strip() and block_pc is not None:
                    sizes[block_pc] = block_n
                    block_pc = None
    q.kill()
    q.wait()
    os.unlink(fifo)
    os.rmdir(tmp)
    if not done:
        sys.exit('profile.py: window %d of %s not found' % (window, start_sym))
    return per_sym


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('elf')
    ap.add_argument('start_symbol')
    ap.add_argument('--window', type=int, default=1)
    ap.add_argument('--top', type=int, default=30)
    a = ap.parse_args()
    per_sym = profile(a.elf, a.start_symbol, a.window)
    total = sum(per_sym.values())
    print('%12s %6s  %s' % ('instructions', '%', 'function'))
    for sym, n in per_sym.most_common(a.top):
        print('%12d %6.1f  %s' % (n, 100.0 * n / total, sym))
    print('%12d %6.1f  total' % (total, 100.0))


if __name__ == '__main__':
    main()
