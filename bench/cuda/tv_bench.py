#!/usr/bin/env python3
"""modelc's cuda target against torch.compile on torchvision nets (GPU machine).

usage: python3 bench/cuda/tv_bench.py --modelc PATH --work DIR [--nets a,b] [--reps N]

For each net (torchvision mobilenet_v2, resnet18, squeezenet1_1,
mobilenet_v3_small; seeded random weights, eval mode, batch 1, 3x224x224):
  1. exports it to ONNX (opset 17) with the torch installed here;
  2. compiles it with `modelc compile --target cuda --harness`, builds
     libNAME.a with the generated build.ninja and the driver with nvcc, runs
     it on the same input: N timed runs of the CUDA graph, each between two
     CUDA events (the driver prints the median);
  3. times torch.compile(mode="reduce-overhead") with
     torch._inductor.config.freezing = True on the same module and input,
     the same way (N calls, each between two events, median);
  4. checks modelc's output against torch's eager fp32 output.
fp16: modelc with --dtype fp16 (weights and activations stored as float16,
arithmetic in float32, inputs and outputs float32), its output checked
against the same fp32 reference; torch.compile on model.half() and a half
input. Prints a markdown table (and JSON to DIR/results.json).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import torch
import torchvision

NETS = ["mobilenet_v2", "resnet18", "squeezenet1_1", "mobilenet_v3_small"]


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


def modelc_net(name, onnx_path, x_np, args, dtype="fp32"):
    gen = os.path.join(args.work, name, "gen-" + dtype)
    t0 = time.time()
    run([args.modelc, "compile", onnx_path, "-o", gen, "--name", name, "--target", "cuda",
         "--harness", "--cuda-arch", args.cuda_arch, "--dtype", dtype, "--stats"])
    compile_s = time.time() - t0
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
        prof = [l for l in r.stderr.splitlines() if l.startswith("profile:")][:28]
        print("\n".join(f"{name}: {l}" for l in prof), flush=True)
    line = [l for l in r.stderr.splitlines() if "median" in l][-1]
    med = float(line.split("median ")[1].split(" us")[0])
    lo = float(line.split("min ")[1].split(" us")[0])
    y = np.fromfile(os.path.join(out, "output_0.bin"), dtype=np.float32)
    return med, lo, compile_s, y


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--modelc", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--nets", default=",".join(NETS))
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--cuda-arch", default="sm_90")
    ap.add_argument("--skip-fp16", action="store_true")
    ap.add_argument("--skip-torch", action="store_true", help="modelc only (no torch.compile timing)")
    ap.add_argument("--profile", action="store_true", help="print modelc's time per launch")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    torch._inductor.config.freezing = True
    dev = torch.cuda.get_device_name(0)
    rows = []
    for name in args.nets.split(","):
        torch.manual_seed(0)
        model = getattr(torchvision.models, name)(weights=None).eval()
        x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1))
        onnx_path = os.path.join(args.work, f"{name}.onnx")
        os.makedirs(os.path.join(args.work, name), exist_ok=True)
        with torch.no_grad():
            torch.onnx.export(model, (x,), onnx_path, opset_version=17, dynamo=False,
                              input_names=["input"], output_names=["output"])
        model = model.cuda()
        xc = x.cuda()
        # the reference in true fp32 (cuDNN convolutions default to TF32)
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
        with torch.no_grad():
            ref = model(xc).float().cpu().numpy().ravel()
        torch.backends.cudnn.allow_tf32 = True
        row = {"net": name, "device": dev}
        try:
            med, lo, cs, y = modelc_net(name, onnx_path, x.numpy(), args)
            err = float(np.max(np.abs(y - ref)) / max(np.max(np.abs(ref)), 1e-30))
            row.update(modelc_fp32_us=med, modelc_fp32_min_us=lo, modelc_compile_s=cs, modelc_rel_err=err)
        except Exception as ex:  # one net's failure is a row, not the end
            row.update(modelc_error=str(ex)[-2000:])
        if not args.skip_fp16:
            try:  # fp16 storage, fp32 arithmetic; checked against the fp32 reference
                med, lo, cs, y = modelc_net(name, onnx_path, x.numpy(), args, "fp16")
                err = float(np.max(np.abs(y - ref)) / max(np.max(np.abs(ref)), 1e-30))
                row.update(modelc_fp16_us=med, modelc_fp16_min_us=lo, modelc_fp16_rel_err=err)
            except Exception as ex:
                row.update(modelc_fp16_error=str(ex)[-2000:])
        if args.skip_torch:
            rows.append(row)
            print(json.dumps(row), flush=True)
            continue
        med, lo, cs = torch_compile_us(model, xc, args.reps)
        row.update(torch_fp32_us=med, torch_fp32_min_us=lo, torch_compile_s=cs)
        if not args.skip_fp16:
            mh = model.half()
            with torch.no_grad():  # what fp16 itself costs in accuracy: torch's own half output
                y16 = mh(xc.half()).float().cpu().numpy().ravel()
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
    print("| net | modelc fp32 | torch.compile fp32 | ratio fp32 | modelc fp16 | torch.compile fp16 | ratio fp16 "
          "| rel. max err vs fp32: modelc fp32 / modelc fp16 / torch eager fp16 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        m = r.get("modelc_fp32_us")
        t = r.get("torch_fp32_us")
        if t is None:
            print(f"| {r['net']} | {m if m else 'FAILED'} | - | - | - | - | {r.get('modelc_rel_err', '-')} |")
            continue
        mc = f"{m:.1f}" if m else "FAILED"
        ratio = f"{m / t:.2f}" if m else "-"
        t16 = r.get("torch_fp16_us")
        m16 = r.get("modelc_fp16_us")
        ratio16 = f"{m16 / t16:.2f}" if m16 and t16 else "-"
        err = f"{r['modelc_rel_err']:.1e}" if "modelc_rel_err" in r else "-"
        err16 = f"{r['modelc_fp16_rel_err']:.1e}" if "modelc_fp16_rel_err" in r else "-"
        terr16 = f"{r['torch_fp16_rel_err']:.1e}" if "torch_fp16_rel_err" in r else "-"
        print(f"| {r['net']} | {mc} | {t:.1f} | {ratio} | {f'{m16:.1f}' if m16 else '-'} | "
              f"{f'{t16:.1f}' if t16 else '-'} | {ratio16} | {err} / {err16} / {terr16} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
