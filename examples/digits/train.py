#!/usr/bin/env python3
"""Train the bundled default model: a small CNN for scikit-learn's 8x8 digits.

This script is kept for reproducibility only: CI and the tests never run it;
they use the committed outputs (digits.onnx, test-images.bin, test-labels.bin).

Needs (Debian 12 packages): python3-torch (1.13), python3-sklearn (1.2, for
sklearn.datasets.load_digits, whose data ships inside the package) and
python3-onnx (only to check the exported file). As root:

    apt-get install python3-torch python3-sklearn python3-onnx
    python3 examples/digits/train.py            # writes into examples/digits/

Without root, the same packages work unpacked into a private prefix. Fetch
python3-torch, libtorch1.13, python3-sklearn, python3-sklearn-lib,
python3-scipy, python3-joblib, python3-threadpoolctl and, recursively, every
dependency not installed yet (first alternative of each; `apt-cache depends
--no-recommends --no-suggests PKG` lists them; on a Debian 12 with
python3-numpy and python3-onnx that is about 190 packages, most of them
libtorch1.13's: ffmpeg, OpenCV, gloo, dnnl, sleef...):

    mkdir /tmp/debs && cd /tmp/debs
    apt-get download python3-torch libtorch1.13 python3-sklearn ... # as above
    for f in *.deb; do dpkg -x "$f" root; done
    R=$PWD/root
    export PYTHONPATH=$R/usr/lib/python3/dist-packages
    export LD_LIBRARY_PATH=$R/usr/lib/x86_64-linux-gnu:$R/lib/x86_64-linux-gnu:$R/usr/lib:$R/usr/lib/x86_64-linux-gnu/atlas
    cd - && /usr/bin/python3 examples/digits/train.py

An optional argument names another output directory (default: this one).
The run takes a few seconds on one CPU core and is deterministic: it writes
byte-identical files each time.

Data: load_digits() gives 1797 images of 8x8 pixels, values 0..16, scaled
here to 0..1 (/16). Split, fixed: the first 1437 images train, the last 360
are the held-out test set (written to test-images.bin / test-labels.bin).

Model (input "image" float32 [1,1,8,8], output "logits" float32 [1,10]):

    Conv 3x3 1->8 pad 1, BatchNorm, Relu                  -> 8x8x8
    Conv 3x3 8->16 pad 1 stride 2, BatchNorm, Relu        -> 16x4x4
    residual block: Conv 3x3 16->16 pad 1, BatchNorm, Add, Relu
    Flatten, Gemm 256->10

The export keeps the BatchNormalization nodes (training=PRESERVE on a model
in eval mode skips the exporter's Conv+BN fusion) so that the compiler's own
BatchNorm folding has work to do.
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = sys.argv[1] if len(sys.argv) > 1 else HERE
SEED = 0
N_TEST = 360
EPOCHS = 60
BATCH = 32
OPSET = 13


class DigitsNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1, stride=2, bias=False)
        self.bn2 = nn.BatchNorm2d(16)
        self.conv3 = nn.Conv2d(16, 16, 3, padding=1, bias=False)
        self.bn3 = nn.BatchNorm2d(16)
        self.fc = nn.Linear(16 * 4 * 4, 10)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = F.relu(x + self.bn3(self.conv3(x)))
        return self.fc(torch.flatten(x, 1))


def load_data():
    digits = load_digits()
    images = (digits.data.astype(np.float32) / 16.0).reshape(-1, 1, 8, 8)
    labels = digits.target.astype(np.int64)
    return (images[:-N_TEST], labels[:-N_TEST]), (images[-N_TEST:], labels[-N_TEST:])


def accuracy(model, images, labels):
    model.eval()
    with torch.no_grad():
        pred = model(torch.from_numpy(images)).argmax(1).numpy()
    return float((pred == labels).mean())


def shift_randomly(images, gen):
    """Augmentation: moves each image by -1..1 pixel in x and y (zero fill):
    the digits are centred by hand, not exactly."""
    padded = F.pad(images, (1, 1, 1, 1))
    out = torch.empty_like(images)
    offsets = torch.randint(0, 3, (len(images), 2), generator=gen)
    for i, (dy, dx) in enumerate(offsets.tolist()):
        out[i] = padded[i, :, dy:dy + 8, dx:dx + 8]
    return out


def train(model, images, labels):
    gen = torch.Generator().manual_seed(SEED)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, EPOCHS)
    x_all, y_all = torch.from_numpy(images), torch.from_numpy(labels)
    for epoch in range(EPOCHS):
        model.train()
        order = torch.randperm(len(x_all), generator=gen)
        total = 0.0
        for start in range(0, len(order), BATCH):
            idx = order[start:start + BATCH]
            batch = shift_randomly(x_all[idx], gen)
            loss = F.cross_entropy(model(batch), y_all[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        sched.step()
        if epoch % 10 == 9 or epoch == EPOCHS - 1:
            print(f"epoch {epoch + 1:3d}  loss {total / len(order):.4f}")


def export(model, path):
    model.eval()
    torch.onnx.export(
        model, torch.zeros(1, 1, 8, 8), path,
        input_names=["image"], output_names=["logits"],
        opset_version=OPSET,
        training=torch.onnx.TrainingMode.PRESERVE,  # model is in eval mode: keeps BatchNorm
        do_constant_folding=False)


def main():
    torch.manual_seed(SEED)
    np.random.seed(SEED)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)

    (train_x, train_y), (test_x, test_y) = load_data()
    model = DigitsNet()
    print("parameters:", sum(p.numel() for p in model.parameters()))
    train(model, train_x, train_y)
    print(f"train accuracy {accuracy(model, train_x, train_y) * 100:.2f}%  "
          f"({len(train_y)} images)")
    print(f"test accuracy  {accuracy(model, test_x, test_y) * 100:.2f}%  "
          f"({len(test_y)} images)")

    os.makedirs(OUT_DIR, exist_ok=True)
    onnx_path = os.path.join(OUT_DIR, "digits.onnx")
    export(model, onnx_path)
    test_x.reshape(len(test_x), 64).astype("<f4").tofile(os.path.join(OUT_DIR, "test-images.bin"))
    test_y.astype(np.uint8).tofile(os.path.join(OUT_DIR, "test-labels.bin"))

    import onnx
    m = onnx.load(onnx_path)
    onnx.checker.check_model(m, full_check=True)
    ops = [n.op_type for n in m.graph.node]
    print("exported", onnx_path, "ir_version", m.ir_version,
          "opset", m.opset_import[0].version, "ops", " ".join(ops))


if __name__ == "__main__":
    main()
