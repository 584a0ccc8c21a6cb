"""Self-check of every kernel this CPU can run against a float64 reference (the main job's PASS/FAIL
lines).  Each supported ISA is selected with ``nnkern.max_isa`` in turn."""
from __future__ import annotations

from typing import Callable, List, Tuple

import numpy as np

#: (M, N, K): single element, tails of every kernel (16x6/48x8/8x4 and K unroll remainders),
#: exact tiles, a multi-block shape (K > kc, M > mc for the usual blockings) and a skinny one.
SGEMM_CHECK_SHAPES = [(1, 1, 1), (17, 13, 9), (15, 5, 7), (33, 7, 3), (48, 8, 64), (16, 6, 8),
                      (100, 70, 300), (1, 300, 200), (257, 129, 515)]
EPS = 2.0 ** -24


def _factor() -> float:
    from .. import gemm
    return float(getattr(gemm, "GEMM_ERROR_FACTOR", 2.0))


def _ratio(got, a, b, alpha=1.0, beta=0.0, c0=None) -> float:
    """max |got - exact| / documented bound (<= 1 passes); a, b are op(A), op(B) as float64."""
    K = a.shape[1]
    exact = alpha * (a @ b)
    bound = _factor() * max(K, 1) * EPS * abs(alpha) * (np.abs(a) @ np.abs(b))
    if c0 is not None and beta != 0.0:
        exact = exact + beta * c0.astype(np.float64)
        bound = bound + EPS * np.abs(beta * c0.astype(np.float64))
    bound = bound + np.finfo(np.float32).tiny  # allow exact zeros
    return float(np.max(np.abs(got.astype(np.float64) - exact) / bound))


def check_sgemm_shape(M, N, K, rng) -> Tuple[bool, str]:
    """All four transposes, plus alpha/beta with a C and beta=0 over NaN."""
    import nnkern
    worst, ok = 0.0, True
    for ta in (False, True):
        for tb in (False, True):
            A = rng.standard_normal((M, K)).astype(np.float32)
            B = rng.standard_normal((K, N)).astype(np.float32)
            a_arg = np.ascontiguousarray(A.T) if ta else A
            b_arg = np.ascontiguousarray(B.T) if tb else B
            got = nnkern.sgemm(a_arg, b_arg, trans_a=ta, trans_b=tb)
            worst = max(worst, _ratio(got, A.astype(np.float64), B.astype(np.float64)))
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((K, N)).astype(np.float32)
    C0 = rng.standard_normal((M, N)).astype(np.float32)
    C = C0.copy()
    nnkern.sgemm(A, B, alpha=0.5, beta=-2.0, c=C)
    worst = max(worst, _ratio(C, A.astype(np.float64), B.astype(np.float64), 0.5, -2.0, C0))
    Cn = np.full((M, N), np.nan, np.float32)
    nnkern.sgemm(A, B, beta=0.0, c=Cn)
    if np.isnan(Cn).any():
        ok = False
    worst = max(worst, _ratio(Cn, A.astype(np.float64), B.astype(np.float64)))
    ok = ok and worst <= 1.0
    return ok, f"err/bound {worst:.3f}" + ("" if np.isfinite(Cn).all() else ", beta=0 kept NaN")


def check_linear(rng) -> Tuple[bool, str]:
    """Linear with bias (+relu), 1-D / 2-D / 3-D inputs, odd feature counts."""
    import nnkern
    worst, ok = 0.0, True
    for (out_f, in_f), lead, act in [((13, 9), (5,), None), ((70, 300), (3, 7), "relu"),
                                     ((6, 1024), (), None), ((129, 515), (33,), "relu")]:
        W = rng.standard_normal((out_f, in_f)).astype(np.float32)
        bias = rng.standard_normal(out_f).astype(np.float32)
        x = rng.standard_normal(lead + (in_f,)).astype(np.float32)
        y = nnkern.Linear(W, bias, activation=act)(x)
        x2 = x.reshape(-1, in_f).astype(np.float64)
        exact = x2 @ W.T.astype(np.float64) + bias
        bound = (_factor() * in_f * EPS * (np.abs(x2) @ np.abs(W.T.astype(np.float64)))
                 + EPS * np.abs(bias) + np.finfo(np.float32).tiny)
        if act == "relu":
            exact = np.maximum(exact, 0.0)
        ok = ok and y.shape == lead + (out_f,)
        worst = max(worst, float(np.max(np.abs(y.reshape(-1, out_f) - exact) / bound)))
    return ok and worst <= 1.0, f"err/bound {worst:.3f}"


def check_threads(rng) -> Tuple[bool, str]:
    """1 thread vs all threads: bit-identical."""
    import nnkern
    A = rng.standard_normal((301, 257)).astype(np.float32)
    B = rng.standard_normal((257, 203)).astype(np.float32)
    old = nnkern.get_num_threads()
    try:
        nnkern.set_num_threads(1)
        c1 = nnkern.sgemm(A, B)
        nnkern.set_num_threads(max(2, old))
        c2 = nnkern.sgemm(A, B)
    finally:
        nnkern.set_num_threads(old)
    return bool(np.array_equal(c1, c2)), f"1 vs {max(2, old)} threads bit-identical"


#: qgemm (M, N, K): tails of the 64x6 / 16x6 / 8x4 tiles, K remainders of the groups of 4 / 2, the GEMV path
#: (M <= 4) and a shape past the K block.
QGEMM_CHECK_SHAPES = [(1, 1, 1), (17, 13, 9), (1, 70, 33), (4, 65, 7), (40, 130, 141), (7, 64, 1000)]


def check_qgemm(rng) -> Tuple[bool, str]:
    """qgemm (uint8 / int8 activations, scalar and per-column zero points) and qgemm16 vs numpy int64."""
    import nnkern
    bad = 0
    for M, N, K in QGEMM_CHECK_SHAPES:
        for dt, za in ((np.uint8, 255), (np.int8, -128)):
            info = np.iinfo(dt)
            a = rng.integers(info.min, info.max + 1, (M, K), dtype=dt)
            b = rng.integers(-128, 128, (K, N), dtype=np.int8)
            zb = rng.integers(-128, 128, N)
            want = (a.astype(np.int64) - za) @ (b.astype(np.int64) - zb)
            bad += not np.array_equal(nnkern.qgemm(a, b, a_zero_point=za, b_zero_point=zb), want)
        a16 = rng.integers(-3000, 3000, (M, K), dtype=np.int16)
        b16 = rng.integers(-300, 300, (K, N), dtype=np.int16)
        bad += not np.array_equal(nnkern.qgemm16(a16, b16), a16.astype(np.int64) @ b16.astype(np.int64))
    return bad == 0, f"bit-exact vs int64 ({bad} mismatching shapes)"


def check_quant(rng) -> Tuple[bool, str]:
    """quantize vs the numpy formula (ties, NaN, Inf), QLinear uint8 output vs its float32 formula."""
    import nnkern
    x = np.concatenate([rng.standard_normal(1001).astype(np.float32) * 50,
                        np.array([0.5, 1.5, -2.5, np.nan, np.inf, -np.inf], np.float32)])
    with np.errstate(invalid="ignore"):
        want = np.where(np.isnan(x), 3, np.clip(np.rint(x / np.float32(0.5)) + 3, 0, 255)).astype(np.uint8)
    ok = np.array_equal(nnkern.quantize(x, 0.5, 3, np.uint8), want)
    w = rng.standard_normal((70, 300)).astype(np.float32)
    layer = nnkern.QLinear(w, None, input_scale=0.02, input_zero_point=128, output_scale=0.3, output_zero_point=100)
    xq = rng.integers(0, 256, (9, 300), dtype=np.uint8)
    acc = (xq.astype(np.int64) - 128) @ layer.weight_q.T.astype(np.int64)
    y = (acc.astype(np.float32).astype(np.float64) * layer.factor + layer.offset).astype(np.float32)
    ok = ok and np.array_equal(layer(xq), np.rint(np.clip(y, 0, 255)).astype(np.uint8))
    return bool(ok), "quantize bit-exact; QLinear = its float32 epilogue"


def _lstm_step_ratio(lstm, w, x, h, c, method) -> float:
    """One step from the float32 state (h, c): max |error| / the documented per-step bound, over h' and c'."""
    from ..activations import SIGMOID_MAX_ABS_ERROR, TANH_MAX_ABS_ERROR
    _, (h1, c1) = lstm(x[None], (h[None], c[None]))
    w_ih, w_hh, b = (a.astype(np.float64) for a in (w[0], w[1], w[2] + w[3]))
    H = w_hh.shape[1]
    x64, h64, c64 = (a.astype(np.float64) for a in (x, h, c))
    z = x64 @ w_ih.T + h64 @ w_hh.T + b
    ez = (_factor() * (w_ih.shape[1] + H) + 6) * EPS * (np.abs(x64) @ np.abs(w_ih).T + np.abs(h64) @ np.abs(w_hh).T
                                                          + np.abs(w[2]) + np.abs(w[3]))
    es, et = SIGMOID_MAX_ABS_ERROR[method], TANH_MAX_ABS_ERROR[method]
    sig = lambda v: 0.5 * (1.0 + np.tanh(0.5 * v))  # noqa: E731
    i, f, g, o = (z[:, k * H:(k + 1) * H] for k in range(4))
    e_i, e_f, e_g, e_o = (ez[:, k * H:(k + 1) * H] for k in range(4))
    i, f, g, o = sig(i), sig(f), np.tanh(g), sig(o)
    e_i, e_f, e_o, e_g = e_i / 4 + es, e_f / 4 + es, e_o / 4 + es, e_g + et
    c_new = f * c64 + i * g
    e_c = np.abs(c64) * e_f + np.abs(g) * e_i + (np.abs(i) + e_i) * e_g + 2 * EPS * (np.abs(f * c64) + np.abs(i * g))
    t = np.tanh(c_new)
    e_h = np.abs(t) * e_o + (np.abs(o) + e_o) * (e_c + et) + EPS * np.abs(o * t)
    return max(float(np.max(np.abs(h1[0] - o * t) / e_h)), float(np.max(np.abs(c1[0] - c_new) / e_c)))


def check_lstm(rng) -> Tuple[bool, str]:
    """nnkern.LSTM: a step per activation method against float64 under the documented per-step bound, and
    lengths= bit-identical to running each sequence alone."""
    import nnkern
    I, H, B, seq = 29, 53, 11, 4  # tails of every unit block (MR) and column group (NR)
    s = 0.5
    w = [rng.uniform(-s, s, shape).astype(np.float32) for shape in ((4 * H, I), (4 * H, H), (4 * H,), (4 * H,))]
    x = rng.standard_normal((seq, B, I)).astype(np.float32)
    h, c = rng.standard_normal((B, H)).astype(np.float32), rng.standard_normal((B, H)).astype(np.float32)
    worst = 0.0
    for method in ("accurate", "scalef", "minimax"):
        worst = max(worst, _lstm_step_ratio(nnkern.LSTM(*w, activation=method), w, x[0], h, c, method))
    lstm = nnkern.LSTM(*w)
    lengths = rng.integers(0, seq + 1, B)
    out, (h_n, _) = lstm(x, lengths=lengths)
    same = all(np.array_equal(out[:L, b], lstm(x[:L, b:b + 1])[0][:, 0]) and not out[L:, b].any()
               for b, L in enumerate(lengths.tolist()))
    return worst <= 1.0 and same, f"step err/bound {worst:.3f}; lengths vs alone {'identical' if same else 'DIFFER'}"


def check_activations(rng) -> Tuple[bool, str]:
    """sigmoid / tanh, every method: a grid of [-20, 20], random inputs up to +-100 and the special values,
    within the documented bounds of float64; +-0, +-inf and NaN exactly."""
    import nnkern
    from ..activations import ACTIVATION_METHODS, SIGMOID_MAX_ABS_ERROR, TANH_MAX_ABS_ERROR
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -1e30, -88.0, -89.0, -100.0], np.float32)
    x = np.concatenate([special, np.linspace(-20, 20, 200001, dtype=np.float32),
                        rng.uniform(-100, 100, 10000).astype(np.float32)])
    x64 = x.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(-np.abs(x64))
        want = {"sigmoid": np.where(x64 >= 0, 1.0 / (1.0 + e), e / (1.0 + e)), "tanh": np.tanh(x64)}
    exact = {"sigmoid": [0.5, 0.5, 1.0, 0.0], "tanh": [0.0, -0.0, 1.0, -1.0]}
    worst, ok = 0.0, True
    for fn, bounds in (("sigmoid", SIGMOID_MAX_ABS_ERROR), ("tanh", TANH_MAX_ABS_ERROR)):
        for m in ACTIVATION_METHODS:
            y = getattr(nnkern, fn)(x, method=m)
            fin = ~np.isnan(x)
            worst = max(worst, float(np.max(np.abs(y[fin] - want[fn][fin]))) / bounds[m])
            ok = ok and np.isnan(y[4]) and list(y[:4]) == exact[fn] and not np.isnan(y[fin]).any()
            ok = ok and np.array_equal(np.signbit(y[:2]), [False, fn == "tanh"])
    return ok and worst <= 1.0, f"err/bound {worst:.3f}, special values exact" if ok else "special values wrong"


#: The F(m x m, 3 x 3) matrices (kernels/f32_winograd.h), by m, for the bound's magnitudes.
_B_T = {2: np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], float),
       4: np.array([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0], [0, -2, -1, 2, 1, 0],
                    [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]], float)}
_G = {2: np.array([[1, 0, 0], [.5, .5, .5], [.5, -.5, .5], [0, 0, 1]]),
     4: np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6], [1 / 24, 1 / 12, 1 / 6],
                  [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]])}
_A_T = {2: np.array([[1, 1, 1, 0], [0, 1, -1, -1]], float),
       4: np.array([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]], float)}


def winograd_reference(x, w, b, padding, groups, m):
    """(float64 convolution, Winograd's bound) for a 3x3 stride-1 layer (x NHWC, w OHWI, b or None, padding
    (top, bottom, left, right)): the magnitudes carried through the transforms of each m x m tile, as
    nnkern.Conv2d's docstring states the bound. The self-check's reference and the tests' (tests/test_winograd.py)."""
    N, H, W, IC = x.shape
    OC = w.shape[0]
    pt, pb, pl, pr = padding
    OH, OW = H + pt + pb - 2, W + pl + pr - 2
    th, tw = -(-OH // m), -(-OW // m)
    alpha = m + 2
    xp = np.zeros((N, th * m + 2, tw * m + 2, IC))
    xp[:, pt:pt + H, pl:pl + W] = x
    # exact: the plain convolution of the padded input
    out = np.zeros((N, th * m, tw * m, OC))
    ICg, OCg = IC // groups, OC // groups
    w64 = w.astype(np.float64)
    for g in range(groups):
        cs, os_ = slice(g * ICg, (g + 1) * ICg), slice(g * OCg, (g + 1) * OCg)
        for kh in range(3):
            for kw in range(3):
                out[..., os_] += xp[:, kh:kh + th * m, kw:kw + tw * m, cs] @ w64[os_, kh, kw, :].T
    # magnitudes: |B^T| |d| |B| per tile, |G| |g| |G^T| per filter, summed products, |A^T| . |A|
    idx = np.arange(th)[:, None] * m + np.arange(alpha)[None, :]
    jdx = np.arange(tw)[:, None] * m + np.arange(alpha)[None, :]
    d = np.abs(xp[:, idx[:, :, None, None], jdx[None, None, :, :], :])  # N, th, alpha, tw, alpha, IC
    bt, gm, at = np.abs(_B_T[m]), np.abs(_G[m]), np.abs(_A_T[m])
    v = np.einsum("ai,ntiujc,bj->ntuabc", bt, d, bt)
    u = np.einsum("ai,oijc,bj->oabc", gm, np.abs(w64), gm)
    mag = np.zeros((N, th, tw, alpha, alpha, OC))
    for g in range(groups):
        mag[..., g * OCg:(g + 1) * OCg] = np.einsum("ntuabc,oabc->ntuabo", v[..., g * ICg:(g + 1) * ICg],
                                                    u[g * OCg:(g + 1) * OCg])
    y_mag = np.einsum("ia,ntuabo,jb->ntiujo", at, mag, at).reshape(N, th * m, tw * m, OC)
    K = 9 * ICg
    bound = (2 * K + 24) * EPS * y_mag[:, :OH, :OW] + 1e-30
    out = out[:, :OH, :OW]
    if b is not None:
        out = out + b.astype(np.float64)
        bound = bound + 2 * EPS * np.abs(b.astype(np.float64))
    return out, bound


def check_winograd(rng) -> Tuple[bool, str]:
    """Conv2d's Winograd algorithms (F(4x4) and F(2x2)), channel and tile tails, under their bound."""
    import nnkern
    worst = 0.0
    for (N, H, W, C, OC) in ((1, 9, 7, 19, 21), (2, 6, 11, 8, 40)):
        x = rng.uniform(-1, 1, (N, H, W, C)).astype(np.float32)
        w = rng.uniform(-1, 1, (OC, 3, 3, C)).astype(np.float32)
        b = rng.uniform(-1, 1, OC).astype(np.float32)
        for algorithm, m in (("winograd", 4), ("winograd_2x2", 2)):
            y = nnkern.Conv2d(w, b, padding=1, algorithm=algorithm)(x)
            want, bound = winograd_reference(x, w, b, (1, 1, 1, 1), 1, m)
            worst = max(worst, float(np.max(np.abs(y - want) / bound)))
    return worst <= 1.0, f"err/bound {worst:.3f}"


def _bf16_round(x):
    """float32 -> the nearest bf16 value (ties to even) as float64: the operands' rounding at "medium"."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return (((u + 0x7FFF + ((u >> 16) & 1)) >> 16 << 16).astype(np.uint32)).view(np.float32).astype(np.float64)


def check_bf16(rng) -> Tuple[bool, str]:
    """matmul at precision "medium" (bf16 products, float32 sums): tails, odd K, a bias'd Linear, within the
    float32 bound of the rounded operands' exact product."""
    import nnkern
    worst = 0.0
    for M, N, K in ((1, 1, 1), (17, 13, 9), (5, 49, 64), (100, 70, 301)):
        a = rng.standard_normal((M, K)).astype(np.float32)
        b = rng.standard_normal((K, N)).astype(np.float32)
        a64, b64 = _bf16_round(a), _bf16_round(b)
        bound = (K + 2) * EPS * (np.abs(a64) @ np.abs(b64)) + np.finfo(np.float32).tiny
        got = nnkern.matmul(a, b, precision="medium")
        worst = max(worst, float(np.max(np.abs(got - a64 @ b64) / bound)))
        bias = rng.standard_normal(N).astype(np.float32)
        got = nnkern.Linear(np.ascontiguousarray(b.T), bias, precision="medium")(a)
        worst = max(worst, float(np.max(np.abs(got - (a64 @ b64 + bias)) / (bound + 2 * EPS * np.abs(bias)))))
    return worst <= 1.0, f"err/bound {worst:.3f}"


def run(report: Callable[[str], None] = print) -> bool:
    """Print one PASS/FAIL line per (ISA, check); True when everything passed."""
    import nnkern
    all_ok = True
    rng = np.random.default_rng(2024)
    for isa in nnkern.supported_isas():
        with nnkern.max_isa(isa):
            kern = nnkern.cpu_info()["kernels"].get("f32_gemm", "?")
            checks: List[Tuple[str, Callable]] = [
                (f"sgemm {M}x{N}x{K} NN/NT/TN/TT+alpha/beta", lambda M=M, N=N, K=K: check_sgemm_shape(M, N, K, rng))
                for M, N, K in SGEMM_CHECK_SHAPES]
            checks += [("Linear bias/relu, 1-3 D inputs", lambda: check_linear(rng)),
                       ("sgemm threads", lambda: check_threads(rng))]
            if hasattr(nnkern, "LSTM"):
                checks += [("LSTM step vs float64 (3 methods), lengths", lambda: check_lstm(rng))]
            qkern = nnkern.cpu_info()["kernels"].get("u8s8_gemm", "?").split(" ")[0]
            akern = nnkern.cpu_info()["kernels"].get("f32_sigmoid", "?").split("|")[0]
            checks += [(("act", akern), "sigmoid/tanh, all methods, special values", lambda: check_activations(rng))]
            wkern = nnkern.cpu_info()["kernels"].get("f32_winograd", "?")
            checks += [(("conv", wkern), "Conv2d Winograd F(4x4), F(2x2), tails", lambda: check_winograd(rng))]
            bkern = nnkern.cpu_info()["kernels"].get("bf16_gemm", "?")
            checks += [(("bf16", bkern), "matmul / Linear at precision medium (bf16)", lambda: check_bf16(rng))]
            if hasattr(nnkern, "qgemm"):
                checks += [(("int8", qkern), "qgemm u8/s8 x s8, zero points, qgemm16", lambda: check_qgemm(rng)),
                           (("int8", qkern), "quantize, QLinear requantization", lambda: check_quant(rng))]
            for item in checks:
                name, fn = item[-2], item[-1]
                kname = item[0][1] if len(item) == 3 else kern
                try:
                    ok, detail = fn()
                except Exception as e:  # a crash in a check is a FAIL, not a traceback
                    ok, detail = False, f"{type(e).__name__}: {e}"
                all_ok &= ok
                report(f"{'PASS' if ok else 'FAIL'}  {isa:<10} {kname:<24} {name:<42} {detail}")
    return all_ok
