#!/usr/bin/env python3
"""Fits the polynomials of nnkern's float32 erf (csrc/kernels/f32_erf.h) and checks them in float32.

    python tools/fit_erf.py            # print the coefficients and the float32 error over a dense sweep
    python tools/fit_erf.py --check    # compare with the header's coefficients

The function (branch-free, so that plain C++ loops vectorize on any ISA):
  a = |x|;  small: erf(a) = a P(a^2) for a < 1, P of degree 6 (relative least squares on Chebyshev points);
  large: erf(a) = 1 - e^(-a^2) Q(a) for 1 <= a, a clamped to 4 (erf(4) rounds to 1 in float32), Q ~ erfc(a) e^(a^2)
  of degree 11 on [1, 4]; sign copied from x. e^(-a^2) is a float32 exp: 2^n e^r, r in [-ln2/2, ln2/2], e^r of
  degree 7 (Taylor: its remainder is below float32's rounding there). P by Horner's scheme, Q and e^r by Estrin's.
The fits are in float64 and rounded to float32; the sweep evaluates the C++ formula's float32 operations in numpy
(float32 arrays, no fused multiply-adds, as the library compiles) over every 64th float32 in [0, 4.5] and reports
the largest absolute and relative error against math.erf.
"""
from __future__ import annotations

import argparse
import math
import os
import re
import sys

import numpy as np

HEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "csrc", "kernels", "f32_erf.h")
F = np.float32


def chebyshev(lo, hi, n):
    k = np.arange(n)
    return (lo + hi) / 2 + (hi - lo) / 2 * np.cos((2 * k + 1) * np.pi / (2 * n))


def fit_small(deg=6):
    a = chebyshev(0.0, 1.0, 4000)
    y = np.array([math.erf(v) for v in a])
    # erf(a) / a = P(a^2): relative error of erf is the relative error of P
    target = np.where(a > 0, y / np.where(a > 0, a, 1), 2 / math.sqrt(math.pi))
    V = np.vander(a * a, deg + 1, increasing=True)
    c, *_ = np.linalg.lstsq(V / target[:, None], np.ones_like(target), rcond=None)
    return c.astype(F)


def fit_large(deg=11):
    a = chebyshev(1.0, 4.0, 6000)
    q = np.array([math.erfc(v) * math.exp(v * v) for v in a])
    t = a - 2.5  # centred, for conditioning
    V = np.vander(t, deg + 1, increasing=True)
    c, *_ = np.linalg.lstsq(V / q[:, None], np.ones_like(q), rcond=None)
    return c.astype(F)


EXP_C = [F(1 / math.factorial(k)) for k in range(8)]
LN2_HI, LN2_LO = F(0.693145751953125), F(1.428606765330187045e-06)
LOG2E = F(1.4426950408889634)


def estrin(c, t):
    """c[0] + c[1] t + ... by Estrin's scheme in float32, in the header's order: pairs c[2i] + c[2i+1] t, then pairs
    of those in t^2, t^4, ... (an odd count's last term carried up)."""
    c = list(c)
    while len(c) > 1:
        c = [c[i] + c[i + 1] * t for i in range(0, len(c) - 1, 2)] + ([c[-1]] if len(c) % 2 else [])
        t = t * t
    return c[0]


def exp_f32(y):
    """e^y for y in [-17, 0] as the C++ computes it (float32 operations)."""
    n = np.rint(y * LOG2E).astype(F)
    r = (y - n * LN2_HI) - n * LN2_LO
    p = estrin(EXP_C, r)
    scale = ((n.astype(np.int32) + 127) << 23).view(F)
    return p * scale


def erf_f32(x, small, large):
    a = np.abs(x).astype(F)
    s = a * a
    p = small[-1]
    for k in range(len(small) - 2, -1, -1):
        p = p * s + small[k]
    lo = a * p
    b = np.minimum(a, F(4))
    q = estrin(large, b - F(2.5))
    hi = F(1) - exp_f32(-(b * b)) * q
    return np.copysign(np.where(a < F(1), lo, hi), x)


def sweep(small, large):
    bits = np.arange(0, np.float32(4.5).view(np.int32), 64, dtype=np.int32)
    x = bits.view(F)
    got = erf_f32(x, small, large).astype(np.float64)
    want = np.array([math.erf(float(v)) for v in x])
    err = np.abs(got - want)
    rel = err / np.maximum(np.abs(want), 1e-300)
    return float(err.max()), float(rel[x > 0].max())


def header_coeffs():
    text = open(HEADER).read()
    out = []
    for name in ("kErfSmall", "kErfLarge"):
        body = re.search(name + r"\[\]\s*=\s*\{([^}]*)\}", text).group(1)
        out.append(np.array([float(v.strip().rstrip("f")) for v in body.split(",") if v.strip()], F))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    small, large = fit_small(), fit_large()
    if args.check:
        hs, hl = header_coeffs()
        if not (np.array_equal(hs, small) and np.array_equal(hl, large)):
            print("the header's coefficients differ from the fit")
            return 1
    fmt = lambda c: ", ".join(f"{float(v):.9g}f" for v in c)  # noqa: E731
    print(f"kErfSmall[] = {{{fmt(small)}}};")
    print(f"kErfLarge[] = {{{fmt(large)}}};")
    abs_err, rel_err = sweep(small, large)
    print(f"float32 sweep: max abs error {abs_err:.3g}, max rel error {rel_err:.3g}")
    if args.check and abs_err > 1.6e-7:
        print("the float32 formula is past the documented 1.6e-7")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
