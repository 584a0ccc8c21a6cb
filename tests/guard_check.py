"""Guard-page check, run as a subprocess by test_ukernels.py (a fault kills only this process).

    python guard_check.py ISA ukernel|igemm|sgemm|gemv

ukernel: every (m, n) tile of ISA's f32_gemm micro-kernel and every K remainder of its unroll, with A,
  B, C, the a_copy panel and the residual each placed so that the last element the kernel may touch is the
  last float before an unmapped page (nnkern._C.GuardedBuffer); results are checked against float64 as well.
igemm: the indirect form of the same kernel (every tile, K remainder, ks in 1, 2, 9): packed A, the tap
  columns, the zero row, C and the residual each ending at a guard page.
sgemm: the full driver under the cap ISA, with a, b and c ending at guard pages, all transpose
  combinations and tail sizes of the kernel's MR x NR.
gemv: the skinny-GEMM kernels (rows, store, dot) directly, and the GEMV / small-N driver paths and
  Linear batch 1, each operand ending at a guard page.
Prints "OK" and exits 0 on success; exits 1 with a message on a wrong result; a fault is a signal.
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nnkern  # noqa: E402
from nnkern import _C  # noqa: E402
from helpers import QUICK, assert_gemm_close, check_within_bound, gemm_bound  # noqa: E402

F = 4  # bytes per float32


class Guarded:
    """A float32 array of n elements whose last element is right before a guard page."""

    def __init__(self, n):
        self.buf = _C.GuardedBuffer(max(n, 1) * F)
        self.all = np.frombuffer(self.buf, dtype=np.float32)
        self.n = max(n, 1)

    def tail(self, count):
        """A view of the last ``count`` floats (count == 0: an empty view at the very end)."""
        return self.all[self.n - count:]


def k_values(mr):
    """0..2*8+7: every remainder of a K unroll of 8 (k8/k4/k2/k1 paths), twice over."""
    return range(0, 24) if not QUICK else (0, 1, 2, 3, 4, 7, 8, 9, 15, 17, 23)


def ukernel_guard(isa):
    rng = np.random.default_rng(0)
    _, MR, NR = _C.f32_gemm_tile(isa)
    kmax = max(k_values(MR))
    # One guarded buffer per operand, large enough for the biggest placement.
    gA = Guarded((kmax + 1) * (MR + 5) + MR)
    gB = Guarded((kmax + 1) * NR * 2)
    gC = Guarded(NR * (MR + 3) + MR)
    gCopy = Guarded(MR * (kmax + 1))
    gBias = Guarded(MR)
    gR = Guarded(NR * (MR + 5) + MR)  # ldr up to MR + 5
    bias_full = rng.uniform(-1, 1, MR).astype(np.float32)
    for a_stride_extra in (0, 5):
        a_stride = MR + a_stride_extra
        for k in k_values(MR):
            A = rng.uniform(-1, 1, (MR, k)).astype(np.float32)
            B = rng.uniform(-1, 1, (k, NR)).astype(np.float32)
            for m in range(1, MR + 1):
                for n in range(1, NR + 1):
                    for variant in range(2):
                        # A: the last element read, A(m-1, k-1), is the buffer's last float.
                        used_a = (k - 1) * a_stride + m if k else 0
                        a_off = gA.n - used_a
                        av = gA.all
                        for p in range(k):
                            av[a_off + p * a_stride:a_off + p * a_stride + m] = A[:m, p]
                        # B: variant 0 = packed NR-interleaved (b_stride = n), 1 = one contiguous column each.
                        if variant == 0:
                            b_stride = n
                            b_off0 = gB.n - (k * n if k else 0)
                            offs = [b_off0 + j for j in range(n)]
                            if k:
                                gB.all[b_off0:] = B[:, :n].ravel()
                        else:
                            b_stride = 1
                            b_off0 = gB.n - k * n
                            offs = [b_off0 + j * k for j in range(n)]
                            if k:
                                gB.all[b_off0:] = B[:, :n].T.ravel()
                        # C: tight (ldc = m) or with a leading dimension; ends at the guard page.
                        ldc = m if variant == 0 else m + 3
                        used_c = (n - 1) * ldc + m
                        c_off = gC.n - used_c
                        c0 = rng.uniform(-1, 1, used_c).astype(np.float32)
                        gC.all[c_off:] = c0
                        beta = 0.0 if variant == 0 else 0.5
                        if beta == 0.0:
                            gC.all[c_off:] = np.nan
                        copy = gCopy.tail(MR * k) if (variant == 1 and k) else None
                        bias = gBias.tail(m) if variant == 1 else None
                        if bias is not None:
                            bias[:] = bias_full[:m]
                        # The residual (variant 1), ldr = ldc + 2, its last element the buffer's last float.
                        ldr = ldc + 2
                        r_off = gR.n - ((n - 1) * ldr + m)
                        R = rng.uniform(-1, 1, (m, n)).astype(np.float32)
                        for j in range(n):
                            gR.all[r_off + j * ldr:r_off + j * ldr + m] = R[:, j]
                        _C.f32_gemm_ukernel(isa, m, n, k, gA.all, a_off, a_stride, copy, gB.all, offs, b_stride,
                                            gC.all, c_off, ldc, 1.25, beta, bias, variant == 1,
                                            residual=gR.all if variant == 1 else None, r_offset=r_off, ldr=ldr)
                        got = np.stack([gC.all[c_off + j * ldc:c_off + j * ldc + m] for j in range(n)], axis=1)
                        c_old = np.stack([c0[j * ldc:j * ldc + m] for j in range(n)], axis=1)
                        A64, B64 = A[:m].astype(np.float64), B[:, :n].astype(np.float64)
                        want = 1.25 * (A64 @ B64)
                        bound = gemm_bound(A64, B64, k, 1.25, beta, c_old if beta else None)
                        if beta:
                            want = want + beta * c_old
                        if bias is not None:
                            want = want + bias_full[:m, None]
                            bound = bound + 2 ** -24 * np.abs(want)
                        if variant == 1:
                            want = want + R
                            bound = bound + 2 ** -24 * np.abs(want)
                            want = np.maximum(want, 0)
                        check_within_bound(got, want, bound, f"{isa} m={m} n={n} k={k} a_stride={a_stride} v{variant}")
                        if copy is not None:
                            cp = copy.reshape(k, MR)[:, :m]
                            if not np.array_equal(cp, A[:m].T):
                                raise AssertionError(f"{isa} m={m} n={n} k={k}: a_copy differs from A")


def igemm_guard(isa):
    """The indirect form: every (m, n) tile, the K remainders, ks in (1, 2, 9). The packed A panel (ks*k*MR
    floats), the last tap's last column, the zero row (exactly k floats) and C each end at a guard page."""
    rng = np.random.default_rng(2)
    name, MR, NR = _C.f32_gemm_tile(isa)
    kmax = max(k_values(MR))
    gA = Guarded(9 * kmax * MR + 1)
    gX = Guarded(9 * NR * kmax + 3)  # + the 2 floats the pointers sit early
    gZ = Guarded(kmax + 1)
    gC = Guarded(NR * (MR + 3) + MR)
    gR = Guarded(NR * (MR + 3) + MR)
    for ks in (1, 2, 9):
        for k in k_values(MR):
            A = rng.uniform(-1, 1, (ks * k, MR)).astype(np.float32)
            a_off = gA.n - ks * k * MR
            gA.all[a_off:] = A.ravel()
            zero = gZ.tail(k)
            zero[:] = 0.0
            z_off = gZ.n - k
            for m in range(1, MR + 1):
                for n in range(1, NR + 1):
                    # Tap columns packed back to back, (t, j) of the tile only, the last one ending at the page;
                    # every third pointer is the zero row. The offset is 8 bytes: pointers sit 2 floats early.
                    cols = [(t, j) for t in range(ks) for j in range(n)]
                    x_off0 = gX.n - len(cols) * k
                    X = np.zeros((ks * k, n))
                    offs = [0] * (ks * NR)
                    for q, (t, j) in enumerate(cols):
                        if q % 3 == 1:
                            offs[t * NR + j] = -1
                            continue
                        o = x_off0 + q * k
                        gX.all[o:o + k] = rng.uniform(-1, 1, k)
                        X[t * k:(t + 1) * k, j] = gX.all[o:o + k]
                        offs[t * NR + j] = o - 2
                    for ldc in (m, m + 3):
                        used_c = (n - 1) * ldc + m
                        c_off = gC.n - used_c
                        gC.all[c_off:] = np.nan  # beta = 0: never read
                        # With a leading dimension, a residual too (ldr = ldc), ending at the guard page.
                        R = rng.uniform(-1, 1, (m, n)) if ldc > m else np.zeros((m, n))
                        r_off = gR.n - used_c
                        for j in range(n):
                            gR.all[r_off + j * ldc:r_off + j * ldc + m] = R[:, j]
                        _C.f32_igemm_ukernel(name, m, n, k, ks, gA.all, a_off, gX.all, offs, gZ.all, z_off, 8,
                                             gC.all, c_off, ldc, residual=gR.all if ldc > m else None,
                                             r_offset=r_off, ldr=ldc)
                        got = np.stack([gC.all[c_off + j * ldc:c_off + j * ldc + m] for j in range(n)], axis=1)
                        A64 = A[:, :m].T.astype(np.float64)
                        want = A64 @ X + R.astype(np.float32)
                        check_within_bound(got, want, gemm_bound(A64, X, ks * k) + 2 ** -24 * np.abs(want),
                                           f"{name} igemm m={m} n={n} k={k} ks={ks} ldc={ldc}")


def sgemm_guard(isa):
    rng = np.random.default_rng(1)
    nnkern.set_max_isa(isa)
    _, MR, NR = _C.f32_gemm_tile(isa)
    # C[M, N]: N runs along the kernel's MR (vector lanes), M along NR (broadcasts).
    Ns = sorted({1, MR - 1, MR, MR + 1, 2 * MR + 3, 4 * MR + 1} - {0})
    Ms = sorted({1, NR - 1, NR, NR + 1, 2 * NR + 3, 20} - {0})
    Ks = (1, 3, 8, 13, 300) if not QUICK else (1, 13, 300)
    for M in Ms:
        for N in Ns:
            for K in Ks:
                a, b = rng.uniform(-1, 1, (M, K)).astype(np.float32), rng.uniform(-1, 1, (K, N)).astype(np.float32)
                for trans_a in (False, True):
                    for trans_b in (False, True):
                        sa = np.ascontiguousarray(a.T if trans_a else a)
                        sb = np.ascontiguousarray(b.T if trans_b else b)
                        ga, gb, gc = Guarded(sa.size), Guarded(sb.size), Guarded(M * N)
                        av = ga.tail(sa.size).reshape(sa.shape)
                        bv = gb.tail(sb.size).reshape(sb.shape)
                        av[...] = sa
                        bv[...] = sb
                        cv = gc.tail(M * N).reshape(M, N)
                        c0 = rng.uniform(-1, 1, (M, N)).astype(np.float32)
                        cv[...] = c0
                        nnkern.sgemm(av, bv, trans_a=trans_a, trans_b=trans_b, alpha=-0.5, beta=2.0, c=cv)
                        assert_gemm_close(cv, a, b, alpha=-0.5, beta=2.0, c0=c0,
                                          what=f"{isa} {M}x{N}x{K} trans {trans_a},{trans_b}")
                        # Column-major output ending at the guard page too.
                        cf = gc.tail(M * N).reshape(N, M).T
                        nnkern.sgemm(av, bv, trans_a=trans_a, trans_b=trans_b, c=cf)
                        assert_gemm_close(cf, a, b, what=f"{isa} {M}x{N}x{K} F-order c")
                        del av, bv, cv, cf
    # Few rows (B read in place) and a B beyond half of L2, over several K blocks.
    for M, N in [(3, MR * 23 + 5), (NR + 1, 1100)]:
        K = 300
        a, b = rng.uniform(-1, 1, (M, K)).astype(np.float32), rng.uniform(-1, 1, (K, N)).astype(np.float32)
        ga, gb, gc = Guarded(a.size), Guarded(b.size), Guarded(M * N)
        av, bv, cv = ga.tail(a.size).reshape(a.shape), gb.tail(b.size).reshape(b.shape), gc.tail(M * N).reshape(M, N)
        av[...], bv[...] = a, b
        nnkern.sgemm(av, bv, c=cv)
        assert_gemm_close(cv, a, b, what=f"{isa} in-place B {M}x{N}x{K}")
        del av, bv, cv
    # Linear: packed weights, input and output at guard pages.
    for out_f, in_f in [(MR + 1, 13), (3, 300), (2 * MR - 1, 9)]:
        w = rng.uniform(-1, 1, (out_f, in_f)).astype(np.float32)
        layer = nnkern.Linear(w)
        for rows in (1, NR - 1 or 1, NR + 1):
            gx, gy = Guarded(rows * in_f), Guarded(rows * out_f)
            x = gx.tail(rows * in_f).reshape(rows, in_f)
            x[...] = rng.uniform(-1, 1, x.shape)
            y = gy.tail(rows * out_f).reshape(rows, out_f)
            layer(x, out=y)
            check_within_bound(y, *_ref(x, w.T), what=f"Linear {in_f}->{out_f} x{rows}")
            del x, y


def gemv_guard(isa):
    rng = np.random.default_rng(2)
    nnkern.set_max_isa(isa)
    _, MR, NR = _C.f32_gemv_info(isa)
    ks = range(0, 40) if not QUICK else (0, 1, 7, 8, 9, 15, 16, 17, 33)
    # dot: A rows, B^T rows and C each end at a guard page (the masked K tail must not read past them).
    gA, gB, gC, gBias = Guarded(MR * 64), Guarded(NR * 64), Guarded(MR * NR), Guarded(NR)
    for k in ks:
        A, Bt = rng.uniform(-1, 1, (MR, k)).astype(np.float32), rng.uniform(-1, 1, (NR, k)).astype(np.float32)
        for m in range(1, MR + 1):
            for n in range(1, NR + 1):
                a_off, b_off, c_off = gA.n - m * k, gB.n - n * k, gC.n - m * n
                gA.all[a_off:] = A[:m].ravel()
                gB.all[b_off:] = Bt[:n].ravel()
                gC.all[c_off:] = np.nan
                bias = gBias.tail(n)
                bias[:] = 0.5
                _C.f32_gemv_dot(isa, m, n, k, gA.all, a_off, max(k, 1), gB.all, b_off, max(k, 1), gC.all, c_off, n,
                                1.0, 0.0, bias, False)
                got = gC.all[c_off:].reshape(m, n)
                want = A[:m].astype(np.float64) @ Bt[:n].T + 0.5
                check_within_bound(got, want, gemm_bound(A[:m].astype(np.float64), Bt[:n].T.astype(np.float64), k)
                                   + 1e-6, f"{isa} dot m={m} n={n} k={k}")
    # rows + store: B (k x n, ldb = n), x, acc and c end at guard pages.
    gX, gRB, gAcc, gOut = Guarded(64), Guarded(40 * 140), Guarded(140), Guarded(140)
    for k in (0, 1, 3, 8, 13, 31):
        for n in list(range(1, 70)) + [127, 128, 129, 140]:
            B = rng.uniform(-1, 1, (k, n)).astype(np.float32)
            x = gX.tail(k) if k else gX.all
            x[:] = rng.uniform(-1, 1, x.size)
            b_off = gRB.n - k * n
            gRB.all[b_off:] = B.ravel()
            acc = gAcc.tail(n)
            acc[:] = 0.0
            _C.f32_gemv_rows(isa, n, k, x, 0, 1, gRB.all, b_off, n, acc, 0)
            out = gOut.tail(n)
            out[:] = 1.0
            _C.f32_gemv_store(isa, n, acc, 0, out, 0, 1.0, 1.0, None, True)
            want = np.maximum(x[:k].astype(np.float64) @ B + 1.0, 0) if k else np.ones(n)
            check_within_bound(out, want, gemm_bound(x[None, :k].astype(np.float64), B.astype(np.float64), k)[0] + 1e-6,
                               f"{isa} rows n={n} k={k}")
            del acc, out
    # rows_m (where the level has one): B (k x n), x (m rows of k) and acc (m x n) each end at a guard page.
    mr = _C.f32_gemv_rows_m_info(isa)[0]
    gXm, gAm = Guarded(max(mr, 1) * 13), Guarded(max(mr, 1) * 129)
    for k in ((0, 1, 3, 4, 5, 13) if mr else ()):
        for n in (1, 15, 16, 17, 33, 129):
            for m in sorted({1, 3, 4, 5, mr}):
                B = rng.uniform(-1, 1, (k, n)).astype(np.float32)
                b_off = gRB.n - k * n
                gRB.all[b_off:] = B.ravel()
                x = gXm.tail(m * k) if k else gXm.all
                x[:] = rng.uniform(-1, 1, x.size)
                acc = gAm.tail(m * n)
                acc[:] = 0.0
                _C.f32_gemv_rows_m(isa, m, n, k, x, 0, max(k, 1), 1, gRB.all, b_off, n, acc, 0, n)
                xm = x[:m * k].reshape(m, k).astype(np.float64)
                check_within_bound(acc.reshape(m, n), xm @ B, gemm_bound(xm, B.astype(np.float64), k) + 1e-6,
                                   f"{isa} rows_m m={m} n={n} k={k}")
                del x, acc
    # The rows path over rows_m's groups of rows: a (plain and transposed), b and c ending at guard pages.
    for M, N, K in ([(M, N, K) for M in (2, 5, 8, mr) for N in (17, 300) for K in (3, 70)] if mr else []):
        a, b = rng.uniform(-1, 1, (M, K)).astype(np.float32), rng.uniform(-1, 1, (K, N)).astype(np.float32)
        for trans_a in (False, True):
            sa = np.ascontiguousarray(a.T if trans_a else a)
            ga, gb, gc = Guarded(sa.size), Guarded(b.size), Guarded(M * N)
            av, bv = ga.tail(sa.size).reshape(sa.shape), gb.tail(b.size).reshape(b.shape)
            cv = gc.tail(M * N).reshape(M, N)
            av[...], bv[...], cv[...] = sa, b, 0.5
            nnkern.sgemm(av, bv, trans_a=trans_a, alpha=1.5, beta=-1.0, c=cv, algorithm="rows")
            assert_gemm_close(cv, a, b, alpha=1.5, beta=-1.0, c0=np.full((M, N), 0.5, np.float32),
                              what=f"{isa} rows {M}x{N}x{K} trans_a {trans_a}")
            del av, bv, cv
    # Driver: M = 1 (every transpose) and small N, a, b and c ending at guard pages.
    shapes = [(1, N, K) for N in (1, 5, 9, 16, 17, 65, 300) for K in (1, 15, 16, 17, 70)]
    shapes += [(M, N, K) for M in (1, 2, 4, 40) for N in range(1, 10) for K in (16, 17, 33)]
    for M, N, K in shapes:
        a, b = rng.uniform(-1, 1, (M, K)).astype(np.float32), rng.uniform(-1, 1, (K, N)).astype(np.float32)
        for trans_a in (False, True):
            for trans_b in (False, True):
                sa = np.ascontiguousarray(a.T if trans_a else a)
                sb = np.ascontiguousarray(b.T if trans_b else b)
                ga, gb, gc = Guarded(sa.size), Guarded(sb.size), Guarded(M * N)
                av, bv = ga.tail(sa.size).reshape(sa.shape), gb.tail(sb.size).reshape(sb.shape)
                av[...], bv[...] = sa, sb
                cv = gc.tail(M * N).reshape(M, N)
                c0 = rng.uniform(-1, 1, (M, N)).astype(np.float32)
                cv[...] = c0
                nnkern.sgemm(av, bv, trans_a=trans_a, trans_b=trans_b, alpha=1.5, beta=-1.0, c=cv)
                assert_gemm_close(cv, a, b, alpha=1.5, beta=-1.0, c0=c0,
                                  what=f"{isa} {M}x{N}x{K} trans {trans_a},{trans_b}")
                del av, bv, cv
    for out_f, in_f in [(1, 1), (47, 13), (49, 300), (100, 129)]:
        w = rng.uniform(-1, 1, (out_f, in_f)).astype(np.float32)
        gbias = Guarded(out_f)
        bias = gbias.tail(out_f)
        bias[:] = rng.uniform(-1, 1, out_f)
        layer = nnkern.Linear(w, bias)
        gx, gy = Guarded(in_f), Guarded(out_f)
        x, y = gx.tail(in_f).reshape(1, in_f), gy.tail(out_f).reshape(1, out_f)
        x[...] = rng.uniform(-1, 1, x.shape)
        layer(x, out=y)
        want, bound = _ref(x, w.T)
        check_within_bound(y, want + bias, bound + 1e-6, what=f"Linear {in_f}->{out_f} x1")
        del x, y, bias, layer


def _ref(a, b):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return a64 @ b64, gemm_bound(a64, b64, a.shape[1])


if __name__ == "__main__":
    isa_name, what = sys.argv[1], sys.argv[2]
    {"ukernel": ukernel_guard, "igemm": igemm_guard, "sgemm": sgemm_guard, "gemv": gemv_guard}[what](isa_name)
    print("OK")
