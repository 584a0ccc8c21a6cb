"""Conv2d / conv2d (NHWC FP32 convolution): every algorithm of the "conv2d" table on every f32_gemm kernel this
CPU runs (test id = kernel name; ISAs the CPU lacks skip naming the ISA) against a float64 convolution within
the documented bound, over a seeded sweep of kernel sizes (1x1 .. 7x7, 1x7, 7x1), strides 1-3, asymmetric
padding, dilation 1-2, channels 1..70, groups and depthwise, spatial sizes 1..40 and batches > 1; the fused
activations against their unfused formulas; thread counts bit for bit; the indirection cache; pickling,
from_torch, the NCHW call and hostile inputs."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

import nnkern
from nnkern import _C
import os

from conftest import at_kernel_level, conv_kernel_paths, require_level
from helpers import (EPS, QUICK, check_within_bound, describe_process, rand, run_concurrently, run_script_isolated,
                     same_for_thread_counts)

TABLE = _C.algorithms("conv2d")
# The algorithms under the direct bound that apply to any window; Winograd's (3x3 stride 1 only, its own bound)
# are tested in tests/test_winograd.py.
ALGORITHMS = [a for a in TABLE if not a.startswith("winograd") and a != "bf16"]  # bf16: tests/test_bf16.py
FAMILY = dict(_C.conv2d_algorithm_families())  # the kernels each algorithm runs, as C++ lists them


@pytest.fixture(params=conv_kernel_paths(ALGORITHMS))
def path(request):
    """(algorithm, kernel name) of every algorithm on every kernel it can run, with the ISA cap at the kernel's
    level; skipped, naming the ISA, where this CPU lacks it."""
    yield from at_kernel_level(request.param)

KERNEL_SHAPES = [(1, 1), (3, 3), (5, 5), (7, 7), (1, 7), (7, 1), (2, 3)]


def ref_conv(x, w, b, stride, padding, dilation, groups):
    """(float64 convolution, its bound (2 K + 2) eps sum |x w| + 2 eps |b|)."""
    N, H, W, IC = x.shape
    OC, KH, KW, ICg = w.shape
    pt, pb, pl, pr = padding
    (sh, sw), (dh, dw) = stride, dilation
    xp = np.zeros((N, H + pt + pb, W + pl + pr, IC), np.float64)
    xp[:, pt:pt + H, pl:pl + W] = x
    OH = (H + pt + pb - dh * (KH - 1) - 1) // sh + 1
    OW = (W + pl + pr - dw * (KW - 1) - 1) // sw + 1
    out = np.zeros((N, OH, OW, OC))
    mag = np.zeros((N, OH, OW, OC))
    OCg = OC // groups
    w64 = w.astype(np.float64)
    for g in range(groups):
        for kh in range(KH):
            for kw in range(KW):
                patch = xp[:, kh * dh:kh * dh + sh * (OH - 1) + 1:sh, kw * dw:kw * dw + sw * (OW - 1) + 1:sw,
                           g * ICg:(g + 1) * ICg]
                wg = w64[g * OCg:(g + 1) * OCg, kh, kw, :].T
                out[..., g * OCg:(g + 1) * OCg] += patch @ wg
                mag[..., g * OCg:(g + 1) * OCg] += np.abs(patch) @ np.abs(wg)
    K = KH * KW * ICg
    bound = (2 * K + 2) * EPS * mag + 1e-30
    if b is not None:
        out += b.astype(np.float64)
        bound += 2 * EPS * np.abs(b.astype(np.float64))
    return out, bound


def random_config(rng, algorithm=""):
    KH, KW = KERNEL_SHAPES[rng.integers(len(KERNEL_SHAPES))]
    groups = int(rng.choice([1, 1, 1, 2, 3]))
    depthwise = algorithm == "depthwise" or rng.random() < 0.15
    ICg = 1 if depthwise else int(rng.integers(1, 71 // groups + 1))
    if depthwise:
        groups = int(rng.integers(1, 71))
    OCg = int(rng.integers(1, 71 // groups + 1)) if not depthwise else int(rng.choice([1, 2]))
    if algorithm == "depthwise":  # channel multiplier 1 only
        OCg = 1
    mgemm = algorithm == "mgemm"
    sh, sw = (int(v) for v in rng.integers(1, 4, 2))
    dh, dw = (int(v) for v in rng.integers(1, 3, 2))
    if mgemm:  # its kernels need stride == dilation along W
        sw = dw
    pad = tuple(int(v) for v in rng.integers(0, 4, 4))
    span_h, span_w = dh * (KH - 1) + 1, dw * (KW - 1) + 1
    H = int(rng.integers(max(1, span_h - pad[0] - pad[1]), 41))
    W = int(rng.integers(max(1, span_w - pad[2] - pad[3]), 41))
    N = int(rng.choice([1, 1, 2, 3]))
    return dict(N=N, H=H, W=W, IC=ICg * groups, OC=OCg * groups, KH=KH, KW=KW, groups=groups, stride=(sh, sw),
                dilation=(dh, dw), padding=pad)


def for_algorithm(cfg, algorithm):
    """cfg made depthwise (groups = in = out channels) when the algorithm is "depthwise"."""
    if algorithm != "depthwise":
        return cfg
    return dict(cfg, IC=cfg["OC"], groups=cfg["OC"])


def make(rng, cfg, bias=True, **kw):
    x = rand(rng, cfg["N"], cfg["H"], cfg["W"], cfg["IC"])
    w = rand(rng, cfg["OC"], cfg["KH"], cfg["KW"], cfg["IC"] // cfg["groups"])
    b = rand(rng, cfg["OC"]) if bias else None
    layer = nnkern.Conv2d(w, b, stride=cfg["stride"], padding=cfg["padding"], dilation=cfg["dilation"],
                          groups=cfg["groups"], **kw)
    return x, w, b, layer


N_CONFIGS = 12 if QUICK else 60


def test_algorithms_listed():
    assert set(TABLE) == set(FAMILY) and set(TABLE) - set(ALGORITHMS) == {"winograd", "winograd_2x2", "bf16"}
    assert _C.kernel_list("f32_conv_direct")[0]["level"] == "scalar"  # direct runs everywhere


def test_large_windows_every_kernel_and_algorithm(path):
    """Windows past every kernel's size classes (9x9, 11x11, 8x9) and long 1xK / Kx1 ones, several channel blocks."""
    algorithm, kernel = path
    rng = np.random.default_rng(sum(map(ord, "large" + algorithm + kernel)))
    for i, (KH, KW) in enumerate([(9, 9), (11, 11), (8, 9), (1, 17), (17, 1), (3, 13)]):
        C = (32, 70)[i % 2]
        cfg = dict(N=2, H=KH + 3, W=KW + 2, IC=(3, 5)[i % 2], OC=C, KH=KH, KW=KW, groups=1,
                   stride=(1, 1 + i % 2), dilation=(1, 1), padding=(KH // 2, (KH - 1) // 2, KW // 2, (KW - 1) // 2))
        if algorithm == "dot":
            cfg.update(IC=C, OC=(3, 5)[i % 2])
        if algorithm == "mgemm":
            cfg.update(stride=(1, 1))
        cfg = for_algorithm(cfg, algorithm)
        x, w, b, layer = make(rng, cfg)
        want, bound = ref_conv(x, w, b, cfg["stride"], cfg["padding"], cfg["dilation"], cfg["groups"])
        check_within_bound(layer._run(x, None, algorithm, kernel), want, bound, f"{algorithm} {kernel} {KH}x{KW}")


def test_sweep_every_kernel_and_algorithm(path):
    algorithm, kernel = path
    rng = np.random.default_rng(sum(map(ord, algorithm + kernel)))
    for i in range(N_CONFIGS):
        cfg = random_config(rng, algorithm)
        x, w, b, layer = make(rng, cfg, bias=bool(i % 2))
        y = layer._run(x, None, algorithm, kernel)
        ref, bound = ref_conv(x, w, b, cfg["stride"], cfg["padding"], cfg["dilation"], cfg["groups"])
        check_within_bound(y, ref, bound, f"{algorithm} {kernel} {cfg}")


def test_channel_and_pixel_tails(path, rng):
    # every channel remainder of the kernels' blocks (8 .. 64 channels, 1-4 vectors) and every pixel count of a
    # row's interior up to 40 (tiles of 4 .. 24 pixels and their 8 / 4 / 2 / 1 pieces), edges on both sides
    algorithm, kernel = path
    for OC in range(1, 66) if not QUICK else (1, 7, 16, 17, 33, 48, 49, 64, 65):
        W = 1 + OC % 40
        IC, groups = (OC, OC) if algorithm == "depthwise" else (1 + OC % 5, 1)
        cfg = dict(N=1, H=3 + OC % 19, W=W, IC=IC, OC=OC, KH=3, KW=3, groups=groups, stride=(1, 1),
                   dilation=(1, 1), padding=(1, 1, 1, 1))
        x, w, b, layer = make(rng, cfg)
        y = layer._run(x, None, algorithm, kernel)
        check_within_bound(y, *ref_conv(x, w, b, (1, 1), (1, 1, 1, 1), (1, 1), groups), f"{algorithm} {kernel} OC={OC}")


GUARD_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conv_guard_check.py")


def test_no_access_past_guard_page(path):
    """Input, weights and output ending at an unmapped page (tests/conv_guard_check.py, in a subprocess)."""
    algorithm, kernel = path
    proc = run_script_isolated(GUARD_SCRIPT, algorithm, kernel)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("OK"), describe_process(proc)


def test_pixels_do_not_depend_on_the_image_height(path, rng):
    # Each output's summation order depends only on its own window (the fused blocks rely on it): the rows of a
    # truncated image whose windows do not reach the cut equal the full image's, bit for bit, on every kernel.
    algorithm, kernel = path
    compared = 0
    for i in range(8 if QUICK else 16):
        cfg = random_config(rng, algorithm)
        if cfg["H"] < 4:
            continue
        x, w, b, layer = make(rng, cfg)
        full = layer._run(x, None, algorithm, kernel)
        cut = int(rng.integers(cfg["H"] // 2, cfg["H"]))
        try:
            layer.output_shape(x[:, :cut].shape)
        except ValueError:  # the window does not fit the cut image
            continue
        part = layer._run(np.ascontiguousarray(x[:, :cut]), None, algorithm, kernel)
        (sh, _), (dh, _), pt = layer.stride, layer.dilation, layer.padding[0]
        span = dh * (cfg["KH"] - 1)
        rows = [oh for oh in range(part.shape[1]) if oh * sh - pt + span < cut]
        np.testing.assert_array_equal(part[:, rows], full[:, rows], err_msg=f"{algorithm} {kernel} {cfg} cut {cut}")
        compared += len(rows)
    assert compared > 0


def test_mgemm_applies_only_with_stride_equal_dilation_and_a_kernel(rng):
    x = rand(rng, 1, 8, 8, 2)
    with pytest.raises(ValueError, match="does not apply"):  # stride 2, dilation 1 along W
        nnkern.Conv2d(rand(rng, 4, 3, 3, 2), stride=(1, 2), padding=1)._run(x, None, "mgemm", "")
    with nnkern.max_isa("scalar"), pytest.raises(ValueError, match="does not apply"):  # no scalar mGEMM kernel
        nnkern.Conv2d(rand(rng, 4, 3, 3, 2), padding=1)._run(x, None, "mgemm", "")


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("activation, method", [("relu", "accurate"), ("relu6", "accurate"), ("sigmoid", "accurate"),
                                                ("silu", "accurate"), ("sigmoid", "minimax"), ("silu", "scalef"),
                                                ("hardswish", "accurate"), ("hardsigmoid", "accurate"),
                                                ("leaky_relu", "accurate"), ("tanh", "accurate"), ("tanh", "minimax")])
@pytest.mark.parametrize("residual, OC", [(False, 37), (True, 37), (False, 8), (True, 8)])
def test_fused_activation_equals_unfused(rng, algorithm, activation, method, residual, OC):
    """The activation in the epilogue or post-ops gives the separate op's bits; with a residual (a ResNet
    shortcut), after the add: activation(conv + bias + residual), the add rounded once, as the separate Add.
    8 channels: blocks of whole pixels, which the post-ops take as one row."""
    cfg = for_algorithm(dict(N=2, H=9, W=13, IC=5, OC=OC, KH=3, KW=3, groups=1, stride=(1, 1), dilation=(1, 1),
                             padding=(1, 1, 1, 1)), algorithm)
    x, w, b, plain = make(rng, cfg)
    x *= 4  # reach relu6's clamp, the hard activations' corners and sigmoid's tails
    params = {"hardsigmoid": dict(activation_alpha=0.3, activation_beta=0.4),
              "leaky_relu": dict(activation_alpha=0.1)}.get(activation, {})
    fused = nnkern.Conv2d(w, b, padding=1, groups=cfg["groups"], activation=activation, activation_method=method,
                          algorithm=algorithm, **params)
    t = plain._run(x, None, algorithm, "")
    r = rand(rng, *t.shape) * 4 if residual else None
    y = fused(x, residual=r)
    if residual:
        t = t + r
    f32 = np.float32
    if activation == "relu":
        want = np.maximum(t, 0)
    elif activation == "relu6":
        want = np.minimum(np.maximum(t, 0), 6)
    elif activation == "hardswish":  # the ONNX op's formula in float32: x * clip(x / 6 + 0.5, 0, 1)
        want = t * np.clip(f32(1) / f32(6) * t + f32(0.5), f32(0), f32(1))
    elif activation == "hardsigmoid":
        want = np.clip(f32(0.3) * t + f32(0.4), f32(0), f32(1))
    elif activation == "leaky_relu":
        want = np.where(t < 0, t * f32(0.1), t)
    elif activation == "tanh":
        want = nnkern.tanh(t, method=method)
    else:
        s = nnkern.sigmoid(t, method=method)
        want = s if activation == "sigmoid" else (t * s).astype(np.float32)
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("activation", ["sigmoid", "silu", "tanh"])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_indirect_kernel_activations_over_whole_pixels(rng, activation, threads):
    """The indirect algorithm runs sigmoid / SiLU / tanh over a block's whole pixels where there are blocks enough
    for the threads (every channel panel of the block in one task), else per panel: the separate op's bits either
    way, with and without a residual, one group or several, channels past the last panel."""
    nnkern.set_num_threads(threads)
    f32 = np.float32
    for N, H, W, IC, OC, groups in [(2, 37, 41, 6, 37, 1), (1, 33, 20, 8, 64, 2), (1, 6, 5, 6, 40, 1)]:
        x = rand(rng, N, H, W, IC) * 4
        w = rand(rng, OC, 3, 3, IC // groups)
        b = rand(rng, OC)
        plain = nnkern.Conv2d(w, b, padding=1, groups=groups, algorithm="indirect")
        fused = nnkern.Conv2d(w, b, padding=1, groups=groups, algorithm="indirect", activation=activation)
        t = plain(x)
        for r in (None, rand(rng, *t.shape)):
            s = t if r is None else t + r
            want = {"sigmoid": lambda: nnkern.sigmoid(s), "tanh": lambda: nnkern.tanh(s),
                    "silu": lambda: (s * nnkern.sigmoid(s)).astype(f32)}[activation]()
            np.testing.assert_array_equal(fused(x, residual=r), want, err_msg=str((N, H, W, IC, OC, groups, r is None)))


# Layers whose residual the GEMM adds in its tiles' epilogue, each reaching another path of the GEMM: (N, H, W, IC,
# OC, KH, groups). One pixel (the GEMV), 3 outputs over 160 inputs (sgemm's dot path), 600 inputs (K blocks: the
# residual on the last only), a 24 x 24 x 64 output (the block order), tails of both tile sides, groups.
RESIDUAL_GEMM_LAYERS = [(1, 1, 1, 20, 37, 1, 1), (1, 5, 7, 160, 3, 1, 1), (1, 9, 9, 600, 40, 1, 1),
                        (1, 24, 24, 16, 64, 1, 1), (2, 9, 13, 7, 37, 3, 1), (2, 6, 5, 12, 22, 3, 2),
                        (1, 3, 4, 9, 5, 1, 1)]


@pytest.fixture(params=conv_kernel_paths(["im2col", "indirect"]))
def gemm_path(request):
    yield from at_kernel_level(request.param)


@pytest.mark.parametrize("activation", [None, "relu", "relu6"])
def test_residual_in_the_gemm_epilogue(rng, gemm_path, activation):
    """The GEMM algorithms add the residual in their tiles' epilogue, the clamp after it: the bits of the layer
    without activation, then the add, then the clamp (each rounded once), on every path of the GEMM and with the
    layer packed under another ISA cap than the call's, above or below (the weights are then packed again for the
    call's kernel: the bits of a layer packed under its cap)."""
    algorithm, kernel = gemm_path
    clamp = {None: lambda t: t, "relu": lambda t: np.maximum(t, 0), "relu6": lambda t: np.clip(t, 0, 6)}[activation]
    for N, H, W, IC, OC, KH, groups in RESIDUAL_GEMM_LAYERS:
        w, b = rand(rng, OC, KH, KH, IC // groups), rand(rng, OC)
        x = rand(rng, N, H, W, IC)
        plain = nnkern.Conv2d(w, b, padding=KH // 2, groups=groups)
        fused = nnkern.Conv2d(w, b, padding=KH // 2, groups=groups, activation=activation)
        packed_elsewhere = {}
        for cap in (nnkern.ISA_LEVELS[-1], "scalar"):
            packed_elsewhere[cap] = nnkern.Conv2d(w, b, padding=KH // 2, groups=groups, activation=activation)
            with nnkern.max_isa(cap):  # packs the GEMM's weights on its first call
                packed_elsewhere[cap]._run(x, None, algorithm, "")
        t = plain._run(x, None, algorithm, kernel)
        r = rand(rng, *t.shape) * 4
        want = clamp(t + r)
        what = f"{algorithm} {kernel} {activation} {(N, H, W, IC, OC, KH, groups)}"
        np.testing.assert_array_equal(fused._run(x, None, algorithm, kernel, residual=r), want, err_msg=what)
        for cap, layer in packed_elsewhere.items():
            np.testing.assert_array_equal(layer._run(x, None, algorithm, kernel, residual=r), want,
                                          err_msg=f"{what} packed under the cap {cap}")


def test_residual_is_checked_and_follows_the_layout(rng):
    """residual=: the output's shape and float32, never sharing memory with out; in the NCHW call, NCHW too; NaN
    and Inf in it pass through the add and the clamp as through the separate ops."""
    x, w, b = rand(rng, 2, 7, 8, 6), rand(rng, 10, 3, 3, 6), rand(rng, 10)
    layer = nnkern.Conv2d(w, b, padding=1, activation="relu")
    plain = nnkern.Conv2d(w, b, padding=1)(x)
    r = rand(rng, 2, 7, 8, 10)
    r[0, 1, 2, 3], r[1, 0, 0, 0], r[1, 6, 7, 9] = np.nan, np.inf, -np.inf
    want = np.maximum(plain + r, 0)
    want[0, 1, 2, 3] = np.nan
    np.testing.assert_array_equal(layer(x, residual=r), want)
    np.testing.assert_array_equal(layer(x, residual=r[:, ::-1].copy()[:, ::-1]), want)  # any strides: copied
    nchw = layer(x.transpose(0, 3, 1, 2), residual=r.transpose(0, 3, 1, 2), layout="NCHW")
    np.testing.assert_array_equal(nchw, want.transpose(0, 3, 1, 2))
    with pytest.raises(ValueError, match="residual"):
        layer(x, residual=r[:, :6])
    with pytest.raises(TypeError, match="residual"):
        layer(x, residual=r.astype(np.float64))
    out = np.zeros_like(r)
    with pytest.raises(ValueError, match="overlap"):
        layer(x, out=out, residual=out)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_threads_bit_identical(rng, algorithm):
    cfg = for_algorithm(dict(N=2, H=23, W=19, IC=24, OC=72, KH=3, KW=3, groups=1, stride=(1, 1), dilation=(1, 1),
                             padding=(1, 1, 1, 1)), algorithm)
    x, w, b, layer = make(rng, cfg, activation="silu")
    same_for_thread_counts(lambda: layer._run(x, None, algorithm, ""))


@pytest.fixture(params=conv_kernel_paths(["depthwise"]))
def depthwise_path(request):
    """(algorithm, kernel) of the depthwise algorithm on each kernel, as `path`."""
    yield from at_kernel_level(request.param)


def test_depthwise_chunks_of_blocks(rng, depthwise_path):
    """Depthwise tasks run chunks of channel blocks at each tile, as many chunks as the thread count asks for on a
    small image: every chunking (and the partial last block, 100 = 6 x 16 + 4 channels) gives the same bits,
    within the bound; rows run as tiles down a band, edges and the whole band's full rows alike."""
    algorithm, kernel = depthwise_path
    for N, H, W, stride in [(1, 6, 9, 1), (2, 11, 13, 2)]:
        C = 100
        x, w, b = rand(rng, N, H, W, C), rand(rng, C, 3, 3, 1), rand(rng, C)
        layer = nnkern.Conv2d(w, b, stride=stride, padding=1, groups=C)
        y = same_for_thread_counts(lambda: layer._run(x, None, algorithm, kernel), counts=(1, 2, 3, 4, 7))
        check_within_bound(y, *ref_conv(x, w, b, (stride, stride), (1, 1, 1, 1), (1, 1), C), f"{kernel} N={N}")


@pytest.mark.parametrize("level", nnkern.ISA_LEVELS)
def test_auto_rule(rng, level):
    require_level(level)
    # auto takes mgemm / direct where their kernels are ahead (AVX-512 levels; NEON by its instruction counts, not
    # measured on hardware), direct on the stems (at most 4 input channels) at every SIMD level, dot wherever a
    # SIMD dot kernel runs
    wide = level in ("avx512", "avx512vnni", "avx512bf16", "amx", "neon", "neondot", "neoni8mm", "neonbf16")
    stems = level != "scalar"
    simd_dot = level != "scalar"
    with nnkern.max_isa(level):
        pw = nnkern.Conv2d(rand(rng, 16, 1, 1, 8))
        assert pw.algorithm_for((1, 10, 10, 8)) == "im2col"
        assert pw.workspace_bytes((1, 10, 10, 8), "im2col") == 0  # a plain GEMM on the input rows
        assert pw.algorithm_for((1, 60, 60, 8)) == "im2col"  # the plain GEMM at any width
        dw = nnkern.Conv2d(rand(rng, 8, 3, 3, 1), padding=1, groups=8)
        assert dw.algorithm_for((1, 10, 10, 8)) == "depthwise"
        k3 = nnkern.Conv2d(rand(rng, 64, 3, 3, 8), padding=1)
        k3s2 = nnkern.Conv2d(rand(rng, 64, 3, 3, 8), padding=1, stride=2)
        # mgemm where a row holds a whole tile inside the image, else direct (SIMD levels), else indirect
        assert k3.algorithm_for((1, 56, 56, 8)) == ("mgemm" if wide else "indirect")
        assert k3.algorithm_for((1, 3, 3, 8)) == "indirect"  # narrow: mostly window edges
        assert k3.algorithm_for((1, 14, 14, 8)) == ("direct" if wide else "indirect")  # one mgemm tile per row
        stem = nnkern.Conv2d(rand(rng, 16, 7, 7, 3), stride=2, padding=3)
        assert stem.algorithm_for((1, 30, 30, 3)) == ("direct" if stems else "indirect")
        assert stem.algorithm_for((1, 7, 7, 3)) == ("direct" if stems else "indirect")  # narrow, still a stem
        # stride 2 (no mgemm): past 4 input channels the wide rule; ResNeXt's 4-channel groups are no stem
        five = nnkern.Conv2d(rand(rng, 16, 3, 3, 5), padding=1, stride=2)
        assert five.algorithm_for((1, 30, 30, 5)) == ("direct" if wide else "indirect")
        groups4 = nnkern.Conv2d(rand(rng, 16, 3, 3, 4), padding=1, stride=2, groups=4)
        assert groups4.algorithm_for((1, 30, 30, 16)) == ("direct" if wide else "indirect")
        assert k3s2.algorithm_for((1, 56, 56, 8)) == ("direct" if wide else "indirect")
        low_oc = nnkern.Conv2d(rand(rng, 3, 3, 3, 64), padding=1)  # few output channels, whole input vectors
        assert low_oc.algorithm_for((1, 20, 20, 64)) == ("dot" if simd_dot else "indirect")
        assert nnkern.Conv2d(rand(rng, 3, 3, 3, 8), padding=1).algorithm_for((1, 20, 20, 8)) != "dot"
        for layer in (k3, k3s2, dw):  # every algorithm but im2col works without scratch
            for a in ALGORITHMS:
                if a != "im2col" and (a != "mgemm" or (level != "scalar" and layer is not k3s2)) and (
                        a != "depthwise" or layer is dw):
                    assert layer.workspace_bytes((1, 10, 10, 8), a) == 0
        assert k3.workspace_bytes((1, 10, 10, 8), "im2col") >= 100 * 72 * 4


def test_concurrent_calls_share_one_layer(rng):
    # first calls race to pack each algorithm's weights and build the indirection buffers
    layer = nnkern.Conv2d(rand(rng, 24, 3, 3, 8), rand(rng, 24), padding=1, activation="silu")
    xs = [rand(rng, 1 + t % 2, 9 + t, 11, 8) for t in range(6)]
    want = [[layer._run(x, None, a, "") for a in ALGORITHMS if a != "depthwise"] for x in xs]
    fresh = nnkern.Conv2d(layer.weight, layer.bias, padding=1, activation="silu")
    got = [None] * len(xs)

    def work(t):
        got[t] = [fresh._run(xs[t], None, a, "") for a in ALGORITHMS if a != "depthwise"]

    run_concurrently(work, len(xs))
    for g, w in zip(got, want):
        for a, b in zip(g, w):
            np.testing.assert_array_equal(a, b)


def test_indirection_cache(rng):
    cfg = dict(N=1, H=12, W=12, IC=4, OC=8, KH=3, KW=3, groups=1, stride=(1, 1), dilation=(1, 1),
               padding=(1, 1, 1, 1))
    x, w, b, layer = make(rng, cfg, algorithm="indirect")
    y0 = layer(x)
    builds = layer._packed.indirection_builds
    x2 = x.copy()  # another address, same shape: the cached buffer serves it
    np.testing.assert_array_equal(layer(x2), y0)
    assert layer._packed.indirection_builds == builds
    layer(rand(rng, 2, 12, 12, 4))  # another shape: a new buffer
    assert layer._packed.indirection_builds == builds + 1
    np.testing.assert_array_equal(layer(x), y0)


def test_indirection_cache_is_bounded(rng):
    """A 31x31 layer on 8 input shapes: each buffer is ~30 MB (961 taps per pixel); the cache keeps the least recently
    used ones only while they total 64 MiB and 8 shapes, the one in use always, and recomputes what it dropped."""
    limit = 64 << 20
    w = rand(rng, 4, 31, 31, 2)
    q = nnkern.QConv2d(w, padding=15, input_scale=0.02, input_zero_point=3, output_dtype=np.int32,
                       algorithm="indirect")
    layer = nnkern.Conv2d(w, padding=15, algorithm="indirect")
    first = rand(rng, 1, 60, 64, 2)
    y_first, q_first = layer(first), q(np.full(first.shape, 7, np.uint8))
    for i in range(8):
        x = rand(rng, 1, 61 + i, 64, 2)
        layer(x)
        q(np.full(x.shape, 7, np.uint8))
        for lay in (layer, q):
            one = 4096 * (61 + i) // 64 * 961 * 8
            assert lay._packed.indirection_bytes <= max(limit, one * 1.1), (i, lay._packed.indirection_bytes)
    builds = layer._packed.indirection_builds
    np.testing.assert_array_equal(layer(first), y_first)  # dropped long ago: rebuilt, the same result
    np.testing.assert_array_equal(q(np.full(first.shape, 7, np.uint8)), q_first)
    assert layer._packed.indirection_builds == builds + 1


def test_pickle_repr_and_properties(rng):
    w, b = rand(rng, 6, 3, 2, 2), rand(rng, 6)
    layer = nnkern.Conv2d(w, b, stride=(2, 1), padding=(1, 0, 2, 1), dilation=(1, 2), groups=2, activation="relu6")
    x = rand(rng, 2, 9, 8, 4)
    clone = pickle.loads(pickle.dumps(layer))
    np.testing.assert_array_equal(clone(x), layer(x))
    assert (clone.stride, clone.padding, clone.dilation, clone.groups) == ((2, 1), (1, 0, 2, 1), (1, 2), 2)
    assert "Conv2d(in_channels=4, out_channels=6" in repr(layer)
    assert not layer.weight.flags.writeable and not layer.bias.flags.writeable
    leaky = nnkern.Conv2d(w, b, groups=2, activation="leaky_relu", activation_alpha=0.25)
    clone = pickle.loads(pickle.dumps(leaky))
    assert (clone.activation, clone.activation_alpha, clone.activation_beta) == ("leaky_relu", 0.25, None)
    np.testing.assert_array_equal(clone(x), leaky(x))
    assert (nnkern.Conv2d(w, activation="hardsigmoid").activation_alpha,
            nnkern.Conv2d(w, activation="hardsigmoid").activation_beta) == (np.float64(0.2), 0.5)


def test_out_argument_and_noncontiguous_input(rng):
    w = rand(rng, 5, 3, 3, 4)
    x = rand(rng, 1, 10, 10, 8)[..., ::2]  # a strided view
    layer = nnkern.Conv2d(w, padding=1)
    want = layer(np.ascontiguousarray(x))
    out = np.empty((1, 10, 10, 5), np.float32)
    assert layer(x, out) is out
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(nnkern.conv2d(x, w, padding=1), want)


def test_nchw_layout_is_the_nhwc_call_transposed(rng):
    w, b = rand(rng, 7, 3, 3, 5), rand(rng, 7)
    layer = nnkern.Conv2d(w, b, padding=1)
    x = rand(rng, 2, 5, 9, 11)  # NCHW
    y = layer(x, layout="NCHW")
    np.testing.assert_array_equal(y, layer(np.ascontiguousarray(x.transpose(0, 2, 3, 1))).transpose(0, 3, 1, 2))
    with pytest.raises(ValueError, match="NCHW"):
        layer(x.transpose(0, 2, 3, 1), layout="NCHW")


def test_from_torch(rng):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    for kwargs in [dict(padding="same", dilation=2), dict(stride=2, padding=(1, 2), groups=3, bias=False),
                   dict(padding="valid", groups=6)]:
        m = torch.nn.Conv2d(6, 12, (3, 5), **kwargs)
        layer = nnkern.Conv2d.from_torch(m, activation="relu")
        x = rand(rng, 2, 11, 13, 6)
        with torch.no_grad():
            want = torch.relu(m(torch.from_numpy(x).permute(0, 3, 1, 2))).permute(0, 2, 3, 1).numpy()
        np.testing.assert_allclose(layer(x), want, rtol=1e-5, atol=1e-5)
    with pytest.raises(TypeError, match="torch.nn.Conv2d"):
        nnkern.Conv2d.from_torch(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="padding_mode"):
        nnkern.Conv2d.from_torch(torch.nn.Conv2d(2, 2, 3, padding_mode="reflect"))


def test_bad_inputs(rng):
    w = rand(rng, 4, 3, 3, 2)
    layer = nnkern.Conv2d(w, padding=1)
    x = rand(rng, 1, 5, 5, 2)
    bad_layers = [
        (dict(weight=w.astype(np.float64)), TypeError, "float32"),
        (dict(weight=w[0]), ValueError, "4-D"),
        (dict(weight=w[:0]), ValueError, "zero-size"),
        (dict(weight=w, groups=3), ValueError, "divide"),
        (dict(weight=w, groups=0), ValueError, ">= 1"),
        (dict(weight=w, stride=0), ValueError, "stride"),
        (dict(weight=w, padding=-1), ValueError, "padding"),
        (dict(weight=w, padding=(1, 2, 3)), ValueError, "padding"),
        (dict(weight=w, dilation=(1, 2, 3)), ValueError, "dilation"),
        (dict(weight=w, stride=2**40), ValueError, "stride"),
        (dict(weight=w, bias=rand(rng, 3)), ValueError, "bias"),
        (dict(weight=w, bias=np.zeros(4)), TypeError, "float32"),
        (dict(weight=w, activation="gelu"), ValueError, "activation"),
        (dict(weight=w, activation=1), TypeError, "activation"),
        (dict(weight=w, activation="silu", activation_method="fast"), ValueError, "activation_method"),
        (dict(weight=w, activation="relu", activation_alpha=0.1), ValueError, "not a parameter"),
        (dict(weight=w, activation="leaky_relu", activation_beta=0.1), ValueError, "not a parameter"),
        (dict(weight=w, activation="leaky_relu", activation_alpha=float("nan")), ValueError, "finite"),
        (dict(weight=w, activation="hardsigmoid", activation_alpha="0.2"), ValueError, "finite"),
        (dict(weight=w, algorithm="fft"), ValueError, "algorithm"),
        (dict(weight=w, precision="low"), ValueError, "precision"),
        (dict(weight=w, precision=1), TypeError, "precision"),
        (dict(weight=w, stride=1.5), TypeError, "stride"),
        (dict(weight=[[1.0]]), TypeError, "list"),
    ]
    for kwargs, exc, match in bad_layers:
        kwargs = dict(kwargs)
        with pytest.raises(exc, match=match):
            nnkern.Conv2d(kwargs.pop("weight"), **kwargs)
    with pytest.raises(TypeError, match="float32"):
        layer(x.astype(np.float64))
    with pytest.raises(ValueError, match="4-D"):
        layer(x[0])
    with pytest.raises(ValueError, match="channels"):
        layer(rand(rng, 1, 5, 5, 3))
    with pytest.raises(ValueError, match="larger than the padded input"):
        nnkern.Conv2d(rand(rng, 4, 7, 7, 2))(x)
    with pytest.raises(ValueError, match="H, W >= 1"):
        layer(np.zeros((1, 0, 5, 2), np.float32))
    with pytest.raises(ValueError, match="shape"):
        layer(x, np.empty((1, 5, 5, 3), np.float32))
    with pytest.raises(TypeError, match="dtype"):
        layer(x, np.empty((1, 5, 5, 4), np.float64))
    with pytest.raises(ValueError):
        layer(x, out=x[..., :1].repeat(2, -1)[..., :0])
    with pytest.raises(ValueError, match="layout"):
        layer(x, layout="NWHC")
    assert layer(np.zeros((0, 5, 5, 2), np.float32)).shape == (0, 5, 5, 4)
    xs = np.zeros((1, 5, 5, 4), np.float32)
    with pytest.raises(ValueError, match="overlap"):  # out aliasing x
        nnkern.Conv2d(rand(rng, 4, 3, 3, 4), padding=1)(xs, xs)


def test_nan_and_inf_propagate(rng):
    x = rand(rng, 1, 6, 6, 2)
    x[0, 2, 2, :] = np.nan
    x[0, 5, 5, :] = np.inf
    for algorithm in ALGORITHMS:
        groups = 2 if algorithm == "depthwise" else 1
        w = rand(rng, 2, 3, 3, 2 // groups)
        y = nnkern.Conv2d(w, padding=1, groups=groups, algorithm=algorithm)(x)
        assert np.isnan(y[0, 1:4, 1:4]).all()
        assert not np.isfinite(y[0, 4:, 4:]).any()
        assert np.isfinite(y[0, 0, 0]).all()


# --- the fused inverted-residual block ---------------------------------------------------------------------------

def _block_layers(rng, IC, t, OC, stride, kernel=3, dilation=1, algorithms=("auto", "auto", "auto")):
    hid = IC * t
    pad = dilation * (kernel - 1) // 2
    ex = None if t == 1 else nnkern.Conv2d(rand(rng, hid, 1, 1, IC), rand(rng, hid), activation="relu6",
                                          algorithm=algorithms[0])
    dw = nnkern.Conv2d(rand(rng, hid, kernel, kernel, 1), rand(rng, hid), stride=stride, padding=pad,
                       dilation=dilation, groups=hid, activation="relu6", algorithm=algorithms[1])
    pr = nnkern.Conv2d(rand(rng, OC, 1, 1, hid), rand(rng, OC), algorithm=algorithms[2])
    return ex, dw, pr


@pytest.mark.parametrize("N, H, W, IC, t, OC, stride, kernel, dilation", [
    (1, 112, 112, 16, 6, 24, 2, 3, 1), (2, 29, 31, 24, 6, 24, 1, 3, 1), (1, 7, 9, 8, 1, 8, 1, 3, 1),
    (3, 5, 1, 4, 3, 4, 1, 3, 1), (1, 13, 11, 8, 4, 16, 2, 5, 1), (1, 17, 17, 6, 2, 6, 1, 3, 2),
    (1, 1, 1, 5, 2, 7, 1, 3, 1), (2, 40, 6, 3, 5, 9, 3, 3, 1)])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_inverted_residual_equals_layer_by_layer(rng, N, H, W, IC, t, OC, stride, kernel, dilation, threads):
    nnkern.set_num_threads(threads)
    ex, dw, pr = _block_layers(rng, IC, t, OC, stride, kernel, dilation)
    residual = stride == 1 and IC == OC
    block = nnkern.InvertedResidual(ex, dw, pr, residual=residual)
    x = rand(rng, N, H, W, IC)
    want = pr(dw(ex(x) if ex else x))
    if residual:
        want = want + x
    np.testing.assert_array_equal(block(x), want)
    out = np.full(block.output_shape(x.shape), np.nan, np.float32)
    assert block(x, out) is out
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("threads", [1, 2])
def test_inverted_residual_bands_in_the_padding(rng, threads):
    """Bands of output rows lying wholly in the depthwise layer's padding (a 1x1 depthwise with padding 1 or 3, a
    3x3 with padding 4) run on a zero row where the three layers one by one see zero padding: the same bits."""
    nnkern.set_num_threads(threads)
    for IC, hidden, k, pad, H, W, stride in [(31, 43, 1, 1, 53, 55, 1), (8, 16, 1, 3, 7, 5, 1), (8, 12, 3, 4, 9, 6, 1),
                                             (6, 6, 1, 2, 1, 1, 1), (8, 16, 3, 4, 10, 7, 2)]:
        e = nnkern.Conv2d(rand(rng, hidden, 1, 1, IC), rand(rng, hidden), activation="relu6")
        d = nnkern.Conv2d(rand(rng, hidden, k, k, 1), rand(rng, hidden), groups=hidden, padding=pad, stride=stride,
                          activation="relu6")
        p = nnkern.Conv2d(rand(rng, IC, 1, 1, hidden), rand(rng, IC))
        x = rand(rng, 2, H, W, IC)
        for block, want in ((nnkern.InvertedResidual(e, d, p), p(d(e(x)))),
                            (nnkern.InvertedResidual(None, nnkern.Conv2d(d.weight[:IC], d.bias[:IC], groups=IC,
                                                                         padding=pad, stride=stride),
                                                     nnkern.Conv2d(rand(rng, IC, 1, 1, IC))), None)):
            if want is None:
                want = block.project(block.depthwise(x))
            np.testing.assert_array_equal(block(x), want)


def test_inverted_residual_band_per_thread_on_small_images(rng):
    """A small image (its slices fit the cache whole) runs one band per thread when each gets two rows or more, so
    the threads run the three layers without meeting between them; fewer rows: one band, each layer on the pool.
    The same bits as layer by layer either way (the test above, at 1 to 3 threads)."""
    ex, dw, pr = _block_layers(rng, 8, 4, 8, 1)
    block = nnkern.InvertedResidual(ex, dw, pr, residual=True)
    for threads, H, rows in [(1, 14, 14), (2, 14, 7), (3, 14, 5), (2, 7, 4), (2, 3, 3), (4, 7, 7)]:
        nnkern.set_num_threads(threads)  # the conftest fixture restores the count
        assert block._block.rows_per_band(H, H) == rows, (threads, H)
        x = rand(rng, 1, H, H, 8)
        np.testing.assert_array_equal(block(x), pr(dw(ex(x))) + x, err_msg=f"{threads} threads, {H} rows")


def test_inverted_residual_uses_each_layers_algorithm(rng):
    x = rand(rng, 1, 30, 30, 8)
    for algorithms in [("direct", "depthwise", "direct"), ("indirect", "depthwise", "im2col"),
                       ("im2col", "direct", "indirect")]:
        ex, dw, pr = _block_layers(rng, 8, 4, 8, 1, algorithms=algorithms)
        np.testing.assert_array_equal(nnkern.InvertedResidual(ex, dw, pr, residual=True)(x), pr(dw(ex(x))) + x)


def test_inverted_residual_bad_inputs(rng):
    ex, dw, pr = _block_layers(rng, 8, 4, 8, 1)
    s2 = _block_layers(rng, 8, 4, 8, 2)[1]
    bad = [((dw, dw, pr), {}, ValueError, "expansion must be 1x1"),
           ((ex, pr, pr), {}, ValueError, "depthwise"),
           ((ex, dw, dw), {}, ValueError, "projection must be 1x1"),
           ((ex, dw, _block_layers(rng, 8, 3, 8, 1)[2]), {}, ValueError, "do not chain"),
           ((ex, s2, pr), {"residual": True}, ValueError, "residual"),
           ((ex, dw, _block_layers(rng, 8, 4, 5, 1)[2]), {"residual": True}, ValueError, "residual"),
           ((ex, dw, None), {}, TypeError, "project"),
           ((ex, "dw", pr), {}, TypeError, "depthwise"),
           ((ex, dw, pr), {"residual": 1}, TypeError, "residual")]
    for args, kw, exc, match in bad:
        with pytest.raises(exc, match=match):
            nnkern.InvertedResidual(*args, **kw)
    block = nnkern.InvertedResidual(ex, dw, pr, residual=True)
    x = rand(rng, 1, 6, 6, 8)
    with pytest.raises(ValueError, match="channels"):
        block(rand(rng, 1, 6, 6, 5))
    with pytest.raises(TypeError, match="float32"):
        block(x.astype(np.float64))
    with pytest.raises(ValueError, match="overlap"):
        block(x, x)
    with pytest.raises(ValueError, match="shape"):
        block(x, np.empty((1, 6, 6, 7), np.float32))
    assert block(np.zeros((0, 6, 6, 8), np.float32)).shape == (0, 6, 6, 8)
    assert "InvertedResidual(in_channels=8" in repr(block)
