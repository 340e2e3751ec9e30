#!/usr/bin/env python3
"""Int8 test models for modelc's quantize pass, made from float networks.

usage: python3 scripts/make-int8-models.py OUTDIR [--only NAME,...] [--list]

Needs torch, torchvision, onnx and onnxruntime (with onnxruntime.quantization):
the GPU machine's Python has them; nothing is downloaded (random init,
seeded). For each network below it writes

  OUTDIR/NAME.float.onnx       the float export (torch.onnx, TorchScript
                               exporter, static shapes, batch 1)
  OUTDIR/NAME_VARIANT.onnx     quantize_static of it: per-channel weights,
                               MinMax calibration on 8 seeded inputs uniform in
                               [-1, 1] (reference.js's default input range)
  OUTDIR/NAME.input.bin        one more seeded input (raw float32)
  OUTDIR/summary.json          per model: opset, ops, sizes, ORT int8 vs
                               float max|diff| on that input

VARIANT is qdq_u8s8 (QuantFormat.QDQ, QUInt8 activations, QInt8 weights:
ORT's default), qdq_s8s8 (QInt8 activations) or qop_u8s8 (QuantFormat.QOperator:
QLinearConv, QLinearMatMul and com.microsoft QLinear* ops).

Networks (batch norm statistics are first estimated on random batches, so
that random-init activations keep a sensible range):
  resnet18          torchvision, 1x3x224x224
  mobilenet_v2      torchvision, 1x3x224x224
  mobilenet_v3_small torchvision, 1x3x224x224 (HardSwish, Hardsigmoid SE, Mul)
  squeezenet1_1     torchvision, 1x3x224x224 (MaxPool ceil_mode, Concat)
  smallcnn          own, 1x3x64x64: MaxPool, Concat of branches, residual
                    Add, Sigmoid gate (Mul of two activations), HardSwish,
                    AveragePool, GlobalAveragePool, Gemm
  bert2             own BERT-style encoder, 1x32x128: 2 layers, hidden 128,
                    4 heads, MatMul + Softmax + LayerNormalization + GELU (Erf),
                    a Tanh pooler on token 0 (opset 17)
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torch.nn as nn
import torchvision
from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                      quantize_static)

SEED = 1
N_CALIB = 8


class SmallCNN(nn.Module):
    """Concat of branches, MaxPool, residual Add, Sigmoid gate, HardSwish."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.BatchNorm2d(16), nn.ReLU())
        self.pool = nn.MaxPool2d(3, 2, 1)
        self.b1 = nn.Sequential(nn.Conv2d(16, 8, 1), nn.ReLU())
        self.b3 = nn.Sequential(nn.Conv2d(16, 8, 3, 1, 1), nn.BatchNorm2d(8), nn.ReLU6())
        self.bp = nn.Sequential(nn.MaxPool2d(3, 1, 1), nn.Conv2d(16, 16, 1))
        self.mix = nn.Sequential(nn.Conv2d(32, 32, 3, 1, 1), nn.BatchNorm2d(32))
        self.gate = nn.Conv2d(32, 32, 1)
        self.dw = nn.Sequential(nn.Conv2d(32, 32, 3, 1, 1, groups=32), nn.BatchNorm2d(32), nn.Hardswish())
        self.avg = nn.AvgPool2d(2)
        self.head = nn.Sequential(nn.Conv2d(32, 64, 1), nn.Hardswish())
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        x = self.pool(self.stem(x))
        y = torch.cat([self.b1(x), self.b3(x), self.bp(x)], 1)
        y = torch.relu(self.mix(y) + y)              # residual Add
        y = y * torch.sigmoid(self.gate(y))          # Sigmoid gate: Mul of two activations
        y = self.avg(self.dw(y))
        y = self.head(y).mean((2, 3))                # ReduceMean or GlobalAveragePool
        return self.fc(y)


class EncoderLayer(nn.Module):
    def __init__(self, d, heads, ff):
        super().__init__()
        self.h, self.dk = heads, d // heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ff1, self.ff2 = nn.Linear(d, ff), nn.Linear(ff, d)
        self.act = nn.GELU()

    def forward(self, x):
        b, s, d = x.shape
        q = self.q(x).reshape(b, s, self.h, self.dk).transpose(1, 2)
        k = self.k(x).reshape(b, s, self.h, self.dk).transpose(1, 2)
        v = self.v(x).reshape(b, s, self.h, self.dk).transpose(1, 2)
        att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.dk), -1)
        a = (att @ v).transpose(1, 2).reshape(b, s, d)
        x = self.ln1(x + self.o(a))
        return self.ln2(x + self.ff2(self.act(self.ff1(x))))


class Bert2(nn.Module):
    def __init__(self, d=128, heads=4, ff=512, layers=2, seq=32):
        super().__init__()
        self.pos = nn.Parameter(torch.randn(1, seq, d) * 0.1)
        self.ln = nn.LayerNorm(d)
        self.layers = nn.ModuleList(EncoderLayer(d, heads, ff) for _ in range(layers))
        self.pool = nn.Linear(d, d)
        self.cls = nn.Linear(d, 2)

    def forward(self, x):
        x = self.ln(x + self.pos)
        for layer in self.layers:
            x = layer(x)
        return x, self.cls(torch.tanh(self.pool(x[:, 0])))


# name -> (constructor, input shape, opset, variants)
NETS = {
    "resnet18": (lambda: torchvision.models.resnet18(weights=None), (1, 3, 224, 224), 13,
                 ["qdq_u8s8", "qop_u8s8"]),
    "mobilenet_v2": (lambda: torchvision.models.mobilenet_v2(weights=None), (1, 3, 224, 224), 13,
                     ["qdq_u8s8", "qdq_s8s8"]),
    "mobilenet_v3_small": (lambda: torchvision.models.mobilenet_v3_small(weights=None), (1, 3, 224, 224), 14,
                           ["qdq_u8s8"]),
    "squeezenet1_1": (lambda: torchvision.models.squeezenet1_1(weights=None), (1, 3, 224, 224), 13,
                      ["qdq_u8s8"]),
    "smallcnn": (SmallCNN, (1, 3, 64, 64), 14, ["qdq_u8s8", "qdq_s8s8", "qop_u8s8"]),
    "bert2": (Bert2, (1, 32, 128), 17, ["qdq_u8s8", "qdq_s8s8", "qop_u8s8"]),
}

VARIANTS = {
    "qdq_u8s8": (QuantFormat.QDQ, QuantType.QUInt8, QuantType.QInt8),
    "qdq_s8s8": (QuantFormat.QDQ, QuantType.QInt8, QuantType.QInt8),
    "qop_u8s8": (QuantFormat.QOperator, QuantType.QUInt8, QuantType.QInt8),
}


class Reader(CalibrationDataReader):
    def __init__(self, name, shape, n=N_CALIB, seed=SEED):
        rng = np.random.default_rng(seed)
        self.data = [{name: rng.uniform(-1, 1, size=shape).astype(np.float32)} for _ in range(n)]
        self.rewind()

    def get_next(self):
        return next(self.it, None)

    def rewind(self):
        self.it = iter(self.data)


def calibrate_bn(model, shape):
    """Running statistics of the batch norms from random batches (random init
    leaves mean 0, variance 1, which blows activations up or down)."""
    if not any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules()):
        return
    g = torch.Generator().manual_seed(SEED + 100)
    model.train()
    with torch.no_grad():
        for _ in range(4):
            model(torch.rand((8,) + shape[1:], generator=g) * 2 - 1)


def export(name, path):
    ctor, shape, opset, _ = NETS[name]
    torch.manual_seed(SEED)
    model = ctor()
    calibrate_bn(model, shape)
    model.eval()
    x = torch.zeros(shape)
    outs = ["output"] if name != "bert2" else ["hidden", "logits"]
    torch.onnx.export(model, (x,), path, opset_version=opset, dynamo=False, do_constant_folding=True,
                      input_names=["input"], output_names=outs)
    onnx.checker.check_model(path)


def ops_of(path):
    m = onnx.load(path, load_external_data=False)
    hist = {}
    for n in m.graph.node:
        key = n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}"
        hist[key] = hist.get(key, 0) + 1
    return dict(sorted(hist.items(), key=lambda kv: -kv[1]))


def ort_run(path, feed):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return s.run(None, feed)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    only = [n for n in args.only.split(",") if n]
    summary = {"torch": torch.__version__, "onnx": onnx.__version__, "onnxruntime": ort.__version__,
               "models": {}}
    for name, (_, shape, opset, variants) in NETS.items():
        if only and name not in only:
            continue
        t0 = time.time()
        fpath = os.path.join(args.outdir, f"{name}.float.onnx")
        try:
            export(name, fpath)
        except Exception as e:  # report and go on with the next network
            print(f"{name}: export failed: {type(e).__name__}: {e}", flush=True)
            summary["models"][name] = {"error": f"export: {e}"}
            continue
        x = np.random.default_rng(SEED + 1).uniform(-1, 1, size=shape).astype(np.float32)
        x.tofile(os.path.join(args.outdir, f"{name}.input.bin"))
        ref = ort_run(fpath, {"input": x})
        summary["models"][name] = {"shape": list(shape), "opset": opset, "bytes": os.path.getsize(fpath),
                                   "ops": ops_of(fpath)}
        print(f"{name}: float {os.path.getsize(fpath)} bytes, {time.time() - t0:.1f} s", flush=True)
        for var in variants:
            fmt, act, wt = VARIANTS[var]
            qpath = os.path.join(args.outdir, f"{name}_{var}.onnx")
            t1 = time.time()
            rec = {"format": str(fmt), "activation": str(act), "weight": str(wt)}
            try:
                quantize_static(fpath, qpath, Reader("input", shape), quant_format=fmt, per_channel=True,
                                activation_type=act, weight_type=wt, calibrate_method=CalibrationMethod.MinMax)
                out = ort_run(qpath, {"input": x})
                rec.update(bytes=os.path.getsize(qpath), ops=ops_of(qpath),
                           ort_int8_vs_float=[{"max_abs_diff": float(np.abs(a - b).max()),
                                               "max_abs_ref": float(np.abs(b).max())} for a, b in zip(out, ref)])
                print(f"  {name}_{var}: {rec['bytes']} bytes, {time.time() - t1:.1f} s, "
                      f"int8 vs float {rec['ort_int8_vs_float']}", flush=True)
            except Exception as e:
                rec["error"] = f"{type(e).__name__}: {e}"
                print(f"  {name}_{var}: FAILED {rec['error']}", flush=True)
            summary["models"][f"{name}_{var}"] = rec
    with open(os.path.join(args.outdir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
