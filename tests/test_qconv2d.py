"""QConv2d (NHWC INT8 convolution): bit-exact against a numpy int64 reference convolution for every algorithm
of the "qconv2d" table and every integer GEMM micro-kernel this CPU runs (test id = kernel name; kernels of
ISAs the CPU lacks skip naming the ISA), over a seeded sweep of kernel sizes (1x1 .. 7x7, 1x7, 7x1), strides
1-3, asymmetric padding 0-3, dilation 1-2, channels 1..70, groups and depthwise (multiplier 1 and 2), spatial
sizes 1..40 and batches > 1, uint8 and int8 activations at their extremes with zero points at the limits, and
every output dtype; the fused ReLU / requantization equal the int32 output followed by the formula in numpy;
thread counts, the indirection cache (addresses, shapes, threads), pickling, from_torch and hostile inputs.
"""
from __future__ import annotations

import os

import copy
import pickle

import numpy as np
import pytest

import nnkern
from nnkern import _C
from helpers import QUICK, describe_process, run_concurrently, run_script_isolated
from qhelpers import QGEMM_KERNELS, epilogue_ref, has_panels, runnable, weight_range
from test_qgemm import qisa  # noqa: F401  (the per-ISA fixture of the dispatched path)

ALGORITHMS = _C.algorithms("qconv2d")
QDWCONV_KERNELS = _C.kernel_list("qdwconv")
QCONV_DIRECT_KERNELS = _C.kernel_list("qconv_direct")
DIRECT_GUARD_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "qconv_direct_guard_check.py")
DW_GUARD_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "qdwconv_guard_check.py")
INDIRECT_GUARD_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "qconv_indirect_guard_check.py")
KERNEL_SHAPES = [(1, 1), (3, 3), (5, 5), (7, 7), (1, 7), (7, 1)]
OUT_KIND = {np.dtype(np.float32): "f32", np.dtype(np.uint8): "u8", np.dtype(np.int8): "s8"}


def ref_conv(x, wq, zx, stride, padding, dilation, groups):
    """sum over the window and the group's channels of (x - zx) * wq in int64; padding reads zx."""
    N, H, W, IC = x.shape
    OC, KH, KW, ICg = wq.shape
    pt, pb, pl, pr = padding
    (sh, sw), (dh, dw) = stride, dilation
    xp = np.full((N, H + pt + pb, W + pl + pr, IC), zx, np.int64)
    xp[:, pt:pt + H, pl:pl + W] = x
    xp -= zx
    OH = (H + pt + pb - dh * (KH - 1) - 1) // sh + 1
    OW = (W + pl + pr - dw * (KW - 1) - 1) // sw + 1
    out = np.zeros((N, OH, OW, OC), np.int64)
    OCg = OC // groups
    w64 = wq.astype(np.int64)
    for g in range(groups):
        for kh in range(KH):
            for kw in range(KW):
                patch = xp[:, kh * dh:kh * dh + sh * (OH - 1) + 1:sh, kw * dw:kw * dw + sw * (OW - 1) + 1:sw,
                           g * ICg:(g + 1) * ICg]
                out[..., g * OCg:(g + 1) * OCg] += patch @ w64[g * OCg:(g + 1) * OCg, kh, kw, :].T
    return out


def ref_layer(layer, x):
    return ref_conv(x, layer.weight, layer.input_zero_point, layer.stride, layer.padding, layer.dilation, layer.groups)


def unfused(layer, acc):
    """The layer's output stage applied in numpy to int32 accumulators (N, OH, OW, OC)."""
    odt = layer.output_dtype
    flat = acc.reshape(-1, acc.shape[-1]).T  # channels x pixels, as the kernels' tiles
    if odt == np.int32:
        y = epilogue_ref(flat, "i32", relu=layer.relu)
    else:
        y = epilogue_ref(flat, OUT_KIND[odt], scale=layer.factor, bias=layer.offset, relu=layer.relu,
                         lo=layer._lo, hi=layer._hi)
    return y.T.reshape(acc.shape)


def direct_auto():
    """Whether auto may pick "direct" under the ISA cap: its dispatched kernel is a VNNI one, not the scalar
    reference (kernels/qconv_direct_list.h)."""
    return not _C.cpu_info()["kernels"]["u8s8_conv_direct"].endswith("__scalar")


def algorithms_for(layer, x_shape):
    """The table's entries that apply to the layer on an input of this shape, as C++ decides."""
    return layer._packed.applicable_algorithms(*x_shape[:3])


def rand_x(rng, dtype, shape, extreme=None):
    info = np.iinfo(dtype)
    if extreme == "max":
        return np.full(shape, info.max, dtype)
    if extreme == "min":
        return np.full(shape, info.min, dtype)
    return rng.integers(info.min, info.max + 1, shape, dtype=dtype)


def make_layer(rng, OC, KH, KW, ICg, output_dtype=np.int32, relu=False, weight_max=127, **kw):
    """weight_max below 127: int8 weights quantized to [-weight_max, weight_max] (the 7-bit kernels' 64)."""
    w = rng.standard_normal((OC, KH, KW, ICg)).astype(np.float32)
    if weight_max < 127:
        scale = np.maximum(np.abs(w).reshape(OC, -1).max(axis=1), 1e-6).astype(np.float32) / weight_max
        w = np.clip(np.rint(w / scale[:, None, None, None]), -weight_max, weight_max).astype(np.int8)
        kw["weight_scale"] = scale
    args = dict(input_scale=0.02, input_zero_point=kw.pop("input_zero_point", 128), output_dtype=output_dtype,
                relu=relu)
    if output_dtype != np.int32:
        b = rng.uniform(-2, 2, OC).astype(np.float32)
    else:
        b = None
    if output_dtype in (np.uint8, np.int8):
        K = KH * KW * ICg
        args.update(output_scale=0.02 * np.sqrt(K) / 3, output_zero_point=100 if output_dtype == np.uint8 else -5)
    args.update(kw)
    return nnkern.QConv2d(w, b, **args)


def random_config(rng, kinds=("plain", "plain", "groups", "dw1", "dw2"), shapes=KERNEL_SHAPES):
    """One seeded convolution of the sweep (sizes kept small enough for the scalar kernels)."""
    KH, KW = shapes[rng.integers(len(shapes))]
    stride = tuple(int(v) for v in rng.integers(1, 4, 2))
    dilation = tuple(int(v) for v in rng.integers(1, 3, 2))
    padding = tuple(int(v) for v in rng.integers(0, 4, 4))
    kind = rng.choice(list(kinds))
    if kind == "plain":
        groups, IC, OC = 1, int(rng.integers(1, 71)), int(rng.integers(1, 71))
    elif kind == "groups":
        groups = int(rng.choice([2, 3, 4]))
        IC, OC = groups * int(rng.integers(1, 18)), groups * int(rng.integers(1, 18))
    else:  # depthwise, channel multiplier 1 or 2
        groups = IC = int(rng.integers(1, 71))
        OC = IC * (1 if kind == "dw1" else 2)
    span_h, span_w = dilation[0] * (KH - 1) + 1, dilation[1] * (KW - 1) + 1
    H = max(int(rng.integers(1, 41)), span_h - padding[0] - padding[1])
    W = max(int(rng.integers(1, 41)), span_w - padding[2] - padding[3])
    N = int(rng.integers(1, 4))
    # keep the work (multiply-adds) bounded
    while N * H * W * OC * KH * KW * (IC // groups) > 3e6 and (H > span_h or W > span_w or N > 1):
        N, H, W = max(1, N - 1), max(span_h, H * 2 // 3, 1), max(span_w, W * 2 // 3, 1)
    return dict(KH=KH, KW=KW, IC=IC, OC=OC, groups=groups, stride=stride, dilation=dilation, padding=padding,
                N=N, H=H, W=W)


@pytest.fixture(params=QGEMM_KERNELS, ids=[k["name"] for k in QGEMM_KERNELS])
def qkernel(request):
    """Each integer GEMM micro-kernel of the list, run through the layer's test hook."""
    return runnable(request.param)


def weight_max(kernel):
    """The largest weight the layers given to `kernel` may have (64 for the 7-bit kernels: their range's top)."""
    return weight_range(kernel, np.int8)[1]


N_CONFIGS = 16 if QUICK else 200


def sweep(rng, n_configs, weight_max=127, **config_kw):
    """The seeded sweep: (description, layer, x, the reference output) per configuration."""
    out_dtypes = [np.int32, np.uint8, np.int8, np.float32]
    for i in range(n_configs):
        c = random_config(rng, **config_kw)
        if i % 8 == 0:  # pointwise: im2col runs the plain GEMM on the input rows (groups too)
            c.update(KH=1, KW=1, stride=(1, 1), padding=(0, 0, 0, 0))
        xdt = (np.uint8, np.int8)[i % 2]
        info = np.iinfo(xdt)
        zx = int(rng.choice([info.min, info.max, int(rng.integers(info.min, info.max + 1))]))
        odt = out_dtypes[i % 4]
        relu = bool(rng.integers(2))
        layer = make_layer(rng, c["OC"], c["KH"], c["KW"], c["IC"] // c["groups"], odt, relu,
                           input_zero_point=zx, stride=c["stride"], padding=c["padding"], dilation=c["dilation"],
                           groups=c["groups"], weight_max=weight_max)
        x = rand_x(rng, xdt, (c["N"], c["H"], c["W"], c["IC"]), extreme=[None, None, "max", "min"][i % 4])
        want = unfused(layer, ref_layer(layer, x))
        yield f"{c} {xdt.__name__} zx={zx} {odt.__name__} relu={relu}", layer, x, want


def test_sweep_bit_exact_every_kernel_and_algorithm(qkernel):
    # the same sweep for every kernel (the 7-bit kernels: its weights in 7 bits)
    for desc, layer, x, want in sweep(np.random.default_rng(11), N_CONFIGS, weight_max(qkernel)):
        for alg in algorithms_for(layer, x.shape):
            got = layer._run(x, None, alg, qkernel)
            assert got.dtype == want.dtype
            assert np.array_equal(got, want), f"{qkernel} {alg} {desc}"


def test_indirect_no_access_past_guard_page(qkernel):
    """Input channels 1..9 per group (each tail of the K group, read whole away from the input's end), windows,
    strides, groups and batches with the input and output ending at an unmapped page
    (tests/qconv_indirect_guard_check.py, in a subprocess: a fault fails this test only)."""
    proc = run_script_isolated(INDIRECT_GUARD_SCRIPT, qkernel)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("OK"), describe_process(proc)


@pytest.fixture(params=QDWCONV_KERNELS, ids=[k["name"] for k in QDWCONV_KERNELS])
def dwkernel(request):
    """Each depthwise micro-kernel of the list (skipped, naming the ISA, where the CPU lacks it)."""
    return runnable(request.param)


def test_depthwise_no_access_past_guard_page(dwkernel):
    """Every channel tail of the depthwise kernel with input and output ending at an unmapped page; in a
    subprocess (tests/qdwconv_guard_check.py), so a fault fails this test only."""
    proc = run_script_isolated(DW_GUARD_SCRIPT, dwkernel)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("OK"), describe_process(proc)


def test_sweep_depthwise_every_dwconv_kernel(dwkernel):
    """The sweep restricted to depthwise layers (multiplier 1 and 2; 1x1 .. 7x7, 3x1, 1x5; channels 1..70, so
    every tail of the vector width) on each qdwconv kernel, "auto" picking "depthwise" for all of them but the
    single-channel ones (one group: a plain convolution to auto)."""
    shapes = KERNEL_SHAPES + [(3, 1), (1, 5), (2, 2), (4, 6)]
    for desc, layer, x, want in sweep(np.random.default_rng(12), N_CONFIGS, kinds=("dw1", "dw2"), shapes=shapes):
        assert (layer._packed.auto_algorithm(*x.shape[:3]) == "depthwise") == (layer.groups > 1), desc
        got = layer._run(x, None, "depthwise", dwkernel)
        assert got.dtype == want.dtype and np.array_equal(got, want), f"{dwkernel} {desc}"


# Windows past every kernel's size classes: the depthwise kernels' 8x8 (64 taps) resolved on the stack, the
# GEMM kernels' taps, the direct and low_ofm kernels' rows; long 1xK / Kx1 ones.
LARGE_WINDOWS = [(9, 9), (11, 11), (8, 9), (1, 17), (17, 1), (3, 13)]


def large_window_layers(rng, groups_kind, weight_max=127):
    """(layer, x) per large window: several channel blocks (32 and 70 channels), padding K // 2 asymmetric, batch 2,
    every output dtype in turn."""
    for i, (KH, KW) in enumerate(LARGE_WINDOWS):
        C = (32, 70)[i % 2]
        odt = (np.int32, np.uint8, np.int8, np.float32)[i % 4]
        groups, ICg, OC = (C, 1, C * (1 + i % 2)) if groups_kind == "depthwise" else (1, (3, 5)[i % 2], C)
        xdt = (np.uint8, np.int8)[i % 2]
        layer = make_layer(rng, OC, KH, KW, ICg, odt, relu=odt != np.int32, groups=groups,
                           padding=(KH // 2, (KH - 1) // 2, KW // 2 + 1, (KW - 1) // 2), stride=(1, 1 + i % 2),
                           input_zero_point=(100, -3)[i % 2], weight_max=weight_max)
        yield layer, rand_x(rng, xdt, (2, KH + 3, KW + 2, ICg * groups))


def test_depthwise_large_windows(dwkernel, rng):
    """Windows past 8x8 (the kernels' large-window path) and long rows / columns, over several channel blocks."""
    for layer, x in large_window_layers(rng, "depthwise"):
        want = unfused(layer, ref_layer(layer, x))
        assert np.array_equal(layer._run(x, None, "depthwise", dwkernel), want), (dwkernel, layer)


def test_gemm_and_direct_large_windows(qkernel, rng):
    for layer, x in large_window_layers(rng, "plain", weight_max(qkernel)):
        want = unfused(layer, ref_layer(layer, x))
        for alg in ("im2col", "indirect"):
            assert np.array_equal(layer._run(x, None, alg, qkernel), want), (qkernel, alg, layer)


def test_direct_large_windows(directkernel, rng):
    for layer, x in large_window_layers(rng, "plain"):
        assert np.array_equal(layer._run(x, None, "direct", directkernel), unfused(layer, ref_layer(layer, x)))


@pytest.mark.parametrize("C", [1, 7, 8, 9, 15, 16, 17, 31, 33, 63, 65, 70, 97])
@pytest.mark.parametrize("m", [1, 2])
def test_depthwise_channel_tails(dwkernel, C, m, rng):
    """Every channel count around the vector width and block (8, 16; AVX-512: 16, 32, 64; NEON: 8, 16, 32), both
    input dtypes and every output; rows of 4 + (0..3) output pixels (the kernels take up to 4 pixels at a time)."""
    for i, (odt, xdt) in enumerate([(np.int32, np.uint8), (np.uint8, np.int8), (np.int8, np.uint8),
                                    (np.float32, np.int8)]):
        layer = make_layer(rng, C * m, 3, 3, 1, odt, relu=odt != np.int32, groups=C, padding=(1, 2, 0, 1),
                           input_zero_point=int(np.iinfo(xdt).min + 3))
        x = rand_x(rng, xdt, (2, 6, 5 + (C + i) % 4, C))
        assert np.array_equal(layer._run(x, None, "depthwise", dwkernel), unfused(layer, ref_layer(layer, x)))


@pytest.mark.parametrize("xdt,zx,extreme", [(np.uint8, 0, "max"), (np.uint8, 255, "min"), (np.int8, -128, "max"),
                                            (np.int8, 127, "min")])
def test_depthwise_extremes(dwkernel, xdt, zx, extreme):
    """|x - zx| and |w| at their maxima, padding taps included, multiplier 2, a 7x7 window."""
    for wv in (-128, 127):
        w = np.full((140, 7, 7, 1), wv, np.int8)
        layer = nnkern.QConv2d(w, weight_scale=1.0, padding=(3, 2, 0, 3), stride=(1, 2), groups=70, input_scale=1.0,
                               input_zero_point=zx, output_dtype=np.int32)
        x = rand_x(None, xdt, (2, 8, 9, 70), extreme=extreme)
        assert np.array_equal(layer._run(x, None, "depthwise", dwkernel), ref_layer(layer, x)), wv


@pytest.fixture(params=QCONV_DIRECT_KERNELS, ids=[k["name"] for k in QCONV_DIRECT_KERNELS])
def directkernel(request):
    """Each direct convolution micro-kernel of the list (skipped, naming the ISA, where the CPU lacks it)."""
    return runnable(request.param)


def test_direct_kernels_listed():
    """The scalar reference direct kernel, and the others only at VNNI levels of this build."""
    levels = [k["level"] for k in QCONV_DIRECT_KERNELS]
    assert "scalar" in levels and set(levels) <= {"scalar", "avxvnni", "avx512vnni"}


def test_sweep_direct_every_direct_kernel(directkernel):
    """The seeded sweep restricted to groups == 1 (1x1 .. 7x7, 1x7, 7x1, 2x2, 4x6; strides 1-3, padding 0-3
    asymmetric, dilation 1-2, IC / OC 1..70, batch 1-3, uint8 / int8 with extreme zero points, every output)
    through each direct kernel, bit-exact against the int64 reference."""
    shapes = KERNEL_SHAPES + [(2, 2), (4, 6), (3, 1)]
    for desc, layer, x, want in sweep(np.random.default_rng(13), N_CONFIGS, kinds=("plain",), shapes=shapes):
        got = layer._run(x, None, "direct", directkernel)
        assert got.dtype == want.dtype and np.array_equal(got, want), f"{directkernel} {desc}"


@pytest.mark.parametrize("OC", [1, 15, 16, 17, 33, 48, 63, 64, 65, 70, 127, 129])
@pytest.mark.parametrize("IC", [1, 3, 4, 5, 8, 67])
def test_direct_channel_tails(directkernel, OC, IC, rng):
    """Every output-channel count around the vector (8, 16) and the 64-channel block, input channels around the
    group of 4, output widths around the 6 / 4 pixel block."""
    for OW in (1, 5, 6, 7, 13):
        odt, xdt = [(np.int32, np.uint8), (np.uint8, np.int8), (np.int8, np.uint8), (np.float32, np.int8)][OW % 4]
        layer = make_layer(rng, OC, 3, 3, IC, odt, relu=odt != np.int32, padding=(1, 2, 0, 1),
                           input_zero_point=int(np.iinfo(xdt).min + 3))
        x = rand_x(rng, xdt, (2, 4, OW + 1, IC))
        assert np.array_equal(layer._run(x, None, "direct", directkernel), unfused(layer, ref_layer(layer, x)))


@pytest.mark.parametrize("xdt,zx,extreme", [(np.uint8, 0, "max"), (np.uint8, 255, "min"), (np.int8, -128, "max"),
                                            (np.int8, 127, "min")])
def test_direct_extremes(directkernel, xdt, zx, extreme):
    """|x - zx| and |w| at their maxima, padding taps included, a 7x7 window, 70 channels (tails everywhere)."""
    for wv in (-128, 127):
        w = np.full((70, 7, 7, 70), wv, np.int8)
        layer = nnkern.QConv2d(w, weight_scale=1.0, padding=(3, 2, 0, 3), stride=(1, 2), input_scale=1.0,
                               input_zero_point=zx, output_dtype=np.int32)
        x = rand_x(None, xdt, (2, 8, 9, 70), extreme=extreme)
        assert np.array_equal(layer._run(x, None, "direct", directkernel), ref_layer(layer, x)), wv


def test_direct_no_access_past_guard_page(directkernel):
    """Input, output tails at an unmapped page (tests/qconv_direct_guard_check.py, in a subprocess)."""
    proc = run_script_isolated(DIRECT_GUARD_SCRIPT, directkernel)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("OK"), describe_process(proc)


def test_direct_does_not_apply(rng):
    """groups > 1, or a padded copy far larger than the input and the windows' reads (huge strides and padding):
    "direct" raises "does not apply". Without VNNI it applies (the scalar kernel), but auto never picks it."""
    x = rand_x(rng, np.uint8, (1, 5, 5, 8))
    with pytest.raises(ValueError, match="does not apply"):
        make_layer(rng, 8, 3, 3, 4, groups=2)._run(x, None, "direct", "")
    for kw in (dict(stride=64, padding=64), dict(stride=40, dilation=40, padding=80)):
        layer = make_layer(rng, 8, 3, 3, 8, **kw)
        assert "direct" not in layer._packed.applicable_algorithms(1, 5, 5)
        with pytest.raises(ValueError, match="does not apply"):
            layer._run(x, None, "direct", "")
    stem = make_layer(rng, 8, 7, 7, 3, stride=2, padding=3)
    for isa in ("scalar", "avx2", "avx512"):
        if isa not in _C.isa_levels():
            continue
        with nnkern.max_isa(isa):
            assert not direct_auto()
            assert "direct" in stem._packed.applicable_algorithms(1, 16, 16)
            assert stem._packed.auto_algorithm(1, 16, 16) == "im2col"


def test_dispatched_path_every_isa(qisa, rng):
    """layer(x) under each ISA cap (the dispatched kernel, auto and every algorithm) for every output dtype."""
    for KH, KW, stride, padding, groups in [(3, 3, 1, 1, 1), (1, 1, 1, 0, 1), (3, 3, 2, (0, 1, 1, 0), 8),
                                            (1, 7, 1, (0, 0, 3, 3), 2), (1, 1, 2, 0, 1), (3, 3, 1, 1, 16)]:
        IC, OC = 16, 24 if groups < 16 else 32
        for odt in (np.int32, np.uint8, np.int8, np.float32):
            for alg in ("auto", *ALGORITHMS):
                layer = make_layer(rng, OC, KH, KW, IC // groups, odt, relu=odt != np.int32, stride=stride,
                                   padding=padding, groups=groups, algorithm=alg)
                x = rand_x(rng, np.uint8, (2, 9, 10, IC))
                if alg != "auto" and alg not in algorithms_for(layer, x.shape):
                    continue
                assert np.array_equal(layer(x), unfused(layer, ref_layer(layer, x))), (qisa, KH, KW, odt, alg)


@pytest.mark.parametrize("xdt,zx,extreme", [(np.uint8, 0, "max"), (np.uint8, 255, "min"), (np.int8, -128, "max"),
                                            (np.int8, 127, "min"), (np.uint8, 128, "max")])
def test_extremes(qkernel, xdt, zx, extreme):
    """|x - zx| and |w| at their maxima everywhere (int8 weights -128 / 127; the 7-bit kernels' -64 / 64), padding
    taps included."""
    for wv in weight_range(qkernel, np.int8):
        w = np.full((9, 3, 3, 70), wv, np.int8)
        layer = nnkern.QConv2d(w, weight_scale=1.0, padding=(2, 1, 0, 3), stride=(1, 2), input_scale=1.0,
                               input_zero_point=zx, output_dtype=np.int32)
        x = rand_x(None, xdt, (2, 5, 6, 70), extreme=extreme)
        want = ref_layer(layer, x)
        for alg in algorithms_for(layer, x.shape):
            assert np.array_equal(layer._run(x, None, alg, qkernel), want), (qkernel, alg, wv)


@pytest.mark.parametrize("odt", [np.uint8, np.int8, np.float32, np.int32])
@pytest.mark.parametrize("relu", [False, True])
def test_fused_equals_unfused(rng, odt, relu):
    """ReLU and requantization fused in the kernels = the int32 output, then the formula in numpy."""
    kw = dict(stride=2, padding=1, input_zero_point=3)
    layer = make_layer(np.random.default_rng(5), 33, 3, 3, 20, odt, relu, **kw)
    i32 = nnkern.QConv2d(layer.weight, weight_scale=layer.weight_scale, output_dtype=np.int32,
                         input_scale=layer.input_scale, **kw)
    x = rand_x(rng, np.uint8, (3, 17, 12, 20))
    acc = i32(x)
    assert np.array_equal(acc, ref_layer(i32, x))
    for alg in algorithms_for(layer, x.shape):
        assert np.array_equal(layer._run(x, None, alg, ""), unfused(layer, acc)), alg
    if odt == np.float32:  # the real value, as the float64 formula
        y = acc * (layer.input_scale * layer.weight_scale.astype(np.float64)) + layer.bias
        assert np.allclose(layer(x), np.maximum(y, 0) if relu else y, rtol=1e-5, atol=1e-4)


def test_threads_bit_identical(rng):
    layers = [make_layer(rng, 40, 3, 3, 24, np.uint8, True, padding=1),
              make_layer(rng, 48, 1, 1, 24, np.int8),
              make_layer(rng, 48, 5, 5, 1, np.float32, groups=24, padding=2),
              make_layer(rng, 130, 3, 3, 24, np.int8, padding=(0, 1, 2, 0), stride=(2, 1))]  # 3 direct blocks
    x = rand_x(rng, np.uint8, (2, 23, 19, 24))
    for layer in layers:
        for alg in algorithms_for(layer, x.shape):
            nnkern.set_num_threads(1)
            one = layer._run(x, None, alg, "")
            for t in (2, 3, 5):
                nnkern.set_num_threads(t)
                assert np.array_equal(layer._run(x, None, alg, ""), one), (alg, t)


def test_indirection_cache_addresses_shapes_threads(rng):
    layer = make_layer(rng, 20, 3, 3, 12, np.int32, padding=(1, 2, 0, 1), stride=(2, 1), algorithm="indirect")
    x = rand_x(rng, np.uint8, (2, 15, 11, 12))
    want = ref_layer(layer, x)
    assert np.array_equal(layer(x), want)
    builds = layer._packed.indirection_builds
    # the same shape at other addresses (copies, an offset view inside a bigger buffer): no rebuild
    big = np.zeros(x.size + 37, np.uint8)
    moved = big[37:].reshape(x.shape)
    moved[...] = x
    for xi in (x.copy(), moved, np.ascontiguousarray(x[::-1][::-1])):
        assert np.array_equal(layer(xi), want)
    assert layer._packed.indirection_builds == builds
    # other shapes (more than the cache keeps), then the first again
    shapes = [(1, 7, 5), (3, 15, 11), (1, 1, 2), (2, 30, 4)] + [(1, 5 + i, 6) for i in range(8)] + [(2, 15, 11)]
    for n, h, w in shapes:
        xi = rand_x(rng, np.uint8, (n, h, w, 12))
        assert np.array_equal(layer(xi), ref_layer(layer, xi)), (n, h, w)
    assert layer._packed.indirection_builds > builds
    # several Python threads at once, each with its own shapes and input arrays
    inputs = [rand_x(np.random.default_rng(t), np.uint8, (1 + t % 2, 6 + t, 9 - t % 3, 12)) for t in range(6)]
    wants = [ref_layer(layer, xi) for xi in inputs]

    def work(t):
        for r in range(5):
            xi = inputs[(t + r) % 6].copy()
            assert np.array_equal(layer(xi), wants[(t + r) % 6])

    run_concurrently(work, 6)


def test_auto_rule_and_algorithm_argument(rng):
    assert ALGORITHMS == ["depthwise", "low_ofm", "direct", "im2col", "indirect"]  # auto tries them in this order
    for ks, kw in ((3, {}), (1, {}), (5, dict(stride=2, padding=2))):  # depthwise: always, pointwise too
        dw = make_layer(rng, 16, ks, ks, 1, groups=8, **kw)
        assert dw._packed.auto_algorithm(1, 9, 9) == "depthwise"
        assert dw._run(rand_x(rng, np.uint8, (1, 9, 9, 8)), None, "auto", "").shape[-1] == 16
    with pytest.raises(ValueError, match="does not apply"):  # groups < in_channels: no depthwise
        make_layer(rng, 8, 3, 3, 2, groups=4)._run(rand_x(rng, np.uint8, (1, 4, 4, 8)), None, "depthwise", "")
    # pointwise: im2col from 32 input channels per group; below, im2col where the kernel runs whole panels in one
    # call (QGemmKernel::run_panels), else indirect (the GEMM driver's per-panel calls cost more than the
    # indirection), under every cap
    assert make_layer(rng, 8, 1, 1, 32)._packed.auto_algorithm(1, 4, 4) == "im2col"
    assert make_layer(rng, 8, 1, 1, 64, groups=2)._packed.auto_algorithm(1, 4, 4) == "im2col"
    few_channels = {}
    for isa in nnkern.supported_isas():
        with nnkern.max_isa(isa):
            want = "im2col" if has_panels(_C.qgemm_kernel_for(8)) else "indirect"
            few_channels[isa] = want
            assert make_layer(rng, 8, 1, 1, 8)._packed.auto_algorithm(1, 4, 4) == want, isa
            assert make_layer(rng, 8, 1, 1, 31)._packed.auto_algorithm(1, 4, 4) == want, isa
    assert few_channels["scalar"] == "indirect" and few_channels.get("avx2", "im2col") == "im2col", few_channels
    for kw in (dict(stride=2), dict(padding=1)):
        assert make_layer(rng, 8, 1, 1, 8, **kw)._packed.auto_algorithm(1, 4, 4) == "indirect"
    assert make_layer(rng, 8, 3, 3, 8)._packed.auto_algorithm(1, 4, 4) == "indirect"
    # >= 25 taps over 1-3 input channels (7x7 stems, 5x5 input layers): direct where a direct kernel runs at the
    # ISA cap, else im2col (one copy of the window instead of a tap's channels padded to 4 and a pointer per tap);
    # one input channel and one group is depthwise only by name: auto treats it as a plain convolution
    stem = make_layer(rng, 64, 7, 7, 3, stride=2, padding=3)
    assert stem._packed.auto_algorithm(1, 16, 16) == ("direct" if direct_auto() else "im2col")
    for c, k in ((3, 5), (2, 5), (1, 7)):
        assert make_layer(rng, 8, k, k, c)._packed.auto_algorithm(1, 9, 9) == (
            "direct" if direct_auto() else "im2col"), (c, k)
    for c, k in ((4, 7), (3, 3), (1, 3)):
        assert make_layer(rng, 8, k, k, c)._packed.auto_algorithm(1, 9, 9) == "indirect", (c, k)
    for isa in ("avx2", "avx512"):  # no direct kernel under these caps
        if isa in _C.isa_levels():
            with nnkern.max_isa(isa):
                assert stem._packed.auto_algorithm(1, 16, 16) == "im2col"
    with pytest.raises(ValueError, match="algorithm"):
        make_layer(rng, 8, 3, 3, 8, algorithm="winograd")
    with pytest.raises(TypeError, match="algorithm"):
        make_layer(rng, 8, 3, 3, 8, algorithm=1)


def test_int8_weights_out_and_layouts(rng):
    w = rng.integers(-128, 128, (6, 3, 2, 4), dtype=np.int8)
    layer = nnkern.QConv2d(w, weight_scale=np.linspace(0.1, 1, 6), input_scale=1.0, input_zero_point=-2,
                           output_dtype=np.int32, padding=1)
    assert layer.weight is not w and np.array_equal(layer.weight, w) and not layer.weight.flags.writeable
    x = rand_x(rng, np.int8, (2, 8, 18, 4))
    want = ref_layer(layer, x)
    xs = x[:, :, ::2]  # non-contiguous: copied
    assert np.array_equal(layer(xs), ref_layer(layer, xs))
    out = np.empty(want.shape, np.int32)
    assert layer(x, out=out) is out and np.array_equal(out, want)
    assert layer(x[:0]).shape == (0,) + want.shape[1:]  # empty batch
    assert layer.output_shape(x.shape) == want.shape


def test_pickle_and_deepcopy(rng):
    layer = make_layer(rng, 10, 3, 1, 3, np.uint8, True, stride=(2, 1), padding=(0, 1, 2, 3), dilation=(1, 2),
                       groups=2, input_zero_point=7, algorithm="im2col")
    x = rand_x(rng, np.uint8, (2, 9, 7, 6))
    for clone in (pickle.loads(pickle.dumps(layer)), copy.deepcopy(layer)):
        assert repr(clone) == repr(layer)
        assert np.array_equal(clone(x), layer(x))


def test_from_torch(rng):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    for kw in (dict(padding=1), dict(padding="same", dilation=2), dict(stride=2, groups=4, bias=False),
               dict(padding=(0, 2), groups=8)):
        conv = torch.nn.Conv2d(8, 16, (3, 5), **kw)
        layer = nnkern.QConv2d.from_torch(conv, 0.05, 128, output_dtype=np.float32)
        x = rand_x(rng, np.uint8, (2, 11, 12, 8))
        xf = (torch.from_numpy(x.astype(np.float32)) - 128) * 0.05
        with torch.no_grad():
            y = conv(xf.permute(0, 3, 1, 2)).permute(0, 2, 3, 1).numpy()
        got = layer(x)
        assert got.shape == y.shape
        # only the weight quantization differs: at most half a weight step per weight times |x| (<= 128 * 0.05)
        K = conv.weight[0].numel()
        tol = 0.5 * layer.weight_scale * K * 128 * 0.05 * (1 + 1e-5) + 1e-4
        assert (np.abs(got - y) <= tol).all(), kw
        # and exactly the layer built from the permuted weight with the same geometry
        same = nnkern.QConv2d(conv.weight.detach().permute(0, 2, 3, 1).contiguous().numpy(),
                              None if conv.bias is None else conv.bias.detach().numpy(), stride=layer.stride,
                              padding=layer.padding, dilation=layer.dilation, groups=layer.groups,
                              input_scale=0.05, input_zero_point=128, output_dtype=np.float32)
        assert np.array_equal(same(x), got)
    with pytest.raises(TypeError, match="Conv2d"):
        nnkern.QConv2d.from_torch(torch.nn.Linear(3, 4), 0.1, 0)
    with pytest.raises(ValueError, match="padding_mode"):
        nnkern.QConv2d.from_torch(torch.nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect"), 0.1, 0)


def test_bad_inputs(rng):
    w = rng.standard_normal((8, 3, 3, 4)).astype(np.float32)
    kw = dict(input_scale=0.1, input_zero_point=0, output_dtype=np.int32)
    bad_ctor = [
        (TypeError, dict(weight=w.astype(np.float64))),
        (ValueError, dict(weight=w[0])),                              # 3-D
        (ValueError, dict(weight=w[:0])),                             # zero-size
        (ValueError, dict(groups=3)),                                 # does not divide OC
        (ValueError, dict(groups=0)),
        (TypeError, dict(groups=2.0)),
        (ValueError, dict(stride=0)),
        (ValueError, dict(stride=(1, 2, 3))),
        (ValueError, dict(padding=-1)),
        (ValueError, dict(padding=(1, 2, 3))),
        (TypeError, dict(padding="same")),
        (ValueError, dict(dilation=(0, 1))),
        (ValueError, dict(stride=2**64)),                             # would overflow the C++ size
        (ValueError, dict(padding=(2**31, 0))),
        (ValueError, dict(dilation=2**40)),
        (ValueError, dict(input_scale=0.0)),
        (ValueError, dict(input_scale=float("nan"))),
        (ValueError, dict(input_zero_point=256)),
        (TypeError, dict(output_dtype=np.float64)),
        (ValueError, dict(output_dtype=np.uint8)),                    # no output_scale
        (ValueError, dict(bias=np.zeros(8, np.float32))),             # int32 output takes no bias
        (ValueError, dict(output_dtype=np.float32, bias=np.zeros(7, np.float32))),
        (ValueError, dict(output_dtype=np.float32, bias=np.full(8, np.inf, np.float32))),
        (ValueError, dict(weight=w.astype(np.int8))),                 # int8 weights need weight_scale
        (TypeError, dict(relu="yes")),
    ]
    for err, change in bad_ctor:
        args = dict(kw, weight=w)
        args.update(change)
        with pytest.raises(err):
            nnkern.QConv2d(args.pop("weight"), args.pop("bias", None), **args)
    layer = nnkern.QConv2d(w, padding=(0, 0, 1, 0), dilation=2, **kw)
    x = rand_x(rng, np.uint8, (1, 6, 6, 4))
    for err, bad in [(TypeError, x.astype(np.int16)), (TypeError, x.astype(np.float32)), (TypeError, [[1, 2]]),
                     (ValueError, x[0]), (ValueError, x[..., :3]),             # channels
                     (ValueError, x[:, :4]), (ValueError, x[:, :, :3]),         # kernel larger than padded input
                     (ValueError, x[:, :0]), (ValueError, x[:, :, :0])]:        # zero-size H / W
        with pytest.raises(err):
            layer(bad)
    with pytest.raises(TypeError, match="out"):
        layer(x, out=np.empty((1, 2, 3, 8), np.float32))
    with pytest.raises(ValueError, match="out"):
        layer(x, out=np.empty((1, 2, 2, 8), np.int32))
    with pytest.raises(ValueError, match="out"):
        layer(x, out=np.empty((1, 2, 3, 16), np.int32)[..., ::2])
    # K bound: a window whose int32 accumulators could overflow
    big = nnkern.QConv2d(np.ones((1, 7, 7, 1400), np.float32), input_scale=1.0, input_zero_point=0,
                         output_dtype=np.int32)
    with pytest.raises(ValueError, match="exceeds"):
        big(np.zeros((1, 7, 7, 1400), np.uint8))
    # an int8 input whose zero point is outside int8
    with pytest.raises(ValueError, match="input_zero_point 200"):
        nnkern.QConv2d(w, input_scale=1.0, input_zero_point=200, output_dtype=np.int32)(x.astype(np.int8))
    # the C++ object checks the arrays on its own
    with pytest.raises((TypeError, ValueError)):
        layer._packed.run(x.astype(np.int8)[..., :2], np.empty((1, 2, 3, 8), np.int32), "auto", "")
    with pytest.raises(ValueError, match="kernel"):
        layer._run(x, None, "auto", "no_such_kernel")


@pytest.mark.parametrize("odt", [np.uint8, np.int8, np.float32])
@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("rdt,zr", [(np.uint8, 131), (np.int8, -7)])
@pytest.mark.parametrize("groups", [1, 16])
def test_residual_equals_unfused(rng, odt, relu, rdt, zr, groups):
    """residual=: t = the float32 pre-activation, + float32((r - zr) * rf), then ReLU / clamp / rint; groups=16:
    a depthwise layer (multiplier 2: 32 channels) through every algorithm, "depthwise" included."""
    kw = dict(padding=(1, 0, 2, 1), stride=(1, 2), input_zero_point=5, groups=groups)
    OC = 24 if groups == 1 else 32
    layer = make_layer(np.random.default_rng(3), OC, 3, 3, 16 // groups, odt, relu, residual_scale=0.07,
                       residual_zero_point=zr, **kw)
    i32 = nnkern.QConv2d(layer.weight, weight_scale=layer.weight_scale, output_dtype=np.int32,
                         input_scale=layer.input_scale, **kw)
    x = rand_x(rng, np.uint8, (2, 13, 14, 16))
    acc = i32(x)
    r = rand_x(rng, rdt, acc.shape)
    t = epilogue_ref(acc.reshape(-1, OC).T, "f32", scale=layer.factor, bias=layer.offset).T.reshape(acc.shape)
    y = t + (r.astype(np.float32) - np.float32(zr)) * np.float32(layer._residual_factor)
    assert y.dtype == np.float32
    if odt == np.float32:
        want = np.maximum(y, np.float32(0)) if relu else y
    else:
        want = np.rint(np.clip(y, np.float32(layer._lo), np.float32(layer._hi))).astype(odt)
    for alg in algorithms_for(layer, x.shape):
        got = layer._run(x, None, alg, "", r)
        assert got.dtype == odt and np.array_equal(got, want), alg
    out = np.empty_like(want)
    assert layer(x, out, residual=r) is out and np.array_equal(out, want)
    assert np.array_equal(pickle.loads(pickle.dumps(layer))(x, residual=r), want)
    if odt == np.uint8 and rdt == np.uint8:
        with pytest.raises(ValueError, match="overlap"):
            layer(x, out=r, residual=r)
    with pytest.raises(ValueError, match="shape"):
        layer(x, residual=r[:, 1:])
    with pytest.raises(TypeError, match="residual"):
        layer(x, residual=r.astype(np.int16))
    with pytest.raises(ValueError, match="without residual_scale"):
        i32(x, residual=r)


@pytest.mark.parametrize("odt", [np.uint8, np.float32])
def test_residual_batch_in_chunks(rng, odt):
    """A batch whose float32 pre-activation exceeds the residual stage's chunk (1 MiB: 40 x 40 x 96 x 4 bytes
    = 600 KiB per image, one image per chunk): each image equals its own call, for every algorithm."""
    layer = make_layer(np.random.default_rng(4), 96, 3, 3, 5, odt, True, padding=1, input_zero_point=9,
                       residual_scale=0.03, residual_zero_point=100)
    x = rand_x(rng, np.uint8, (3, 40, 40, 5))
    r = rand_x(rng, np.uint8, layer.output_shape(x.shape))
    for alg in algorithms_for(layer, x.shape):
        got = layer._run(x, None, alg, "", r)
        for n in range(3):
            assert np.array_equal(got[n:n + 1], layer._run(x[n:n + 1], None, alg, "", r[n:n + 1])), (alg, n)


def test_residual_bad_construction(rng):
    with pytest.raises(ValueError, match="int32"):
        make_layer(rng, 4, 1, 1, 4, np.int32, residual_scale=0.1)
    with pytest.raises(ValueError, match="residual_scale"):
        make_layer(rng, 4, 1, 1, 4, np.uint8, residual_scale=-1.0)
    with pytest.raises(ValueError, match="residual_zero_point"):
        make_layer(rng, 4, 1, 1, 4, np.uint8, residual_zero_point=3)
    layer = make_layer(rng, 4, 1, 1, 4, np.uint8, residual_scale=0.1, residual_zero_point=200)
    with pytest.raises(ValueError, match="outside the range"):
        layer(rand_x(rng, np.uint8, (1, 2, 2, 4)), residual=np.zeros((1, 2, 2, 4), np.int8))


@pytest.mark.parametrize("isa", nnkern.supported_isas())
def test_im2col_dispatches_by_row_depth(isa, rng):
    """im2col without a kernel asked for runs the kernel dispatched for its row's depth K = 7 * 7 * 3 = 147
    (AMX where the CPU has it), not the one for 3 channels per tap: exact on every ISA cap."""
    layer = make_layer(rng, 64, 7, 7, 3, np.int32, padding=3, stride=2, input_zero_point=200)
    x = rand_x(rng, np.uint8, (2, 23, 20, 3))
    with nnkern.max_isa(isa):
        got = layer._run(x, None, "im2col", "", None)
    assert np.array_equal(got, ref_layer(layer, x))


def test_im2col_row_blocks(qkernel, rng):
    """A window of 7 x 7 x 70 on 1800 output pixels: the im2col matrix is built in several row blocks."""
    layer = make_layer(rng, 5, 7, 7, 70, np.int32, padding=3, input_zero_point=77, weight_max=weight_max(qkernel))
    x = rand_x(rng, np.uint8, (2, 30, 30, 70))
    assert np.array_equal(layer._run(x, None, "im2col", qkernel), ref_layer(layer, x))


def test_nchw_layout_is_the_nhwc_call_transposed(rng):
    """layout="NCHW": x, residual and out in torch's order; the values are the NHWC call's, transposed."""
    layer = make_layer(rng, 10, 3, 3, 6, np.uint8, relu=True, padding=1, stride=(1, 2), residual_scale=0.05,
                       residual_zero_point=3)
    x = rand_x(rng, np.uint8, (2, 7, 9, 6))
    r = rand_x(rng, np.uint8, layer.output_shape(x.shape))
    want = layer(x, residual=r).transpose(0, 3, 1, 2)
    x_nchw, r_nchw = np.ascontiguousarray(x.transpose(0, 3, 1, 2)), np.ascontiguousarray(r.transpose(0, 3, 1, 2))
    got = layer(x_nchw, residual=r_nchw, layout="NCHW")
    assert got.shape == want.shape and got.flags.c_contiguous and np.array_equal(got, want)
    out = np.empty(want.shape, np.uint8)
    assert layer(x_nchw, out, residual=r_nchw, layout="NCHW") is out and np.array_equal(out, want)
    plain = make_layer(rng, 5, 1, 1, 6, np.int32)
    assert np.array_equal(plain(x_nchw, layout="NCHW"), plain(x).transpose(0, 3, 1, 2))


@pytest.mark.parametrize("bad, exc", [("nchw", ValueError), ("NHCW", ValueError), ("", ValueError), (None, TypeError),
                                      (0, TypeError)])
def test_layout_argument_is_checked(rng, bad, exc):
    layer = make_layer(rng, 4, 1, 1, 3)
    with pytest.raises(exc, match="layout"):
        layer(np.zeros((1, 2, 2, 3), np.uint8), layout=bad)


def test_nchw_shapes_are_checked(rng):
    layer = make_layer(rng, 4, 3, 3, 3, np.uint8, padding=1, residual_scale=0.1)
    with pytest.raises(ValueError, match="NCHW"):
        layer(np.zeros((1, 5, 5, 3), np.uint8), layout="NCHW")  # NHWC data passed as NCHW: C = 5
    with pytest.raises(ValueError, match="NCHW"):
        layer(np.zeros((3, 5, 5), np.uint8), layout="NCHW")
    x = np.zeros((1, 3, 5, 5), np.uint8)
    with pytest.raises(ValueError, match="out must have shape"):
        layer(x, np.empty((1, 5, 5, 4), np.uint8), layout="NCHW")
    with pytest.raises(ValueError, match="residual"):
        layer(x, residual=np.zeros((1, 5, 5, 4), np.uint8), layout="NCHW")


def test_seven_bit_weights_pick_the_narrow_kernel_where_it_is_the_only_8bit_one(rng):
    """A level whose only 8-bit kernel is exact for weights in [-64, 64] (AVX2's vpmaddubsw one) runs it for
    layers whose weights all are, and widens to int16 for the others; naming it for wider weights is refused."""
    narrow = [k for k in QGEMM_KERNELS if k["weight_bits"] == 7]
    if not narrow:
        pytest.skip("no kernel of this build is exact only for 7-bit weights (x86's AVX2 level has one)")
    for k in narrow:
        if k["level"] not in nnkern.supported_isas():
            pytest.skip(f"CPU lacks {k['level']}")
        x = rand_x(rng, np.uint8, (1, 6, 7, 20))
        with nnkern.max_isa(k["level"]):
            assert nnkern.cpu_info()["kernels"]["u8s8_gemm_7bit_weights"] == k["name"]
            seven = make_layer(rng, 24, 3, 3, 20, np.uint8, padding=1, weight_max=64)
            assert np.abs(seven.weight.astype(int)).max() == 64
            eight = make_layer(rng, 24, 3, 3, 20, np.uint8, padding=1)
            assert seven.kernel == k["name"] and eight.kernel != k["name"]
            linear = nnkern.QLinear(rng.integers(-64, 65, (8, 40)).astype(np.int8), weight_scale=0.01,
                                    input_scale=0.02, input_zero_point=3, output_dtype=np.float32)
            assert linear.kernel == k["name"]
            xl = rng.integers(0, 256, (5, 40)).astype(np.uint8)
            acc = (xl.astype(np.int64) - 3) @ linear.weight.astype(np.int64).T
            assert np.array_equal(linear(xl), (acc.astype(np.float32) * np.float32(0.02 * 0.01)))
            assert np.array_equal(seven(x), unfused(seven, ref_layer(seven, x)))
            with pytest.raises(ValueError, match="exact only for weights in \\[-64, 64\\]"):
                eight._run(x, None, "indirect", k["name"])
