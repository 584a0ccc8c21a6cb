"""INT8 / INT16 GEMM: bit-exact against numpy int64 on every ISA path this CPU has.

Every micro-kernel of the list (nnkern._C.kernel_list("qgemm"), kernels/qgemm_list.h) is a test id; those the
CPU cannot run skip naming their ISA. Every tile (m <= MR, n <= NR, every k remainder of its group / inner
step) is run directly (nnkern._C.qgemm_ukernel) with each epilogue, in the direct and the indirect form (ks
taps 1..9, zero-row taps anywhere, a nonzero b_offset, extremes), with the per-row output pointers and the
tile hook; the driver is swept over M in 1..40, N in 1..70,
K in 1..140 (batched: each (M, N) pair once with a K cycling through 1..140, and each K with several
(M, N)), with zero points, per-column zero points and int8 activations; extremes at the largest exact
K; the guard-page checks run in a subprocess (tests/qgemm_guard_check.py).
"""
from __future__ import annotations

import functools
import os

import numpy as np
import pytest

import nnkern
from nnkern import _C
from helpers import QUICK, describe_process, run_script_isolated
from qhelpers import (KIND_DTYPES, LARGE_TILE, OUT_KINDS, QGEMM_KERNELS, QGEMM_LEVELS, epilogue_ref, first_kernel,
                      has_panels, kernel_traits, pack_a, pack_taps, ref_qgemm, runnable, tile_grid, weight_range)

GUARD_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "qgemm_guard_check.py")


def expected_kernel(isa):
    """What cpu_info()['kernels']['u8s8_gemm'] must say under the cap isa (a level of the list): its first
    8-bit kernel, or the kernel it widens 8-bit data to int16 for (its s16w8 one, listed first, else its s16 one)."""
    i8 = first_kernel(isa, ("u8s8", "s8s8"))
    return i8["name"] if i8 else first_kernel(isa, ("s16w8", "s16"))["name"] + " (int8 widened to int16)"


@pytest.fixture(params=QGEMM_LEVELS)
def qisa(request):
    """Each ISA level that has integer GEMM kernels (from the list), with the dispatch cap set to it."""
    name = request.param
    if name not in nnkern.supported_isas():
        pytest.skip(f"CPU lacks {name}")
    want = expected_kernel(name)
    with nnkern.max_isa(name):
        assert nnkern.cpu_info()["kernels"]["u8s8_gemm"] == want, f"cap {name} did not dispatch {want}"
        yield name


def rand_int(rng, dtype, shape, lo=None, hi=None):
    info = np.iinfo(dtype)
    return rng.integers(info.min if lo is None else lo, (info.max if hi is None else hi) + 1, shape, dtype=dtype)


# --- micro-kernels, every tile, every epilogue -------------------------------------------------------

@pytest.fixture(params=QGEMM_KERNELS, ids=[k["name"] for k in QGEMM_KERNELS])
def qkernel(request):
    """Each integer GEMM kernel of the list: (name, MR, NR, G, kind, k step, zero points in kernel)."""
    k = request.param
    kind, step, zp = kernel_traits(runnable(k))
    return k["name"], k["mr"], k["nr"], k["kgroup"], kind, step, zp


def check_stored_tile(c, ldc, want, sentinel, what):
    """c holds the m x n tile `want` column by column (C(i, j) = c[j * ldc + i]) and `sentinel` elsewhere."""
    m, n = want.shape
    got = np.stack([c[j * ldc:j * ldc + m] for j in range(n)], axis=1)
    assert np.array_equal(got, want), f"{what}: got {got} want {want}"
    outside = np.ones(c.size, bool)
    for j in range(n):
        outside[j * ldc:j * ldc + m] = False
    assert (c[outside] == sentinel).all(), f"{what}: wrote outside the tile"


def test_ukernel_every_tile(qkernel, rng):
    """Every tile m <= MR, n <= NR, every k to three inner steps deep, each epilogue. A large tile (AMX's
    32 x 32, k steps of 64) runs its edge sizes (qhelpers.tile_grid) for every k to two steps deep with the
    epilogue cycling, then every (m, n) at one k past a step."""
    isa, MR, NR, G, kind, S, _ = qkernel  # every remainder of the inner loop's k step, three steps deep
    adt, bdt = KIND_DTYPES[kind]
    large = MR * NR > LARGE_TILE
    kmax = (2 * S + 1 if large else 3 * S + S - 1) if not QUICK else 2 * S + 1
    W = rand_int(rng, adt, (MR, kmax), *weight_range(isa, adt))
    X = rand_int(rng, bdt, (NR, kmax))  # column j of B = X[j]
    ldc = MR + 3
    pad = -(-MR // 64) * 64
    comp = rng.integers(-1000, 1000, pad).astype(np.int32)
    zb = rng.integers(-128, 128, pad).astype(np.int32)
    rsum = rng.integers(-5000, 5000, NR).astype(np.int32)
    scale = rng.uniform(1e-4, 1e-2, pad).astype(np.float32)
    bias = rng.uniform(-50, 200, pad).astype(np.float32)
    cases = [("i32", {}), ("i32", dict(col_comp=comp, b_zero=zb, row_sum=rsum, relu=True)),
             ("f32", dict(scale=scale, bias=bias)), ("f32", dict(scale=scale, col_comp=comp, relu=True)),
             ("u8", dict(scale=scale, bias=bias, lo=0.0, hi=255.0)),
             ("s8", dict(scale=scale, bias=bias - 128, col_comp=comp, b_zero=zb, row_sum=rsum, lo=-128.0, hi=127.0)),
             ("i32", dict(c_in=True)), ("u8", dict(c_in=True, scale=scale, bias=bias, lo=0.0, hi=255.0))]
    c_in_full = rng.integers(-2 ** 31, 2 ** 31, NR * ldc + 5).astype(np.int32)
    b_flat = np.ascontiguousarray(X)
    item = np.dtype(bdt).itemsize

    def check(m, n, k, out, kw, acc_full):
        a = pack_a(W[:m, :k], MR, G)
        odt = {"i32": np.int32, "f32": np.float32, "u8": np.uint8, "s8": np.int8}[out]
        sentinel = odt(77)
        c = np.full(n * ldc + 5, sentinel, odt)
        args = dict(col_comp=None, b_zero=None, row_sum=None, scale=None, bias=None, relu=False, lo=0.0, hi=0.0)
        args.update(kw)
        c_in = args.pop("c_in", None)
        c_in = c_in_full[:n * ldc] if c_in else None  # read only inside the m x n tile
        _C.qgemm_ukernel(isa, m, n, k, a, 0, b_flat, [j * kmax * item for j in range(n)], c, 0, ldc, OUT_KINDS[out],
                         args["col_comp"], args["b_zero"], args["row_sum"], args["scale"], args["bias"], args["relu"],
                         args["lo"], args["hi"], c_in)
        acc = acc_full[:m, :n]
        if c_in is not None:
            acc = acc + np.stack([c_in[j * ldc:j * ldc + m] for j in range(n)], axis=1)
        want = epilogue_ref(acc, out, **args)
        check_stored_tile(c, ldc, want, sentinel, f"{isa} {kind} m={m} n={n} k={k} out={out} {sorted(kw)}")

    for k in range(0, kmax + 1):
        acc_full = W[:, :k].astype(np.int64) @ X[:, :k].astype(np.int64).T
        for m, n in tile_grid(MR, NR):
            for ci, (out, kw) in enumerate(cases):
                if not large or ci == (m + n + k) % len(cases):
                    check(m, n, k, out, kw, acc_full)
    if large:
        k = S + 5
        acc_full = W[:, :k].astype(np.int64) @ X[:, :k].astype(np.int64).T
        for m in range(1, MR + 1):
            for n in range(1, NR + 1):
                out, kw = cases[(m + 3 * n) % len(cases)]
                check(m, n, k, out, kw, acc_full)


def test_ukernel_zero_points_in_kernel(qkernel, rng):
    """QNNPACK-style kernels (seed Q1) form (w - w_zero[i]) and (x - x_zero) themselves: every tile and
    k remainder, zero points at their limits (x_zero 0 / 255, w_zero -128 / 127 against the opposite
    extremes of the data), with c_in and the requantized output. Kernels without the feature refuse
    zero points instead of ignoring them."""
    isa, MR, NR, G, kind, S, zp_kernel = qkernel
    pad = -(-MR // 64) * 64
    adt, bdt = KIND_DTYPES[kind]
    if not zp_kernel:
        c = np.zeros(MR, np.int32)
        with pytest.raises(ValueError, match="zero points"):
            _C.qgemm_ukernel(isa, 1, 1, 0, np.zeros(MR * G, adt), 0, np.zeros(1, bdt), [0], c, 0, MR, 0,
                             None, None, None, None, None, False, 0.0, 0.0, None, 3, None)
        pytest.skip(f"{isa} {kind}: zero points go through row/column sums (tested by the driver tests)")
    kmax = 3 * S + S - 1 if not QUICK else 2 * S + 1
    ldc = MR + 1
    scale = rng.uniform(1e-5, 1e-3, pad).astype(np.float32)
    bias = rng.uniform(-50, 200, pad).astype(np.float32)
    cases = [  # (W fill, X fill, x_zero, w_zero fill): random, and the extremes at the largest products
        ("random", "random", int(rng.integers(0, 256)), rng.integers(-128, 128, pad).astype(np.int32)),
        (127, 0, 255, np.full(pad, -128, np.int32)),
        (-128, 255, 0, np.full(pad, 127, np.int32)),
        ("random", "random", 0, None),
    ]
    item = np.dtype(bdt).itemsize
    for wfill, xfill, xz, wz in cases:
        W = rand_int(rng, adt, (MR, kmax)) if wfill == "random" else np.full((MR, kmax), wfill, adt)
        X = rand_int(rng, bdt, (NR, kmax)) if xfill == "random" else np.full((NR, kmax), xfill, bdt)
        wz_col = (wz[:MR] if wz is not None else np.zeros(MR, np.int32)).astype(np.int64)
        Wd = W.astype(np.int64) - wz_col[:, None]
        Xd = X.astype(np.int64) - xz
        for k in range(kmax + 1):
            acc_full = Wd[:, :k] @ Xd[:, :k].T
            for m in range(1, MR + 1):
                a = pack_a(W[:m, :k], MR, G)
                for n in (range(1, NR + 1) if not QUICK else sorted({1, NR // 2, NR})):
                    c_in = rng.integers(-2 ** 31, 2 ** 31, n * ldc).astype(np.int32) if k % 3 == 1 else None
                    acc = acc_full[:m, :n]
                    if c_in is not None:
                        acc = acc + np.stack([c_in[j * ldc:j * ldc + m] for j in range(n)], axis=1)
                    for out in ("i32", "u8"):
                        odt = np.int32 if out == "i32" else np.uint8
                        c = np.full(n * ldc, 77, odt)
                        kw = dict(scale=scale, bias=bias, lo=0.0, hi=255.0) if out == "u8" else {}
                        _C.qgemm_ukernel(isa, m, n, k, a, 0, np.ascontiguousarray(X),
                                         [j * kmax * item for j in range(n)], c, 0, ldc, OUT_KINDS[out], None, None,
                                         None, kw.get("scale"), kw.get("bias"), False, kw.get("lo", 0.0),
                                         kw.get("hi", 0.0), c_in, xz, wz)
                        want = epilogue_ref(acc, out, **kw)
                        check_stored_tile(c, ldc, want, 77,
                                          f"{isa} {kind} m={m} n={n} k={k} out={out} x_zero={xz} w={wfill} x={xfill}")


def test_epilogue_ties_round_half_to_even(qkernel):
    """acc * 0.5 lands exactly on x.5: u8/s8 outputs round half to even (as np.rint)."""
    qisa, MR, NR, G, kind, _, _ = qkernel
    adt, bdt = KIND_DTYPES[kind]
    pad = -(-MR // 64) * 64
    accs = np.arange(-9, 9 + NR * MR)[:NR * MR]  # acc values, odd ones give x.5
    W = np.ones((MR, 1), adt)
    a = pack_a(W, MR, G)
    X = accs.reshape(NR, MR)  # acc(i, j) = X[j, i] needs per-(i,j) B: use col_comp instead
    for j in range(NR):
        comp = np.zeros(pad, np.int32)
        comp[:MR] = X[j]
        bcol = np.zeros(1, bdt)
        for out, lo, hi, bias0 in (("u8", 0.0, 255.0, 100.0), ("s8", -128.0, 127.0, 0.0)):
            c = np.zeros(MR, np.uint8)
            scale = np.full(pad, 0.5, np.float32)
            bias = np.full(pad, bias0, np.float32)
            _C.qgemm_ukernel(qisa, MR, 1, 1, a, 0, bcol, [0], c, 0, MR, OUT_KINDS[out], comp, None, None,
                             scale, bias, False, lo, hi)
            want = np.clip(np.rint(X[j] * 0.5 + bias0), lo, hi).astype(np.int64)
            got = c.astype(np.int64) if out == "u8" else c.view(np.int8).astype(np.int64)
            assert np.array_equal(got, want), f"{qisa} {kind} {out}: ties {X[j] * 0.5 + bias0} -> {got}"


# --- the indirect form (kernels/qgemm.h): ks taps, zero row, b_offset ---------------------------------

def run_indirect(qkernel, rng, m, n, k, ks, zero_mask, out, *, fill=None, b_offset=0, c_rows=False, hook=False,
                 panels=0, **kw):
    """One indirect tile against int64 numpy: weights (m x ks*k) packed tap by tap, column j's tap t the row
    X[t, j] or, where zero_mask[t, j], the shared zero row (the zero point zval: x_zero for the kernels that
    subtract it, else any value, which the kernel must use as is). Real rows live at scattered places of one
    buffer, the zero row in another; the kernel gets every real entry minus b_offset. Returns the hook calls.
    panels > 0: m = panels * MR channels as that many packed panels, in one call of the whole-panel form."""
    name, MR, NR, G, kind, _, zp = qkernel
    adt, bdt = KIND_DTYPES[kind]
    ai, bi = np.iinfo(adt), np.iinfo(bdt)
    if fill is None:
        W = rand_int(rng, adt, (m, ks * k), *weight_range(name, adt))
        X = rand_int(rng, bdt, (ks, n, k))
        zval = int(rng.integers(bi.min, bi.max + 1))
    else:  # extremes: the largest products of one sign everywhere, the zero row included
        W = np.full((m, ks * k), fill[0], adt)
        X = np.full((ks, n, k), fill[1], bdt)
        zval = fill[1]
    xz = zval if zp else 0
    item = np.dtype(bdt).itemsize
    gap = 3  # elements between rows: an off-by-one read lands on another row's values
    buf = rand_int(rng, bdt, (ks * n * (k + gap) + 5,))
    offsets = []
    for t in range(ks):
        for j in range(n):
            if zero_mask[t, j]:
                offsets.append(None)
            else:
                at = ((t * n + (n - 1 - j)) * (k + gap) + 2)  # scattered: reversed within a tap
                buf[at:at + k] = X[t, j]
                offsets.append(at * item)
    zero = np.concatenate([rand_int(rng, bdt, (1,)), np.full(k, zval, bdt)])  # the row starts at element 1
    Xeff = np.where(zero_mask[:, :, None], np.asarray(zval, np.int64), X.astype(np.int64))  # ks x n x k
    flat = Xeff.transpose(1, 0, 2).reshape(n, ks * k)  # column j: its taps one after the other
    acc = W.astype(np.int64) @ (flat - xz).T  # m x n
    parts = [pack_taps(W[p * MR:(p + 1) * MR], MR, G, ks) for p in range(max(panels, 1))]
    a = np.concatenate(parts)
    ldc = m + 2
    odt = {"i32": np.int32, "f32": np.float32, "u8": np.uint8, "s8": np.int8}[out]
    c = np.full(n * ldc + 3, odt(77), odt)
    rows = None
    if c_rows:  # output column j at row n - 1 - j of c (a permutation, as a pixel shuffle makes)
        rows = [(n - 1 - j) * ldc * c.itemsize for j in range(n)]
    args = dict(col_comp=None, b_zero=None, row_sum=None, scale=None, bias=None, relu=False, lo=0.0, hi=0.0)
    args.update(kw)
    calls = _C.qgemm_ukernel(name, m, n, k, a, 0, buf, offsets, c, 0, ldc, OUT_KINDS[out], args["col_comp"],
                             args["b_zero"], args["row_sum"], args["scale"], args["bias"], args["relu"], args["lo"],
                             args["hi"], None, xz, None, ks=ks, zero=zero, zero_offset_bytes=item, b_offset=b_offset,
                             c_rows=rows, hook=hook, tile_i=3 * m, tile_j=5 * n, panels=panels,
                             a_panel_bytes=parts[0].nbytes)
    want = epilogue_ref(acc, out, **args)
    what = (f"{name} m={m} n={n} k={k} ks={ks} panels={panels} out={out} zeros={zero_mask.astype(int).tolist()} "
            f"b_offset={b_offset}")
    if c_rows:
        check_stored_tile(c, ldc, want[:, ::-1], odt(77), what + " c_rows")
    else:
        check_stored_tile(c, ldc, want, odt(77), what)
    return calls, want


def epilogue_cases(rng, MR, NR, rows=None):
    pad = -(-(rows or MR) // 64) * 64
    comp = rng.integers(-1000, 1000, pad).astype(np.int32)
    zb = rng.integers(-128, 128, pad).astype(np.int32)
    rsum = rng.integers(-5000, 5000, NR).astype(np.int32)
    scale = rng.uniform(1e-4, 1e-2, pad).astype(np.float32)
    bias = rng.uniform(-50, 200, pad).astype(np.float32)
    return [("i32", {}), ("i32", dict(col_comp=comp, b_zero=zb, row_sum=rsum, relu=True)),
            ("f32", dict(scale=scale, bias=bias)), ("f32", dict(scale=scale, col_comp=comp, relu=True)),
            ("u8", dict(scale=scale, bias=bias, lo=0.0, hi=255.0)),
            ("s8", dict(scale=scale, bias=bias - 128, col_comp=comp, b_zero=zb, row_sum=rsum, lo=-128.0, hi=127.0))]


def test_indirect_every_tail(qkernel, rng):
    """Every m <= MR, n <= NR and k over the inner step and past it, with ks, the zero-row pattern, b_offset
    and the epilogue cycling through their cases."""
    name, MR, NR, G, kind, S, zp = qkernel
    cases = epilogue_cases(rng, MR, NR)
    kmax = 2 * S + 1 if not QUICK else S + 1
    grid = [(k, m, n) for k in range(1, kmax + 1) for m, n in tile_grid(MR, NR)]
    if MR * NR > LARGE_TILE:  # sampled above: every (m, n) once more, at k = S + 3
        grid += [(S + 3, m, n) for m in range(1, MR + 1) for n in range(1, NR + 1)]
    for k, m, n in grid:
        ks = 1 + (m + 2 * n + k) % 9
        mask = rng.random((ks, n)) < [0.0, 0.3, 1.0][(m + k) % 3]
        out, kw = cases[(m + 3 * n + k) % len(cases)]
        run_indirect(qkernel, rng, m, n, k, ks, mask, out, b_offset=[0, 4096, 2 ** 20 + 6][(n + k) % 3], **kw)


@pytest.mark.parametrize("ks", range(1, 10))
def test_indirect_taps_and_zero_rows(qkernel, rng, ks):
    """ks taps with zero-row taps anywhere (none, all, one, random), full and partial tiles, k a few steps deep,
    every epilogue."""
    name, MR, NR, G, kind, S, zp = qkernel
    cases = epilogue_cases(rng, MR, NR)
    for m, n in ((MR, NR), (max(1, MR - 1), max(1, NR - 1)), (1, 1)):
        masks = [np.zeros((ks, n), bool), np.ones((ks, n), bool), rng.random((ks, n)) < 0.5]
        one = np.zeros((ks, n), bool)
        one[ks // 2, n // 2] = True
        masks.append(one)
        for mi, mask in enumerate(masks):
            k = 3 * S + 1 + mi
            out, kw = cases[(mi + m) % len(cases)]
            run_indirect(qkernel, rng, m, n, k, ks, mask, out, b_offset=12 + ks * 2, **kw)


# The kernels of QGemmTemplate (kernels/inc/qgemm_tile.inc) have the whole-panel form (QGemmKernel::run_panels);
# the drivers run the others one panel per call.
PANEL_FORM_LEVELS = ("avx2", "avxvnni", "avx512", "avx512vnni")


def test_whole_panels_in_one_call(qkernel, rng):
    """The whole-panel form: 1-3 panels of MR channels in one call, each the tile the reference gives for its
    channels (its per-row arrays, its columns of C), for every n, every k up to two inner steps and one past
    (every remainder of the group and the step), ks 1 and 3 with zero rows, every epilogue, the per-row output
    pointers; a kernel without the form, a hook, m other than panels * MR and a short panel buffer are refused."""
    name, MR, NR, G, kind, S, zp = qkernel
    level = next(k["level"] for k in QGEMM_KERNELS if k["name"] == name)
    assert has_panels(name) == (level in PANEL_FORM_LEVELS), f"{name}: whole-panel form {has_panels(name)}"
    no_zeros = np.zeros((1, 1), bool)
    if not has_panels(name):
        with pytest.raises(ValueError, match="whole-panel"):
            run_indirect(qkernel, rng, MR, 1, 1, 1, no_zeros, "i32", panels=1)
        return
    for bad in (dict(hook=True), dict(m=MR + 1)):
        with pytest.raises(ValueError, match="whole-panel"):
            run_indirect(qkernel, rng, bad.pop("m", MR), 1, 1, 1, no_zeros, "i32", panels=1, **bad)
    with pytest.raises(ValueError, match="fewer bytes"):  # two panels claimed, one packed
        _C.qgemm_ukernel(name, 2 * MR, 1, G, pack_a(np.zeros((MR, G), KIND_DTYPES[kind][0]), MR, G), 0,
                         np.zeros(G, KIND_DTYPES[kind][1]), [0], np.zeros(2 * MR, np.int32), 0, 2 * MR, 0, None, None,
                         None, None, None, False, 0.0, 0.0, panels=2, a_panel_bytes=MR * G * np.dtype(
                             KIND_DTYPES[kind][0]).itemsize)
    for panels in (1, 2, 3):
        cases = epilogue_cases(rng, MR, NR, rows=panels * MR)
        for n in range(1, NR + 1):
            for k in range(1, 2 * S + 2):
                for ks in (1, 3):
                    mask = rng.random((ks, n)) < (0.0 if ks == 1 else 0.4)
                    out, kw = cases[(n + k + ks + panels) % len(cases)]
                    run_indirect(qkernel, rng, panels * MR, n, k, ks, mask, out, panels=panels,
                                 c_rows=bool((n + k) % 2), b_offset=[0, 4096][k % 2], **kw)


def test_indirect_extremes(qkernel, rng):
    """Range ends everywhere (255 x -128 for u8s8; the largest products of either sign for the others), the
    zero row at the same value; all taps, mixed zero taps; i32 and requantized outputs."""
    name, MR, NR, G, kind, S, zp = qkernel
    adt, bdt = KIND_DTYPES[kind]
    (wmin, wmax), bi = weight_range(name, adt), np.iinfo(bdt)
    pad = -(-MR // 64) * 64
    scale = np.full(pad, 1e-6, np.float32)
    for fill in ((wmin, bi.max), (wmin, bi.min), (wmax, bi.max)):
        for ks in (1, 9):
            mask = np.zeros((ks, NR), bool)
            mask[::2, 1::2] = True
            for out, kw in (("i32", {}), ("u8", dict(scale=scale, lo=0.0, hi=255.0))):
                run_indirect(qkernel, rng, MR, NR, 2 * S + 3, ks, mask, out, fill=fill, b_offset=64, **kw)


def test_epilogue_row_pointers_and_hook(qkernel, rng):
    """Per-row output pointers (column j at c_rows[j]) and the tile hook on the GEMM tile (ks = 1) and an
    indirect one: the hook is called once per tile, after the store, with the caller's position and where the
    values are; without the hook nothing is reported."""
    name, MR, NR, G, kind, S, zp = qkernel
    cases = epilogue_cases(rng, MR, NR)
    for ks in (1, 3):
        for m, n in ((MR, NR), (max(1, MR - 3), 1), (1, NR)):
            for out, kw in cases:
                mask = np.zeros((ks, n), bool)
                for c_rows in (False, True):
                    calls, want = run_indirect(qkernel, rng, m, n, S + 1, ks, mask, out, c_rows=c_rows, hook=True,
                                               **kw)
                    assert len(calls) == 1, calls
                    call = calls[0]
                    assert (call["i0"], call["j0"], call["m"], call["n"]) == (3 * m, 5 * n, m, n)
                    assert call["out"] == OUT_KINDS[out] and call["c_rows"] == c_rows
                    got = np.array(call["values"]).T  # values as the hook found them: m x n
                    if out == "f32":
                        got = got.astype(np.float32)
                    assert np.array_equal(got, want), f"{name} hook values {out}"
                calls, _ = run_indirect(qkernel, rng, m, n, S + 1, ks, mask, out, **kw)
                assert calls == []


# --- the driver, every tail ---------------------------------------------------------------------------

CONFIGS = {
    # name: (a dtype, a zero point, b zero point: scalar or 'col')
    "u8": (np.uint8, 0, 0),
    "u8-zp": (np.uint8, 131, -7),
    "u8-zpcol": (np.uint8, 255, "col"),
    "s8": (np.int8, 0, 0),
    "s8-zp": (np.int8, -128, "col"),
}


def _prefix_refs(A, B, za, zb):
    """P[K] = (A[:, :K] - za) @ (B[:K] - zb) for every K (cumulative outer products), int64."""
    Ad = A.astype(np.int64) - za
    Bd = B.astype(np.int64) - np.asarray(zb, np.int64)
    steps = Ad.T[:, :, None] * Bd[:, None, :]  # K x M x N
    return np.concatenate([np.zeros((1,) + steps.shape[1:], np.int64), np.cumsum(steps, axis=0)])


@pytest.mark.parametrize("config", list(CONFIGS))
def test_driver_every_tail(qisa, config, rng):
    adt, za, zbk = CONFIGS[config]
    Mmax, Nmax, Kmax = 40, 70, 140
    A = rand_int(rng, adt, (Mmax, Kmax))
    B = rand_int(rng, np.int8, (Kmax, Nmax))
    zb_full = rng.integers(-128, 128, Nmax) if zbk == "col" else zbk
    P = _prefix_refs(A, B, za, zb_full)
    full = config == "u8-zp" and not QUICK  # the densest sweep once; the others on every 3rd N
    pairs = [(M, N, (M * 31 + N * 17) % Kmax + 1) for M in range(1, Mmax + 1) for N in range(1, Nmax + 1)
             if full or N % 3 == M % 3]
    pairs += [(M, N, K) for K in range(1, Kmax + 1) for (M, N) in ((Mmax, Nmax), (1, 65), (7, 64), (6, 17))]
    pairs += [(M, N, 0) for (M, N) in ((1, 1), (5, 70))]
    for M, N, K in pairs:
        zb = zb_full[:N] if zbk == "col" else zb_full
        got = nnkern.qgemm(A[:M, :K], B[:K, :N], a_zero_point=za, b_zero_point=zb)
        want = P[K][:M, :N]
        if not np.array_equal(got, want):
            bad = np.argwhere(got != want)[0]
            raise AssertionError(f"{qisa} {config} M={M} N={N} K={K}: C{tuple(bad)} = {got[tuple(bad)]}, "
                                 f"want {want[tuple(bad)]}")


@pytest.mark.parametrize("kc", [4, 8, 36])
def test_driver_k_blocks(qisa, rng, kc):
    """The K-blocked path (partial sums through the workspace, epilogue on the last block), forced to
    small blocks so its tails are reached with small shapes: GEMM and QLinear (u8 output)."""
    _C.set_qgemm_kc(kc)
    try:
        for M, N, K in [(7, 65, 1), (7, 65, kc), (13, 70, kc + 1), (40, 17, 3 * kc + 3), (5, 130, 140), (1, 64, 99)]:
            a = rand_int(rng, np.int8, (M, K))
            b = rand_int(rng, np.int8, (K, N))
            zb = rng.integers(-128, 128, N)
            assert np.array_equal(nnkern.qgemm(a, b, a_zero_point=-9, b_zero_point=zb), ref_qgemm(a, b, -9, zb))
            a16 = rand_int(rng, np.int16, (M, K), -999, 999)
            b16 = rand_int(rng, np.int16, (K, N), -999, 999)
            assert np.array_equal(nnkern.qgemm16(a16, b16), ref_qgemm(a16, b16))
            w = rng.standard_normal((N, K)).astype(np.float32)
            layer = nnkern.QLinear(w, rng.standard_normal(N).astype(np.float32), input_scale=0.05,
                                   input_zero_point=130, output_scale=0.2, output_zero_point=120)
            x = rand_int(rng, np.uint8, (M, K))
            _C.set_qgemm_kc(0)
            want = layer(x)
            _C.set_qgemm_kc(kc)
            assert np.array_equal(layer(x), want), (M, N, K)
    finally:
        _C.set_qgemm_kc(0)


@pytest.mark.parametrize("shape", [(1, 4096, 1000), (1, 3, 5000), (300, 500, 700), (97, 1029, 259), (2, 200, 1)])
def test_driver_large_and_gemv(qisa, rng, shape):
    M, N, K = shape
    a = rand_int(rng, np.uint8, (M, K))
    b = rand_int(rng, np.int8, (K, N))
    zb = rng.integers(-128, 128, N)
    for threads in (1, 2):
        nnkern.set_num_threads(threads)
        assert np.array_equal(nnkern.qgemm(a, b, a_zero_point=17, b_zero_point=zb), ref_qgemm(a, b, 17, zb))
        s = (a.astype(np.int16) - 128).astype(np.int8)
        assert np.array_equal(nnkern.qgemm(s, b, a_zero_point=-3), ref_qgemm(s, b, -3, 0))


EXTREMES = [("255x-128", 255, -128), ("255x127", 255, 127), ("0x-128", 0, -128)]


@pytest.mark.parametrize("adt,za,zb", [(np.uint8, 0, 0), (np.uint8, 255, 127), (np.uint8, 0, -128),
                                       (np.uint8, 255, -128), (np.int8, -128, 127), (np.int8, 127, -128),
                                       (np.int8, 0, 0)])
def test_extremes_at_the_largest_exact_k(qisa, rng, adt, za, zb):
    """Inputs at the range ends, zero points at their limits, K = the computed bound: results reach
    +-(2^31 - 1) territory and must still be exact; K + 1 raises."""
    K = nnkern.qgemm_max_k(adt, za, zb)
    info = np.iinfo(adt)
    M, N = 3, 67
    a = np.empty((M, K), adt)
    a[0] = info.max
    a[1] = info.min
    a[2] = np.where(np.arange(K) % 2, info.max, info.min)  # alternating
    b = np.empty((K, N), np.int8)
    b[:, 0::3] = -128
    b[:, 1::3] = 127
    b[:, 2::3] = np.where(np.arange(K) % 2, 127, -128)[:, None]
    got = nnkern.qgemm(a, b, a_zero_point=za, b_zero_point=zb)
    want = ref_qgemm(a, b, za, zb)
    assert np.abs(want).max() <= 2 ** 31 - 1
    assert np.array_equal(got, want)
    with pytest.raises(ValueError, match="exceeds"):
        nnkern.qgemm(np.zeros((1, K + 1), adt), np.zeros((K + 1, 1), np.int8), a_zero_point=za, b_zero_point=zb)


def test_max_k_is_computed():
    assert nnkern.qgemm_max_k(np.uint8, 0, 0) == (2 ** 31 - 1) // (255 * 128)
    assert nnkern.qgemm_max_k(np.uint8, 128, -1) == (2 ** 31 - 1) // (128 * 128)
    assert nnkern.qgemm_max_k(np.int8, 0, [0, 127]) == (2 ** 31 - 1) // (128 * 255)


def test_qgemm16(qisa, rng):
    for M, N, K in [(1, 1, 1), (7, 65, 33), (40, 70, 3), (13, 17, 140), (1, 300, 257)]:
        a = rand_int(rng, np.int16, (M, K), -3000, 3000)
        b = rand_int(rng, np.int16, (K, N), -300, 300)
        zb = rng.integers(-300, 300, N)
        assert np.array_equal(nnkern.qgemm16(a, b, a_zero_point=-5, b_zero_point=zb), ref_qgemm(a, b, -5, zb))
    a = rand_int(rng, np.int16, (5, 2))  # full range, K = 2
    b = rand_int(rng, np.int16, (2, 70), -16384, 16383)
    assert np.array_equal(nnkern.qgemm16(a, b), ref_qgemm(a, b))
    # -32768 * -32768 pairs (VPMADDWD's saturating case) with K at the data bound
    a = np.full((2, 1), -32768, np.int16)
    b = np.full((1, 3), -32768, np.int16)
    assert np.array_equal(nnkern.qgemm16(a, b), ref_qgemm(a, b))
    with pytest.raises(ValueError, match="exceeds"):
        nnkern.qgemm16(np.full((1, 2), -32768, np.int16), np.full((2, 1), -32768, np.int16))


def test_results_do_not_depend_on_threads(rng):
    a = rand_int(rng, np.int8, (123, 777))
    b = rand_int(rng, np.int8, (777, 301))
    nnkern.set_num_threads(1)
    one = nnkern.qgemm(a, b, a_zero_point=3, b_zero_point=-2)
    nnkern.set_num_threads(2)
    assert np.array_equal(nnkern.qgemm(a, b, a_zero_point=3, b_zero_point=-2), one)


def test_out_and_layouts(rng):
    a = rand_int(rng, np.uint8, (30, 50))
    b = rand_int(rng, np.int8, (50, 20))
    out = np.full((30, 20), 7, np.int32)
    assert nnkern.qgemm(a, b, out=out) is out
    assert np.array_equal(out, ref_qgemm(a, b))
    assert np.array_equal(nnkern.qgemm(a[::2, ::3], b[::3, ::-1]), ref_qgemm(a[::2, ::3], b[::3, ::-1]))
    assert nnkern.qgemm(np.zeros((0, 5), np.uint8), np.zeros((5, 3), np.int8)).shape == (0, 3)
    assert np.array_equal(nnkern.qgemm(np.zeros((2, 0), np.uint8), np.zeros((0, 3), np.int8)), np.zeros((2, 3)))


@pytest.mark.parametrize("adt", [np.uint8, np.int8])
@pytest.mark.parametrize("M, N, K", [(17, 13, 9), (1, 70, 40), (33, 1, 140), (5, 6, 0), (0, 4, 3), (40, 0, 2)])
def test_fast_path_is_exact_and_matches_the_checked_path(qisa, rng, adt, M, N, K):
    """qgemm with scalar int zero points and no out/algorithm skips the Python checks (_C.qgemm_fast)."""
    a, b = rand_int(rng, adt, (M, K)), rand_int(rng, np.int8, (K, N))
    for za, zb in [(0, 0), (int(np.iinfo(adt).max), -128), (int(np.iinfo(adt).min), 127), (3, -5)]:
        fast = _C.qgemm_fast(a, b, za, zb)
        assert fast is not None and fast.dtype == np.int32 and fast.shape == (M, N) and fast.flags.owndata
        assert np.array_equal(fast, ref_qgemm(a, b, za, zb))
        checked = nnkern.qgemm(a, b, a_zero_point=np.int64(za), b_zero_point=np.int64(zb))  # the checked path
        assert np.array_equal(nnkern.qgemm(a, b, a_zero_point=za, b_zero_point=zb), checked)
        out = np.full((M, N), -7, np.int32)
        assert _C.qgemm_fast(a, b, za, zb, out) is out and np.array_equal(out, checked)


def test_fast_path_declines_what_it_does_not_handle():
    a, b = np.zeros((4, 8), np.uint8), np.zeros((8, 5), np.int8)
    for x, y in [(a.astype(np.int16), b), (a, b.astype(np.uint8)), (a[:, ::2], b[:4]), (a, b[::2]), (a[0], b),
                 (a.tolist(), b), (a, b[:7]), (a[None], b)]:
        assert _C.qgemm_fast(x, y) is None
    for za, zb in [(256, 0), (-1, 0), (0, 128), (0, -129)]:
        assert _C.qgemm_fast(a, b, za, zb) is None
    assert _C.qgemm_fast(a.view(np.int8), b, 128, 0) is None and _C.qgemm_fast(a.view(np.int8), b, -129, 0) is None
    buf = np.zeros(64, np.int32)
    ro = np.zeros((4, 5), np.int32)
    ro.flags.writeable = False
    for out in (np.zeros((4, 5), np.int64), np.zeros((5, 4), np.int32), np.zeros((4, 5), np.int32, order="F"),
                buf.view(np.uint8)[2:82].view(np.int32).reshape(4, 5), ro, [[0] * 5] * 4):
        assert _C.qgemm_fast(a, b, 0, 0, out) is None
    assert _C.qgemm_fast(buf.view(np.uint8)[:32].reshape(4, 8), b, 0, 0, buf[:20].reshape(4, 5)) is None  # overlap
    # K past qgemm_max_k: the checked path's ValueError, not a wrapped int32 result
    big_k = nnkern.qgemm_max_k(np.uint8) + 1
    assert _C.qgemm_fast(np.zeros((1, big_k), np.uint8), np.zeros((big_k, 1), np.int8)) is None
    with pytest.raises(ValueError, match="exceeds"):
        nnkern.qgemm(np.zeros((1, big_k), np.uint8), np.zeros((big_k, 1), np.int8))
    assert _C.qgemm_fast(np.zeros((1, big_k - 1), np.uint8), np.zeros((big_k - 1, 1), np.int8)) is not None


def test_bad_inputs():
    a = np.zeros((4, 8), np.uint8)
    b = np.zeros((8, 5), np.int8)
    with pytest.raises(TypeError, match="dtype"):
        nnkern.qgemm(a.astype(np.int16), b)
    with pytest.raises(TypeError, match="dtype"):
        nnkern.qgemm(a, b.astype(np.uint8))
    with pytest.raises(TypeError):
        nnkern.qgemm(a.tolist(), b)
    with pytest.raises(ValueError, match="2-D"):
        nnkern.qgemm(a[0], b)
    with pytest.raises(ValueError, match="inner dimensions"):
        nnkern.qgemm(a, b[:7])
    with pytest.raises(ValueError, match="a_zero_point"):
        nnkern.qgemm(a, b, a_zero_point=256)
    with pytest.raises(ValueError, match="a_zero_point"):
        nnkern.qgemm(a.view(np.int8), b, a_zero_point=128)
    with pytest.raises(TypeError, match="a_zero_point"):
        nnkern.qgemm(a, b, a_zero_point=1.5)
    with pytest.raises(ValueError, match="b_zero_point"):
        nnkern.qgemm(a, b, b_zero_point=-129)
    with pytest.raises(ValueError, match="b_zero_point"):
        nnkern.qgemm(a, b, b_zero_point=np.zeros(4, np.int32))
    with pytest.raises(ValueError, match="b_zero_point"):
        nnkern.qgemm(a, b, b_zero_point=np.full(5, 200))
    with pytest.raises(TypeError, match="out"):
        nnkern.qgemm(a, b, out=np.zeros((4, 5), np.int64))
    with pytest.raises(ValueError, match="shape"):
        nnkern.qgemm(a, b, out=np.zeros((5, 4), np.int32))
    buf = np.zeros(64, np.int32)
    with pytest.raises(ValueError, match="overlaps"):
        nnkern.qgemm(buf.view(np.uint8)[:32].reshape(4, 8), b, out=buf[:20].reshape(4, 5))
    with pytest.raises(TypeError, match="dtype"):
        nnkern.qgemm16(a, b)
    # Empty inputs (K = 0) asking for an output no memory holds: numpy's error, before any write.
    for M, N in ((2 ** 31, 2 ** 31), (2 ** 40, 2 ** 40)):
        e, f = np.zeros((M, 0), np.uint8), np.zeros((0, N), np.int8)
        for call in (lambda: nnkern.qgemm(e, f), lambda: nnkern.qgemm(e, f, algorithm="pack_all"),
                     lambda: nnkern.matmul(e.view(np.int8).astype(np.float32), f.astype(np.float32))):
            with pytest.raises((ValueError, MemoryError)):
                call()


# --- guard pages (subprocess: a fault fails one test) ----------------------------------------------------

def run_guard_script(target, what):
    proc = run_script_isolated(GUARD_SCRIPT, target, what)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("OK"), describe_process(proc)


def test_no_access_past_guard_page(qisa):
    """Tails of the driver, qgemm16 and QLinear with inputs and outputs ending at an unmapped page; in a
    subprocess, so a fault fails this test only."""
    run_guard_script(qisa, "qgemm")


@pytest.mark.parametrize("what", ["ukernel", "indirect"])
def test_ukernel_no_access_past_guard_page(qkernel, what):
    """Every tile of the kernel, direct (ukernel) and indirect (every tap row, the zero row, A and each output
    column through c_rows ending at a guard page)."""
    run_guard_script(qkernel[0], what)


# --- the algorithm table (ops/qgemm/qgemm.cc): every path, where it applies, gives the exact result ---------

def test_every_algorithm_is_exact_where_it_applies(rng):
    names = nnkern._C.algorithms("qgemm")
    assert set(names) >= {"gemv", "pack_per_panel", "pack_all"}
    ran = set()
    # (5, 2100, 70): rows of B 2 KiB apart, packed with software prefetches.
    for M, N, K in [(1, 70, 33), (3, 5, 300), (4, 129, 64), (9, 17, 40), (37, 5000, 20), (5, 2100, 70)]:
        a = rng.integers(0, 256, (M, K), dtype=np.uint8)
        b = rng.integers(-128, 128, (K, N), dtype=np.int8)
        zb = rng.integers(-5, 5, N)
        want = ref_qgemm(a, b, 7, zb)
        for name in names:
            try:
                got = nnkern.qgemm(a, b, a_zero_point=7, b_zero_point=zb, algorithm=name)
            except ValueError as e:
                assert "does not apply" in str(e)
                assert name == "gemv", f"{name} must apply to any shape"
                continue
            assert np.array_equal(got, want), f"{name} {M}x{N}x{K}"
            ran.add(name)
    assert {"pack_per_panel", "pack_all"} <= ran
    if QGEMV_KERNELS and any(k["level"] in nnkern.supported_isas() for k in QGEMV_KERNELS):
        assert "gemv" in ran


QGEMV_KERNELS = _C.kernel_list("qgemv")


def gemv_max_m(name):
    """The largest M a GEMV kernel takes: the M of its name (kind_gemv_MxN__isa)."""
    return int(name.split("_gemv_")[1].split("x")[0])


@pytest.fixture(params=[k["name"] for k in QGEMV_KERNELS])
def qgemv_level(request):
    """Each GEMV kernel of the build, with the cap at its level (where auto dispatches it for M <= its max_m)."""
    k = next(k for k in QGEMV_KERNELS if k["name"] == request.param)
    if k["level"] not in nnkern.supported_isas():
        pytest.skip(f"CPU lacks {k['level']}: cannot run {k['name']}")
    with nnkern.max_isa(k["level"]):
        assert nnkern.cpu_info()["kernels"]["u8s8_gemv"] == k["name"]
        yield k["level"]


def test_gemv_every_tail(qgemv_level, rng):
    """The small-M path (algorithm "gemv"): M 1..max_m, every channel tail of 16 and 64, K odd and even across
    the kernels' K chunks, uint8 and int8 activations, scalar and per-column zero points; bit-exact; and M one
    past max_m, which gemv refuses."""
    Ns = range(1, 70) if not QUICK else (1, 5, 15, 16, 17, 33, 63, 64, 65)
    Ks = (0, 1, 2, 3, 7, 8, 9, 17, 511, 512, 513, 1025)
    max_m = gemv_max_m(nnkern.cpu_info()["kernels"]["u8s8_gemv"])
    with pytest.raises(ValueError, match="does not apply"):
        nnkern.qgemm(np.ones((max_m + 1, 3), np.uint8), np.ones((3, 2), np.int8), algorithm="gemv")
    for M in range(1, max_m + 1):
        for i, N in enumerate(Ns):
            K = Ks[(i + M) % len(Ks)]
            for adt in (np.uint8, np.int8):
                a, b = rand_int(rng, adt, (M, K)), rand_int(rng, np.int8, (K, N))
                info = np.iinfo(adt)
                for za, zb in ((0, 0), (int(info.max), -128), (int(info.min), rng.integers(-128, 128, N))):
                    got = nnkern.qgemm(a, b, a_zero_point=za, b_zero_point=zb, algorithm="gemv")
                    assert np.array_equal(got, ref_qgemm(a, b, za, zb)), (qgemv_level, M, N, K, adt, za)
    # wide B: more channels than a kernel keeps accumulators for at once (the AVX-512 kernel's blocks of
    # 24 KiB / (4 (M + 1)) channels: 1216 for M = 4 with column sums, 6144 for M = 1 without), with K past the
    # driver's L2 slices (the kernel then accumulates onto c)
    for M, N, K, za in ((4, 1300, 1025, 9), (1, 6200, 201, 0), (2, 4097, 700, 255), (3, 2100, 3, 1),
                        (max_m, 800, 90, 4)):
        a, b = rand_int(rng, np.uint8, (M, K)), rand_int(rng, np.int8, (K, N))
        zb = rng.integers(-128, 128, N)
        got = nnkern.qgemm(a, b, a_zero_point=za, b_zero_point=zb, algorithm="gemv")
        assert np.array_equal(got, ref_qgemm(a, b, za, zb)), (qgemv_level, M, N, K, za)
    # extremes at the largest exact K: every product at its maximum magnitude
    K = nnkern.qgemm_max_k(np.uint8, 0, -128)
    a, b = np.full((4, K), 255, np.uint8), np.full((K, 20), -128, np.int8)
    assert np.array_equal(nnkern.qgemm(a, b, algorithm="gemv"), ref_qgemm(a, b))


def test_gemv_is_auto_for_small_m(rng):
    """Where the cap has a GEMV kernel (its own or one of a level it implies), auto runs it for M <= max_m."""
    a, b = rand_int(rng, np.uint8, (3, 40)), rand_int(rng, np.int8, (40, 9))
    for level in nnkern.supported_isas():
        with nnkern.max_isa(level):
            gemv = nnkern.cpu_info()["kernels"]["u8s8_gemv"]
            has = not gemv.startswith("none")
            nnkern.qgemm(a, b)
            assert (_C.last_algorithm("qgemm") == "gemv") == has, level
            max_m = gemv_max_m(gemv) if has else 0
            nnkern.qgemm(rand_int(rng, np.uint8, (max_m + 1, 40)), b)
            assert _C.last_algorithm("qgemm") != "gemv"


def test_algorithm_argument():
    a, b = np.ones((2, 3), np.uint8), np.ones((3, 4), np.int8)
    with pytest.raises(ValueError, match="algorithm"):
        nnkern.qgemm(a, b, algorithm="fast")
    with pytest.raises(TypeError, match="algorithm"):
        nnkern.qgemm(a, b, algorithm=1)
    with pytest.raises(ValueError, match="does not apply"):
        nnkern.qgemm16(np.ones((2, 3), np.int16), np.ones((3, 4), np.int16), algorithm="gemv")


def test_shallow_work_runs_the_level_below(rng):
    """A kernel with measured limits (AMX: min_depth 128, min_k 24) hands shallower reductions to the best
    8-bit kernel of the levels below: qgemm, QLinear and QConv2d all choose by their depth, and stay exact."""
    if "amx" not in nnkern.supported_isas():
        pytest.skip("CPU lacks amx (the only kernel with depth limits)")
    with nnkern.max_isa("amx"):
        amx, vnni = "u8s8_gemm_32x32c4__amx", "u8s8_gemm_64x6c4__avx512vnni"
        assert _C.qgemm_kernel_for(127) == vnni and _C.qgemm_kernel_for(128) == amx
        assert _C.qgemm_kernel_for(16, 9) == vnni and _C.qgemm_kernel_for(24, 9) == amx
        assert _C.qgemm_kernel_for(23, 100) == vnni
        for K, want in ((64, vnni), (128, amx)):
            w = rng.standard_normal((40, K)).astype(np.float32)
            assert nnkern.QLinear(w, input_scale=0.1, input_zero_point=3, output_dtype=np.int32).kernel == want
            a = rand_int(rng, np.uint8, (33, K))
            b = rand_int(rng, np.int8, (K, 35))
            assert np.array_equal(nnkern.qgemm(a, b, a_zero_point=7), ref_qgemm(a, b, 7))
        for ic, want in ((16, vnni), (32, amx)):
            conv = nnkern.QConv2d(rng.standard_normal((8, 3, 3, ic)).astype(np.float32), padding=1,
                                  input_scale=0.1, input_zero_point=3, output_dtype=np.int32)
            assert conv.kernel == want
    with nnkern.max_isa("avx512vnni"):
        assert _C.qgemm_kernel_for(10 ** 6) == vnni


def test_amx_configuration_survives_other_tile_users(rng):
    """The AMX kernel keeps its tile configuration between calls and checks it on each one: another user of
    the tiles on the same thread in between (here the peak loop, which loads its own configuration and
    releases the tiles) costs a reload, never a wrong result."""
    if "amx" not in nnkern.supported_isas():
        pytest.skip("CPU lacks amx")
    nnkern.set_num_threads(1)  # the calling thread runs the tiles (the conftest fixture restores the count)
    with nnkern.max_isa("amx"):
        for M, N, K in ((33, 40, 200), (17, 33, 130), (40, 64, 512)):
            a = rand_int(rng, np.uint8, (M, K))
            b = rand_int(rng, np.int8, (K, N))
            want = ref_qgemm(a, b, 5)
            assert np.array_equal(nnkern.qgemm(a, b, a_zero_point=5), want)
            _C.i8_peak_ops("amx", 1e-4)
            assert np.array_equal(nnkern.qgemm(a, b, a_zero_point=5), want)


def _at_offset(x, offset):
    """A copy of x whose data starts `offset` bytes past a 64-byte line."""
    buf = np.empty(x.nbytes + 128, np.uint8)
    start = -buf.ctypes.data % 64 + offset
    y = buf[start:start + x.nbytes].view(x.dtype).reshape(x.shape)
    y[...] = x
    assert y.ctypes.data % 64 == offset
    return y


@pytest.mark.parametrize("offset", [0, 1, 16, 63])
@pytest.mark.parametrize("adt", [np.uint8, np.int8])
def test_activations_at_any_byte_offset(qisa, rng, offset, adt):
    """A starting anywhere in a line, with row strides that are not multiples of 64 (a column slice): the
    AMX GEMMs with 512 or more output channels copy such A onto aligned rows (row_align) first, with its
    row sums when a b zero point needs them; fewer channels read it in place. Every level exact, qgemm and
    QLinear."""
    for M, N, K in ((37, 530, 200), (64, 33, 256), (5, 520, 130)):
        a_full = _at_offset(rand_int(rng, adt, (M, K + 3)), offset)
        a = a_full[:, :K]  # rows K + 3 bytes apart
        b = rand_int(rng, np.int8, (K, N))
        za = 3 if adt == np.uint8 else -3
        zb = rng.integers(-9, 9, N)
        want = ref_qgemm(a, b, za, zb)
        assert np.array_equal(nnkern.qgemm(a, b, a_zero_point=za, b_zero_point=zb), want), f"{M}x{N}x{K}"
        a_rows = _at_offset(np.ascontiguousarray(a), offset)  # contiguous rows K apart, from the offset
        assert np.array_equal(nnkern.qgemm(a_rows, b, a_zero_point=za), ref_qgemm(a, b, za)), f"{M}x{N}x{K}"
        if adt == np.uint8:
            layer = nnkern.QLinear(b.T.copy(), weight_scale=1.0, input_scale=1.0, input_zero_point=za,
                                   output_dtype=np.int32)
            assert np.array_equal(layer(a_rows), ref_qgemm(a, b, za)), f"QLinear {M}x{N}x{K}"


@pytest.mark.parametrize("M, N", [(128, 128), (300, 301), (4, 5)])
def test_new_outputs_start_on_a_line_when_large(rng, M, N):
    """Outputs nnkern allocates start on a 64-byte line from 64 KiB up (the AMX kernel stores whole tile rows),
    by the fast path and the checked one alike; they are ordinary writeable arrays."""
    a = rand_int(rng, np.uint8, (M, 20))
    b = rand_int(rng, np.int8, (20, N))
    fa, fb = a.astype(np.float32), b.astype(np.float32)
    for c in (nnkern.qgemm(a, b), nnkern.qgemm(a, b, algorithm="pack_all"), nnkern.matmul(fa, fb)):
        assert c.flags.c_contiguous and c.flags.writeable and c.shape == (M, N)
        if c.nbytes >= 64 << 10:
            assert c.ctypes.data % 64 == 0
        c[0, 0] = 1
    assert np.array_equal(nnkern.qgemm(a, b), ref_qgemm(a, b))


def test_outputs_larger_than_l2(qisa, rng):
    """Raw int32 sums into an output larger than L2 (the AMX kernel streams them past the caches when the
    output starts on a line, and fences them before the call returns), on 1 and 2 threads; and the same into
    an out= array off the lines (tile stores), and through QLinear's int32 output."""
    l2 = nnkern.cpu_info()["caches"]["l2"] or 1 << 20
    K = 150
    for N in (1024, 1040):  # 1040: the last panel is one 16-channel half (its own streaming loop)
        M = l2 // (4 * N) + 37  # a row tail too
        a = rand_int(rng, np.uint8, (M, K))
        b = rand_int(rng, np.int8, (K, N))
        want = ref_qgemm(a, b)
        layer = nnkern.QLinear(b.T.copy(), weight_scale=1.0, input_scale=1.0, input_zero_point=0,
                               output_dtype=np.int32)
        for threads in (1, 2):
            nnkern.set_num_threads(threads)
            got = nnkern.qgemm(a, b)
            assert got.ctypes.data % 64 == 0 and np.array_equal(got, want), f"{qisa} N={N} threads={threads}"
            off = _at_offset(np.zeros((M, N), np.int32), 16)
            assert nnkern.qgemm(a, b, out=off) is off and np.array_equal(off, want)
            assert np.array_equal(layer(a), want)


@functools.lru_cache(maxsize=1)
def _row_block_case(l2):
    """A off a line with more rows than one task's L2 block at K = 1000, B with 520 channels, and the exact
    product (computed once: the int64 reference is the slow part)."""
    gen = np.random.default_rng(1234)
    K, N = 1000, 520
    M = l2 // (2 * K) + 150
    a = _at_offset(rand_int(gen, np.uint8, (M, K)), 16)
    b = rand_int(gen, np.int8, (K, N))
    return a, b, ref_qgemm(a, b, 9)


@pytest.mark.parametrize("threads", [1, 2])
def test_misaligned_activations_in_row_blocks(qisa, threads):
    """Tasks that start at later rows (more rows than one task's L2 block), each copying its own rows of
    misaligned A (AMX, 512+ channels); every level exact, qgemm and QLinear, 1 and 2 threads."""
    a, b, want = _row_block_case(nnkern.cpu_info()["caches"]["l2"] or 1 << 20)
    nnkern.set_num_threads(threads)
    assert np.array_equal(nnkern.qgemm(a, b, a_zero_point=9), want)
    layer = nnkern.QLinear(b.T.copy(), weight_scale=1.0, input_scale=1.0, input_zero_point=9, output_dtype=np.int32)
    assert np.array_equal(layer(a), want)


@pytest.mark.parametrize("xdt", [np.uint8, np.int8])
def test_reduction_tail_read_whole(qisa, rng, xdt):
    """Every K % 64 with 512+ channels and rows off the cache lines: the AMX GEMMs copy A onto rows padded
    with zeros and read the last 64-k step whole, whatever weights follow the panel's tail meet those zeros
    (QEpilogue::k_padded). QLinear (prepacked weights), qgemm packing per panel and all at once; every
    level exact."""
    M, N = 35, 520  # two row tiles, the second of 3 rows; a last panel of 8 channels
    info = np.iinfo(xdt)
    for t in range(1, 64):
        K = 128 + t
        a = rng.integers(info.min, info.max + 1, (M, K), dtype=xdt)
        b = rng.integers(-128, 128, (K, N), dtype=np.int8)
        za = 7 if xdt == np.uint8 else -3
        want = ref_qgemm(a, b, za, 0)
        for alg in ("pack_per_panel", "pack_all"):
            assert np.array_equal(nnkern.qgemm(a, b, a_zero_point=za, algorithm=alg), want), (qisa, K, alg)
        layer = nnkern.QLinear(b.T.copy(), weight_scale=1.0, input_scale=1.0, input_zero_point=za,
                               output_dtype=np.int32)
        assert np.array_equal(layer(a), want), (qisa, K)
        with nnkern.max_isa(nnkern.supported_isas()[0]):  # packed for another kernel: repacked per call
            other = nnkern.QLinear(b.T.copy(), weight_scale=1.0, input_scale=1.0, input_zero_point=za,
                                   output_dtype=np.int32)
        assert np.array_equal(other(a), want), (qisa, K, "repacked")


@pytest.mark.parametrize("threads", [1, 2])
def test_few_rows_weights_past_l2(qisa, rng, threads):
    """A few rows with weights larger than L2 stream B from memory and take a thread per 256 KiB of it
    (ops/qgemm/driver.cc): QLinear and qgemm with all of B packed, exact on 1 and 2 threads."""
    l2 = nnkern.cpu_info()["caches"]["l2"] or 1 << 20
    M, N = 5, 1040
    K = l2 // N + 65
    a = rand_int(rng, np.uint8, (M, K))
    b = rand_int(rng, np.int8, (K, N))
    want = ref_qgemm(a, b, 3, 0)
    nnkern.set_num_threads(threads)
    layer = nnkern.QLinear(b.T.copy(), weight_scale=1.0, input_scale=1.0, input_zero_point=3, output_dtype=np.int32)
    assert np.array_equal(layer(a), want), (qisa, threads)
    assert np.array_equal(nnkern.qgemm(a, b, a_zero_point=3, algorithm="pack_all"), want), (qisa, threads)
