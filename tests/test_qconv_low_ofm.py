"""QConv2d's "low_ofm" algorithm (seed I11: groups == 1, at most 4 output channels, output pixels in vector
lanes): bit-exact against the numpy int64 reference through every kernel of the "qconv_low_ofm" list (test id =
kernel name; kernels of ISAs the CPU lacks skip naming the ISA), over OC 1..4, IC 1..70 (every remainder of the
group of 4), widths 1..40 (every tail of the 8 / 16-pixel vectors and the 16 / 64-pixel blocks), 1x1, 3x3 and 5x5
with padding 0-2, strides 1-2, batches > 1, uint8 / int8 inputs at their extremes with zero points at their
limits, every output dtype, NHWC and the planar (NCHW) output the kernels store directly; guard pages for the
tails; the dispatched path under every ISA cap, thread counts, auto's rule and the errors where it does not apply.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

import nnkern
from nnkern import _C
from helpers import QUICK, describe_process, run_script_isolated
from qhelpers import runnable
from test_qconv2d import LARGE_WINDOWS, make_layer, rand_x, ref_layer, unfused
from test_qgemm import qisa  # noqa: F401  (the per-ISA fixture of the dispatched path)

LOW_OFM_KERNELS = _C.kernel_list("qconv_low_ofm")
GUARD_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "qconv_low_ofm_guard_check.py")
OUT_DTYPES = [np.int32, np.uint8, np.int8, np.float32]


@pytest.fixture(params=LOW_OFM_KERNELS, ids=[k["name"] for k in LOW_OFM_KERNELS])
def lowkernel(request):
    """Each low_ofm micro-kernel of the list (skipped, naming the ISA, where the CPU lacks it)."""
    return runnable(request.param)


def planar(y):
    return np.ascontiguousarray(y.transpose(0, 3, 1, 2))


def check(layer, x, kernel, want=None, what=""):
    """The NHWC and the planar output through `kernel`, both against the reference."""
    if want is None:
        want = unfused(layer, ref_layer(layer, x))
    got = layer._run(x, None, "low_ofm", kernel)
    assert got.dtype == want.dtype and np.array_equal(got, want), f"{kernel} NHWC {what}"
    got = layer._run(x, None, "low_ofm", kernel, planar=True)
    assert np.array_equal(got, planar(want)), f"{kernel} planar {what}"


def test_kernels_listed():
    """A scalar kernel (the oracle, the only one on aarch64), and the x86 SIMD levels where built."""
    levels = [k["level"] for k in LOW_OFM_KERNELS]
    assert levels[0] == "scalar"
    assert set(levels) <= {"scalar", "avx2", "avxvnni", "avx512", "avx512vnni"}
    assert all(k["mr"] == 4 and k["kgroup"] == 4 for k in LOW_OFM_KERNELS)


def low_ofm_configs(rng, n):
    """Seeded layers: OC 1..4, IC 1..70, 1x1 / 3x3 / 5x5 (and 1x3, 3x1), padding 0-2 per side, strides 1-2,
    dilation 1 (2 now and then), widths 1..40, batch 1-3, uint8 / int8 with extreme zero points, every output."""
    for i in range(n):
        KH, KW = [(1, 1), (3, 3), (5, 5), (1, 3), (3, 1)][i % 5]
        OC, IC = 1 + i % 4, int(rng.integers(1, 71))
        padding = tuple(int(v) for v in rng.integers(0, 3, 4))
        stride = tuple(int(v) for v in rng.integers(1, 3, 2))
        dilation = (1, 1) if i % 7 else (2, 2)
        span_h, span_w = dilation[0] * (KH - 1) + 1, dilation[1] * (KW - 1) + 1
        H = max(int(rng.integers(1, 12)), span_h - padding[0] - padding[1])
        W = max(int(rng.integers(1, 41)), span_w - padding[2] - padding[3])
        N = int(rng.integers(1, 4))
        xdt = (np.uint8, np.int8)[i % 2]
        info = np.iinfo(xdt)
        zx = int(rng.choice([info.min, info.max, int(rng.integers(info.min, info.max + 1))]))
        odt = OUT_DTYPES[(i // 2) % 4]
        relu = bool(rng.integers(2))
        layer = make_layer(rng, OC, KH, KW, IC, odt, relu, input_zero_point=zx, stride=stride, padding=padding,
                           dilation=dilation)
        x = rand_x(rng, xdt, (N, H, W, IC), extreme=[None, None, "max", "min"][i % 4])
        yield f"OC={OC} IC={IC} {KH}x{KW} pad={padding} s={stride} d={dilation} {N}x{H}x{W} " \
              f"{xdt.__name__} zx={zx} {np.dtype(odt).name} relu={relu}", layer, x


def test_sweep_every_kernel(lowkernel):
    for what, layer, x in low_ofm_configs(np.random.default_rng(21), 40 if QUICK else 240):
        check(layer, x, lowkernel, what=what)


@pytest.mark.parametrize("OC", [1, 2, 3, 4])
def test_every_channel_and_width_tail(lowkernel, OC):
    """IC 1..70 (every remainder of 4, and past 64) and widths 1..40 (every tail of 8, 16 and 64 pixels), a 3x3
    window with padding 1 on both input dtypes and every output dtype."""
    rng = np.random.default_rng(OC)
    widths = list(range(1, 41)) + [63, 64, 65, 127, 129]
    for i, W in enumerate(widths):
        IC = 1 + (i * 11 + OC) % 70
        odt, xdt = [(np.int32, np.uint8), (np.uint8, np.int8), (np.int8, np.uint8), (np.float32, np.int8)][i % 4]
        info = np.iinfo(xdt)
        zx = [info.min, info.max, int(rng.integers(info.min, info.max + 1))][i % 3]
        layer = make_layer(rng, OC, 3, 3, IC, odt, relu=bool(i % 3), padding=1, input_zero_point=zx)
        check(layer, rand_x(rng, xdt, (2, 3, W, IC)), lowkernel, what=f"W={W} IC={IC}")
    for IC in range(1, 71):  # every IC, 1x1, a width with a vector tail
        layer = make_layer(rng, OC, 1, 1, IC, np.int32)
        check(layer, rand_x(rng, np.uint8, (1, 2, 21, IC)), lowkernel, what=f"1x1 IC={IC}")


@pytest.mark.parametrize("xdt,zx,extreme", [(np.uint8, 0, "max"), (np.uint8, 255, "min"), (np.int8, -128, "max"),
                                            (np.int8, 127, "min")])
def test_extremes(lowkernel, xdt, zx, extreme):
    """|x - zx| and |w| at their maxima everywhere, padding taps included (where they must add exactly 0), a 5x5
    window over 70 channels (K = 1750), 4 output channels, stride 2 on one axis."""
    for wv in (-128, 127):
        w = np.full((4, 5, 5, 70), wv, np.int8)
        layer = nnkern.QConv2d(w, weight_scale=1.0, padding=(2, 1, 0, 2), stride=(1, 2), input_scale=1.0,
                               input_zero_point=zx, output_dtype=np.int32)
        x = rand_x(None, xdt, (2, 6, 37, 70), extreme=extreme)
        check(layer, x, lowkernel, what=str(wv))


@pytest.mark.parametrize("stride,dilation", [((1, 1), (1, 9)), ((1, 2), (1, 3)), ((2, 3), (2, 5)), ((1, 3), (1, 1)),
                                             ((1, 1), (3, 17))])
def test_strides_and_dilations(lowkernel, stride, dilation):
    """Taps whose offset into a re-laid-out row is past a vector (dilation 9, 17), stride phases (2, 3), their
    mixes, widths around the vectors: every tap position the kernels load from."""
    rng = np.random.default_rng(sum(stride) * 10 + sum(dilation))
    for i, OW_in in enumerate((1, 7, 16, 17, 33, 70)):
        layer = make_layer(rng, 1 + i % 4, 3, 3, 5 + 7 * i, [np.int32, np.float32, np.uint8][i % 3],
                           stride=stride, dilation=dilation, padding=(1, 2, 2 * dilation[1], dilation[1] + 1),
                           input_zero_point=int(rng.integers(0, 256)))
        x = rand_x(rng, np.uint8, (2, 7, OW_in, layer.in_channels))
        check(layer, x, lowkernel, what=f"W={OW_in} s={stride} d={dilation}")


def test_no_access_past_guard_page(lowkernel):
    """Input (every IC tail: the last pixel's last group) and output (NHWC and planar tails) ending at an
    unmapped page (tests/qconv_low_ofm_guard_check.py, in a subprocess)."""
    proc = run_script_isolated(GUARD_SCRIPT, lowkernel)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("OK"), describe_process(proc)


def test_dispatched_path_every_isa(qisa, rng):
    """layer(x) under each ISA cap: auto and "low_ofm" (the cap's kernel), NHWC and planar, every output."""
    for KH, stride, padding in [(1, 1, 0), (3, 1, 1), (3, 2, (0, 1, 1, 0)), (5, 1, 2)]:
        for odt in OUT_DTYPES:
            for alg in ("auto", "low_ofm"):
                layer = make_layer(rng, 3, KH, KH, 13, odt, relu=odt != np.int32, stride=stride, padding=padding,
                                   algorithm=alg)
                x = rand_x(rng, np.uint8, (2, 9, 21, 13))
                want = unfused(layer, ref_layer(layer, x))
                assert np.array_equal(layer(x), want), (qisa, KH, odt, alg)
                assert np.array_equal(layer(x, out_layout="NCHW"), planar(want)), (qisa, KH, odt, alg)


@pytest.mark.parametrize("KH", [1, 3])
def test_threads_bit_identical(rng, KH):
    """1 thread = 2, 3, 5 threads (rows of 1x1 windows; bands of re-laid-out rows for 3x3)."""
    layer = make_layer(rng, 3, KH, KH, 20, np.uint8, True, padding=KH // 2, stride=(1, 2), input_zero_point=-7)
    x = rand_x(rng, np.int8, (2, 23, 70, 20))
    threads = nnkern.get_num_threads()
    try:
        nnkern.set_num_threads(1)
        one = layer._run(x, None, "low_ofm", "")
        for t in (2, 3, 5):
            nnkern.set_num_threads(t)
            assert np.array_equal(layer._run(x, None, "low_ofm", ""), one), t
            assert np.array_equal(layer._run(x, None, "low_ofm", "", planar=True), planar(one)), t
    finally:
        nnkern.set_num_threads(threads)


def test_out_layout_planar_every_algorithm(rng):
    """out_layout="NCHW" (planar output from NHWC x) equals the NHWC result transposed for every algorithm
    (low_ofm writes it directly, the others through a copy), with a planar residual too; layout="NCHW" (x NCHW)
    gives the same; out= of the planar shape is filled."""
    for odt in OUT_DTYPES:
        kw = dict(residual_scale=0.05, residual_zero_point=7) if odt != np.int32 else {}
        layer = make_layer(rng, 4, 3, 3, 9, odt, relu=True, padding=1, **kw)
        x = rand_x(rng, np.uint8, (2, 7, 19, 9))
        r = rand_x(rng, np.uint8, (2, 7, 19, 4)) if kw else None
        want = layer._run(x, None, "indirect", "", r)
        for alg in ("low_ofm", "im2col", "indirect", "direct"):
            rp = None if r is None else planar(r)
            got = layer._run(x, None, alg, "", rp, planar=True)
            assert np.array_equal(got, planar(want)), (odt, alg)
        assert np.array_equal(layer(x, residual=None if r is None else planar(r), out_layout="NCHW"),
                              planar(layer(x, residual=r)))
        x_nchw = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
        out = np.empty((2, 4, 7, 19), odt)
        assert layer(x_nchw, out, residual=None if r is None else planar(r), layout="NCHW") is out
        assert np.array_equal(out, planar(want))
        # NCHW input, NHWC output
        assert np.array_equal(layer(x_nchw, residual=r, layout="NCHW", out_layout="NHWC"), want)


def test_auto_rule(rng):
    """auto: low_ofm for groups == 1 and at most 4 output channels where a SIMD low_ofm kernel runs (x86; with
    the AMX GEMM only up to 256 input channels, and strided only under 16 of them or with 25 taps or more), the
    table's earlier depthwise for depthwise layers, the other algorithms past 4 channels or with groups."""
    simd = any(k["supported"] and k["level"] != "scalar" for k in LOW_OFM_KERNELS)
    for OC in (1, 2, 3, 4):
        for IC in (3, 15, 16, 64, 200, 256, 257):
            for KH, kw in ((1, {}), (3, dict(padding=1)), (5, dict(stride=2, padding=2)), (7, dict(stride=(1, 2)))):
                layer = make_layer(rng, OC, KH, KH, IC, **kw)
                amx = layer.kernel.endswith("__amx")  # the GEMM kernel indirect / im2col would run
                want = simd and not (amx and (IC > 256 or (layer.stride != (1, 1) and IC >= 16 and KH < 5)))
                assert (layer._packed.auto_algorithm(1, 16, 16) == "low_ofm") == want, (OC, IC, KH)
    assert make_layer(rng, 5, 3, 3, 8)._packed.auto_algorithm(1, 9, 9) == "indirect"
    assert make_layer(rng, 4, 3, 3, 2, groups=2)._packed.auto_algorithm(1, 9, 9) == "indirect"
    assert make_layer(rng, 3, 3, 3, 1, groups=3)._packed.auto_algorithm(1, 9, 9) == "depthwise"
    with nnkern.max_isa("scalar"):  # the scalar kernel only: auto keeps the GEMM paths
        assert make_layer(rng, 3, 3, 3, 8)._packed.auto_algorithm(1, 9, 9) == "indirect"
        assert make_layer(rng, 3, 1, 1, 32)._packed.auto_algorithm(1, 9, 9) == "im2col"
        assert make_layer(rng, 3, 1, 1, 8)._packed.auto_algorithm(1, 9, 9) == "indirect"  # few channels


def test_does_not_apply_and_bad_arguments(rng):
    """low_ofm asked where it does not apply (more than 4 output channels, groups > 1, depthwise) is a
    ValueError naming the algorithm; a bad out_layout is checked like layout; planar out= of the NHWC shape and a
    residual of the wrong layout are rejected."""
    x = rand_x(rng, np.uint8, (1, 6, 6, 8))
    for layer in (make_layer(rng, 5, 3, 3, 8), make_layer(rng, 4, 3, 3, 4, groups=2),
                  make_layer(rng, 8, 3, 3, 1, groups=8), make_layer(rng, 64, 1, 1, 8)):
        with pytest.raises(ValueError, match="'low_ofm' does not apply"):
            layer._run(x, None, "low_ofm", "")
    with pytest.raises(ValueError, match="'low_ofm' does not apply"):
        make_layer(rng, 5, 1, 1, 8, algorithm="low_ofm")(x)
    layer = make_layer(rng, 3, 3, 3, 8, np.uint8, residual_scale=0.1)
    with pytest.raises(ValueError, match="layout"):
        layer(x, out_layout="CHW")
    with pytest.raises(TypeError, match="layout"):
        layer(x, out_layout=1)
    with pytest.raises(ValueError, match="shape"):
        layer(x, np.empty((1, 4, 4, 3), np.uint8), out_layout="NCHW")
    with pytest.raises(ValueError, match="shape"):
        layer(x, residual=np.zeros((1, 4, 4, 3), np.uint8), out_layout="NCHW")
    with pytest.raises(ValueError, match="unknown kernel|cannot run|no kernel|qconv_low_ofm|kernel"):
        layer._run(x, None, "low_ofm", "u8s8_conv_low_ofm_no_such_kernel")


@pytest.mark.parametrize("KH", [1, 3])
def test_fused_pool_and_pixel_shuffle(lowkernel, KH):
    """The fused output stages (ops/qconv/stage.h) through low_ofm: rows wider than one fused chunk (so rows
    go through the stage in several chunks, re-laid-out rows shifted to each), NHWC and re-laid-out input."""
    from test_qconv_fused import check_pool, shuffled
    rng = np.random.default_rng(KH)
    for odt in OUT_DTYPES:
        x = rand_x(rng, np.uint8, (2, 3, 1100, 6))
        layer = make_layer(rng, 4, KH, KH, 6, odt, relu=odt != np.int32, padding=KH // 2, pixel_shuffle=2)
        want_y = unfused(layer, ref_layer(layer, x))
        assert np.array_equal(layer._run(x, None, "low_ofm", lowkernel), shuffled(want_y, 2)), odt
        layer = make_layer(rng, 3, KH, KH, 6, odt, relu=odt != np.int32, padding=KH // 2, pool="global_avg")
        check_pool(layer, layer._run(x, None, "low_ofm", lowkernel), unfused(layer, ref_layer(layer, x)), str(odt))


def test_wide_rows_of_many_channels_stay_nhwc(lowkernel):
    """A band of re-laid-out rows over 4 MiB (10 rows of 1700 pixels x 256 channels, 3x3): the SIMD kernels
    then read the NHWC rows per tap (in-register re-layout and gathers), as for 1x1 windows."""
    rng = np.random.default_rng(3)
    layer = make_layer(rng, 2, 3, 3, 257, np.int32, padding=1, input_zero_point=-100)
    x = rand_x(rng, np.int8, (1, 3, 1700, 257))
    check(layer, x, lowkernel)


def test_large_windows(lowkernel, rng):
    """Windows past 8x8 and long rows / columns (the re-laid-out rows of a band and the per-tap path)."""
    for i, (KH, KW) in enumerate(LARGE_WINDOWS):
        odt = OUT_DTYPES[i % 4]
        layer = make_layer(rng, 1 + i % 4, KH, KW, (3, 9)[i % 2], odt, relu=odt != np.int32,
                           padding=(KH // 2, (KH - 1) // 2, KW // 2, (KW - 1) // 2 + 1), stride=(1 + i % 2, 1),
                           input_zero_point=(100, -3)[i % 2])
        x = rand_x(rng, (np.uint8, np.int8)[i % 2], (2, KH + 2, KW + 5, (3, 9)[i % 2]))
        assert np.array_equal(layer._run(x, None, "low_ofm", lowkernel), unfused(layer, ref_layer(layer, x))), (KH, KW)
