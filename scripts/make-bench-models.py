#!/usr/bin/env python3
"""Networks modelc was not tuned on, exported as small skeletons for bench/run
and tests/models/check.

usage: python3 scripts/make-bench-models.py OUTDIR [--only NAME,...]

Needs torch, torchvision and onnx (the GPU machine's Python has them); nothing
is downloaded (random init, seeded; batch norm statistics estimated on random
batches as scripts/make-int8-models.py does). For each network below it
writes

  OUTDIR/NAME.skel.onnx   the export with the data of every float tensor of
                          16 or more elements removed: its doc_string says
                          "modelc-fill normal MEAN STD" (that tensor's own
                          mean and standard deviation), and
                          build/inflate (tests/models/inflate.c; run by
                          tests/models/fetch) refills it with seeded normal
                          values, so that a 20 MB network is committed as a
                          few tens of KB
  OUTDIR/summary.json     per model: input shape, opset, ops, sizes

Networks (static shapes, batch 1, TorchScript exporter):
  efficientnet_b0  torchvision, 1x3x224x224 (5x5 stride-2 depthwise, SiLU,
                   squeeze-and-excitation)
  convnext_tiny    torchvision, 1x3x224x224 (7x7 depthwise, LayerNorm over
                   channels, GELU, Linear on channels-last tensors)
  resnet50         torchvision, 1x3x224x224 (bottleneck 1x1 convolutions)
  resnet18         torchvision, 1x3x224x224 (3x3 convolutions; for --blas
                   openblas's check)
  bert4            BERT-style encoder, 1x128x256 embeddings in: 4 layers,
                   hidden 256, 4 heads, MLP 1024; opset 17
                   (LayerNormalization; GELU as Erf)
  vit6             ViT: 224x224, patch 16, 6 pre-norm layers, hidden 192,
                   3 heads, MLP 768; opset 13 (LayerNorm decomposed into
                   ReduceMean/Sub/Pow/Sqrt/Div)
  gru_kws          keyword spotter: 2-layer GRU 40 -> 128 over 98 frames,
                   Linear to 12 classes on the last frame
  lstm_kws         the same with a 2-layer LSTM

Networks with dynamic axes (issue 24; made only when named with --only, and
not in tests/models/models.tsv, whose models have static shapes; refill one
with `build/inflate bench/models/NAME.skel.onnx NAME.onnx`):
  resnet18_dynbatch  resnet18 with the batch dynamic ("batch", exported at 2)
  bert4_dynseq       bert4 with the sequence dynamic ("seq", exported at 64;
                     its position table of 128 sliced to the sequence: Shape,
                     Gather, Slice chains in the graph)
  tinydet_nms        a small single-shot detector (64x64, 192 boxes, 4
                     classes) ending in torchvision's batched_nms: boxes,
                     scores and labels of a data-dependent count
  ssdlite320         torchvision's ssdlite320_mobilenet_v3_large (random
                     weights): a detector with NonMaxSuppression in its graph,
                     boxes, scores and labels of a data-dependent count
"""
import argparse
import importlib.util
import json
import math
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn as nn
import torchvision
from onnx import numpy_helper

_spec = importlib.util.spec_from_file_location(
    "int8_models", os.path.join(os.path.dirname(os.path.abspath(__file__)), "make-int8-models.py"))
int8_models = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(int8_models)

SEED = 1
MIN_FILL = 16   # float tensors with at least this many elements are refilled


class PreNormLayer(nn.Module):
    """A ViT encoder layer: pre-norm attention and MLP, residuals."""

    def __init__(self, d, heads, ff):
        super().__init__()
        self.h, self.dk = heads, d // heads
        self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ln1, self.ln2 = nn.LayerNorm(d, eps=1e-6), nn.LayerNorm(d, eps=1e-6)
        self.ff1, self.ff2 = nn.Linear(d, ff), nn.Linear(ff, d)
        self.act = nn.GELU()

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).reshape(b, s, 3, self.h, self.dk).permute(2, 0, 3, 1, 4)
        att = torch.softmax((q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.dk)), -1)
        x = x + self.o((att @ v).transpose(1, 2).reshape(b, s, d))
        return x + self.ff2(self.act(self.ff1(self.ln2(x))))


class ViT(nn.Module):
    def __init__(self, image=224, patch=16, d=192, heads=3, ff=768, layers=6, classes=1000):
        super().__init__()
        n = (image // patch) ** 2
        self.embed = nn.Conv2d(3, d, patch, patch)
        self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, n + 1, d) * 0.02)
        self.layers = nn.ModuleList(PreNormLayer(d, heads, ff) for _ in range(layers))
        self.ln = nn.LayerNorm(d, eps=1e-6)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        x = self.embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        for layer in self.layers:
            x = layer(x)
        return self.head(self.ln(x)[:, 0])


class BertDynSeq(nn.Module):
    """bert4 whose position table (128 rows) is sliced to the input's length."""

    def __init__(self):
        super().__init__()
        self.bert = int8_models.Bert2(d=256, heads=4, ff=1024, layers=4, seq=128)

    def forward(self, x):
        b = self.bert
        x = b.ln(x + b.pos[:, : x.shape[1]])
        for layer in b.layers:
            x = layer(x)
        return x, b.cls(torch.tanh(b.pool(x[:, 0])))


class TinyDet(nn.Module):
    """A small single-shot detector: 64x64 image, three stride-2 convolutions
    to an 8x8 grid, 3 anchors a cell (192 boxes), 4 classes; the boxes
    decoded from the anchors, each box's best class, then torchvision's
    batched_nms (its ONNX form: NonMaxSuppression, the indices gathered);
    boxes, scores and labels of the kept ones, a data-dependent count."""

    def __init__(self, classes=4, anchors=3):
        super().__init__()
        self.a, self.c = anchors, classes
        self.backbone = nn.Sequential(
            nn.Conv2d(3, 16, 3, 2, 1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 32, 3, 2, 1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 32, 3, 2, 1), nn.BatchNorm2d(32), nn.ReLU())
        self.box = nn.Conv2d(32, anchors * 4, 3, 1, 1)
        self.cls = nn.Conv2d(32, anchors * classes, 3, 1, 1)
        ys, xs = torch.meshgrid(torch.arange(8.0), torch.arange(8.0), indexing="ij")
        sizes = torch.tensor([12.0, 20.0, 32.0])
        cx = ((xs + 0.5) * 8).reshape(8, 8, 1).expand(8, 8, anchors)
        cy = ((ys + 0.5) * 8).reshape(8, 8, 1).expand(8, 8, anchors)
        wh = sizes.reshape(1, 1, anchors).expand(8, 8, anchors)
        self.register_buffer("anchors", torch.stack([cx, cy, wh, wh], -1).reshape(-1, 4))

    def forward(self, x):
        f = self.backbone(x)
        d = self.box(f).permute(0, 2, 3, 1).reshape(-1, 4)
        logits = self.cls(f).permute(0, 2, 3, 1).reshape(-1, self.c)
        an = self.anchors
        cx = an[:, 0] + d[:, 0] * an[:, 2]
        cy = an[:, 1] + d[:, 1] * an[:, 3]
        w = an[:, 2] * torch.exp(d[:, 2].clamp(max=4.0))
        h = an[:, 3] * torch.exp(d[:, 3].clamp(max=4.0))
        boxes = torch.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], -1)
        scores, labels = torch.softmax(logits, -1).max(-1)
        keep = torchvision.ops.batched_nms(boxes, scores, labels, 0.3)
        return boxes[keep], scores[keep], labels[keep]


def ssdlite():
    m = torchvision.models.detection.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None)
    int8_models.calibrate_bn(m.backbone, (1, 3, 320, 320))  # the detector's train mode wants targets
    return m


class RecurrentKWS(nn.Module):
    def __init__(self, cell, feat=40, hidden=128, layers=2, classes=12):
        super().__init__()
        self.rnn = cell(feat, hidden, layers, batch_first=True)
        self.fc = nn.Linear(hidden, classes)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.fc(y[:, -1])


# name -> (constructor, input shape, opset, output names)
NETS = {
    "efficientnet_b0": (lambda: torchvision.models.efficientnet_b0(weights=None), (1, 3, 224, 224), 13,
                        ["output"]),
    "convnext_tiny": (lambda: torchvision.models.convnext_tiny(weights=None), (1, 3, 224, 224), 13,
                      ["output"]),
    "resnet50": (lambda: torchvision.models.resnet50(weights=None), (1, 3, 224, 224), 13, ["output"]),
    "resnet18": (lambda: torchvision.models.resnet18(weights=None), (1, 3, 224, 224), 13, ["output"]),
    "bert4": (lambda: int8_models.Bert2(d=256, heads=4, ff=1024, layers=4, seq=128), (1, 128, 256), 17,
              ["hidden", "logits"]),
    "vit6": (ViT, (1, 3, 224, 224), 13, ["output"]),
    "gru_kws": (lambda: RecurrentKWS(nn.GRU), (1, 98, 40), 14, ["output"]),
    "lstm_kws": (lambda: RecurrentKWS(nn.LSTM), (1, 98, 40), 14, ["output"]),
}

# name -> (constructor, export shape, opset, output names, dynamic axes);
# made only when named with --only
DYNAMIC_NETS = {
    "resnet18_dynbatch": (lambda: torchvision.models.resnet18(weights=None), (2, 3, 224, 224), 13, ["output"],
                          {"input": {0: "batch"}, "output": {0: "batch"}}),
    "bert4_dynseq": (BertDynSeq, (1, 64, 256), 17, ["hidden", "logits"],
                     {"input": {1: "seq"}, "hidden": {1: "seq"}}),
    "tinydet_nms": (TinyDet, (1, 3, 64, 64), 17, ["boxes", "scores", "labels"],
                    {"boxes": {0: "detections"}, "scores": {0: "detections"}, "labels": {0: "detections"}}),
    "ssdlite320": (ssdlite, (1, 3, 320, 320), 17, ["boxes", "scores", "labels"],
                   {"boxes": {0: "detections"}, "scores": {0: "detections"}, "labels": {0: "detections"}}),
}


def strip(t, stats):
    """Removes a float tensor's data, leaving its shape and a fill rule."""
    if t.data_type != onnx.TensorProto.FLOAT or int(np.prod(t.dims)) < MIN_FILL:
        return
    a = numpy_helper.to_array(t).astype(np.float64)
    mean, std = float(a.mean()), float(a.std())
    t.ClearField("raw_data")
    t.ClearField("float_data")
    t.doc_string = f"modelc-fill normal {mean:.9g} {std:.9g}"
    stats.append((t.name, list(t.dims), mean, std))


def skeleton(src, dst):
    m = onnx.load(src)
    stats = []
    for t in m.graph.initializer:
        strip(t, stats)
    for n in m.graph.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                strip(a.t, stats)
    onnx.save(m, dst)
    return stats


def ops_of(m):
    hist = {}
    for n in m.graph.node:
        hist[n.op_type] = hist.get(n.op_type, 0) + 1
    return dict(sorted(hist.items(), key=lambda kv: -kv[1]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    only = [n for n in args.only.split(",") if n]
    summary = {"torch": torch.__version__, "onnx": onnx.__version__, "models": {}}
    nets = {name: spec + (None,) for name, spec in NETS.items()}
    nets.update({name: spec for name, spec in DYNAMIC_NETS.items() if name in only})
    for name, (ctor, shape, opset, outs, dynamic) in nets.items():
        if only and name not in only:
            continue
        torch.manual_seed(SEED)
        model = ctor()
        if name == "tinydet_nms":  # the backbone alone: the head's boxes are one image's
            int8_models.calibrate_bn(model.backbone, shape)
        elif name != "ssdlite320":
            int8_models.calibrate_bn(model, shape)
        model.eval()
        full = os.path.join(args.outdir, f"{name}.full.onnx")
        skel = os.path.join(args.outdir, f"{name}.skel.onnx")
        # the dynamic ones are traced on a seeded random input, as a user
        # would (the detector's NonMaxSuppression is scripted into an If
        # either way: its graph was the same traced on zeros)
        example = torch.zeros(shape) if dynamic is None else torch.rand(shape, generator=torch.Generator().manual_seed(SEED))
        try:
            torch.onnx.export(model, (example,), full, opset_version=opset, dynamo=False,
                              do_constant_folding=True, input_names=["input"], output_names=outs,
                              dynamic_axes=dynamic)
            onnx.checker.check_model(full)
            stats = skeleton(full, skel)
        except Exception as e:  # report and go on with the next network
            print(f"{name}: FAILED {type(e).__name__}: {e}", flush=True)
            summary["models"][name] = {"error": str(e)}
            continue
        m = onnx.load(skel)
        summary["models"][name] = {"shape": list(shape), "opset": opset, "full_bytes": os.path.getsize(full),
                                   "skel_bytes": os.path.getsize(skel), "filled": len(stats),
                                   "ops": ops_of(m)}
        os.remove(full)
        print(f"{name}: {summary['models'][name]}", flush=True)
    with open(os.path.join(args.outdir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
