"""Guard-page check of the integer GEMM, run as a subprocess by test_qgemm.py.

    python qgemm_guard_check.py KERNEL ukernel|indirect
    python qgemm_guard_check.py ISA qgemm

ukernel: every (m, n) tile of the kernel (a name of nnkern._C.kernel_list("qgemm")) and every k remainder of its
  groups, with the packed A panel, each B column, C (int32 and uint8) and the partial sums c_in each ending
  right before an unmapped page (nnkern._C.GuardedBuffer): B's k % G tail must read no byte past b[j][k-1],
  C's and c_in's m % lanes tails no element past (m-1, j).
indirect: the same tails in the indirect form (ks = 3, a nonzero b_offset): every real tap row in its own
  buffer ending at a guard page, the zero row too, the ks-tap A panel, C through c_rows, each column ending at
  a guard page.
qgemm: the driver under the cap ISA with a, b and out ending at guard pages, over the tails of M, N, K
  (uint8 and int8 activations, per-column zero points), qgemm16, and QLinear with u8 output.
Prints "OK" and exits 0 on success; exits 1 on a wrong result; a fault is a signal.
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nnkern  # noqa: E402
from nnkern import _C  # noqa: E402
from helpers import QUICK  # noqa: E402
from qhelpers import (KIND_DTYPES, QGEMM_KERNELS, epilogue_ref, kernel_traits, pack_a, pack_taps, ref_qgemm,  # noqa: E402
                      tile_grid, weight_range)


def guarded(dtype, count):
    """A 1-D array of ``count`` elements whose last element is right before a guard page."""
    item = np.dtype(dtype).itemsize
    buf = _C.GuardedBuffer(max(count, 1) * item)
    arr = np.frombuffer(buf, dtype=dtype)
    return arr[arr.size - count:], buf


def sizes(MR, NR, axis):
    """Every m (axis 0) or n (axis 1) of the tile; a large tile's edge sizes (qhelpers.tile_grid)."""
    return sorted({mn[axis] for mn in tile_grid(MR, NR)})


def step_edges(name):
    """k on both sides of an inner step longer than the K group (AMX's 64): the in-place loads of whole
    steps end at the guard page too."""
    G, S = next(k["kgroup"] for k in QGEMM_KERNELS if k["name"] == name), kernel_traits(name)[1]
    return [S - 1, S, S + 1, 2 * S + 3] if S > G else []


def kernel_info(name):
    k = next(k for k in QGEMM_KERNELS if k["name"] == name)
    return k["mr"], k["nr"], k["kgroup"], kernel_traits(name)[0]


def ukernel_guard(isa):
    rng = np.random.default_rng(0)
    if True:
        MR, NR, G, kind = kernel_info(isa)
        adt, bdt = KIND_DTYPES[kind]
        ks = list(range(0, 3 * G + 1)) if not QUICK else [0, 1, G, G + 1, 2 * G + G - 1]
        ks += step_edges(isa)
        for k in ks:
            W = rng.integers(*np.add(weight_range(isa, adt), (0, 1)), (MR, k), dtype=adt)
            X = rng.integers(np.iinfo(bdt).min, np.iinfo(bdt).max + 1, (NR, k), dtype=bdt)
            for m in sizes(MR, NR, 0):
                panel = pack_a(W[:m], MR, G)
                # The kernel may read whole vectors of the panel, up to ceil(m / lanes) lanes of each group:
                # the guard sits right after the full panel (the packed layout's own end).
                a, abuf = guarded(adt, panel.size)
                a[...] = panel
                for n in sizes(MR, NR, 1):
                    # B: the n columns back to back, the last one ending at the guard page.
                    flat, fb = guarded(bdt, n * k)
                    for j in range(n):
                        flat[j * k:(j + 1) * k] = X[j, :k]
                    item = np.dtype(bdt).itemsize
                    c, cbuf = guarded(np.int32, (n - 1) * m + m)
                    _C.qgemm_ukernel(isa, m, n, k, a, 0, flat, [j * k * item for j in range(n)], c, 0, m,
                                     0, None, None, None, None, None, False, 0.0, 0.0)
                    got = c.reshape(n, m).T
                    want = epilogue_ref(W[:m].astype(np.int64) @ X[:n].astype(np.int64).T, "i32")
                    if not np.array_equal(got, want):
                        raise SystemExit(f"{isa} {kind} m={m} n={n} k={k}: wrong result")
                    # partial sums in (c_in, masked loads of the m % lanes tail) ending at a guard page
                    cin, cinbuf = guarded(np.int32, (n - 1) * m + m)
                    cin[...] = rng.integers(-10 ** 6, 10 ** 6, cin.size)
                    _C.qgemm_ukernel(isa, m, n, k, a, 0, flat, [j * k * item for j in range(n)], c, 0, m,
                                     0, None, None, None, None, None, False, 0.0, 0.0, cin)
                    if not np.array_equal(c.reshape(n, m).T, want + cin.reshape(n, m).T):
                        raise SystemExit(f"{isa} {kind} m={m} n={n} k={k}: wrong result with c_in")
                    # u8 output (byte tails) ending at a guard page
                    c8, c8buf = guarded(np.uint8, (n - 1) * m + m)
                    pad = -(-MR // 64) * 64
                    scale = np.full(pad, 1e-3, np.float32)
                    _C.qgemm_ukernel(isa, m, n, k, a, 0, flat, [j * k * item for j in range(n)], c8, 0, m,
                                     2, None, None, None, scale, None, False, 0.0, 255.0)
                    want8 = epilogue_ref(W[:m].astype(np.int64) @ X[:n].astype(np.int64).T, "u8", scale=scale,
                                         lo=0.0, hi=255.0)
                    if not np.array_equal(c8.reshape(n, m).T, want8):
                        raise SystemExit(f"{isa} {kind} m={m} n={n} k={k}: wrong u8 result")
                    del flat, c, c8, cin


def indirect_guard(name):
    rng = np.random.default_rng(2)
    MR, NR, G, kind = kernel_info(name)
    adt, bdt = KIND_DTYPES[kind]
    item = np.dtype(bdt).itemsize
    ks, b_offset = 3, 4096 + 8
    pad = -(-MR // 64) * 64
    scale = np.full(pad, 1e-3, np.float32)
    ks_range = list(range(1, 3 * G + 2)) if not QUICK else [1, G, G + 1]
    for k in ks_range + step_edges(name):
        W = rng.integers(*np.add(weight_range(name, adt), (0, 1)), (MR, ks * k), dtype=adt)
        for m in sizes(MR, NR, 0):
            panel = pack_taps(W[:m], MR, G, ks)
            a, abuf = guarded(adt, panel.size)
            a[...] = panel
            for n in sizes(MR, NR, 1):
                mask = rng.random((ks, n)) < 0.4
                zero, zbuf = guarded(bdt, k)
                zero[...] = rng.integers(np.iinfo(bdt).min, np.iinfo(bdt).max + 1, k)
                rows, keep, offsets = [], [], []
                base, bbuf = guarded(bdt, 1)
                for t in range(ks):
                    for j in range(n):
                        r, rb = guarded(bdt, k)
                        r[...] = rng.integers(np.iinfo(bdt).min, np.iinfo(bdt).max + 1, k)
                        keep.append((r, rb))
                        rows.append(zero if mask[t, j] else r)
                        offsets.append(None if mask[t, j] else r.ctypes.data - base.ctypes.data)
                flat = np.stack([np.concatenate([rows[t * n + j] for t in range(ks)]) for j in range(n)])
                want = epilogue_ref(W[:m].astype(np.int64) @ flat.astype(np.int64).T, "u8", scale=scale,
                                    lo=0.0, hi=255.0)
                cols = [guarded(np.uint8, m) for _ in range(n)]
                c_rows = [col.ctypes.data - cols[0][0].ctypes.data for col, _ in cols]
                _C.qgemm_ukernel(name, m, n, k, a, 0, base, offsets, cols[0][0], 0, m, 2, None, None, None, scale,
                                 None, False, 0.0, 255.0, ks=ks, zero=zero, b_offset=b_offset, c_rows=c_rows)
                got = np.stack([col for col, _ in cols], axis=1)
                if not np.array_equal(got, want):
                    raise SystemExit(f"{name} indirect m={m} n={n} k={k}: wrong result")
                del rows, keep, cols, base, zero


def qgemm_guard(isa):
    rng = np.random.default_rng(1)
    nnkern.set_max_isa(isa)
    Ms = (1, 2, 3, 4, 5, 6, 7, 13)
    Ns = (1, 15, 16, 17, 63, 64, 65, 130)
    Ks = (1, 2, 3, 4, 5, 7, 9, 31, 64, 65) if not QUICK else (1, 3, 5, 65)
    for M in Ms:
        for N in Ns:
            for K in Ks:
                for adt in (np.uint8, np.int8):
                    a, ab = guarded(adt, M * K)
                    a[...] = rng.integers(np.iinfo(adt).min, np.iinfo(adt).max + 1, M * K)
                    b, bb = guarded(np.int8, K * N)
                    b[...] = rng.integers(-128, 128, K * N)
                    c, cb = guarded(np.int32, M * N)
                    A, B, C = a.reshape(M, K), b.reshape(K, N), c.reshape(M, N)
                    zb = rng.integers(-128, 128, N)
                    nnkern.qgemm(A, B, a_zero_point=7 if adt == np.uint8 else -7, b_zero_point=zb, out=C)
                    if not np.array_equal(C, ref_qgemm(A, B, 7 if adt == np.uint8 else -7, zb)):
                        raise SystemExit(f"{isa} qgemm {adt.__name__} {M}x{N}x{K}: wrong result")
                    del a, b, c, A, B, C
                a16, ab = guarded(np.int16, M * K)
                a16[...] = rng.integers(-1000, 1000, M * K)
                b16, bb = guarded(np.int16, K * N)
                b16[...] = rng.integers(-1000, 1000, K * N)
                A, B = a16.reshape(M, K), b16.reshape(K, N)
                if not np.array_equal(nnkern.qgemm16(A, B), ref_qgemm(A, B)):
                    raise SystemExit(f"{isa} qgemm16 {M}x{N}x{K}: wrong result")
                del a16, b16, A, B
    if hasattr(nnkern, "QLinear"):
        for N, K in ((65, 13), (3, 300), (17, 1)):
            w = rng.uniform(-1, 1, (N, K)).astype(np.float32)
            layer = nnkern.QLinear(w, rng.uniform(-1, 1, N).astype(np.float32), input_scale=0.02,
                                   input_zero_point=128, output_scale=0.05, output_zero_point=100)
            for rows in (1, 7):
                x, xb = guarded(np.uint8, rows * K)
                x[...] = rng.integers(0, 256, rows * K)
                y, yb = guarded(np.uint8, rows * N)
                X, Y = x.reshape(rows, K), y.reshape(rows, N)
                layer(X, out=Y)
                want = layer(np.ascontiguousarray(X))
                if not np.array_equal(Y, want):
                    raise SystemExit(f"{isa} QLinear {K}->{N} x{rows}: wrong result")
                del x, y, X, Y


if __name__ == "__main__":
    isa_name, what = sys.argv[1], sys.argv[2]
    {"ukernel": ukernel_guard, "indirect": indirect_guard, "qgemm": qgemm_guard}[what](isa_name)
    print("OK")
