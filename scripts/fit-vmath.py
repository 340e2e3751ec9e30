#!/usr/bin/env python3
"""Fits the polynomial and rational approximations of aot/kmath.c and
measures their float32 error, evaluated exactly as the kernel IR evaluates
them (float32, a multiply and an add apart: no fused multiply-add).

usage: python3 scripts/fit-vmath.py      (needs numpy; prints C initialisers)

- exp: e^r = 1 + r + r^2 * P(r) on [-ln2/2, ln2/2] after x = n ln2 + r
  (Cody-Waite: ln2 in a short high part and a low part), P of degree 4,
  least squares on Chebyshev nodes, relative error.
- erf: erf(x) = x P(x^2) / Q(x^2) on [0, 4] (x clamped there: erf(4) rounds
  to 1 in float32), P of degree 6, Q of degree 4, Q(0) = 1: linear least
  squares reweighted by the last Q (Sanathanan-Koerner iterations).
- tanh: the same form on [0, 9] (tanh(9) rounds to 1), P of degree 6 and
  Q of degree 3.
"""
import math

import numpy as np

f32 = np.float32


def cheb(lo, hi, n):
    k = np.arange(n)
    return (lo + hi) / 2 + (hi - lo) / 2 * np.cos(np.pi * (k + 0.5) / n)


def horner32(coef, x):
    """coef[0] + x*(coef[1] + x*(...)), float32, mul and add apart."""
    acc = np.full_like(x, f32(coef[-1]))
    for c in coef[-2::-1]:
        acc = (acc * x).astype(f32) + f32(c)
    return acc.astype(f32)


def fit_exp():
    r = cheb(-math.log(2) / 2, math.log(2) / 2, 4000)
    y = (np.exp(r) - 1 - r) / (r * r)
    w = r * r / np.exp(r)  # the relative error of e^r
    A = np.stack([r ** i for i in range(5)], 1)
    c, *_ = np.linalg.lstsq(A * w[:, None], y * w, rcond=None)
    return [float(f32(v)) for v in c]


LN2_HI = 0.693145751953125      # 10 bits of mantissa: n * LN2_HI is exact
LN2_LO = 1.428606765330187e-06
LOG2E = 1.4426950408889634
MAGIC = 12582912.0              # 1.5 * 2^23


def exp32(x, c):
    x = np.minimum(f32(88.8), x)
    x = np.maximum(f32(-104.0), x)
    t = (x * f32(LOG2E)).astype(f32) + f32(MAGIC)
    n = (t - f32(MAGIC)).astype(f32)
    ni = t.view(np.int32) - np.int32(0x4B400000)
    r = (x - (n * f32(LN2_HI)).astype(f32)).astype(f32)
    r = (r - (n * f32(LN2_LO)).astype(f32)).astype(f32)
    p = horner32(c, r)
    p = ((r * r).astype(f32) * p).astype(f32)
    p = (p + r).astype(f32) + f32(1)
    n1 = ni >> 1
    n2 = ni - n1
    s1 = ((n1 + 127) << 23).astype(np.int32).view(f32)
    s2 = ((n2 + 127) << 23).astype(np.int32).view(f32)
    return ((p.astype(f32) * s1).astype(f32) * s2).astype(f32)


def fit_rational(fn, hi, dp, dq, iters=12):
    x = cheb(0, hi, 6000)
    x = x[x > 1e-4]
    y = fn(x)
    t = x / hi  # fitted in t for conditioning, then scaled back to x
    q_prev = np.ones_like(x)
    for _ in range(iters):
        # t P(t^2) - y (Q(t^2) - 1) = y, Q's constant term fixed at 1
        cols = [t * t ** (2 * i) for i in range(dp + 1)] + [-y * t ** (2 * j) for j in range(1, dq + 1)]
        A = np.stack(cols, 1) / (q_prev * y)[:, None]
        b = y / (q_prev * y)
        sol, *_ = np.linalg.lstsq(A, b, rcond=None)
        p, q = sol[:dp + 1], np.concatenate([[1.0], sol[dp + 1:]])
        q_prev = np.polyval(q[::-1], t * t)
    p = [v / hi ** (2 * i + 1) for i, v in enumerate(p)]
    q = [v / hi ** (2 * j) for j, v in enumerate(q)]
    return [float(f32(v)) for v in p], [float(f32(v)) for v in q]


def rational32(x, p, q, hi):
    x = np.maximum(f32(-hi), np.minimum(f32(hi), x))
    x2 = (x * x).astype(f32)
    num = (x * horner32(p, x2)).astype(f32)
    return (num / horner32(q, x2)).astype(f32)


def ulps(got, want):
    want32 = want.astype(f32)
    spacing = np.spacing(np.abs(want32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - want) / np.maximum(spacing, np.spacing(f32(1.175494e-38)))


def main():
    c = fit_exp()
    x = np.concatenate([np.linspace(-87.3, 88.7, 2000001), np.linspace(-2, 2, 400001)]).astype(f32)
    e = ulps(exp32(x, c), np.exp(x.astype(np.float64)))
    print(f"exp: P = {c}\n  max error {e.max():.2f} ulp on [-87.3, 88.7]")
    erf = np.vectorize(math.erf)
    p, q = fit_rational(erf, 4.0, 6, 4)
    x = np.linspace(-5, 5, 400001).astype(f32)
    ref = erf(x.astype(np.float64))
    got = rational32(x, p, q, 4.0)
    print(f"erf: P = {p}\n     Q = {q}\n  max error {ulps(got, ref).max():.2f} ulp, "
          f"{np.abs(got - ref).max():.3g} absolute on [-5, 5]")
    p, q = fit_rational(np.tanh, 9.0, 6, 3)
    x = np.linspace(-12, 12, 400001).astype(f32)
    ref = np.tanh(x.astype(np.float64))
    got = rational32(x, p, q, 9.0)
    print(f"tanh: P = {p}\n      Q = {q}\n  max error {ulps(got, ref).max():.2f} ulp, "
          f"{np.abs(got - ref).max():.3g} absolute on [-12, 12]")


if __name__ == "__main__":
    main()
