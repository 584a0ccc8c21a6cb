"""Skinny SGEMM paths (ops/gemm/gemv.cc): GEMV (M = 1) and small N, through nnkern.sgemm / Linear and
through the kernel hooks nnkern._C.f32_gemv_{rows,store,dot}, on every ISA level this CPU has."""
from __future__ import annotations

import itertools
import os

import numpy as np
import pytest

import nnkern
from nnkern import _C
from helpers import EPS, QUICK, check_within_bound, describe_process, gemm_bound, rand, run_script_isolated

GUARD_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "guard_check.py")
TRANSPOSES = list(itertools.product([False, True], [False, True]))
TRANS_IDS = ["NN", "NT", "TN", "TT"]
SENTINEL = np.float32(-777.0)


def stored(x, trans):
    return np.ascontiguousarray(x.T) if trans else np.ascontiguousarray(x)


def gemv_info(isa):
    """(name, dot MR, dot NR) of the level's skinny-GEMM kernels; skip where the level has none
    (sgemm then keeps its regular driver, which the sweeps here still test)."""
    try:
        return _C.f32_gemv_info(isa)
    except ValueError:
        pytest.skip(f"{isa} has no f32_gemv kernel of its own")


def sweep(rng, Ms, Ns, Ks, trans_a, trans_b, alpha, beta, algorithm="auto"):
    """Every (M, N, K) of the grid; results of one K share a float64 reference (C[:M, :N] of the
    largest product), gathered and compared in one vectorized check."""
    Mx, Nx, Kx = max(Ms), max(Ns), max(Ks)
    A, B, C0 = rand(rng, Mx, Kx), rand(rng, Kx, Nx), rand(rng, Mx, Nx)
    A64, B64 = A.astype(np.float64), B.astype(np.float64)
    got = np.zeros((len(Ks), len(Ms), len(Ns), Mx, Nx))
    want = np.zeros_like(got)
    bound = np.ones_like(got)
    for ik, K in enumerate(Ks):
        full = alpha * (A64[:, :K] @ B64[:K])
        if beta != 0.0:
            full = full + beta * C0
        full_bound = gemm_bound(A64[:, :K], B64[:K], K, alpha, beta, C0)
        for im, M in enumerate(Ms):
            a = stored(A[:M, :K], trans_a)
            for jn, N in enumerate(Ns):
                b = stored(B[:K, :N], trans_b)
                c = C0[:M, :N].copy() if beta != 0.0 else np.full((M, N), np.nan, np.float32)
                nnkern.sgemm(a, b, trans_a=trans_a, trans_b=trans_b, alpha=alpha, beta=beta, c=c, algorithm=algorithm)
                got[ik, im, jn, :M, :N] = c
                want[ik, im, jn, :M, :N] = full[:M, :N]
                bound[ik, im, jn, :M, :N] = full_bound[:M, :N]
    bad = ~(np.abs(got - want) <= bound)
    if bad.any():
        ik, im, jn, i, j = (int(v) for v in np.argwhere(bad)[0])
        raise AssertionError(f"{int(bad.sum())} bad elements; first M={Ms[im]} N={Ns[jn]} K={Ks[ik]} at C[{i}, {j}]: "
                             f"got {got[ik, im, jn, i, j]}, want {want[ik, im, jn, i, j]}")


# --- GEMV: M = 1, N in 1..300, K in 1..70 -------------------------------------------------------------

@pytest.mark.parametrize("trans_a, trans_b", TRANSPOSES, ids=TRANS_IDS)
def test_gemv_every_tail(isa, rng, trans_a, trans_b):
    Ns = range(1, 301) if not QUICK else (1, 2, 15, 16, 17, 63, 64, 65, 130, 300)
    Ks = range(1, 71) if not (QUICK or trans_a) else (1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 70)
    sweep(rng, [1], list(Ns), list(Ks), trans_a, trans_b, alpha=-1.25, beta=0.0)


@pytest.mark.parametrize("trans_a, trans_b", TRANSPOSES, ids=TRANS_IDS)
def test_gemv_alpha_beta(isa, rng, trans_a, trans_b):
    sweep(rng, [1], [1, 7, 16, 65, 130, 2049, 4100], [1, 9, 300], trans_a, trans_b, alpha=0.75, beta=-1.5)


# --- small N: N in 1..9, M in 1..40, K in 1..100 --------------------------------------------------------

@pytest.mark.parametrize("trans_a, trans_b", TRANSPOSES, ids=TRANS_IDS)
def test_small_n_every_tail(isa, rng, trans_a, trans_b):
    Ms = range(1, 41) if not (QUICK or trans_a) else (1, 2, 3, 4, 5, 7, 24, 40)
    Ks = range(1, 101) if not (QUICK or trans_a) else (1, 8, 15, 16, 17, 31, 32, 33, 100)
    sweep(rng, list(Ms), list(range(1, 10)), list(Ks), trans_a, trans_b, alpha=1.0, beta=0.0)


@pytest.mark.parametrize("trans_a, trans_b", TRANSPOSES, ids=TRANS_IDS)
def test_small_n_alpha_beta(isa, rng, trans_a, trans_b):
    sweep(rng, [1, 3, 40, 1000], [1, 3, 6, 8, 9], [16, 17, 1000], trans_a, trans_b, alpha=-0.5, beta=0.25)


def test_k_zero_gives_beta_c(isa, rng):
    for M, N in [(1, 300), (1, 5), (50, 6)]:
        for trans_b in (False, True):
            b = np.empty((N, 0) if trans_b else (0, N), np.float32)
            c0 = rand(rng, M, N)
            c = c0.copy()
            nnkern.sgemm(np.empty((M, 0), np.float32), b, trans_b=trans_b, alpha=np.inf, beta=-2.0, c=c)
            np.testing.assert_array_equal(c, np.float32(-2.0) * c0)


def test_nan_and_inf_propagate(isa, rng):
    for M, N, K in [(1, 70, 40), (1, 5, 40), (33, 6, 40)]:
        for trans_b in (False, True):
            a, b = rand(rng, M, K), rand(rng, K, N)
            a[0, 3] = np.nan
            b[5, N - 1] = np.inf
            got = nnkern.sgemm(a, stored(b, trans_b), trans_b=trans_b)
            with np.errstate(all="ignore"):
                want = a.astype(np.float64) @ b.astype(np.float64)
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
            np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want))
            np.testing.assert_array_equal(np.isneginf(got), np.isneginf(want))


# --- Linear with batch 1 (GEMV over the packed panels) -----------------------------------------------

@pytest.mark.parametrize("use_bias, relu", [(False, False), (True, False), (True, True)],
                         ids=["plain", "bias", "bias-relu"])
def test_linear_batch1(isa, rng, use_bias, relu):
    _, mr, _ = _C.f32_gemm_tile(isa)
    kc = _C.gemm_blocking(1000)[0]
    for N in sorted({1, mr - 1, mr, mr + 1, 3 * mr + 5, 2050}):
        for K in sorted({1, 7, kc - 1, kc, kc + 1, 2 * kc + 9}):
            w, x = rand(rng, N, K), rand(rng, 1, K)
            bias = rand(rng, N) if use_bias else None
            layer = nnkern.Linear(w, bias, activation="relu" if relu else None)
            got = layer(x)
            want = x.astype(np.float64) @ w.T.astype(np.float64)
            bound = gemm_bound(x.astype(np.float64), w.T.astype(np.float64), K)
            if use_bias:
                want = want + bias
                bound = bound + EPS * np.abs(want)
            if relu:
                want = np.maximum(want, 0.0)
            check_within_bound(got, want, bound, f"{isa} Linear {K}->{N} batch 1")
            # batch 1 (GEMV path) agrees with the batched path within the bound
            many = layer(np.repeat(x, 3, axis=0))
            check_within_bound(many[1:2], want, bound, f"{isa} Linear {K}->{N} batch 3")


# --- threads --------------------------------------------------------------------------------------------

def test_threads_bit_identical(isa, rng):
    cases = [(1, 4099, 333, False, False), (1, 5000, 70, False, True), (1, 3001, 129, True, False),
             (1, 777, 1000, True, True), (1000, 7, 301, False, False), (999, 3, 64, False, True)]
    for M, N, K, ta, tb in cases:
        a, b = rand(rng, M, K), rand(rng, K, N)
        sa, sb = stored(a, ta), stored(b, tb)
        w = rand(rng, N, K)
        layer = nnkern.Linear(w, rand(rng, N))
        x = rand(rng, 1, K)
        res = []
        for threads in (1, 2, 3):
            nnkern.set_num_threads(threads)
            res.append((nnkern.sgemm(sa, sb, trans_a=ta, trans_b=tb), layer(x)))
        for c, y in res[1:]:
            assert np.array_equal(c, res[0][0]), f"{isa} {M}x{N}x{K} differs across thread counts"
            assert np.array_equal(y, res[0][1]), f"{isa} Linear {K}->{N} differs across thread counts"


# --- the kernels, called directly -------------------------------------------------------------------------

def test_dot_every_tile(isa, rng):
    _, MR, NR = gemv_info(isa)
    kmax = 40 if not QUICK else 20
    lda, ldbt, ldc = kmax + 3, kmax + 5, NR + 2
    A, Bt = rand(rng, MR, kmax), rand(rng, NR, kmax)
    a_buf = np.full(MR * lda, SENTINEL, np.float32)
    bt_buf = np.full(NR * ldbt, SENTINEL, np.float32)
    for i in range(MR):
        a_buf[i * lda:i * lda + kmax] = A[i]
    for j in range(NR):
        bt_buf[j * ldbt:j * ldbt + kmax] = Bt[j]
    C0 = rand(rng, MR, ldc)
    bias = rand(rng, NR)
    A64, B64 = A.astype(np.float64), Bt.T.astype(np.float64)
    for k in range(kmax + 1):
        for alpha, beta, use_bias, relu in [(1.0, 0.0, False, False), (-1.5, 0.5, True, True)]:
            acc = alpha * (A64[:, :k] @ B64[:k])
            for m in range(1, MR + 1):
                for n in range(1, NR + 1):
                    c = C0.copy()
                    if beta == 0.0:
                        c[:m, :n] = np.nan
                    _C.f32_gemv_dot(isa, m, n, k, a_buf, 0, lda, bt_buf, 0, ldbt, c.ravel(), 0, ldc, alpha, beta,
                                    bias if use_bias else None, relu)
                    want = acc[:m, :n].copy()
                    bound = gemm_bound(A64[:m, :k], B64[:k, :n], k, alpha, beta, C0[:m, :n] if beta else None)
                    if beta:
                        want += beta * C0[:m, :n]
                    if use_bias:
                        want += bias[:n]
                        bound += EPS * np.abs(want)
                    if relu:
                        want = np.maximum(want, 0)
                    what = f"{isa} dot m={m} n={n} k={k}"
                    check_within_bound(c[:m, :n], want, bound, what)
                    outside = np.ones(c.shape, bool)
                    outside[:m, :n] = False
                    assert np.array_equal(c[outside], C0[outside]), f"{what}: wrote C outside the tile"


def test_rows_and_store_every_tail(isa, rng):
    gemv_info(isa)
    nmax, kmax = 140, 20
    ldb = nmax + 7
    X, B = rand(rng, 2 * kmax), rand(rng, kmax, nmax)
    b_buf = np.full(kmax * ldb, SENTINEL, np.float32)
    for p in range(kmax):
        b_buf[p * ldb:p * ldb + nmax] = B[p]
    acc0 = rand(rng, nmax + 16)
    bias = rand(rng, nmax)
    for incx in (1, 2):
        x = X[::incx][:kmax].astype(np.float64)
        for k in range(kmax + 1):
            for n in list(range(0, 70)) + [127, 128, 129, 140]:
                acc = acc0.copy()
                _C.f32_gemv_rows(isa, n, k, X, 0, incx, b_buf, 0, ldb, acc, 0)
                want = acc0[:n] + x[:k] @ B[:k, :n].astype(np.float64)
                bound = gemm_bound(x[None, :k], B[:k, :n].astype(np.float64), k)[0] + 2 * EPS * np.abs(acc0[:n])
                check_within_bound(acc[:n], want, bound, f"{isa} rows n={n} k={k} incx={incx}")
                assert np.array_equal(acc[n:], acc0[n:]), f"{isa} rows n={n} k={k}: wrote acc past n"
    for n in range(0, 70):
        c0 = rand(rng, n + 16)
        for alpha, beta, use_bias, relu in [(2.0, 0.0, False, False), (-1.0, 0.5, True, True)]:
            c = c0.copy()
            if beta == 0.0:
                c[:n] = np.nan
            _C.f32_gemv_store(isa, n, acc0, 0, c, 0, alpha, beta, bias if use_bias else None, relu)
            want = alpha * acc0[:n].astype(np.float64) + beta * c0[:n] + (bias[:n] if use_bias else 0.0)
            if relu:
                want = np.maximum(want, 0)
            check_within_bound(c[:n], want, 4 * EPS * (np.abs(want) + 4) + 1e-30, f"{isa} store n={n}")
            assert np.array_equal(c[n:], c0[n:]), f"{isa} store n={n}: wrote past n"


def test_rows_panels_is_rows_per_panel(isa, rng):
    """rows_panels over 1-6 packed panels, widths around the vector lengths (masked tails), K tails around its 8-row
    blocks, panels further apart than their size: each panel bit-identical to the level's rows kernel on it alone
    (one FMA chain per element in K order, which is also the f32_gemm tile's: test_lstm's batch-1 sequences check
    that side), nothing written past the panels' outputs."""
    pws = (1, 3, 4, 7, 8, 9, 15, 16, 17, 32, 48, 49) if not QUICK else (1, 8, 16, 17, 48)
    ks = (0, 1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 25)
    kmax = max(ks)
    x = rand(rng, kmax + 3)
    used = None
    for pw in pws:
        for k in ks:
            stride = pw * k + 5
            b = rand(rng, 6 * stride + pw * k)
            for np_ in range(1, 7):
                acc0 = rand(rng, np_ * pw + 9)
                acc = acc0.copy()
                used = _C.f32_gemv_rows_panels(isa, np_, pw, k, x, 1, b, 2, stride, acc, 0)
                want = acc0.copy()
                for q in range(np_):
                    _C.f32_gemv_rows(isa, pw, k, x, 1, 1, b, 2 + q * stride, pw, want, q * pw)
                assert np.array_equal(acc, want), f"{isa} rows_panels np={np_} pw={pw} k={k}"
    info = _C.f32_gemv_info(isa)[0]
    assert used == (not info.endswith("__scalar")), f"{info}: rows_panels {'ran' if used else 'missing'}"


def rows_mr(isa):
    """The most rows the level's rows_m kernel takes at once; skip where it has none."""
    gemv_info(isa)
    mr = _C.f32_gemv_rows_m_info(isa)[0]
    if not mr:
        pytest.skip(f"{isa} has no rows_m kernel (the rows path runs rows once per row of x)")
    return mr


def test_rows_m_is_rows_per_row(isa, rng):
    """rows_m on every row count up to rows_mr, column tails around its 16-wide vectors, K tails around its
    4-row steps, x row-major and transposed (strided): each row bit-identical to the level's rows kernel on that
    row alone (one FMA chain per element, in row order), nothing written outside the m x n block of acc."""
    mr = rows_mr(isa)
    ns = list(range(0, 40)) + [63, 64, 65, 127, 128, 129, 513] if not QUICK else [0, 1, 15, 16, 17, 33, 64, 129]
    ks = (0, 1, 3, 4, 5, 7, 8, 9, 12, 17)
    kmax, nmax = max(ks), max(ns)
    ldb = nmax + 3
    b = rand(rng, kmax * ldb)
    for x_row, incx in ((kmax + 1, 1), (1, mr + 1)):  # x row-major (padded rows), or transposed
        x = rand(rng, max(mr * x_row, kmax * incx) + kmax)
        for m in range(1, mr + 1):
            for k in ks:
                for n in ns:
                    ldacc = n + 5
                    acc0 = rand(rng, (mr + 1) * ldacc)
                    acc = acc0.copy()
                    _C.f32_gemv_rows_m(isa, m, n, k, x, 0, x_row, incx, b, 0, ldb, acc, 0, ldacc)
                    want = acc0.copy()
                    for i in range(m):
                        _C.f32_gemv_rows(isa, n, k, x, i * x_row, incx, b, 0, ldb, want, i * ldacc)
                    assert np.array_equal(acc, want), f"{isa} rows_m m={m} n={n} k={k} x_row={x_row}"


def test_rows_path_multi_row(isa, rng):
    """The rows algorithm on up to rows_mr rows of x (each group of rows one pass over B, the column chunk
    narrowed to fit the group's accumulators): every row count, A plain and transposed, alpha / beta, column
    counts around the chunk widths."""
    mr = rows_mr(isa)
    Ms = range(1, mr + 1) if not QUICK else (1, 2, 5, 8, mr)
    for trans_a in (False, True):
        sweep(rng, list(Ms), [1, 17, 255, 256, 257, 511, 513, 1030], [1, 4, 7, 300], trans_a, False,
              alpha=0.75, beta=-1.5, algorithm="rows")
    nnkern.set_num_threads(3)  # threads split the columns only: the same bits
    a, b = rand(rng, 6, 200), rand(rng, 200, 3000)
    many = nnkern.sgemm(a, b, algorithm="rows")
    nnkern.set_num_threads(1)
    assert np.array_equal(many, nnkern.sgemm(a, b, algorithm="rows"))


def test_rows_path_auto_for_few_rows_and_a_large_b(isa, rng):
    """With a rows_m kernel, auto streams B's rows for up to 8 rows of x once B outgrows L2, and for up to the
    kernel's rows_m_auto rows whatever B's size; otherwise it keeps the register tile."""
    rows_mr(isa)
    auto_m = _C.f32_gemv_rows_m_info(isa)[1]
    l2 = nnkern.cpu_info()["caches"]["l2"] or 256 * 1024
    K = 256
    # small: B in half of L2, and rows under a page long (3 rows or fewer would take the rows path then)
    big, small = 2 * l2 // (4 * K) + 1, min(max(l2 // (8 * K), 9), 1000)
    cases = [(8, big, True), (4, big, True), (max(9, auto_m + 1), big, False), (8, small, 8 <= auto_m),
             (max(auto_m, 2), small, auto_m > 0), (max(auto_m + 1, 4), small, False)]
    for M, N, want in cases:
        a, b = rand(rng, M, K), rand(rng, K, N)
        got = nnkern.sgemm(a, b)
        assert (_C.last_algorithm("sgemm") == "rows") == want, (M, N, _C.last_algorithm("sgemm"))
        ref = a.astype(np.float64) @ b.astype(np.float64)
        check_within_bound(got, ref, gemm_bound(a.astype(np.float64), b.astype(np.float64), K), f"{isa} {M}x{N}x{K}")


def test_routing_is_listed():
    assert "f32_gemv" in nnkern.cpu_info()["kernels"]


def test_no_access_past_guard_page(isa):
    """The gemv kernels and skinny driver paths with operands ending at an unmapped page (subprocess)."""
    gemv_info(isa)
    proc = run_script_isolated(GUARD_SCRIPT, isa, "gemv")
    assert proc.returncode == 0 and proc.stdout.strip().endswith("OK"), describe_process(proc)
