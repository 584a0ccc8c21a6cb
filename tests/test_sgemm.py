"""nnkern.sgemm / matmul / Linear against a float64 reference, on every ISA level this CPU has."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import nnkern
from nnkern import _C
from helpers import (EPS, QUICK, assert_gemm_close, check_within_bound, describe_process, gemm_bound, rand, ref_gemm,
                     run_concurrently, run_python_isolated)

TRANSPOSES = list(itertools.product([False, True], [False, True]))
TRANS_IDS = ["NN", "NT", "TN", "TT"]


def stored(x, trans):
    """The array to pass for op(x) == x: x itself, or a C-contiguous x.T with trans=True."""
    return np.ascontiguousarray(x.T) if trans else np.ascontiguousarray(x)


# ---------------------------------------------------------------------------------------------------
# Exhaustive tails: every (M, N, K), M in 1..40, N in 1..14, K in 1..20, every transpose combination.
# The float64 reference of every (M, N, K) is a corner of one product per K, so it is computed once;
# results are gathered into one padded array and checked in a single vectorized comparison.

SWEEP_M, SWEEP_N, SWEEP_K = (40, 14, 20) if not QUICK else (19, 9, 11)


def sweep(rng, trans_a, trans_b, alpha, beta):
    Mx, Nx, Kx = SWEEP_M, SWEEP_N, SWEEP_K
    A = rand(rng, Mx, Kx)
    B = rand(rng, Kx, Nx)
    C0 = rand(rng, Mx, Nx)
    A64, B64, C064 = A.astype(np.float64), B.astype(np.float64), C0.astype(np.float64)
    got = np.full((Kx, Mx, Nx, Mx, Nx), np.nan, np.float64)
    want = np.zeros_like(got)
    bound = np.ones_like(got)
    nan_c = np.full((Mx, Nx), np.nan, np.float32)
    for K in range(1, Kx + 1):
        full = alpha * (A64[:, :K] @ B64[:K, :])
        if beta != 0.0:
            full = full + beta * C064
        full_bound = gemm_bound(A64[:, :K], B64[:K, :], K, alpha, beta, C0)
        for M in range(1, Mx + 1):
            a = stored(A[:M, :K], trans_a)
            for N in range(1, Nx + 1):
                b = stored(B[:K, :N], trans_b)
                # beta == 0: C is full of NaN and must be ignored
                c = C0[:M, :N].copy() if beta != 0.0 else nan_c[:M, :N].copy()
                r = nnkern.sgemm(a, b, trans_a=trans_a, trans_b=trans_b, alpha=alpha, beta=beta, c=c)
                assert r is c
                got[K - 1, M - 1, N - 1, :M, :N] = c
                want[K - 1, M - 1, N - 1, :M, :N] = full[:M, :N]
                bound[K - 1, M - 1, N - 1, :M, :N] = full_bound[:M, :N]
    err = np.abs(got - want)
    valid = np.zeros(got.shape, bool)
    for M in range(1, Mx + 1):
        for N in range(1, Nx + 1):
            valid[:, M - 1, N - 1, :M, :N] = True
    bad = valid & ~(err <= bound)
    if bad.any():
        K, M, N, i, j = (int(v) + 1 for v in np.argwhere(bad)[0])
        raise AssertionError(f"{int(bad.sum())} bad elements; first: M={M} N={N} K={K} at C[{i - 1}, {j - 1}]: "
                             f"got {got[K - 1, M - 1, N - 1, i - 1, j - 1]}, want {want[K - 1, M - 1, N - 1, i - 1, j - 1]}")


@pytest.mark.parametrize("trans_a, trans_b", TRANSPOSES, ids=TRANS_IDS)
def test_exhaustive_tails_beta0_over_nan(isa, rng, trans_a, trans_b):
    sweep(rng, trans_a, trans_b, alpha=1.0, beta=0.0)


@pytest.mark.parametrize("trans_a, trans_b", [(False, False), (True, True)], ids=["NN", "TT"])
def test_exhaustive_tails_alpha_beta(isa, rng, trans_a, trans_b):
    sweep(rng, trans_a, trans_b, alpha=-1.75, beta=0.625)


# ---------------------------------------------------------------------------------------------------
# Larger and random shapes: K blocking, packing, several tasks.

def random_shapes(rng, count, limit):
    return [tuple(int(v) for v in rng.integers(1, limit + 1, size=3)) for _ in range(count)]


@pytest.mark.parametrize("trans_a, trans_b", TRANSPOSES, ids=TRANS_IDS)
def test_random_shapes(isa, rng, trans_a, trans_b):
    shapes = random_shapes(rng, 2 if QUICK else 4, 1100)
    shapes += [(1, 1100, 700), (1100, 1, 700), (513, 257, 1)]  # skinny ones
    for M, N, K in shapes:
        a, b = rand(rng, M, K), rand(rng, K, N)
        c = nnkern.sgemm(stored(a, trans_a), stored(b, trans_b), trans_a=trans_a, trans_b=trans_b)
        assert c.shape == (M, N) and c.dtype == np.float32
        assert_gemm_close(c, a, b, what=f"{isa} {M}x{N}x{K}")


def test_documented_bound_small_k_with_beta(isa):
    rng = np.random.default_rng(1)
    alpha, beta = -1.75, 0.625
    worst = 0.0
    for K in (1, 2):
        for _ in range(40):
            a, b, c0 = rand(rng, 40, K), rand(rng, K, 14), rand(rng, 40, 14)
            c = c0.copy()
            nnkern.sgemm(a, b, alpha=alpha, beta=beta, c=c)
            c64, _ = ref_gemm(a, b, alpha, beta, c0)
            documented = gemm_bound(a.astype(np.float64), b.astype(np.float64), K, alpha, beta, c0)
            worst = max(worst, float((np.abs(c - c64) / documented).max()))
    assert worst <= 1.0, f"error reaches {worst:.3f} x the documented bound"


@pytest.mark.parametrize("alpha, beta", [(1.0, 1.0), (2.5, -1.0), (0.0, 0.5), (-0.5, 0.0), (1e-3, 3.0)])
def test_alpha_beta(isa, rng, alpha, beta):
    for M, N, K in [(67, 45, 300), (5, 131, 17), (128, 96, 64)]:
        a, b, c0 = rand(rng, M, K), rand(rng, K, N), rand(rng, M, N)
        c = c0.copy()
        nnkern.sgemm(a, b, alpha=alpha, beta=beta, c=c)
        assert_gemm_close(c, a, b, alpha=alpha, beta=beta, c0=c0, what=f"alpha={alpha} beta={beta}")


def test_beta0_ignores_nan_and_inf_in_c(isa, rng):
    for M, N, K in [(70, 33, 300), (3, 2, 5)]:
        a, b = rand(rng, M, K), rand(rng, K, N)
        c = np.full((M, N), np.nan, np.float32)
        c[::2] = np.inf
        nnkern.sgemm(a, b, beta=0.0, c=c)
        assert np.isfinite(c).all()
        assert_gemm_close(c, a, b)


def test_alpha_zero_still_propagates_nothing_from_finite_inputs(isa, rng):
    a, b, c0 = rand(rng, 20, 30), rand(rng, 30, 10), rand(rng, 20, 10)
    c = c0.copy()
    nnkern.sgemm(a, b, alpha=0.0, beta=2.0, c=c)
    np.testing.assert_array_equal(c, 2.0 * c0)


K_ZERO_CHECK = """
import numpy as np, nnkern
rng = np.random.default_rng(0)
nnkern.set_max_isa(ISA)
for beta in (0.0, 1.0, -2.0):
    for M, N in [(5, 7), (40, 14), (1, 1)]:
        a, b = np.empty((M, 0), np.float32), np.empty((0, N), np.float32)
        c0 = rng.uniform(-1, 1, (M, N)).astype(np.float32)
        c = c0.copy()
        assert nnkern.sgemm(a, b, alpha=np.inf, beta=beta, c=c) is c  # alpha is irrelevant when K == 0
        np.testing.assert_array_equal(c, np.float32(beta) * c0)
        np.testing.assert_array_equal(nnkern.sgemm(a, b), np.zeros((M, N), np.float32))
        np.testing.assert_array_equal(nnkern.sgemm(a.T.copy(), b.T.copy(), trans_a=True, trans_b=True),
                                      np.zeros((M, N), np.float32))
        np.testing.assert_array_equal(nnkern.matmul(a, b), np.zeros((M, N), np.float32))
assert nnkern.matmul(np.empty(0, np.float32), np.empty(0, np.float32)) == 0
np.testing.assert_array_equal(nnkern.matmul(np.empty(0, np.float32), np.empty((0, 3), np.float32)), np.zeros(3))
layer = nnkern.Linear(np.empty((4, 0), np.float32), np.arange(4, dtype=np.float32))
np.testing.assert_array_equal(layer(np.empty((2, 0), np.float32)), np.tile(np.arange(4, dtype=np.float32), (2, 1)))
print("OK")
"""


def test_k_zero_gives_beta_c(isa):
    """K == 0 gives beta * C (run in a subprocess: a crash must fail this test, not the suite)."""
    proc = run_python_isolated(K_ZERO_CHECK.replace("ISA", repr(isa)))
    assert proc.returncode == 0 and proc.stdout.strip() == "OK", describe_process(proc)


@pytest.mark.parametrize("M, N, K", [(0, 5, 3), (5, 0, 3), (0, 0, 0), (0, 5, 0)])
def test_zero_size_m_or_n(isa, M, N, K):
    a, b = np.ones((M, K), np.float32), np.ones((K, N), np.float32)
    assert nnkern.sgemm(a, b).shape == (M, N)
    c = np.ones((M, N), np.float32)
    assert nnkern.sgemm(a, b, beta=2.0, c=c) is c
    assert nnkern.matmul(a, b).shape == (M, N)


# ---------------------------------------------------------------------------------------------------
# NaN / Inf propagate like numpy.

def nonfinite_pattern(x):
    x = np.asarray(x, np.float64)
    return np.where(np.isnan(x), 2, np.where(np.isposinf(x), 1, np.where(np.isneginf(x), -1, 0)))


@pytest.mark.parametrize("trans_a, trans_b", TRANSPOSES, ids=TRANS_IDS)
def test_nan_and_inf_propagate_like_numpy(isa, rng, trans_a, trans_b):
    for M, N, K in [(37, 13, 21), (3, 5, 2), (100, 70, 300)]:
        a, b = rand(rng, M, K), rand(rng, K, N)
        a[rng.integers(0, M, 3), rng.integers(0, K, 3)] = [np.nan, np.inf, -np.inf]
        b[rng.integers(0, K, 2), rng.integers(0, N, 2)] = [np.inf, np.nan]
        b[:, N - 1] = 0.0  # Inf * 0 -> NaN
        got = nnkern.sgemm(stored(a, trans_a), stored(b, trans_b), trans_a=trans_a, trans_b=trans_b)
        with np.errstate(all="ignore"):
            want = a @ b  # numpy's float32 result
        np.testing.assert_array_equal(nonfinite_pattern(got), nonfinite_pattern(want))
        # Elements whose row of a and column of b are finite are unaffected by the specials.
        rows = np.isfinite(a).all(axis=1)
        cols = np.isfinite(b).all(axis=0)
        if M > 3:  # the tiny case may have a special in every row
            sub = np.ix_(rows, cols)
            check_within_bound(got[sub], *ref_gemm(a[rows], b[:, cols]), what="finite block")


def test_nan_in_c_propagates_when_beta_nonzero(isa, rng):
    a, b = rand(rng, 30, 9), rand(rng, 9, 20)
    c = rand(rng, 30, 20)
    c[4, 7] = np.nan
    c[5, 8] = np.inf
    nnkern.sgemm(a, b, beta=1.0, c=c)
    assert np.isnan(c[4, 7]) and np.isposinf(c[5, 8])
    assert np.isfinite(np.delete(c.ravel(), [4 * 20 + 7, 5 * 20 + 8])).all()


def test_relu_free_paths_keep_negative_zero_and_large_values(isa):
    a = np.full((4, 3), 1e30, np.float32)
    b = np.full((3, 2), 1e30, np.float32)
    assert np.isposinf(nnkern.sgemm(a, b)).all()  # overflow to Inf like numpy


# ---------------------------------------------------------------------------------------------------
# Layouts: Fortran order, slices with a leading dimension, non-contiguous and negative-stride views.

def layout_variants(x, rng):
    """(name, array equal to x) in many memory layouts."""
    M, K = x.shape
    big = rand(rng, 2 * M + 3, 3 * K + 5)
    strided = big[1:2 * M + 1:2, 2:3 * K + 2:3]
    strided[...] = x
    padded = rand(rng, M + 7, K + 9)[3:M + 3, 4:K + 4]
    padded[...] = x
    fpadded = np.asfortranarray(rand(rng, M + 5, K + 2))[2:M + 2, 1:K + 1]
    fpadded[...] = x
    return [
        ("C", np.ascontiguousarray(x)),
        ("F", np.asfortranarray(x)),
        ("row-slice-ld", padded),
        ("col-major-ld", fpadded),
        ("strided", strided),
        ("neg-rows", np.ascontiguousarray(x[::-1])[::-1]),
        ("neg-cols", np.ascontiguousarray(x[:, ::-1])[:, ::-1]),
        ("neg-both", np.ascontiguousarray(x[::-1, ::-1])[::-1, ::-1]),
        ("transposed-view", np.ascontiguousarray(x.T).T),
    ]


@pytest.mark.parametrize("trans_a, trans_b", TRANSPOSES, ids=TRANS_IDS)
def test_memory_layouts(isa, rng, trans_a, trans_b):
    M, N, K = 23, 19, 29
    a, b = rand(rng, M, K), rand(rng, K, N)
    a_s, b_s = (a.T if trans_a else a), (b.T if trans_b else b)
    a_layouts, b_layouts = layout_variants(a_s, rng), layout_variants(b_s, rng)
    for (an, av), (bn, bv) in itertools.product(a_layouts, b_layouts):
        assert np.array_equal(av, a_s) and np.array_equal(bv, b_s)
        a_before, b_before = av.copy(), bv.copy()
        c = nnkern.sgemm(av, bv, trans_a=trans_a, trans_b=trans_b)
        assert_gemm_close(c, a, b, what=f"a {an}, b {bn}")
        assert np.array_equal(av, a_before) and np.array_equal(bv, b_before), "inputs modified"


def test_output_layouts(isa, rng):
    M, N, K = 31, 22, 40
    a, b, c0 = rand(rng, M, K), rand(rng, K, N), rand(rng, M, N)
    for name, cv in layout_variants(c0.copy(), rng):  # the copy: "C" aliases its input
        r = nnkern.sgemm(a, b, alpha=0.5, beta=-1.5, c=cv)
        assert r is cv, name
        assert_gemm_close(cv, a, b, alpha=0.5, beta=-1.5, c0=c0, what=f"c {name}")


def test_output_view_writes_only_its_elements(isa, rng):
    M, N, K = 13, 17, 11
    a, b = rand(rng, M, K), rand(rng, K, N)
    cases = [((M + 5, N + 6), np.s_[2:2 + M, 3:3 + N]),      # row-major with a leading dimension
             ((2 * M + 1, 2 * N - 1), np.s_[1::2, ::2]),      # strided both ways (computed via a copy)
             ((M, N), np.s_[::-1, ::-1]),                     # negative strides
             ((N + 4, M + 2), (np.s_[1:1 + N, 2:2 + M]))]     # transposed below: column-major with ld
    for shape, sl in cases:
        big = np.full(shape, 7.0, np.float32)
        c = big[sl]
        if c.shape != (M, N):
            c = c.T
        assert c.shape == (M, N)
        nnkern.sgemm(a, b, c=c)
        assert_gemm_close(c, a, b, what=f"c view {sl}")
        untouched = np.ones(shape, bool)
        untouched[sl] = False
        assert (big[untouched] == 7.0).all(), f"c view {sl}: wrote outside the view"


MISALIGNED_CHECK = """
import numpy as np, nnkern
nnkern.set_max_isa(ISA)
rng = np.random.default_rng(0)
M, N, K = 9, 14, 21
a, b = rng.uniform(-1, 1, (M, K)).astype(np.float32), rng.uniform(-1, 1, (K, N)).astype(np.float32)
raw = np.zeros(a.nbytes + 1, np.uint8)
am = raw[1:].view(np.float32).reshape(M, K)
am[...] = a
assert am.ctypes.data % 4 != 0
want = a.astype(np.float64) @ b
for got in (nnkern.sgemm(am, b), nnkern.matmul(am, b), nnkern.sgemm(am.T, b.T.copy(), trans_a=True, trans_b=True)):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
print("OK")
"""


def test_misaligned_input_data(isa):
    """Unaligned float32 data is accepted (copied) and correct; run in a subprocess since it may crash."""
    proc = run_python_isolated(MISALIGNED_CHECK.replace("ISA", repr(isa)))
    assert proc.returncode == 0 and proc.stdout.strip() == "OK", describe_process(proc)


# ---------------------------------------------------------------------------------------------------
# Bad inputs: clean Python exceptions, never a crash.

@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.int32, np.int64, np.uint8, np.complex64, bool])
def test_wrong_dtype_raises_type_error(dtype):
    good = np.ones((3, 4), np.float32)
    bad = np.ones((3, 4), dtype)
    with pytest.raises(TypeError, match="float32"):
        nnkern.sgemm(bad, good.T.copy())
    with pytest.raises(TypeError, match="float32"):
        nnkern.sgemm(good, bad.T.copy())
    with pytest.raises(TypeError):
        nnkern.matmul(bad, good.T.copy())
    with pytest.raises(TypeError):
        nnkern.sgemm(good, good.T.copy(), c=np.ones((3, 3), dtype))
    with pytest.raises(TypeError):
        nnkern.matmul(good, good.T.copy(), out=np.ones((3, 3), dtype))
    with pytest.raises(TypeError):
        nnkern.Linear(bad)


def test_non_array_inputs_raise_type_error():
    with pytest.raises(TypeError):
        nnkern.sgemm([[1.0]], np.ones((1, 1), np.float32))
    with pytest.raises(TypeError):
        nnkern.sgemm(np.ones((1, 1), np.float32), np.ones((1, 1), np.float32), alpha="x")
    with pytest.raises(TypeError):
        nnkern.sgemm(np.ones((1, 1), np.float32), np.ones((1, 1), np.float32), beta=None)


@pytest.mark.parametrize("shape_a, shape_b", [((3,), (3, 2)), ((2, 3), (3,)), ((2, 2, 3), (3, 2)), ((2, 3), (1, 3, 2)),
                                              ((), (1, 1))])
def test_sgemm_wrong_ndim_raises_value_error(shape_a, shape_b):
    with pytest.raises(ValueError, match="-D"):
        nnkern.sgemm(np.ones(shape_a, np.float32), np.ones(shape_b, np.float32))


@pytest.mark.parametrize("shape_a, shape_b, match", [((), (1,), "0-D"), ((1,), (), "0-D"), ((2, 3), (4, 2), "aligned"),
                                                     ((2, 2, 3), (3, 3, 2), "broadcast"),
                                                     ((4, 1, 2, 3), (1, 3, 3, 5), None)])
def test_matmul_bad_shapes_raise_value_error(shape_a, shape_b, match):
    """What numpy.matmul refuses, nnkern refuses with a ValueError (the last pair broadcasts: no error)."""
    a, b = np.ones(shape_a, np.float32), np.ones(shape_b, np.float32)
    if match is None:
        assert nnkern.matmul(a, b).shape == np.matmul(a, b).shape
        return
    with pytest.raises(ValueError):
        np.matmul(a, b)  # the reference refuses too (in its own words)
    with pytest.raises(ValueError, match=match):
        nnkern.matmul(a, b)


@pytest.mark.parametrize("shape_a, shape_b", [((2, 3, 4), (4, 5)), ((4,), (2, 4, 3)), ((2, 1, 3, 4), (5, 4, 2)),
                                              ((3, 4), (2, 4)), ((2, 5, 4), (4,)), ((0, 3, 4), (4, 2)),
                                              ((2, 3, 0), (2, 0, 4)), ((1, 2, 1, 4), (3, 1, 4, 6))])
def test_matmul_batches_like_numpy(isa, rng, shape_a, shape_b):
    if shape_a == (3, 4):  # (3, 4) @ (2, 4).T-like: a transposed view as b
        a, b = rand(rng, *shape_a), rand(rng, *shape_b).T
    else:
        a, b = rand(rng, *shape_a), rand(rng, *shape_b)
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    got = nnkern.matmul(a, b)
    assert got.shape == want.shape and got.dtype == np.float32
    bound = gemm_bound(np.abs(a).astype(np.float64), np.abs(b).astype(np.float64), a.shape[-1])
    check_within_bound(got, want, np.broadcast_to(bound, want.shape), "batched matmul")
    out = np.full(want.shape, np.nan, np.float32)
    assert nnkern.matmul(a, b, out=out) is out and np.array_equal(out, got)
    strided = np.full(want.shape + (2,), np.nan, np.float32)[..., 0]  # a non-contiguous out
    nnkern.matmul(a, b, out=strided)
    assert np.array_equal(strided, got)


@pytest.mark.parametrize("trans_a, trans_b", TRANSPOSES, ids=TRANS_IDS)
def test_mismatched_shapes_name_both(trans_a, trans_b):
    a = np.ones((4, 5), np.float32)
    b = np.ones((6, 7), np.float32)
    with pytest.raises(ValueError) as e:
        nnkern.sgemm(a, b, trans_a=trans_a, trans_b=trans_b)
    msg = str(e.value)
    sa = (5, 4) if trans_a else (4, 5)
    sb = (7, 6) if trans_b else (6, 7)
    assert str(sa) in msg and str(sb) in msg, msg
    with pytest.raises(ValueError) as e:
        nnkern.matmul(a, b)
    assert "(4, 5)" in str(e.value) and "(6, 7)" in str(e.value)
    with pytest.raises(ValueError):
        nnkern.matmul(np.ones(3, np.float32), np.ones(4, np.float32))


def test_bad_output_arrays():
    a, b = np.ones((4, 5), np.float32), np.ones((5, 3), np.float32)
    with pytest.raises(ValueError, match="shape"):
        nnkern.sgemm(a, b, c=np.zeros((3, 4), np.float32))
    with pytest.raises(ValueError, match="shape"):
        nnkern.sgemm(a, b, c=np.zeros((4, 3, 1), np.float32))
    with pytest.raises(ValueError, match="shape"):
        nnkern.matmul(a, b, out=np.zeros((4, 4), np.float32))
    with pytest.raises(TypeError):
        nnkern.sgemm(a, b, c=np.zeros((4, 3), np.float64))
    ro = np.zeros((4, 3), np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        nnkern.sgemm(a, b, c=ro)
    with pytest.raises(ValueError, match="read-only"):
        nnkern.matmul(a, b, out=ro)
    assert (ro == 0).all()


def test_output_overlapping_an_input_raises():
    buf = np.ones((8, 8), np.float32)
    a = buf[:4, :5]
    b = np.ones((5, 4), np.float32)
    with pytest.raises(ValueError, match="overlaps"):
        nnkern.sgemm(a, b, c=buf[2:6, 4:8], beta=1.0)
    with pytest.raises(ValueError, match="overlaps"):
        nnkern.matmul(a, b, out=buf[:4, 1:5])
    sq = np.ones((6, 6), np.float32)
    with pytest.raises(ValueError, match="overlaps"):
        nnkern.sgemm(sq, np.eye(6, dtype=np.float32), c=sq)
    with pytest.raises(ValueError, match="overlaps"):
        nnkern.sgemm(np.eye(6, dtype=np.float32), sq, c=sq.T)
    # Disjoint parts of one buffer are fine.
    out = buf[4:8, 4:8]
    nnkern.sgemm(buf[:4, :5], b, c=out)
    np.testing.assert_array_equal(out, np.full((4, 4), 5, np.float32))


# ---------------------------------------------------------------------------------------------------
# Threads and blocking.

# (7, 1100, 300): few rows (no copy-on-first-use) and a B larger than half of L2.
THREAD_SHAPES = [(300, 400, 350), (1, 2000, 300), (2000, 1, 300), (517, 33, 700), (64, 1037, 129), (7, 1100, 300)]


@pytest.mark.parametrize("M", [2, 9, 18, 19])
def test_few_rows_with_a_large_b(isa, rng, M):
    """M <= 18 (B read in place, seed O6) with a B that outgrows L2, over several K blocks."""
    for N, K in [(1100, 300), (1000, 700), (49, 6000)]:
        a, b, c0 = rand(rng, M, K), rand(rng, K, N), rand(rng, M, N)
        c = c0.copy()
        nnkern.sgemm(a, b, alpha=1.5, beta=-0.5, c=c)
        assert_gemm_close(c, a, b, alpha=1.5, beta=-0.5, c0=c0, what=f"{M}x{N}x{K}")


@pytest.mark.parametrize("trans_a, trans_b", [(False, False), (True, True), (False, True)], ids=["NN", "TT", "NT"])
def test_thread_count_gives_bit_identical_results(isa, rng, trans_a, trans_b):
    for M, N, K in THREAD_SHAPES:
        a, b, c0 = rand(rng, M, K), rand(rng, K, N), rand(rng, M, N)
        results = []
        for n in (1, 2, 3):
            nnkern.set_num_threads(n)
            c = c0.copy()
            nnkern.sgemm(stored(a, trans_a), stored(b, trans_b), trans_a=trans_a, trans_b=trans_b, alpha=0.75,
                         beta=0.5, c=c)
            results.append(c)
        assert_gemm_close(results[0], a, b, alpha=0.75, beta=0.5, c0=c0, what=f"{M}x{N}x{K}")
        for n, r in zip((2, 3), results[1:]):
            assert np.array_equal(r.view(np.uint32), results[0].view(np.uint32)), f"{n} threads differ, {M}x{N}x{K}"


@pytest.mark.parametrize("mode", ["fixed", "cache"])
def test_blocking_modes_are_correct(isa, rng, mode):
    _C.set_blocking_mode(mode)
    for M, N, K in [(300, 200, 1000), (50, 4100, 270), (4100, 30, 257), (97, 61, 513)]:
        a, b, c0 = rand(rng, M, K), rand(rng, K, N), rand(rng, M, N)
        for trans_a, trans_b in [(False, False), (True, True)]:
            c = c0.copy()
            nnkern.sgemm(stored(a, trans_a), stored(b, trans_b), trans_a=trans_a, trans_b=trans_b, beta=-1.0, c=c)
            assert_gemm_close(c, a, b, beta=-1.0, c0=c0, what=f"{mode} {M}x{N}x{K}")


def order_shape(order, mr, nr):
    """(M, N, K) that runs in `order` (asserted), with N and M off the tile multiples and K over 2 K blocks
    plus a remainder of that order's kc."""
    kc = _C.gemm_blocking(4096, order)[0]
    N = 2 * mr + 5
    for M in (3 * nr + 1, 37 * nr + 3, 301 * nr + 5, 1201 * nr + 7):
        if _C.gemm_order(M, N) == order:
            return M, N, 2 * kc + 9
    pytest.fail(f"no shape of this list runs in {order} order")


@pytest.mark.parametrize("order", ["panel", "block"])
def test_both_loop_orders(isa, rng, order):
    """Each loop order (an A panel in L1 / an A block in L2) on tails of M, N and K: plain and transposed
    operands (A read in place, copied or packed; B packed or not), and Linear's prepacked panels with a
    bias and ReLU applied at the last K block only."""
    _, mr, nr = _C.f32_gemm_tile(isa)
    M, N, K = order_shape(order, mr, nr)
    a, b, c0 = rand(rng, M, K), rand(rng, K, N), rand(rng, M, N)
    for trans_a, trans_b in TRANSPOSES:
        c = c0.copy()
        nnkern.sgemm(stored(a, trans_a), stored(b, trans_b), trans_a=trans_a, trans_b=trans_b, alpha=0.5,
                     beta=-1.25, c=c)
        assert_gemm_close(c, a, b, alpha=0.5, beta=-1.25, c0=c0, what=f"{order} {M}x{N}x{K} {trans_a} {trans_b}")
    w, bias = np.ascontiguousarray(b.T), rand(rng, N)
    layer = nnkern.Linear(w, bias, activation="relu")
    check_within_bound(layer(a), *linear_ref(a, w, bias, True), what=f"{order} Linear {K}->{N} x{M}")


def test_gil_is_released_and_concurrent_calls_agree(isa, rng):
    a, b = rand(rng, 200, 300), rand(rng, 300, 150)
    want = nnkern.matmul(a, b)
    results = [None] * 6

    def work(i):
        for _ in range(3):
            results[i] = nnkern.sgemm(a, b)

    run_concurrently(work, len(results))
    for r in results:
        assert np.array_equal(r, want)


# ---------------------------------------------------------------------------------------------------
# matmul

@pytest.mark.parametrize("shape_a, shape_b", [((7,), (7, 5)), ((6, 7), (7,)), ((7,), (7,)), ((1,), (1, 40)),
                                              ((33, 1), (1,)), ((5,), (5, 0))])
def test_matmul_1d_operands_like_numpy(isa, rng, shape_a, shape_b):
    a, b = rand(rng, *shape_a), rand(rng, *shape_b)
    got = nnkern.matmul(a, b)
    want = a @ b
    assert np.shape(got) == want.shape
    assert isinstance(got, np.ndarray) and got.dtype == np.float32
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    c64, bound = ref_gemm(a2, b2)
    check_within_bound(np.reshape(got, c64.shape), c64, bound, "matmul")
    out = np.full(want.shape, np.nan, np.float32)
    assert nnkern.matmul(a, b, out=out) is out
    np.testing.assert_array_equal(out, got)


def test_matmul_2d_matches_sgemm_bitwise(isa, rng):
    a, b = rand(rng, 45, 70), rand(rng, 70, 33)
    np.testing.assert_array_equal(nnkern.matmul(a, b), nnkern.sgemm(a, b))
    out = np.empty((45, 33), np.float32, order="F")
    nnkern.matmul(a, b, out=out)
    assert_gemm_close(out, a, b)


# ---------------------------------------------------------------------------------------------------
# The fast path: sgemm / matmul with the defaults and float32 2-D ndarrays skip the Python checks
# (_C.sgemm_fast). It must give what the checked path gives, and hand everything else to that path.

def fast_path_layouts(rng, rows, cols):
    x = rand(rng, rows, cols)
    wide = rand(rng, rows, cols + 3)[:, 1:cols + 1]          # row stride > cols, start one float in
    yield x
    yield np.asfortranarray(x)
    yield wide
    yield rand(rng, 2 * rows, cols)[::2]                     # every other row: rows not unit-strided
    yield rand(rng, rows, 2 * cols)[:, ::2]                  # neither stride unit: copied
    yield x[::-1]                                            # negative stride: copied


@pytest.mark.parametrize("trans_a, trans_b", TRANSPOSES, ids=TRANS_IDS)
@pytest.mark.parametrize("M, N, K", [(17, 13, 9), (1, 40, 7), (33, 1, 70), (5, 6, 0), (0, 4, 3), (40, 0, 2)])
def test_fast_path_matches_the_checked_path(isa, rng, trans_a, trans_b, M, N, K):
    for a in fast_path_layouts(rng, *((K, M) if trans_a else (M, K))):
        for b in fast_path_layouts(rng, *((N, K) if trans_b else (K, N))):
            fast = _C.sgemm_fast(a, b, trans_a, trans_b)
            assert fast is not None and fast.shape == (M, N) and fast.dtype == np.float32
            assert fast.flags.c_contiguous and fast.flags.owndata
            checked = nnkern.sgemm(a, b, trans_a=trans_a, trans_b=trans_b, alpha=1)  # int alpha: the checked path
            np.testing.assert_array_equal(fast, checked)
            np.testing.assert_array_equal(nnkern.sgemm(a, b, trans_a=trans_a, trans_b=trans_b), checked)
            if K == 0:
                assert not fast.any()  # zeros, never the new array's uninitialized memory
            if not (trans_a or trans_b):
                np.testing.assert_array_equal(nnkern.matmul(a, b), checked)
            c = np.full((M, N), np.nan, np.float32)  # beta = 0: c's contents ignored, NaN included
            assert _C.sgemm_fast(a, b, trans_a, trans_b, c) is c
            np.testing.assert_array_equal(c, checked)


class F32Subclass(np.ndarray):
    pass


@pytest.mark.parametrize("a, b", [
    (np.ones((3, 4), np.float64), np.ones((4, 2), np.float32)),
    (np.ones((3, 4), np.float32), np.ones((4, 2), ">f4")),
    (np.ones((3, 4), np.float32), np.ones((5, 2), np.float32)),
    (np.ones(4, np.float32), np.ones((4, 2), np.float32)),
    (np.ones((2, 3, 4), np.float32), np.ones((4, 2), np.float32)),
    (np.ones((3, 4), np.float32).view(F32Subclass), np.ones((4, 2), np.float32)),
    ([[1.0, 2.0]], np.ones((2, 2), np.float32)),
    (None, np.ones((2, 2), np.float32)),
], ids=["float64", "big-endian", "misaligned-K", "1-D", "3-D", "subclass", "list", "None"])
def test_fast_path_declines_what_it_does_not_handle(a, b):
    assert _C.sgemm_fast(a, b) is None and _C.sgemm_fast(b, a) is None


def test_fast_path_declines_outputs_it_cannot_write_in_place(rng):
    a, b = rand(rng, 4, 3), rand(rng, 3, 5)
    buf = np.zeros(64, np.float32)
    overlapping = np.zeros(40, np.float32)
    a_in = overlapping[:12].reshape(4, 3)
    a_in[...] = a
    for c in (np.zeros((4, 5), np.float64), np.zeros((5, 4), np.float32), np.zeros((4, 5), np.float32, order="F"),
              np.zeros((4, 10), np.float32)[:, ::2], buf.view(np.uint8)[2:82].view(np.float32).reshape(4, 5),
              np.zeros((4, 5), np.float32).view(F32Subclass), np.zeros((4, 5), ">f4"), [[0.0] * 5] * 4):
        assert _C.sgemm_fast(a, b, False, False, c) is None
    ro = np.zeros((4, 5), np.float32)
    ro.flags.writeable = False
    assert _C.sgemm_fast(a, b, False, False, ro) is None
    assert _C.sgemm_fast(a_in, b, False, False, overlapping[10:30].reshape(4, 5)) is None
    assert _C.sgemm_fast(a, a_in.T, False, False, overlapping[8:24].reshape(4, 4)) is None
    with pytest.raises(ValueError, match="read-only"):
        nnkern.sgemm(a, b, c=ro)
    with pytest.raises(ValueError, match="overlap"):
        nnkern.sgemm(a_in, b, c=overlapping[10:30].reshape(4, 5))
    f_order = np.zeros((4, 5), np.float32, order="F")
    assert nnkern.sgemm(a, b, c=f_order) is f_order and nnkern.matmul(a, b, out=f_order) is f_order
    np.testing.assert_array_equal(f_order, nnkern.sgemm(a, b))


def test_fast_path_skips_only_when_the_defaults_are_given(rng):
    a, b = rand(rng, 4, 3), rand(rng, 3, 5)
    with pytest.raises(ValueError, match="beta"):
        nnkern.sgemm(a, b, beta=1e39)  # checked even without c
    with pytest.raises(TypeError):
        nnkern.sgemm(a, b, trans_a=1)
    with pytest.raises(ValueError):
        nnkern.sgemm(a, b, algorithm="nonsense")
    np.testing.assert_array_equal(nnkern.sgemm(a, b, alpha=2.0), 2 * nnkern.sgemm(a, b))


# ---------------------------------------------------------------------------------------------------
# Linear

def linear_ref(x, w, bias, relu):
    x2 = x.reshape(-1, x.shape[-1])
    c64, bound = ref_gemm(x2, w.T)
    if bias is not None:
        c64 = c64 + bias
        bound = bound + EPS * np.abs(c64)
    if relu:
        c64 = np.maximum(c64, 0.0)
    return c64.reshape(x.shape[:-1] + (w.shape[0],)), bound.reshape(x.shape[:-1] + (w.shape[0],))


LINEAR_DIMS = [(1, 1), (5, 3), (64, 48), (100, 30), (257, 129), (6, 700)]  # (out_features, in_features)


@pytest.mark.parametrize("relu", [False, True], ids=["none", "relu"])
def test_linear_without_bias(isa, rng, relu):
    for out_f, in_f in LINEAR_DIMS:
        w = rand(rng, out_f, in_f)
        layer = nnkern.Linear(w, activation="relu" if relu else None)
        assert layer.kernel == nnkern.cpu_info()["kernels"]["f32_gemm"]
        for lead in [(1,), (7,), (50,), (2, 3), ()]:
            x = rand(rng, *lead, in_f)
            y = layer(x)
            assert y.shape == lead + (out_f,)
            check_within_bound(y, *linear_ref(x, w, None, relu), what=f"Linear({in_f}->{out_f}) x{lead}")


@pytest.mark.parametrize("relu", [False, True], ids=["bias", "bias+relu"])
def test_linear_bias_on_many_output_features(isa, rng, relu):
    out_f, in_f = 100, 30  # more output features than any kernel's MR
    w, bias = rand(rng, out_f, in_f), rand(rng, out_f)
    layer = nnkern.Linear(w, bias, activation="relu" if relu else None)
    x = rand(rng, 7, in_f)
    check_within_bound(layer(x), *linear_ref(x, w, bias, relu), what="Linear with bias")


@pytest.mark.parametrize("relu", [False, True], ids=["bias", "bias+relu"])
def test_linear_bias_within_one_panel(isa, rng, relu):
    """Output features that fit in one micro-kernel panel (out_features <= MR)."""
    mr = _C.f32_gemm_tile(isa)[1]
    for out_f in sorted({1, 3, mr - 1, mr} - {0}):
        w, bias = rand(rng, out_f, 19), rand(rng, out_f)
        layer = nnkern.Linear(w, bias, activation="relu" if relu else None)
        x = rand(rng, 4, 3, 19)
        y = layer(x)
        check_within_bound(y, *linear_ref(x, w, bias, relu), what=f"Linear 19->{out_f} with bias")
        if relu:
            assert (y >= 0).all()


def test_linear_few_output_features_run_the_dot_path(isa, rng):
    """A layer with up to 16 output features keeps W's rows too: where sgemm's auto would take the dot path
    (N <= the level's limit for it, its dot width or more, or a single row) and K >= 128 the layer runs it on
    them, elsewhere its packed panels; both within the bound, with bias and ReLU, for single rows and batches
    (one with strided rows)."""
    level = nnkern.cpu_info()["kernels"]["f32_gemv"].split("__")[1]
    _, dot_mr, dot_nr = _C.f32_gemv_info(level)
    auto_n = _C.f32_gemv_dot_auto_n(level)
    assert auto_n >= dot_nr
    for out_f in sorted({1, 3, dot_nr, dot_nr + 1, auto_n, auto_n + 1, 16}):
        for in_f in (64, 127, 128, 300):
            w, bias = rand(rng, out_f, in_f), rand(rng, out_f)
            layer = nnkern.Linear(w, bias, activation="relu")
            for batch in (1, 5, 33):
                x = rand(rng, batch, in_f + 7)[:, :in_f] if batch == 5 else rand(rng, batch, in_f)  # strided rows
                nnkern.sgemm(np.ones((1, 1), np.float32), np.ones((1, 1), np.float32), algorithm="tiles")  # reset
                y = layer(x)
                ran_dot = _C.last_algorithm("sgemm") == "dot"
                assert ran_dot == ((out_f <= auto_n or batch == 1) and in_f >= 128), (out_f, in_f, batch)
                check_within_bound(y, *linear_ref(x, w, bias, True), what=f"Linear {in_f}->{out_f} x{batch}")


def test_linear_out_argument(isa, rng):
    w = rand(rng, 40, 24)
    layer = nnkern.Linear(w)
    x = rand(rng, 3, 5, 24)
    out = np.full((3, 5, 40), np.nan, np.float32)
    assert layer(x, out=out) is out
    check_within_bound(out, *linear_ref(x, w, None, False), what="Linear out=")
    with pytest.raises(ValueError, match="shape"):
        layer(x, out=np.empty((15, 40), np.float32))
    with pytest.raises(ValueError):
        layer(x, out=np.empty((3, 5, 80), np.float32)[..., ::2])
    with pytest.raises(TypeError):
        layer(x, out=np.empty((3, 5, 40), np.float64))
    with pytest.raises(ValueError, match="overlaps"):
        buf = np.empty(3 * 5 * 40, np.float32)
        xa = buf[:3 * 5 * 24].reshape(3, 5, 24)
        xa[...] = x
        layer(xa, out=buf.reshape(3, 5, 40))


def test_linear_fast_path_matches_the_checked_path(isa, rng):
    """A plain float32 ndarray, with out None or a plain C-contiguous output, skips the Python checks
    (PackedLinear.run_fast); an ndarray subclass as out takes the checked path. Bitwise the same, leading dimensions and
    empty inputs included."""
    w, bias = rand(rng, 37, 70), rand(rng, 37)
    for layer in (nnkern.Linear(w, bias, activation="relu"), nnkern.Linear(w)):
        for shape in [(1, 70), (9, 70), (2, 3, 70), (70,), (0, 70)]:
            x = rng.standard_normal(shape).astype(np.float32)
            fast = layer._packed.run_fast(x)
            assert fast is not None and fast.dtype == np.float32 and fast.shape == shape[:-1] + (37,)
            sub = np.zeros(shape[:-1] + (37,), np.float32).view(F32Subclass)  # declined: the checked path writes it
            assert layer._packed.run_fast(x, sub) is None
            assert layer(x, out=sub) is sub
            np.testing.assert_array_equal(fast, sub)
            out = np.full_like(fast, np.nan)
            assert layer._packed.run_fast(x, out) is out
            np.testing.assert_array_equal(out, fast)
        x = rand(rng, 4, 70)
        for declined in (x[:, :69], x.repeat(2, axis=1)[:, ::2], x.astype(np.float64), x.astype(">f4"), x.tolist()):
            assert layer._packed.run_fast(declined) is None
        ro = np.zeros((4, 37), np.float32)
        ro.flags.writeable = False
        for out in (np.zeros((4, 36), np.float32), np.zeros((37, 4), np.float32).T, ro, np.zeros((4, 37), ">f4"),
                    np.zeros((4, 37)), [[0.0] * 37] * 4):
            assert layer._packed.run_fast(x, out) is None
        buf = np.zeros(4 * 70 + 4 * 37, np.float32)
        assert layer._packed.run_fast(buf[:280].reshape(4, 70), buf[200:348].reshape(4, 37)) is None
        with pytest.raises(ValueError, match="overlap"):
            layer(buf[:280].reshape(4, 70), out=buf[200:348].reshape(4, 37))
        strided = rand(rng, 4, 140)[:, ::2]  # declined by the fast path, copied by the checked one
        np.testing.assert_array_equal(layer(strided), layer(np.ascontiguousarray(strided)))


def test_linear_bad_arguments():
    w = np.ones((4, 3), np.float32)
    with pytest.raises(ValueError, match="bias"):
        nnkern.Linear(w, np.ones(3, np.float32))
    with pytest.raises(TypeError):
        nnkern.Linear(w, np.ones(4, np.float64))
    with pytest.raises(ValueError, match="activation"):
        nnkern.Linear(w, activation="gelu")
    with pytest.raises(ValueError):
        nnkern.Linear(np.ones((2, 3, 4), np.float32))
    layer = nnkern.Linear(w)
    with pytest.raises(ValueError, match=r"\(\.\.\., 3\)"):
        layer(np.ones((2, 4), np.float32))
    with pytest.raises(TypeError):
        layer(np.ones((2, 3), np.float64))


def test_linear_copies_its_weight(rng):
    w = rand(rng, 10, 8)
    layer = nnkern.Linear(w)
    x = rand(rng, 2, 8)
    before = layer(x)
    w[...] = 0
    np.testing.assert_array_equal(layer(x), before)


def test_linear_under_a_different_cap_than_at_construction(rng):
    supported = [i for i in nnkern.supported_isas()]
    w = rand(rng, 70, 45)
    x = rand(rng, 9, 45)
    want = linear_ref(x, w, None, True)
    for built in supported:
        with nnkern.max_isa(built):
            layer = nnkern.Linear(w, activation="relu")
        for used in supported:
            with nnkern.max_isa(used):
                check_within_bound(layer(x), *want, what=f"built under {built}, called under {used}")


def test_linear_concurrent_python_threads_identical(isa, rng):
    w = rand(rng, 300, 200)
    layer = nnkern.Linear(w, activation="relu")
    xs = [rand(rng, 64, 200) for _ in range(4)]
    want = [layer(x) for x in xs]
    for x, y in zip(xs, want):
        check_within_bound(y, *linear_ref(x, w, None, True), what="Linear")
    got = {}

    def work(t):
        for rep in range(5):
            i = (t + rep) % len(xs)
            got[(t, rep)] = (i, layer(xs[i]))

    run_concurrently(work)
    assert len(got) == 30
    for i, y in got.values():
        assert np.array_equal(y, want[i])


# --- the algorithm table (ops/gemm/gemm.cc) and the workspace ---------------------------------------

def test_every_algorithm_within_the_bound_where_it_applies(rng):
    names = nnkern._C.algorithms("sgemm")
    assert names == ["dot", "rows", "tiles"]
    # rows: up to 3 rows of x, or as many as the dispatched level's rows_m kernel takes at once
    gemv_level = nnkern.cpu_info()["kernels"]["f32_gemv"].split("__")[1]
    rows_max = _C.f32_gemv_rows_m_info(gemv_level)[0] or 3
    ran = set()
    for M, N, K in [(1, 300, 40), (1, 5, 17), (2, 1100, 30), (3, 70, 9), (4, 40, 5), (7, 3, 50), (33, 70, 20),
                    (1, 1, 0), (3, 4, 1), (rows_max, 50, 6), (rows_max + 1, 50, 6)]:
        for ta, tb in [(False, False), (True, False), (False, True), (True, True)]:
            a, b = rand(rng, M, K), rand(rng, K, N)
            sa, sb = (a.T.copy() if ta else a), (b.T.copy() if tb else b)
            for name in names:
                applies = {"dot": not ta or M == 1, "rows": M <= rows_max and not tb, "tiles": True}[name]
                if not applies:
                    with pytest.raises(ValueError, match="does not apply"):
                        nnkern.sgemm(sa, sb, trans_a=ta, trans_b=tb, algorithm=name)
                    continue
                got = nnkern.sgemm(sa, sb, trans_a=ta, trans_b=tb, alpha=0.5, algorithm=name)
                assert_gemm_close(got, a, b, alpha=0.5, what=f"{name} {M}x{N}x{K} ta={ta} tb={tb}")
                c0 = rand(rng, M, N)
                c = nnkern.sgemm(sa, sb, trans_a=ta, trans_b=tb, beta=-2.0, c=c0.copy(), algorithm=name)
                assert_gemm_close(c, a, b, beta=-2.0, c0=c0, what=f"{name} {M}x{N}x{K} beta")
                ran.add(name)
    assert ran == set(names)
    with pytest.raises(ValueError, match="algorithm"):
        nnkern.sgemm(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), algorithm="fastest")


def test_workspace_is_reported_and_released():
    """One workspace per call, reported; a huge call leaves no huge buffer behind (issue: thread_local
    buffers that never shrank)."""
    a = np.ones((300, 2000), np.float32)
    b = np.ones((2000, 300), np.float32)
    nnkern.sgemm(a.T.copy(), b, trans_a=True)  # transposed x: the broadcast operand is packed
    assert nnkern._C.workspace_last_bytes() >= 300 * 2000 * 4
    assert nnkern._C.workspace_retained_bytes() <= 8 << 20
    nnkern.sgemm(np.ones((3, 3), np.float32), np.ones((3, 3), np.float32), algorithm="dot")
    assert 0 < nnkern._C.workspace_last_bytes() < 1024
