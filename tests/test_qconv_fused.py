"""QConv2d's fused output stages (seeds I14, I16): pool="global_avg" and pixel_shuffle=r, for every algorithm of
the "qconv2d" table that applies and every micro-kernel this CPU runs (GEMM kernels through im2col and indirect,
depthwise and direct kernels through their algorithms; kernels of ISAs the CPU lacks skip naming the ISA), over
a seeded sweep of geometries (tails of every tile: channels 1..70, widths around the pixel blocks, batches),
both input dtypes and every output dtype:
  pooling: the int64 sums of the requantized outputs exact (the pooled value equals numpy's formula over the
    reference convolution bit for bit), the float32 output's mean within float32 rounding of numpy's float64
    mean, bit-identical for every thread count;
  pixel shuffle: bit-identical to the unfused layer followed by nnkern.pixel_shuffle (and to numpy), r = 1..4,
    every thread count;
and their arguments' checks, pickling, the NCHW call.
"""
from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

import nnkern
from helpers import QUICK, describe_process, run_script_isolated
from test_qconv2d import (algorithms_for, directkernel, dwkernel, make_layer, qkernel, rand_x,  # noqa: F401
                          random_config, ref_layer, unfused, weight_max)
from test_qgemm import qisa  # noqa: F401

N_CONFIGS = 8 if QUICK else 60
GUARD_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "qconv_fused_guard_check.py")
OUT_DTYPES = [np.uint8, np.int8, np.float32, np.int32]


def plain_twin(layer):
    """The same layer without its fused stage."""
    st = layer.__getstate__()
    st.update(pool=None, pool_dtype=np.float32, pool_scale=None, pool_zero_point=None, pixel_shuffle=None)
    return nnkern.QConv2d(st.pop("weight"), st.pop("bias"), **st)


def expected_pool(layer, y):
    """numpy's version of the fused pooling of the layer's stored output y (N, OH, OW, OC): (value, exact?)."""
    odt = layer.output_dtype
    count = y.shape[1] * y.shape[2]
    if odt == np.float32:
        s = y.astype(np.float64).sum(axis=(1, 2))
        zo, so = 0.0, 1.0
    else:
        s = y.astype(np.int64).sum(axis=(1, 2)).astype(np.float64)  # exact: far below 2^53
        zo, so = (float(layer._output_zero_point), layer._output_scale) if odt in (np.uint8, np.int8) else (0.0, 1.0)
    mean = (s / count - zo) * so
    if layer.pool_dtype == np.float32:
        return mean.astype(np.float32)
    f = layer._fused
    lo, hi = np.iinfo(layer.pool_dtype).min, np.iinfo(layer.pool_dtype).max
    return np.rint(np.clip(mean / f.pool_scale + f.pool_zero_point, lo, hi)).astype(layer.pool_dtype)


def check_pool(layer, got, want_y, what=""):
    want = expected_pool(layer, want_y)
    assert got.dtype == want.dtype and got.shape == want.shape, what
    if layer.output_dtype != np.float32 or layer.pool_dtype != np.float32:
        assert np.array_equal(got, want), what  # integer sums: exact
    else:  # float32 outputs summed in double: within float32 rounding of numpy's float64 mean
        scale = np.abs(want_y.astype(np.float64)).mean(axis=(1, 2))
        err = np.abs(got.astype(np.float64) - want)
        assert np.all(err <= 2 * np.spacing(np.abs(want)) + 1e-12 * scale), what


def zero_point(rng, xdt):
    info = np.iinfo(xdt)
    return int(rng.choice([info.min, info.max, int(rng.integers(info.min, info.max + 1))]))


def pool_sweep(rng, n, kinds=("plain", "plain", "groups", "dw1", "dw2"), shapes=None, weight_max=127):
    """(description, pooled layer, x, reference output of the unpooled layer)."""
    for i in range(n):
        c = random_config(rng, kinds=kinds, **({"shapes": shapes} if shapes else {}))
        if i % 6 == 0:
            c.update(KH=1, KW=1, stride=(1, 1), padding=(0, 0, 0, 0))
        xdt = (np.uint8, np.int8)[i % 2]
        odt = OUT_DTYPES[i % 4]
        pdt = np.float32 if odt in (np.float32, np.int32) or i % 3 else odt
        relu = bool(rng.integers(2))
        layer = make_layer(rng, c["OC"], c["KH"], c["KW"], c["IC"] // c["groups"], odt, relu,
                           stride=c["stride"], padding=c["padding"], dilation=c["dilation"], groups=c["groups"],
                           pool="global_avg", pool_dtype=pdt, input_zero_point=zero_point(rng, xdt),
                           weight_max=weight_max)
        x = rand_x(rng, xdt, (c["N"], c["H"], c["W"], c["IC"]))
        yield f"{c} {xdt.__name__} {odt.__name__}->{np.dtype(pdt).name} relu={relu}", layer, x, \
            unfused(layer, ref_layer(layer, x))


def shuffle_sweep(rng, n, kinds=("plain", "plain", "groups", "dw1"), shapes=None, weight_max=127):
    """(description, shuffled layer, x, reference unshuffled output); OC = a multiple of r*r, r = 1..4."""
    for i in range(n):
        c = random_config(rng, kinds=kinds, **({"shapes": shapes} if shapes else {}))
        r = 1 + i % 4
        rr = r * r
        if c["groups"] == 1:
            c["OC"] = rr * int(rng.integers(1, 6))
        elif c["groups"] == c["IC"]:  # depthwise, multiplier 1: IC = OC a multiple of r*r
            c["IC"] = c["OC"] = c["groups"] = rr * int(rng.integers(1, 4))
        else:
            c["OC"] = c["groups"] * rr * int(rng.integers(1, 3))
        if i % 6 == 0:
            c.update(KH=1, KW=1, stride=(1, 1), padding=(0, 0, 0, 0))
        xdt = (np.uint8, np.int8)[i % 2]
        odt = OUT_DTYPES[i % 4]
        layer = make_layer(rng, c["OC"], c["KH"], c["KW"], c["IC"] // c["groups"], odt, bool(rng.integers(2)),
                           stride=c["stride"], padding=c["padding"], dilation=c["dilation"], groups=c["groups"],
                           pixel_shuffle=r, input_zero_point=zero_point(rng, xdt), weight_max=weight_max)
        x = rand_x(rng, xdt, (c["N"], c["H"], c["W"], c["IC"]))
        yield f"{c} r={r} {xdt.__name__} {odt.__name__}", layer, x, unfused(layer, ref_layer(layer, x))


def shuffled(y, r):
    return nnkern.pixel_shuffle(np.ascontiguousarray(y), r, layout="NHWC")


# --- every kernel, every algorithm --------------------------------------------------------------------------

def test_pool_every_gemm_kernel(qkernel):
    for desc, layer, x, want_y in pool_sweep(np.random.default_rng(21), N_CONFIGS, kinds=("plain", "groups"),
                                             weight_max=weight_max(qkernel)):
        for alg in algorithms_for(layer, x.shape):
            if alg in ("im2col", "indirect"):
                check_pool(layer, layer._run(x, None, alg, qkernel), want_y, f"{qkernel} {alg} {desc}")


def test_pool_every_depthwise_kernel(dwkernel):
    for desc, layer, x, want_y in pool_sweep(np.random.default_rng(22), N_CONFIGS, kinds=("dw1", "dw2")):
        check_pool(layer, layer._run(x, None, "depthwise", dwkernel), want_y, f"{dwkernel} {desc}")


def test_pool_every_direct_kernel(directkernel):
    for desc, layer, x, want_y in pool_sweep(np.random.default_rng(23), N_CONFIGS, kinds=("plain",)):
        check_pool(layer, layer._run(x, None, "direct", directkernel), want_y, f"{directkernel} {desc}")


def test_shuffle_every_gemm_kernel(qkernel):
    for desc, layer, x, want_y in shuffle_sweep(np.random.default_rng(31), N_CONFIGS, kinds=("plain", "groups"),
                                                weight_max=weight_max(qkernel)):
        want = shuffled(want_y, layer.pixel_shuffle)
        plain = plain_twin(layer)
        for alg in ("im2col", "indirect"):
            got = layer._run(x, None, alg, qkernel)
            assert got.dtype == want.dtype and np.array_equal(got, want), f"{qkernel} {alg} {desc}"
            # the definition: the unfused layer, then nnkern.pixel_shuffle
            assert np.array_equal(got, shuffled(plain._run(x, None, alg, qkernel), layer.pixel_shuffle))


def test_shuffle_every_depthwise_kernel(dwkernel):
    for desc, layer, x, want_y in shuffle_sweep(np.random.default_rng(32), N_CONFIGS, kinds=("dw1",)):
        got = layer._run(x, None, "depthwise", dwkernel)
        assert np.array_equal(got, shuffled(want_y, layer.pixel_shuffle)), f"{dwkernel} {desc}"


def test_shuffle_every_direct_kernel(directkernel):
    for desc, layer, x, want_y in shuffle_sweep(np.random.default_rng(33), N_CONFIGS, kinds=("plain",)):
        got = layer._run(x, None, "direct", directkernel)
        assert np.array_equal(got, shuffled(want_y, layer.pixel_shuffle)), f"{directkernel} {desc}"


def test_dispatched_every_isa(qisa, rng):
    """layer(x) with each fused stage under each ISA cap, "auto" and every algorithm that applies."""
    for groups, (KH, KW), pad in [(1, (3, 3), 1), (1, (1, 1), 0), (16, (3, 3), 1), (2, (3, 3), (0, 1, 1, 0))]:
        for odt in OUT_DTYPES:
            for fuse in ({"pool": "global_avg"}, {"pixel_shuffle": 2}, {"pixel_shuffle": 4}):
                layer = make_layer(rng, 32, KH, KW, 16 // groups, odt, relu=odt != np.int32, padding=pad,
                                   groups=groups, **fuse)
                x = rand_x(rng, np.uint8, (2, 9, 10, 16))
                want_y = unfused(layer, ref_layer(layer, x))
                for alg in ("auto", *algorithms_for(layer, x.shape)):
                    got = layer._run(x, None, alg, "")
                    if "pool" in fuse:
                        check_pool(layer, got, want_y, f"{qisa} {alg} {groups} {odt}")
                    else:
                        assert np.array_equal(got, shuffled(want_y, layer.pixel_shuffle)), (qisa, alg, groups, odt)


# --- tails and threads ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("r", [1, 2, 3, 4])
def test_shuffle_tails_and_threads(r, rng):
    """Output widths and channel counts around every tile (NR 4..32 pixels, MR 8..64 channels, 6-pixel direct
    blocks), every output dtype, 1-3 threads: one result."""
    for C, OW in [(1, 1), (3, 5), (2, 7), (5, 13), (4, 33), (7, 6)]:
        for odt in OUT_DTYPES:
            layer = make_layer(rng, C * r * r, 3, 3, 5, odt, relu=odt != np.int32, padding=1, pixel_shuffle=r,
                               input_zero_point=-7)
            x = rand_x(rng, np.int8, (2, 3, OW, 5))
            want = shuffled(unfused(layer, ref_layer(layer, x)), r)
            for alg in algorithms_for(layer, x.shape):
                for t in (1, 2, 3):
                    nnkern.set_num_threads(t)
                    assert np.array_equal(layer._run(x, None, alg, ""), want), (C, OW, odt, alg, t)


def test_pool_threads_bit_identical(rng):
    """float32 pooling sums in double in a fixed order: the same bits for 1, 2 and 3 threads, every algorithm."""
    for groups, ICg, OC in [(1, 40, 200), (96, 1, 96)]:
        layer = make_layer(rng, OC, 3, 3, ICg, np.float32, relu=True, padding=1, groups=groups, pool="global_avg")
        x = rand_x(rng, np.uint8, (3, 23, 29, ICg * groups))
        for alg in algorithms_for(layer, x.shape):
            results = []
            for t in (1, 2, 3):
                nnkern.set_num_threads(t)
                results.append(layer._run(x, None, alg, ""))
            assert all(np.array_equal(results[0], r) for r in results[1:]), alg
            check_pool(layer, results[0], unfused(layer, ref_layer(layer, x)))


def test_pool_large_image_slots(rng):
    """Images of many tiles (1x1 and 3x3 over 60x70), and a window of K = 5400 whose im2col runs in row blocks
    of 776 pixels (not a multiple of NR: a block's last tile and the next one's first share a slot), float32
    and uint8: every slot adds up, the same bits for 1-3 threads."""
    for KH, ICg, H, W, odt in [(1, 7, 60, 70, np.uint8), (3, 7, 60, 70, np.float32), (3, 600, 37, 41, np.float32),
                               (3, 600, 37, 41, np.uint8)]:
        layer = make_layer(rng, 19, KH, KH, ICg, odt, relu=False, padding=KH // 2, pool="global_avg")
        x = rand_x(rng, np.uint8, (2, H, W, ICg))
        want_y = unfused(layer, ref_layer(layer, x))
        for alg in algorithms_for(layer, x.shape):
            results = []
            for t in (1, 2, 3):
                nnkern.set_num_threads(t)
                results.append(layer._run(x, None, alg, ""))
            assert all(np.array_equal(results[0], r) for r in results[1:]), (alg, KH, ICg)
            check_pool(layer, results[0], want_y, f"{alg} {KH} {ICg} {odt}")


def test_pool_requantized_defaults_and_explicit(rng):
    """uint8 pooling: the output's quantization by default (the rounded mean of the stored integers), or its own."""
    layer = make_layer(rng, 24, 3, 3, 8, np.uint8, relu=True, padding=1, pool="global_avg", pool_dtype=np.uint8)
    assert layer._fused.pool_scale == layer._output_scale and layer._fused.pool_zero_point == 100
    x = rand_x(rng, np.uint8, (2, 7, 7, 8))
    y = unfused(layer, ref_layer(layer, x))
    assert np.array_equal(layer(x), np.rint(y.astype(np.float64).mean(axis=(1, 2))).astype(np.uint8))
    layer2 = make_layer(rng, 24, 3, 3, 8, np.float32, padding=1, pool="global_avg", pool_dtype=np.int8,
                        pool_scale=0.05, pool_zero_point=-3)
    check_pool(layer2, layer2(x), unfused(layer2, ref_layer(layer2, x)))


def test_no_access_past_guard_page():
    """Shuffled and pooled results and inputs ending at an unmapped page, every algorithm, r = 1..4, every output
    dtype (tests/qconv_fused_guard_check.py, in a subprocess: a fault fails this test only)."""
    proc = run_script_isolated(GUARD_SCRIPT)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("OK"), describe_process(proc)


# --- API -----------------------------------------------------------------------------------------------------

def test_layouts_out_pickle_repr(rng):
    for fuse in ({"pool": "global_avg"}, {"pixel_shuffle": 3}):
        layer = make_layer(rng, 18, 3, 3, 4, np.uint8, padding=1, **fuse)
        x = rand_x(rng, np.uint8, (2, 5, 6, 4))
        y = layer(x)
        assert y.shape == layer.result_shape(x.shape)
        out = np.empty_like(y)
        assert layer(x, out) is out and np.array_equal(out, y)
        nchw = layer(np.ascontiguousarray(x.transpose(0, 3, 1, 2)), layout="NCHW")
        assert np.array_equal(nchw, y if "pool" in fuse else y.transpose(0, 3, 1, 2))
        again = pickle.loads(pickle.dumps(layer))
        assert np.array_equal(again(x), y) and repr(again) == repr(layer)
        assert ("pool=" in repr(layer)) == ("pool" in fuse)
    assert make_layer(rng, 18, 3, 3, 4, pixel_shuffle=3).pixel_shuffle == 3


def test_bad_arguments(rng):
    with pytest.raises(ValueError, match="pool must be"):
        make_layer(rng, 8, 1, 1, 4, pool="max")
    with pytest.raises(TypeError, match="pool must be"):
        make_layer(rng, 8, 1, 1, 4, pool=1)
    with pytest.raises(ValueError, match="not divisible by r\\*r"):
        make_layer(rng, 6, 1, 1, 4, pixel_shuffle=2)
    with pytest.raises(ValueError, match="positive"):
        make_layer(rng, 8, 1, 1, 4, pixel_shuffle=0)
    with pytest.raises(TypeError):
        make_layer(rng, 8, 1, 1, 4, pixel_shuffle=2.5)
    with pytest.raises(ValueError, match="cannot both"):
        make_layer(rng, 8, 1, 1, 4, pixel_shuffle=2, pool="global_avg")
    with pytest.raises(ValueError, match="residual"):
        make_layer(rng, 8, 1, 1, 4, np.uint8, pool="global_avg", residual_scale=0.1)
    with pytest.raises(ValueError, match="residual"):
        make_layer(rng, 8, 1, 1, 4, np.uint8, pixel_shuffle=2, residual_scale=0.1)
    with pytest.raises(ValueError, match="float32 only"):
        make_layer(rng, 8, 1, 1, 4, np.int32, pool="global_avg", pool_dtype=np.uint8)
    with pytest.raises(ValueError, match="needs pool_scale"):
        make_layer(rng, 8, 1, 1, 4, np.float32, pool="global_avg", pool_dtype=np.uint8)
    with pytest.raises(ValueError, match="outside the range"):
        make_layer(rng, 8, 1, 1, 4, np.uint8, pool="global_avg", pool_dtype=np.int8, pool_zero_point=200)
    with pytest.raises(TypeError, match="pool_dtype"):
        make_layer(rng, 8, 1, 1, 4, np.uint8, pool="global_avg", pool_dtype=np.int16)
    with pytest.raises(ValueError, match="go with pool"):
        make_layer(rng, 8, 1, 1, 4, np.uint8, pool_scale=0.1)
    with pytest.raises(ValueError, match="pool_scale"):
        make_layer(rng, 8, 1, 1, 4, np.uint8, pool="global_avg", pool_scale=-1.0, pool_dtype=np.uint8)
    layer = make_layer(rng, 8, 1, 1, 4, np.uint8, pool="global_avg")
    x = rand_x(rng, np.uint8, (1, 3, 3, 4))
    with pytest.raises(TypeError, match="float32"):
        layer(x, np.empty((1, 8), np.uint8))
    with pytest.raises(ValueError, match="shape"):
        layer(x, np.empty((1, 3, 3, 8), np.float32))
    with pytest.raises(ValueError, match="residual"):
        layer(x, residual=np.zeros((1, 3, 3, 8), np.uint8))
    assert layer(rand_x(rng, np.uint8, (0, 3, 3, 4))).shape == (0, 8)
