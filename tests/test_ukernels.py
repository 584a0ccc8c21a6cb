"""Every tile of every f32_gemm micro-kernel, called directly through nnkern._C.f32_gemm_ukernel.

Column-major terms (csrc/kernels/f32_gemm.h): A(i, p) = a[a_offset + p*a_stride + i],
B(p, j) = b[b_offsets[j] + p*b_stride], C(i, j) = c[c_offset + j*ldc + i], i < m <= MR, j < n <= NR.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from nnkern import _C
from helpers import EPS, QUICK, check_within_bound, describe_process, gemm_bound, run_python_isolated

K_VALUES = range(0, 2 * 8 + 8) if not QUICK else (0, 1, 2, 3, 4, 7, 8, 9, 15, 17, 23)
SENTINEL = np.float32(-777.0)
GUARD_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "guard_check.py")


def tile(isa):
    _, mr, nr = _C.f32_gemm_tile(isa)
    return mr, nr


def run_all_tiles(isa, rng, *, a_stride_extra, alpha=1.0, beta=0.0, use_bias=False, relu=False, a_copy=False):
    """Run every (m, n, k) tile; check the m x n result against float64, and that nothing else in C
    (rows m..ldc of each column, columns n..NR) and nothing past the panel in a_copy changed."""
    MR, NR = tile(isa)
    a_stride = MR + a_stride_extra
    ldc = MR + 3
    kmax = max(K_VALUES)
    A = rng.uniform(-1, 1, (MR, kmax)).astype(np.float32)
    Bm = rng.uniform(-1, 1, (kmax, NR)).astype(np.float32)
    a_buf = np.full(a_stride * kmax + MR, SENTINEL, np.float32)
    for p in range(kmax):
        a_buf[p * a_stride:p * a_stride + MR] = A[:, p]
    b_stride = NR + 2  # an interleaved layout with padding
    b_buf = np.full(b_stride * kmax + NR, SENTINEL, np.float32)
    for p in range(kmax):
        b_buf[p * b_stride:p * b_stride + NR] = Bm[p]
    b_offsets = list(range(NR))
    C0 = rng.uniform(-1, 1, (NR, ldc)).astype(np.float32)  # column j at C0[j]
    bias = rng.uniform(-1, 1, MR).astype(np.float32) if use_bias else None
    A64, B64 = A.astype(np.float64), Bm.astype(np.float64)
    for k in K_VALUES:
        acc = alpha * (A64[:, :k] @ B64[:k])                # MR x NR
        base_bound = gemm_bound(A64[:, :k], B64[:k], k, alpha, beta, C0[:, :MR].T if beta else None)
        for m in range(1, MR + 1):
            for n in range(1, NR + 1):
                c = C0.copy()
                if beta == 0.0:
                    c[:n, :m] = np.nan  # must be ignored
                copy = np.full(MR * k + MR, SENTINEL, np.float32) if a_copy else None
                _C.f32_gemm_ukernel(isa, m, n, k, a_buf, 0, a_stride, copy, b_buf, b_offsets[:n], b_stride,
                                    c.ravel(), 0, ldc, alpha, beta, bias, relu)
                want = acc[:m, :n].copy()
                bound = base_bound[:m, :n].copy()
                if beta:
                    want += beta * C0[:n, :m].T.astype(np.float64)
                if use_bias:
                    want += bias[:m, None]
                    bound += EPS * np.abs(want)
                if relu:
                    want = np.maximum(want, 0.0)
                what = f"{isa} m={m} n={n} k={k} a_stride={a_stride}"
                check_within_bound(c[:n, :m].T, want, bound, what)
                untouched = np.ones(c.shape, bool)
                untouched[:n, :m] = False
                assert np.array_equal(c[untouched], C0[untouched]), f"{what}: wrote C outside the tile"
                if a_copy:
                    panel = copy[:MR * k].reshape(k, MR)
                    assert np.array_equal(panel[:, :m], A[:m, :k].T), f"{what}: a_copy is not the A panel"
                    assert (copy[MR * k:] == SENTINEL).all(), f"{what}: a_copy written past MR*k"


@pytest.mark.parametrize("a_stride_extra", [0, 5], ids=["packed", "strided"])
def test_every_tile_plain(isa, rng, a_stride_extra):
    run_all_tiles(isa, rng, a_stride_extra=a_stride_extra)


@pytest.mark.parametrize("a_stride_extra", [0, 13], ids=["packed", "strided"])
def test_every_tile_with_a_copy(isa, rng, a_stride_extra):
    run_all_tiles(isa, rng, a_stride_extra=a_stride_extra, a_copy=True, alpha=0.5)


@pytest.mark.parametrize("alpha, beta, use_bias, relu", [
    (1.0, 1.0, False, False),
    (-1.5, 0.25, True, False),
    (2.0, 0.0, True, True),
    (1.0, -1.0, False, True),
], ids=["beta1", "alpha-beta-bias", "bias-relu-beta0", "beta-relu"])
def test_every_tile_epilogue(isa, rng, alpha, beta, use_bias, relu):
    run_all_tiles(isa, rng, a_stride_extra=0, alpha=alpha, beta=beta, use_bias=use_bias, relu=relu)


def test_relu_keeps_nan(isa):
    MR, NR = tile(isa)
    a = np.ones(MR, np.float32)
    a[0] = np.nan
    b = np.full(NR, -1.0, np.float32)
    c = np.zeros(MR * NR, np.float32)
    _C.f32_gemm_ukernel(isa, MR, NR, 1, a, 0, MR, None, b, list(range(NR)), NR, c, 0, MR, 1.0, 0.0, None, True)
    c = c.reshape(NR, MR)
    assert np.isnan(c[:, 0]).all()
    assert (c[:, 1:] == 0.0).all()


def test_ukernel_hook_rejects_oversized_tiles(isa):
    MR, NR = tile(isa)
    buf = np.zeros(4 * MR * NR, np.float32)
    with pytest.raises(ValueError):
        _C.f32_gemm_ukernel(isa, MR + 1, 1, 1, buf, 0, MR + 1, None, buf, [0], 1, buf, 0, MR + 1, 1.0, 0.0, None, False)
    with pytest.raises(ValueError):
        _C.f32_gemm_ukernel(isa, 1, NR + 1, 1, buf, 0, MR, None, buf, list(range(NR + 1)), 1, buf, 0, MR, 1.0, 0.0,
                            None, False)


def test_tile_names_follow_convention():
    for level in _C.isa_levels():
        try:
            name, mr, nr = _C.f32_gemm_tile(level)
        except ValueError:
            continue
        assert name == f"f32_gemm_{mr}x{nr}__{level}", name


def test_guarded_buffer_ends_at_guard_page():
    """The helper itself: the view's last element is right before an unmapped page (a read past it faults)."""
    code = ("import numpy as np, nnkern._C as C\n"
            "g = C.GuardedBuffer(40)\n"
            "a = np.frombuffer(g, dtype=np.float32)\n"
            "assert a.size == 10\n"
            "a[:] = 1; print(float(a[-1]), flush=True)\n"
            "c = np.zeros(16, np.float32)\n"
            "C.f32_gemm_ukernel('scalar', 1, 1, 2, a, 9, 1, None, a, [0], 1, c, 0, 1, 1.0, 0.0, None, False)\n"
            "print('no fault')\n")
    proc = run_python_isolated(code)
    assert proc.stdout.startswith("1.0")
    assert proc.returncode < 0 and "no fault" not in proc.stdout, describe_process(proc)


@pytest.mark.parametrize("what", ["ukernel", "sgemm"])
def test_no_access_past_guard_page(isa, what):
    """Every tail of the micro-kernel (what=ukernel) and of the driver (what=sgemm) with inputs and outputs
    ending at an unmapped page; in a subprocess, so a fault is a failure of this test only."""
    proc = run_python_isolated(f"import runpy, sys; sys.argv = [{GUARD_SCRIPT!r}, {isa!r}, {what!r}]; "
                               f"runpy.run_path({GUARD_SCRIPT!r}, run_name='__main__')", timeout=600)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("OK"), describe_process(proc)
