#!/usr/bin/env python3
"""modelc's cuda target against torch.compile on a broad set of nets (GPU machine).

usage: python3 bench/cuda/tv_bench.py --modelc PATH --work DIR [--nets a,b] [--reps N]

For each net (the four it was tuned on: torchvision mobilenet_v2, resnet18,
squeezenet1_1, mobilenet_v3_small; and five it was not, built as
scripts/make-bench-models.py builds them: resnet50, convnext_tiny,
efficientnet_b0, vit6 (a ViT: 6 layers, hidden 192, patch 16, 224x224) and
bert4 (a BERT-style encoder: 4 layers, hidden 256, sequence 128, float
embeddings in, two outputs); seeded random weights, batch norms' statistics
from random batches, eval mode, batch 1):
  1. exports it to ONNX (opset 17) with the torch installed here;
  2. compiles it with `modelc compile --target cuda --harness`, builds
     libNAME.a with the generated build.ninja and the driver with nvcc, runs
     it on the same input: N timed runs of the CUDA graph, each between two
     CUDA events (the driver prints the median), and once more with
     programmatic dependent launch off (--no-pdl: each launch after the
     one before it), to show what the overlap gives;
  3. times torch.compile(mode="reduce-overhead") with
     torch._inductor.config.freezing = True on the same module and input,
     the same way (N calls, each between two events, median);
  4. checks modelc's output against torch's eager fp32 output.
tf32: modelc with --tf32 (fp32 storage, convolutions' multiplies in TF32 on
tensor cores), the same numerics as torch's fp32 default (cuDNN's
convolutions use TF32). --torch-strict also times torch.compile with TF32
off, against modelc's true fp32.
fp16: modelc with --dtype fp16 (weights and activations stored as float16,
convolutions multiply in half on tensor cores, float32 sums; inputs and
outputs float32), its output checked against the same fp32 reference;
torch.compile on model.half() and a half input. Prints a markdown table
(and JSON to DIR/results.json).
"""
import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import time

import importlib.util

import numpy as np
import torch
import torchvision

TUNED = ["mobilenet_v2", "resnet18", "squeezenet1_1", "mobilenet_v3_small"]
BROAD = ["resnet50", "convnext_tiny", "efficientnet_b0", "vit6", "bert4"]
NETS = TUNED + BROAD


@functools.lru_cache(maxsize=None)
def bench_models():
    """scripts/make-bench-models.py as a module (loaded once): its NETS and calibrate_bn."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "make-bench-models.py")
    spec = importlib.util.spec_from_file_location("bench_models", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def make_net(name):
    """(model in eval mode, input, opset, output names)."""
    torch.manual_seed(0)
    if name in TUNED:
        model = getattr(torchvision.models, name)(weights=None).eval()
        return model, torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1)), 17, ["output"]
    bm = bench_models()
    ctor, shape, opset, outs = bm.NETS[name]
    model = ctor()
    bm.int8_models.calibrate_bn(model, shape)
    model.eval()
    return model, torch.randn(*shape, generator=torch.Generator().manual_seed(1)), opset, outs


def flat(y):
    """A net's outputs (a tensor or a tuple of them) as one float32 vector."""
    ys = y if isinstance(y, (tuple, list)) else (y,)
    return np.concatenate([t.float().cpu().numpy().ravel() for t in ys])


def event_median_us(fn, reps, warmup=20):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    times = [s.elapsed_time(e) * 1000.0 for s, e in zip(starts, ends)]
    return statistics.median(times), min(times)


def torch_compile_us(model, x, reps):
    torch._dynamo.reset()
    with torch.no_grad():
        cm = torch.compile(model, mode="reduce-overhead")
        t0 = time.time()
        for _ in range(3):
            cm(x)
        torch.cuda.synchronize()
        compile_s = time.time() - t0
        med, lo = event_median_us(lambda: cm(x), reps)
    return med, lo, compile_s


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r


VARIANT_OPTS = {"fp32": ["--dtype", "fp32"], "tf32": ["--tf32"], "fp16": ["--dtype", "fp16"]}


def modelc_net(name, onnx_path, x_np, args, dtype="fp32", n_out=1):
    gen = os.path.join(args.work, name, "gen-" + dtype)
    t0 = time.time()
    r = run([args.modelc, "compile", onnx_path, "-o", gen, "--name", name, "--target", "cuda",
             "--harness", "--cuda-arch", args.cuda_arch, "--stats"] + VARIANT_OPTS[dtype])
    compile_s = time.time() - t0
    launches = [int(l.split("cuda: ")[1].split(" launches")[0]) for l in r.stderr.splitlines()
                if "stats: cuda:" in l][-1]
    run(["ninja", "-C", gen])
    run(["nvcc", "-O2", "-o", os.path.join(gen, "run"), os.path.join(gen, f"{name}_main.c"),
         f"-I{gen}", f"-L{gen}", f"-l{name}", "-lcudart"])
    inp = os.path.join(args.work, name, "input.bin")
    x_np.astype(np.float32).tofile(inp)
    out = os.path.join(args.work, name, "out-" + dtype)
    os.makedirs(out, exist_ok=True)
    extra = ["--profile"] if args.profile else []
    r = run([os.path.join(gen, "run"), out, "--repeat", str(args.reps)] + extra + [inp])
    if args.profile:
        prof = [l for l in r.stderr.splitlines() if l.startswith("profile:")][:args.profile_lines]
        print("\n".join(f"{name}: {l}" for l in prof), flush=True)
    med, lo, pdl = driver_times(r)
    y = np.concatenate([np.fromfile(os.path.join(out, f"output_{i}.bin"), dtype=np.float32) for i in range(n_out)])
    # the same library with every launch after the one before it (NAME_CUDA_NO_PDL)
    nopdl = driver_times(run([os.path.join(gen, "run"), out, "--repeat", str(args.reps), "--no-pdl", inp]))[0]
    extra = {"launches": launches}
    if args.sms:  # the same library, its K splits planned for a smaller GPU's SMs (a Jetson Orin's 16)
        out_s = out + f"-sms{args.sms}"
        os.makedirs(out_s, exist_ok=True)
        extra["sms_us"] = driver_times(run([os.path.join(gen, "run"), out_s, "--repeat", str(args.reps),
                                            "--sms", str(args.sms), inp]))[0]
        extra["sms_y"] = np.concatenate([np.fromfile(os.path.join(out_s, f"output_{i}.bin"), dtype=np.float32)
                                         for i in range(n_out)])
    if args.sanitize:  # compute-sanitizer memcheck, with the device's splits and with --sms's
        for tag, opt in [("", []), ("_sms", ["--sms", str(args.sms)] if args.sms else None)]:
            if opt is None:
                continue
            rs = subprocess.run(["compute-sanitizer", "--tool", "memcheck", "--error-exitcode", "99",
                                 os.path.join(gen, "run"), out] + opt + [inp], capture_output=True, text=True)
            summary = [l for l in rs.stdout.splitlines() if "ERROR SUMMARY" in l]
            extra["memcheck" + tag] = (summary[-1].split("ERROR SUMMARY: ")[1] if summary else "no summary") + \
                ("" if rs.returncode == 0 else f" (exit {rs.returncode})")
    return med, lo, compile_s, y, pdl, nopdl, extra


def driver_times(r):
    """The driver's median and min (us) and whether it overlapped launches."""
    line = [l for l in r.stderr.splitlines() if "median" in l][-1]
    return (float(line.split("median ")[1].split(" us")[0]), float(line.split("min ")[1].split(" us")[0]),
            "(pdl on" in line)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--modelc", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--nets", default=",".join(NETS))
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--cuda-arch", default="sm_90")
    ap.add_argument("--variants", default="fp32,tf32,fp16", help="modelc's: fp32, tf32, fp16")
    ap.add_argument("--skip-fp16", action="store_true", help="no fp16 (modelc's or torch's)")
    ap.add_argument("--torch-strict", action="store_true", help="also torch.compile fp32 with TF32 off")
    ap.add_argument("--skip-torch", action="store_true", help="modelc only (no torch.compile timing)")
    ap.add_argument("--skip-torch-fp32", action="store_true", help="torch.compile in fp16 only")
    ap.add_argument("--profile", action="store_true", help="print modelc's time per launch")
    ap.add_argument("--profile-lines", type=int, default=28, help="--profile: the slowest launches printed")
    ap.add_argument("--sms", type=int, default=16, help="also run each library with its splits planned for this "
                    "many SMs (a Jetson Orin's 16); 0: not")
    ap.add_argument("--sanitize", action="store_true", help="compute-sanitizer memcheck on each library")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    torch._inductor.config.freezing = True
    dev = torch.cuda.get_device_name(0)
    rows = []
    for name in args.nets.split(","):
        model, x, opset, outs = make_net(name)
        onnx_path = os.path.join(args.work, f"{name}.onnx")
        os.makedirs(os.path.join(args.work, name), exist_ok=True)
        with torch.no_grad():
            torch.onnx.export(model, (x,), onnx_path, opset_version=opset, dynamo=False,
                              do_constant_folding=True, input_names=["input"], output_names=outs)
        model = model.cuda()
        xc = x.cuda()
        # the reference in true fp32 (cuDNN convolutions default to TF32)
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
        with torch.no_grad():
            ref = flat(model(xc))
        torch.backends.cudnn.allow_tf32 = True
        row = {"net": name, "device": dev}
        for variant in [v for v in args.variants.split(",") if not (args.skip_fp16 and v == "fp16")]:
            try:  # one variant's failure is a cell, not the end; all checked against the fp32 reference
                med, lo, cs, y, pdl, nopdl, extra = modelc_net(name, onnx_path, x.numpy(), args, variant, len(outs))
                err = float(np.max(np.abs(y - ref)) / max(np.max(np.abs(ref)), 1e-30))
                if "sms_y" in extra:
                    extra["sms_rel_err"] = float(np.max(np.abs(extra.pop("sms_y") - ref)) / max(np.max(np.abs(ref)), 1e-30))
                row.update({f"modelc_{variant}_{k}": v for k, v in extra.items()})
                row.update({f"modelc_{variant}_us": med, f"modelc_{variant}_min_us": lo,
                            f"modelc_{variant}_pdl": pdl, f"modelc_{variant}_no_pdl_us": nopdl,
                            f"modelc_{variant}_compile_s": cs, f"modelc_{variant}_rel_err": err})
            except Exception as ex:
                row.update({f"modelc_{variant}_error": str(ex)[-2000:]})
        if args.skip_torch:
            rows.append(row)
            print(json.dumps(row), flush=True)
            continue
        if not args.skip_torch_fp32:
            med, lo, cs = torch_compile_us(model, xc, args.reps)
            row.update(torch_fp32_us=med, torch_fp32_min_us=lo, torch_compile_s=cs)
        if args.torch_strict:
            torch.backends.cudnn.allow_tf32 = False
            med, lo, cs = torch_compile_us(model, xc, args.reps)
            row.update(torch_strict_us=med, torch_strict_min_us=lo)
            torch.backends.cudnn.allow_tf32 = True
        if not args.skip_fp16:
            mh = model.half()
            with torch.no_grad():  # what fp16 itself costs in accuracy: torch's own half output
                y16 = flat(mh(xc.half()))
            row.update(torch_fp16_rel_err=float(np.max(np.abs(y16 - ref)) / max(np.max(np.abs(ref)), 1e-30)))
            med, lo, cs = torch_compile_us(mh, xc.half(), args.reps)
            row.update(torch_fp16_us=med, torch_fp16_min_us=lo)
        rows.append(row)
        print(json.dumps(row), flush=True)
    with open(os.path.join(args.work, "results.json"), "w") as f:
        json.dump(rows, f, indent=1)
    print()
    print(f"device: {dev}; torch {torch.__version__}; CUDA-event median of {args.reps} runs (us)")
    print()
    def cell(r, key, fmt="{:.1f}"):
        v = r.get(key)
        return fmt.format(v) if v is not None else ("FAILED" if key.replace("_us", "_error") in r else "-")

    def ratio(r, a, b):
        return f"{r[a] / r[b]:.2f}" if r.get(a) and r.get(b) else "-"

    print("| net | modelc fp32 | torch.compile fp32 TF32 off | ratio | modelc --tf32 | torch.compile fp32 (TF32 convs) "
          "| ratio | modelc fp16 | torch.compile fp16 | ratio | rel. max err vs fp32: modelc fp32 / tf32 / fp16 "
          "/ torch eager fp16 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        errs = " / ".join(cell(r, k, "{:.1e}") for k in
                          ["modelc_fp32_rel_err", "modelc_tf32_rel_err", "modelc_fp16_rel_err", "torch_fp16_rel_err"])
        print(f"| {r['net']} | {cell(r, 'modelc_fp32_us')} | {cell(r, 'torch_strict_us')} | "
              f"{ratio(r, 'modelc_fp32_us', 'torch_strict_us')} | {cell(r, 'modelc_tf32_us')} | "
              f"{cell(r, 'torch_fp32_us')} | {ratio(r, 'modelc_tf32_us', 'torch_fp32_us')} | "
              f"{cell(r, 'modelc_fp16_us')} | {cell(r, 'torch_fp16_us')} | {ratio(r, 'modelc_fp16_us', 'torch_fp16_us')} "
              f"| {errs} |")
    print()
    print(f"| net | variant | launches | us, splits for {args.sms} SMs | rel. max err, {args.sms} SMs | memcheck | "
          f"memcheck, {args.sms} SMs |")
    print("|---|---|---:|---:|---:|---|---|")
    for r in rows:
        for v in args.variants.split(","):
            if f"modelc_{v}_us" in r:
                print(f"| {r['net']} | {v} | {r.get(f'modelc_{v}_launches', '-')} | {cell(r, f'modelc_{v}_sms_us')} | "
                      f"{cell(r, f'modelc_{v}_sms_rel_err', '{:.1e}')} | {r.get(f'modelc_{v}_memcheck', '-')} | "
                      f"{r.get(f'modelc_{v}_memcheck_sms', '-')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
