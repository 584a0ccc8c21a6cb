#!/usr/bin/env python3
"""Fits the polynomial coefficients of nnkern's sigmoid/tanh kernels and writes them out.

    python tools/fit_sigmoid.py            # rewrite csrc/kernels/f32_activation_coeffs.h
    python tools/fit_sigmoid.py --check    # re-derive and compare with the checked-in header

Targets (an exhaustive study of the seed's two schemes over every float32 in [-20, 20]):
* "minimax" (seed I18, A16d2): 16 intervals of |x| by bits(|x|) >> 22 clamped to [246, 261], a
  degree-2 polynomial each, f(t) = (c2 t + c1) t + c0 for t = min(16, |x|). Constraints: c0 = 0.5
  in interval 0 (so sigmoid(+-0) = 0.5 exactly) and fl(p(16)) = 1 in the last interval (so |x| >= 16
  saturates to exactly 1 / 0). Study's max abs error: 2.838e-4. The kernels clamp t to the float just
  below 16 (the index then never passes 261, which saves the upper clamp of the index); the script
  checks that p is exactly 1 there too. kMinimaxD0 = c0 - 0.5 (exact) serves kernels that compute
  g = f - 1/2 and restore the sign with a bit select (NEON); checked: fl(g(tmax)) = 1/2, g <= 1/2.
* "minimax" tanh: its own table of the same structure on u = |x| (bits(u) >> 22 clamped to [244, 259],
  u clamped to the float just below 8), fitted to tanh directly: c0 = 0 in interval 0 (tanh(+-0) = +-0
  with the sign copied from x), fl(p(8)) = 1 and fl(p) <= 1 from u = 3 on. These are exactly the
  sigmoid intervals in 2u, so the error is about twice the sigmoid's (tanh(u) = 2 sigmoid(2u) - 1), but
  the kernels save the doubling and the 2f - 1 of the identity.
* "scalef" (seed I19, Bmm2) and "accurate" (Bmm5): p(y) ~ 2^(y - 0.5) on y in [0, 1), relative
  minimax with fl(p(0.5)) = 1 (so sigmoid(0) = 1/2 exactly). Study: rel err 1.963e-3 (deg 2) and
  1.014e-7 (deg 5).

Method (as in the study): a linear program (HiGHS via scipy.optimize.linprog) on ~8000 Chebyshev
and uniform points per interval, solved for a correction to the least-squares fit so that the LP's
tolerances are relative to the error being minimised. Coefficients are rounded to float32 one at a
time, highest degree first, re-optimising the lower ones after each rounding (fpminimax-style);
finally the constrained coefficient c0 is nudged by whole ulps until the float32 evaluation meets
the equality constraint exactly. Deterministic: same numpy/scipy -> same bits.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np
from scipy.optimize import linprog

HEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "csrc", "kernels", "f32_activation_coeffs.h")
F32 = np.float32


def f32(v):
    return np.float32(v)


def fma32(a, b, c):
    """float32 fma emulated in float64 (a*b is exact in float64 for float32 inputs)."""
    return (np.float64(a) * np.float64(b) + np.float64(c)).astype(F32)


def horner32(coeffs, t):
    """p(t) in float32 with FMA, coeffs c0..cN (as the kernels evaluate it)."""
    t = np.asarray(t, F32)
    acc = np.full(t.shape, coeffs[-1], F32)
    for c in coeffs[-2::-1]:
        acc = fma32(acc, t, c)
    return acc


def sample_points(lo, hi, n=8000):
    k = np.arange(n // 2)
    cheb = (lo + hi) / 2 + (hi - lo) / 2 * np.cos(np.pi * (k + 0.5) / (n // 2))
    uni = np.linspace(lo, hi, n - n // 2)
    t = np.unique(np.concatenate([cheb, uni]).astype(F32).astype(np.float64))
    return t[(t >= lo) & (t <= hi)]


def lp_minimax(t, target, weight, degree, fixed, cap=None):
    """min_c max_i weight_i |sum_j c_j t_i^j - target_i| with c_j = fixed[j] for j in fixed.
    Returns (coefficients c0..cN as float64, minimax error)."""
    V0 = np.vander(t, degree + 1, increasing=True)
    free = [j for j in range(degree + 1) if j not in fixed]
    fixed_part = sum(V0[:, j] * fixed[j] for j in fixed) if fixed else np.zeros_like(t)
    # p(t_i) <= cap on every point: V0_free c <= cap - fixed_part
    ub = (V0[:, free], cap - fixed_part) if cap is not None else None
    cf, err = _lp_basis(V0[:, free] * weight[:, None], (target - fixed_part) * weight, ub)
    c = np.zeros(degree + 1)
    for j, v in fixed.items():
        c[j] = v
    for j, v in zip(free, cf):
        c[j] = v
    return c, err


def fp_minimax(t, target, weight, degree, fixed, cap=None):
    """Round to float32 highest degree first, re-fitting the lower free coefficients each time."""
    fixed = dict(fixed)
    _, ideal = lp_minimax(t, target, weight, degree, fixed, cap)
    for j in range(degree, -1, -1):
        if j in fixed:
            continue
        c, _ = lp_minimax(t, target, weight, degree, fixed, cap)
        fixed[j] = float(f32(c[j]))
    return [f32(fixed[j]) for j in range(degree + 1)], ideal


def nudge_c0(coeffs, t0, want):
    """Move c0 by whole float32 ulps until fl(p(t0)) == want (exactly)."""
    coeffs = list(coeffs)
    for _ in range(64):
        got = horner32(coeffs, np.array([t0], F32))[0]
        if got == want:
            return coeffs
        step = np.inf if got < want else -np.inf
        coeffs[0] = np.nextafter(coeffs[0], F32(step), dtype=F32)
    raise RuntimeError("could not meet the equality constraint")


# ---- scheme A: 16 intervals of |x| -------------------------------------------------------------

class Table:
    """One 16-interval degree-2 table: interval k <-> idx = bits(|x|) >> 22 = first_idx + k (clamped)."""

    def __init__(self, name, func, first_idx, top, c0_first, cap_from):
        self.name, self.func, self.first_idx, self.top = name, func, first_idx, top
        self.c0_first, self.cap_from = c0_first, cap_from
        # the kernels clamp |x| to the float just below `top`, so the index stays <= first_idx + 15
        self.tmax = np.nextafter(F32(top), F32(0))

    def bounds(self):
        lows = [0.0]
        for idx in range(self.first_idx + 1, self.first_idx + 16):
            lows.append(float(np.array([idx << 22], np.uint32).view(F32)[0]))
        highs = lows[1:] + [self.top]
        return list(zip(lows, highs))  # interval k <-> idx first_idx + k


SIGMOID = None  # set below, after sigmoid64
TANH = None


def a16_bounds():
    return SIGMOID.bounds()


def sigmoid64(x):
    x = np.asarray(x, np.float64)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def fit_minimax(tab=None):
    tab = tab or SIGMOID
    table = []
    top = tab.top
    for k, (lo, hi) in enumerate(tab.bounds()):
        t = sample_points(lo, hi)
        fixed = {0: tab.c0_first} if k == 0 else {}
        if k == 15:
            # p(top) = 1 as an LP equality: add the point with a huge weight is fragile, so fix c0
            # through the constraint c0 = 1 - top c1 - top^2 c2 by fitting on the substituted basis.
            s = tab.func(t)
            V = np.stack([t - top, t * t - top * top], axis=1)  # p(t) - 1 = c1 (t - top) + c2 (t^2 - top^2)
            # p <= 1 below top: p'(t) = c1 + 2 c2 t >= 0 at t = top (c2 < 0), i.e. -c1 - 2 top c2 <= 0
            c12, ideal = _lp_basis(V, s - 1.0, (np.array([[-1.0, -2.0 * top]]), np.array([0.0])))
            c2 = f32(c12[1])
            c1, _ = _lp_basis(V[:, :1], s - 1.0 - float(c2) * V[:, 1], (np.array([[-1.0]]), np.array([2.0 * top * float(c2)])))
            c1 = f32(c1[0])
            c0 = f32(1.0 - top * float(c1) - top * top * float(c2))
            coeffs = nudge_c0([c0, c1, c2], top, F32(1.0))
            if horner32(coeffs, np.array([tab.tmax], F32))[0] != 1.0:
                raise RuntimeError(f"{tab.name}: p(tmax) != 1 (the kernels clamp |x| to tmax)")
        else:
            # f(lo) + error could exceed 1, and then 1 - f < 0 (sigmoid, x < 0) or |tanh| > 1:
            # keep p <= 1 - 2^-23.
            cap = 1.0 - 2.0 ** -23 if hi > tab.cap_from else None
            coeffs, ideal = fp_minimax(t, tab.func(t), np.ones_like(t), 2, fixed, cap)
        if hi > tab.cap_from:
            coeffs = cap_at_one(coeffs, lo, hi)
        table.append((coeffs, ideal))
    return table


def half_offset_table(table):
    """d0 = c0 - 1/2 (exact: c0 in [1/2, 1)), for kernels that evaluate g = f - 1/2 = (c2 t + c1) t + d0
    and form 1/2 +- g; checks that g saturates to exactly 1/2 and never exceeds it."""
    d0 = [F32(c[0] - F32(0.5)) for c, _ in table]
    for (c, _), d in zip(table, d0):
        assert float(d) == float(c[0]) - 0.5, "c0 - 1/2 is not exact"
    c15 = table[15][0]
    g = [d0[15], c15[1], c15[2]]
    if horner32(g, np.array([SIGMOID.tmax], F32))[0] != 0.5:
        raise RuntimeError("g(tmax) != 1/2")
    for k, (lo, hi) in enumerate(SIGMOID.bounds()):
        if hi > SIGMOID.cap_from and horner32([d0[k], table[k][0][1], table[k][0][2]], all_floats(lo, min(hi, float(SIGMOID.tmax)))).max() > 0.5:
            raise RuntimeError(f"g exceeds 1/2 in interval {k}")
    return d0


def _lp_basis(V, b, ub=None):
    """min max |V c - b| over c (no constant term), subject to ub = (U, u): U c <= u.
    Solved for the correction to the least-squares fit, scaled by its residual."""
    n = V.shape[1]
    c_ls, *_ = np.linalg.lstsq(V, b, rcond=None)
    r = b - V @ c_ls
    scale = max(np.max(np.abs(r)), 1e-300)
    r = r / scale
    ones = np.ones((len(b), 1))
    A = np.vstack([np.hstack([V, -ones]), np.hstack([-V, -ones])])
    rhs = np.concatenate([r, -r])
    if ub is not None:
        U, u = ub
        A = np.vstack([A, np.hstack([U, np.zeros((len(u), 1))])])
        rhs = np.concatenate([rhs, (u - U @ c_ls) / scale])
    cost = np.zeros(n + 1)
    cost[-1] = 1
    res = linprog(cost, A_ub=A, b_ub=rhs, bounds=[(None, None)] * n + [(0, None)], method="highs")
    if not res.success:
        raise RuntimeError(res.message)
    return c_ls + res.x[:n] * scale, res.x[-1] * scale


def all_floats(lo, hi):
    b = np.array([lo, hi], F32).view(np.uint32)
    return np.arange(b[0], b[1] + 1, dtype=np.uint32).view(F32)


def cap_at_one(coeffs, lo, hi):
    """Check fl(p(t)) <= 1 on every float32 t in [lo, hi]; lower c0 by ulps if needed."""
    t = all_floats(lo, hi)
    coeffs = list(coeffs)
    for _ in range(16):
        if horner32(coeffs, t).max() <= 1.0:
            return coeffs
        coeffs[0] = np.nextafter(coeffs[0], F32(-np.inf), dtype=F32)
    raise RuntimeError("p exceeds 1")


def minimax_error(table, n_per=200000, tab=None):
    """Max abs error of the float32 evaluation, per interval (dense float32 grid, x >= 0)."""
    tab = tab or SIGMOID
    errs = []
    for (lo, hi), (c, _) in zip(tab.bounds(), table):
        t = np.unique(np.linspace(lo, hi, n_per).astype(F32))
        y = horner32(c, t).astype(np.float64)
        errs.append(float(np.max(np.abs(y - tab.func(t)))))
    return errs


SIGMOID = Table("Minimax", sigmoid64, first_idx=246, top=16.0, c0_first=0.5, cap_from=6.0)
TANH = Table("Tanh", np.tanh, first_idx=244, top=8.0, c0_first=0.0, cap_from=3.0)


# ---- scheme B: 2^(y - 0.5) on [0, 1) --------------------------------------------------------------

def fit_exp2(degree):
    t = sample_points(0.0, 1.0)
    g = 2.0 ** (t - 0.5)
    # fl(p(0.5)) = 1: substitute c0 = 1 - sum c_j 0.5^j, fit the rest relative, then nudge c0.
    V = np.stack([t ** j - 0.5 ** j for j in range(1, degree + 1)], axis=1) / g[:, None]
    b = (g - 1.0) / g
    fixed = {}
    for j in range(degree, 0, -1):
        cols = [i for i in range(1, degree + 1) if i not in fixed]
        rhs = b - sum(V[:, i - 1] * float(fixed[i]) for i in fixed)
        c, ideal_j = _lp_basis(V[:, [i - 1 for i in cols]], rhs)
        if j == degree:
            ideal = ideal_j
        fixed[j] = f32(c[cols.index(j)])
    c0 = f32(1.0 - sum(float(fixed[j]) * 0.5 ** j for j in fixed))
    coeffs = [c0] + [fixed[j] for j in range(1, degree + 1)]
    coeffs = nudge_c0(coeffs, 0.5, F32(1.0))
    y = np.unique(np.linspace(0, 1, 2000001)[:-1].astype(F32))
    rel = float(np.max(np.abs(horner32(coeffs, y).astype(np.float64) / 2.0 ** (y.astype(np.float64) - 0.5) - 1)))
    return coeffs, ideal, rel


# ---- output --------------------------------------------------------------------------------------

def hexf(v):
    return "0x%08X" % np.array([v], F32).view(np.uint32)[0]


def render():
    table = fit_minimax(SIGMOID)
    errs = minimax_error(table, tab=SIGMOID)
    d0 = half_offset_table(table)
    ttable = fit_minimax(TANH)
    terrs = minimax_error(ttable, tab=TANH)
    mm2 = fit_exp2(2)
    mm5 = fit_exp2(5)
    out = []
    out.append("// GENERATED by tools/fit_sigmoid.py -- do not edit; tests/test_activations.py re-derives it.")
    out.append("// Baseline header (no intrinsics): float32 bit patterns of the sigmoid/tanh coefficients.")
    out.append("#pragma once")
    out.append("#include <cstdint>")
    out.append("")
    out.append("namespace nnkern::act_coeffs {")
    out.append("")
    out.append("// Scheme A (seed I18, 'minimax'): interval k = clamp(bits(t) >> 22, 246, 261) - 246 of t = min(16, |x|),")
    out.append("// f(t) = (c2[k] t + c1[k]) t + c0[k]. Constrained: c0[0] = 0.5, fl(f(16)) = 1, fl(f) <= 1 on [6, 16]\n// (so 1 - f >= 0 for x < 0; checked on every float32 there).")
    out.append(f"// Max abs error of the float32 evaluation (x >= 0 grid): {max(errs):.4e}")
    for name, j in (("c0", 0), ("c1", 1), ("c2", 2)):
        vals = ", ".join(hexf(c[j]) for c, _ in table)
        out.append(f"constexpr uint32_t kMinimax{name.upper()}[16] = {{{vals}}};")
    out.append("// Per interval: [lo, hi) ideal (unrounded) minimax error / float32 evaluation error")
    for (lo, hi), (c, ideal), e in zip(a16_bounds(), table, errs):
        out.append(f"//   [{lo:.5g}, {hi:.5g}): {ideal:.3e} / {e:.3e}   "
                   f"c = {float(c[0]):.9g}, {float(c[1]):.9g}, {float(c[2]):.9g}")
    out.append("// The kernels clamp t to kMinimaxTMax, the float just below 16 (fl(f) = 1 there too), so the index")
    out.append("// needs no upper clamp. kMinimaxD0 = c0 - 0.5 (exact): g = (c2 t + c1) t + d0 = f - 1/2 for kernels that")
    out.append("// form 1/2 + g with the sign of x (NEON); fl(g(kMinimaxTMax)) = 1/2 and g <= 1/2 (checked).")
    out.append(f"constexpr uint32_t kMinimaxIdx0 = {SIGMOID.first_idx};")
    out.append(f"constexpr uint32_t kMinimaxTMax = {hexf(SIGMOID.tmax)};")
    out.append(f"constexpr uint32_t kMinimaxD0[16] = {{{', '.join(hexf(v) for v in d0)}}};")
    out.append("")
    out.append("// tanh's own table ('minimax' tanh): interval k = clamp(bits(u) >> 22, 244, 259) - 244 of")
    out.append("// u = min(kTanhTMax, |x|) (kTanhTMax: the float just below 8), tanh(|x|) ~ (c2[k] u + c1[k]) u + c0[k], sign of x")
    out.append("// copied onto the result. Constrained: c0[0] = 0, fl(p(8)) = fl(p(kTanhTMax)) = 1, fl(p) <= 1 on [3, 8].")
    out.append(f"// Max abs error of the float32 evaluation (x >= 0 grid): {max(terrs):.4e}")
    for name, j in (("c0", 0), ("c1", 1), ("c2", 2)):
        vals = ", ".join(hexf(c[j]) for c, _ in ttable)
        out.append(f"constexpr uint32_t kTanh{name.upper()}[16] = {{{vals}}};")
    out.append(f"constexpr uint32_t kTanhIdx0 = {TANH.first_idx};")
    out.append(f"constexpr uint32_t kTanhTMax = {hexf(TANH.tmax)};")
    out.append("// Per interval: [lo, hi) ideal (unrounded) minimax error / float32 evaluation error")
    for (lo, hi), (c, ideal), e in zip(TANH.bounds(), ttable, terrs):
        out.append(f"//   [{lo:.5g}, {hi:.5g}): {ideal:.3e} / {e:.3e}   "
                   f"c = {float(c[0]):.9g}, {float(c[1]):.9g}, {float(c[2]):.9g}")
    out.append("")
    for name, (c, ideal, rel) in (("Exp2Deg2", mm2), ("Exp2Deg5", mm5)):
        out.append(f"// p(y) ~ 2^(y - 0.5), y in [0, 1), relative minimax, fl(p(0.5)) = 1; coefficients c0..c{len(c) - 1}.")
        out.append(f"// Max rel error: ideal {ideal:.4e}, float32 evaluation {rel:.4e}")
        out.append(f"//   = {', '.join('%.9g' % float(v) for v in c)}")
        out.append(f"constexpr uint32_t k{name}[{len(c)}] = {{{', '.join(hexf(v) for v in c)}}};")
        out.append("")
    out.append("}  // namespace nnkern::act_coeffs")
    return "\n".join(out) + "\n"


def parse_header(text):
    """{name: [uint32 ...]} of the constexpr arrays in a generated header."""
    import re
    res = {}
    for m in re.finditer(r"constexpr uint32_t (\w+)\[\d+\] = \{([^}]*)\};", text):
        res[m.group(1)] = [int(v, 16) for v in m.group(2).split(",")]
    for m in re.finditer(r"constexpr uint32_t (\w+) = (\w+);", text):
        res[m.group(1)] = [int(m.group(2), 0)]
    return res


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true", help="compare with the checked-in header, exit 1 on mismatch")
    ap.add_argument("--output", default=HEADER)
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        with open(args.output) as f:
            old = f.read()
        if parse_header(old) != parse_header(text):
            print("checked-in coefficients differ from the re-derived ones", file=sys.stderr)
            return 1
        print("coefficients match")
        return 0
    with open(args.output, "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
