"""Every tile of every f32_gemm micro-kernel (the list, _C.kernel_list("f32_gemm")), called directly
through nnkern._C.f32_gemm_ukernel (plain form) and nnkern._C.f32_igemm_ukernel (indirect form).

Column-major terms (csrc/kernels/f32_gemm.h): A(i, p) = a[a_offset + p*a_stride + i],
B(p, j) = b[b_offsets[j] + p*b_stride], C(i, j) = c[c_offset + j*ldc + i], i < m <= MR, j < n <= NR.
Indirect: A packed (ks*k rows of MR), tap t column j at x[b_offsets[t*NR + j] + shift] (the kernel adds
the byte offset 4*shift), or the zero row where b_offsets is -1.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

import nnkern
from nnkern import _C
from helpers import EPS, QUICK, check_within_bound, describe_process, gemm_bound, run_python_isolated, run_script_isolated

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
    C0, bias = outputs(rng, MR, NR, ldc, use_bias)
    A64, B64 = A.astype(np.float64), Bm.astype(np.float64)
    for k in K_VALUES:
        def run(m, n, c, what):
            copy = np.full(MR * k + MR, SENTINEL, np.float32) if a_copy else None
            _C.f32_gemm_ukernel(isa, m, n, k, a_buf, 0, a_stride, copy, b_buf, b_offsets[:n], b_stride,
                                c.ravel(), 0, ldc, alpha, beta, bias, relu)
            if a_copy:
                panel = copy[:MR * k].reshape(k, MR)
                assert np.array_equal(panel[:, :m], A[:m, :k].T), f"{what}: a_copy is not the A panel"
                assert (copy[MR * k:] == SENTINEL).all(), f"{what}: a_copy written past MR*k"

        check_every_tile(run, f"{isa} k={k} a_stride={a_stride}", MR, NR, C0, A64[:, :k], B64[:k], k,
                         alpha, beta, bias, relu)


def outputs(rng, MR, NR, ldc, use_bias):
    """C's starting values (column j at C0[j], ldc apart) and the bias, if any: drawn after the operands."""
    C0 = rng.uniform(-1, 1, (NR, ldc)).astype(np.float32)
    bias = rng.uniform(-1, 1, MR).astype(np.float32) if use_bias else None
    return C0, bias


def check_every_tile(run, what, MR, NR, C0, A64, B64, K, alpha, beta, bias, relu):
    """run(m, n, c, what) for every m <= MR, n <= NR on a copy of C0 (the tile NaN where beta == 0, which
    must not be read); checks the m x n tile against float64 alpha A64 B64 (+ beta C0 + bias, ReLU) within
    the documented bound for a K-deep sum, and that nothing else in C changed."""
    acc = alpha * (A64 @ B64)  # MR x NR
    base_bound = gemm_bound(A64, B64, K, alpha, beta, C0[:, :MR].T if beta else None)
    for m in range(1, MR + 1):
        for n in range(1, NR + 1):
            c = C0.copy()
            if beta == 0.0:
                c[:n, :m] = np.nan  # must be ignored
            tile_what = f"{what} m={m} n={n}"
            run(m, n, c, tile_what)
            want = acc[:m, :n].copy()
            bound = base_bound[:m, :n].copy()
            if beta:
                want += beta * C0[:n, :m].T.astype(np.float64)
            if bias is not None:
                want += bias[:m, None]
                bound += EPS * np.abs(want)
            if relu:
                want = np.maximum(want, 0.0)
            check_within_bound(c[:n, :m].T, want, bound, tile_what)
            untouched = np.ones(c.shape, bool)
            untouched[:n, :m] = False
            assert np.array_equal(c[untouched], C0[untouched]), f"{tile_what}: wrote C outside the tile"


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


def test_kernel_list_names_follow_convention():
    """The list (csrc/kernels/f32_gemm_list.h): names carry the tile and the level, one kernel per level,
    the scalar reference always there, and each runnable one is what its level dispatches."""
    kernels = _C.kernel_list("f32_gemm")
    assert "f32_gemm" in _C.kernel_families()
    assert kernels[0]["name"] == "f32_gemm_8x4__scalar"
    assert len({k["level"] for k in kernels}) == len(kernels)
    for k in kernels:
        assert k["name"] == f"f32_gemm_{k['mr']}x{k['nr']}__{k['level']}", k
        assert k["supported"] == (k["level"] in nnkern.supported_isas())
        if k["supported"]:
            assert _C.f32_gemm_tile(k["name"]) == (k["name"], k["mr"], k["nr"])
            assert _C.f32_gemm_tile(k["level"]) == (k["name"], k["mr"], k["nr"])


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
    # Under AddressSanitizer the fault is left to the kernel (handle_segv=0): ASan's own report of it once hung a
    # loaded CI host until the timeout, and the report is not what this test checks.
    env = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":handle_segv=0:symbolize=0")
    proc = run_python_isolated(code, env=env, timeout=120)
    assert proc.stdout.startswith("1.0")
    # Killed by the signal (or, should a sanitizer still report it, its SEGV report and exit status).
    faulted = proc.returncode < 0 or (proc.returncode != 0 and "SEGV" in proc.stderr)
    assert faulted and "no fault" not in proc.stdout, describe_process(proc)


@pytest.mark.parametrize("what", ["ukernel", "igemm", "sgemm"])
def test_no_access_past_guard_page(isa, what):
    """Every tail of the micro-kernel (what=ukernel) and of the driver (what=sgemm) with inputs and outputs
    ending at an unmapped page; in a subprocess, so a fault is a failure of this test only."""
    proc = run_script_isolated(GUARD_SCRIPT, isa, what)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("OK"), describe_process(proc)


@pytest.mark.parametrize("form, beta", [("plain", 0.0), ("plain", 1.0), ("igemm", 0.0)])
def test_every_tile_residual(isa, rng, form, beta):
    """The residual R(i, j) = residual[r_offset + j * ldr + i] (a ResNet shortcut) is added after the bias and
    before the ReLU on every tile and K remainder: the bits of the same tile stored without ReLU, then the add and
    the ReLU in float32, as the separate ops. beta 1: a K block after the first (C holds the partial sums). Nothing
    outside the tile is written, and the residual is only read."""
    name, MR, NR = _C.f32_gemm_tile(isa)
    ldc, ldr, r_offset = MR + 2, MR + 5, 3
    f32 = lambda *shape: rng.uniform(-1, 1, shape).astype(np.float32)  # noqa: E731
    bias = f32(MR)
    for k in (0, 1, 5, 8, 17):
        ks = 3 if form == "igemm" else 1
        A, x, offs, _ = igemm_case(rng, MR, NR, k, ks, "random", 1)  # A: ks * k rows of MR, packed
        b = f32(NR * (k + 1))  # the plain form's columns, k + 1 apart
        C0, R = f32(NR, ldc), f32(r_offset + NR * ldr) * 2
        for m in range(1, MR + 1):
            for n in range(1, NR + 1):
                def run(c, **kw):
                    if form == "igemm":
                        _C.f32_igemm_ukernel(name, m, n, k, ks, A.ravel(), 0, x, offs, np.zeros(k + 1, np.float32),
                                             0, 4, c.ravel(), 0, ldc, 1.0, beta, bias, **kw)
                    else:
                        _C.f32_gemm_ukernel(name, m, n, k, A.ravel(), 0, MR, None, b, [j * (k + 1) for j in range(n)],
                                            1, c.ravel(), 0, ldc, 1.0, beta, bias, **kw)
                plain, fused, r_before = C0.copy(), C0.copy(), R.copy()
                run(plain, relu=False)
                run(fused, relu=True, residual=R, r_offset=r_offset, ldr=ldr)
                tile_r = np.stack([R[r_offset + j * ldr:r_offset + j * ldr + m] for j in range(n)])
                want = plain.copy()
                want[:n, :m] = np.maximum(plain[:n, :m] + tile_r, np.float32(0))
                what = f"{name} {form} beta={beta} k={k} m={m} n={n}"
                np.testing.assert_array_equal(fused, want, err_msg=what)
                assert np.array_equal(R, r_before), f"{what}: wrote the residual"


# Levels whose f32_gemm kernel has the whole-panel form (the x86 tile template); the others must refuse it.
PANEL_FORM_LEVELS = {"avx2", "avx512"}


def test_whole_panels_in_one_call(isa, rng):
    """The whole-panel form: 1-3 full panels of MR rows in one call, each panel's tile bit for bit the plain
    kernel's on that panel with its rows of C, bias and residual (every n, every k over two 8-step loops and one past,
    every epilogue, c_rows, panels further apart than packed); nothing else in C is written. A kernel without the
    form, a hook, m other than panels * MR, an a_copy and a short panel buffer are refused."""
    name, MR, NR = _C.f32_gemm_tile(isa)
    level = next(k["level"] for k in _C.kernel_list("f32_gemm") if k["name"] == name)
    assert _C.f32_gemm_has_panels(name) == (level in PANEL_FORM_LEVELS), f"{name}: whole-panel form"
    buf = np.zeros(4 * MR * 4, np.float32)
    if not _C.f32_gemm_has_panels(name):
        with pytest.raises(ValueError, match="whole-panel"):
            _C.f32_gemm_ukernel(name, MR, 1, 1, buf, 0, MR, None, buf, [0], 1, buf, 0, MR, 1.0, 0.0, None, False,
                                panels=1, a_panel_stride=MR)
        return
    for bad in (dict(hook=True), dict(m=MR + 1), dict(a_copy=np.zeros(2 * MR, np.float32)), dict(a_stride=MR + 1)):
        args = dict(m=MR, a_stride=MR, a_copy=None)
        args.update(bad)
        with pytest.raises(ValueError, match="whole-panel"):
            _C.f32_gemm_ukernel(name, args.pop("m"), 1, 1, buf, 0, args.pop("a_stride"), args.pop("a_copy"), buf,
                                [0], 1, buf, 0, MR, 1.0, 0.0, None, False, panels=1, a_panel_stride=MR, **args)
    for stride, match in ((2 * MR, "fewer floats"), (2 ** 62, "fewer floats"), (MR, "less than one")):
        # two panels of k = 2 claimed, one and a half held; a stride past any buffer; panels overlapping
        with pytest.raises(ValueError, match=match):
            _C.f32_gemm_ukernel(name, 2 * MR, 1, 2, np.zeros(3 * MR, np.float32), 0, MR, None, buf, [0], 1, buf, 0,
                                MR, 1.0, 0.0, None, False, panels=2, a_panel_stride=stride)
    f32 = lambda *shape: rng.uniform(-1, 1, shape).astype(np.float32)  # noqa: E731
    cases = [dict(alpha=1.0, beta=0.0, bias=False, relu=False), dict(alpha=0.5, beta=0.0, bias=True, relu=True),
             dict(alpha=1.0, beta=1.0, bias=True, relu=False), dict(alpha=1.0, beta=0.0, bias=True, relu=True,
                                                                      residual=True)]
    for panels in (1, 2, 3):
        rows = panels * MR
        for k in range(0, 2 * 8 + 2):  # every remainder of the 8-step loop, and past it
            stride = MR * k + (MR + 3) * (panels % 2)  # packed, or panels further apart
            a = f32(max(1, stride * (panels - 1) + MR * k))
            b = f32(NR * (k + 1))
            offs = [j * (k + 1) for j in range(NR)]
            bias_all, R = f32(rows), f32(NR * (rows + 4) + 2)
            for n in range(1, NR + 1):
                case = cases[(n + k + panels) % len(cases)]
                ldc = rows + 2
                c0 = f32(NR * ldc + 7)
                c_rows = [(n - 1 - j) * ldc + 3 for j in range(n)] if (n + k) % 2 else None
                ep = dict(relu=case["relu"])
                if case.get("residual"):
                    ep.update(residual=R, r_offset=2, ldr=rows + 4)
                bias = bias_all if case["bias"] else None
                got = c0.copy()
                _C.f32_gemm_ukernel(name, rows, n, k, a, 0, MR, None, b, offs[:n], 1, got, 0, ldc, case["alpha"],
                                    case["beta"], bias, c_rows=c_rows, panels=panels, a_panel_stride=stride, **ep)
                want = c0.copy()
                for q in range(panels):
                    pep = dict(ep)
                    if case.get("residual"):
                        pep["r_offset"] = 2 + q * MR
                    _C.f32_gemm_ukernel(name, MR, n, k, a, q * stride, MR, None, b, offs[:n], 1, want, q * MR, ldc,
                                        case["alpha"], case["beta"], None if bias is None else bias[q * MR:],
                                        c_rows=None if c_rows is None else [r + q * MR for r in c_rows], **pep)
                assert np.array_equal(got, want, equal_nan=True), f"{name} panels={panels} k={k} n={n} {case}"


# ---- indirect form (igemm) ------------------------------------------------------------------------

IGEMM_K = (0, 1, 2, 3, 4, 5, 7, 8, 9, 12, 16, 17) if not QUICK else (0, 1, 5, 8, 9, 17)


def igemm_case(rng, MR, NR, k, ks, pattern, shift):
    """A packed (ks*k, MR), x holding each (tap, column) of k floats at offset + shift, the pointer offsets
    (-1: zero row) and the float64 column operand X[t*k + p, j] that they mean."""
    A = rng.uniform(-1, 1, (ks * k, MR)).astype(np.float32)
    if pattern == "none":
        zero = np.zeros((ks, NR), bool)
    elif pattern == "all":
        zero = np.ones((ks, NR), bool)
    else:
        zero = rng.random((ks, NR)) < 0.4
    col = k + 3
    x = np.full(shift + ks * NR * col + 1, SENTINEL, np.float32)
    offs = []
    X = np.zeros((ks * k, NR))
    for t in range(ks):
        for j in range(NR):
            if zero[t, j]:
                offs.append(-1)
                continue
            o = (t * NR + j) * col
            x[shift + o:shift + o + k] = rng.uniform(-1, 1, k)
            X[t * k:(t + 1) * k, j] = x[shift + o:shift + o + k]
            offs.append(o)
    return A, x, offs, X


def run_igemm_tails(isa, rng, ks_values, alpha=1.0, beta=0.0, use_bias=False, relu=False):
    """Every m <= MR, n <= NR for each k in IGEMM_K and ks in ks_values, zero-row patterns rotating (none,
    all, random) and a nonzero offset, against float64 with the documented bound (K = ks * k); nothing
    outside the m x n tile of C changes."""
    name, MR, NR = _C.f32_gemm_tile(isa)
    ldc = MR + 2
    zero_row = np.zeros(max(IGEMM_K) + 1, np.float32)
    patterns = ("none", "all", "random", "random")
    for ks in ks_values:
        for ki, k in enumerate(IGEMM_K):
            pattern, shift = patterns[(ks + ki) % 4], 1 + (ks + ki) % 5
            A, x, offs, X = igemm_case(rng, MR, NR, k, ks, pattern, shift)
            C0, bias = outputs(rng, MR, NR, ldc, use_bias)

            def run(m, n, c, what):
                _C.f32_igemm_ukernel(name, m, n, k, ks, A.ravel(), 0, x, offs, zero_row, 0, 4 * shift,
                                     c.ravel(), 0, ldc, alpha, beta, bias, relu)

            check_every_tile(run, f"{name} igemm k={k} ks={ks} zeros={pattern} shift={shift}", MR, NR, C0,
                             A.T.astype(np.float64), X, ks * k, alpha, beta, bias, relu)


@pytest.mark.parametrize("ks_values", [(1, 2, 3), (4, 5, 6), (7, 8, 9)], ids=["ks1-3", "ks4-6", "ks7-9"])
def test_igemm_every_tail(isa, rng, ks_values):
    run_igemm_tails(isa, rng, ks_values)


@pytest.mark.parametrize("alpha, beta, use_bias, relu", [
    (1.0, 1.0, False, False),
    (-1.5, 0.25, True, False),
    (2.0, 0.0, True, True),
], ids=["beta1", "alpha-beta-bias", "bias-relu-beta0"])
def test_igemm_epilogue(isa, rng, alpha, beta, use_bias, relu):
    run_igemm_tails(isa, rng, (3,), alpha=alpha, beta=beta, use_bias=use_bias, relu=relu)


def test_igemm_ks1_is_the_plain_kernel(isa, rng):
    """ks = 1, no zero row, offset 0: bit-identical to the plain form on the same packed panel."""
    name, MR, NR = _C.f32_gemm_tile(isa)
    for k in (1, 7, 8, 33):
        A = rng.uniform(-1, 1, (k, MR)).astype(np.float32)
        Bm = rng.uniform(-1, 1, (NR, k)).astype(np.float32)
        for m, n in ((MR, NR), (max(MR - 3, 1), max(NR - 1, 1)), (1, 1)):
            c1 = np.zeros(NR * MR, np.float32)
            c2 = np.zeros(NR * MR, np.float32)
            offs = [j * k for j in range(NR)]
            _C.f32_gemm_ukernel(name, m, n, k, A.ravel(), 0, MR, None, Bm.ravel(), offs[:n], 1, c1, 0, MR, 1.0, 0.0,
                                None, False)
            _C.f32_igemm_ukernel(name, m, n, k, 1, A.ravel(), 0, Bm.ravel(), offs, np.zeros(1, np.float32), 0, 0,
                                 c2, 0, MR)
            assert np.array_equal(c1, c2), f"{name} m={m} n={n} k={k}"


@pytest.mark.parametrize("form", ["plain", "indirect"])
def test_c_rows_and_tile_hook(isa, rng, form):
    """c_rows: column j lands at c[c_rows[j]:], nowhere else (and beta reads it there); the hook is called
    once per tile with the stored values and the caller's position; without it, nothing is reported."""
    name, MR, NR = _C.f32_gemm_tile(isa)
    k = 11
    A = rng.uniform(-1, 1, (k, MR)).astype(np.float32)
    Bm = rng.uniform(-1, 1, (NR, k)).astype(np.float32)
    offs = [j * k for j in range(NR)]
    for m, n in ((MR, NR), (max(MR - 1, 1), max(NR - 2, 1)), (1, 1)):
        for beta in (0.0, 0.5):
            size = NR * (MR + 5) * 2
            c0 = rng.uniform(-1, 1, size).astype(np.float32)
            rows = [(n - 1 - j) * (2 * MR + 3) + 1 for j in range(n)]  # reversed, with gaps
            c = c0.copy()
            if form == "plain":
                tiles = _C.f32_gemm_ukernel(name, m, n, k, A.ravel(), 0, MR, None, Bm.ravel(), offs[:n], 1, c, 0, 0,
                                            1.0, beta, None, False, c_rows=rows, hook=True, tile_i=5, tile_j=9)
            else:
                tiles = _C.f32_igemm_ukernel(name, m, n, k, 1, A.ravel(), 0, Bm.ravel(), offs,
                                             np.zeros(1, np.float32), 0, 0, c, 0, 0, beta=beta, c_rows=rows,
                                             hook=True, tile_i=5, tile_j=9)
            A64, B64 = A[:, :m].T.astype(np.float64), Bm[:n].T.astype(np.float64)
            want = A64 @ B64 + beta * np.stack([c0[r:r + m] for r in rows], axis=1)
            got = np.stack([c[r:r + m] for r in rows], axis=1)
            what = f"{name} {form} m={m} n={n} beta={beta}"
            check_within_bound(got, want, gemm_bound(A64, B64, k, 1.0, beta, want) + 1e-6, what)
            untouched = np.ones(size, bool)
            for r in rows:
                untouched[r:r + m] = False
            assert np.array_equal(c[untouched], c0[untouched]), f"{what}: wrote outside the c_rows columns"
            assert len(tiles) == 1, f"{what}: hook called {len(tiles)} times"
            ti, tj, values = tiles[0]
            assert (ti, tj) == (5, 9) and values.shape == (n, m), what
            assert np.array_equal(values.T, got), f"{what}: the hook saw other values than were stored"
            assert _C.f32_gemm_ukernel(name, m, n, k, A.ravel(), 0, MR, None, Bm.ravel(), offs[:n], 1, c, 0, MR,
                                       1.0, 0.0, None, False) is None
