"""Sizes a hostile caller can reach: strides, paddings and dilations near 2^31 (the largest the layers take) run on
every algorithm that applies, with the right result and a cost set by the output (a workspace of a few KiB for a
2x2 output, no padded copy the size of the padding); near 2^63, and sizes whose byte counts overflow, are a
ValueError, from the Python layer and from the C++ objects behind it (nnkern._C) alike."""
from __future__ import annotations

import numpy as np
import pytest

import nnkern
from nnkern import _C

P31 = 2**31 - 1
P63 = 2**63 - 1
# A 2x2 output never needs more than this much workspace (its im2col rows, its indirection, its padded copy).
SMALL_WORKSPACE = 64 << 10


def geometry_list(OC, IC, KH, KW, groups=1, stride=(1, 1), dilation=(1, 1), padding=(0, 0, 0, 0)):
    return [OC, IC, KH, KW, groups, *stride, *dilation, *padding]


def sparse_conv(x, w, stride, padding, dilation, groups, zero=0):
    """The convolution in int64 / float64 by taps, padding never materialized: output (N, OH, OW, OC) of
    sum over the taps inside the input of (x - zero) w. w: (OC, KH, KW, IC // groups)."""
    N, H, W, IC = x.shape
    OC, KH, KW, ICg = w.shape
    (sh, sw), (dh, dw), (pt, pb, pl, pr) = stride, dilation, padding
    OH = (H + pt + pb - dh * (KH - 1) - 1) // sh + 1
    OW = (W + pl + pr - dw * (KW - 1) - 1) // sw + 1
    acc = np.int64 if x.dtype.kind in "iu" else np.float64
    out = np.zeros((N, OH, OW, OC), acc)
    OCg = OC // groups
    for oh in range(OH):
        for ow in range(OW):
            for kh in range(KH):
                for kw in range(KW):
                    ih, iw = oh * sh + kh * dh - pt, ow * sw + kw * dw - pl
                    if 0 <= ih < H and 0 <= iw < W:
                        for g in range(groups):
                            xs = x[:, ih, iw, g * ICg:(g + 1) * ICg].astype(acc) - zero
                            out[:, oh, ow, g * OCg:(g + 1) * OCg] += xs @ w[g * OCg:(g + 1) * OCg, kh, kw].astype(acc).T
    return out


# (stride, padding, dilation) of a 3x3 window over a 2x2 input whose output is 2x2 or 1x1: every tap but a few
# lands in the padding; the last one has stride == dilation (mgemm's condition).
HUGE = [((P, P), (P, P, P, P), (1, 1)) for P in (P31, P31 - 7)] + \
       [((1, 1), (P31, P31, P31, P31), (P31, P31)), ((P31, P31), (P31, P31, P31, P31), (P31, P31))]
# Layer shapes covering every algorithm's applicability: (OC, IC, groups).
CONV_SHAPES = [(16, 3, 1), (16, 16, 16), (3, 16, 1)]
QCONV_SHAPES = [(64, 3, 1), (8, 8, 8), (3, 3, 1)]


@pytest.mark.parametrize("stride,padding,dilation", HUGE)
def test_conv2d_every_algorithm_near_2_31(rng, stride, padding, dilation):
    covered = set()
    x = rng.standard_normal((2, 2, 2, 16)).astype(np.float32)
    for OC, IC, groups in CONV_SHAPES:
        w = rng.standard_normal((OC, 3, 3, IC // groups)).astype(np.float32)
        xi = np.ascontiguousarray(x[..., :IC])
        want = sparse_conv(xi, w, stride, padding, dilation, groups)
        for alg in ["auto", *nnkern.Conv2d(w, stride=stride, padding=padding, dilation=dilation,
                                           groups=groups)._packed.applicable_algorithms(*xi.shape[:3])]:
            layer = nnkern.Conv2d(w, stride=stride, padding=padding, dilation=dilation, groups=groups, algorithm=alg)
            got = layer(xi)
            tol = 2e-2 if alg == "bf16" else 1e-5  # bf16: the operands rounded (tests/test_bf16.py has the bound)
            assert got.shape == want.shape and np.allclose(got, want, rtol=tol, atol=tol), (alg, OC, IC, groups)
            assert _C.workspace_last_bytes() <= SMALL_WORKSPACE, alg
            assert layer._packed.indirection_bytes <= SMALL_WORKSPACE, alg
            covered.add(alg)
    # Winograd's need stride 1 and dilation 1, which none of these layers has
    assert covered >= set(_C.algorithms("conv2d")) - {"winograd", "winograd_2x2"} - (
        {"mgemm"} if stride[1] != dilation[1] else set()), covered


@pytest.mark.parametrize("stride,padding,dilation", HUGE)
def test_qconv2d_every_algorithm_near_2_31(rng, stride, padding, dilation):
    covered, refused = set(), set()
    x = rng.integers(0, 256, (2, 2, 2, 8), dtype=np.uint8)
    for OC, IC, groups in QCONV_SHAPES:
        w = rng.integers(-128, 128, (OC, 3, 3, IC // groups), dtype=np.int8)
        xi = np.ascontiguousarray(x[..., :IC])
        want = sparse_conv(xi, w, stride, padding, dilation, groups, zero=100)
        args = dict(weight_scale=1.0, stride=stride, padding=padding, dilation=dilation, groups=groups,
                    input_scale=1.0, input_zero_point=100, output_dtype=np.int32)
        applicable = nnkern.QConv2d(w, **args)._packed.applicable_algorithms(*xi.shape[:3])
        for alg in ["auto", *_C.algorithms("qconv2d")]:
            layer = nnkern.QConv2d(w, **args, algorithm=alg)
            if alg != "auto" and alg not in applicable:
                with pytest.raises(ValueError, match="does not apply"):
                    layer(xi)
                refused.add(alg)
                continue
            got = layer(xi)
            assert got.shape == want.shape and np.array_equal(got, want), (alg, OC, IC, groups)
            assert _C.workspace_last_bytes() <= SMALL_WORKSPACE, alg
            assert layer._packed.indirection_bytes <= SMALL_WORKSPACE, alg
            covered.add(alg)
    # direct would copy the padded grid its windows walk: refused rather than paying for the padding; low_ofm's
    # kernels index columns in int32 lanes, which a stride near 2^31 leaves
    assert "direct" in refused and "direct" not in covered, covered
    assert covered >= {"auto", *_C.algorithms("qconv2d")} - {"direct", "low_ofm"}, covered


def test_direct_copy_is_bounded_by_the_output(rng):
    """The direct algorithm copies only the grid its windows reach, and only where that grid is a few times the
    input plus what the windows read: a padding of 16384 around a 2x2 input is refused, not a 1 GB copy."""
    w = rng.integers(-128, 128, (64, 5, 5, 3), dtype=np.int8)
    args = dict(weight_scale=1.0, input_scale=1.0, input_zero_point=7, output_dtype=np.int32, algorithm="direct")
    with pytest.raises(ValueError, match="does not apply"):
        nnkern.QConv2d(w, stride=16384, padding=16384, **args)(np.zeros((1, 2, 2, 3), np.uint8))
    # padding larger than the windows reach: copied no further than they reach
    x = rng.integers(0, 256, (1, 6, 7, 3), dtype=np.uint8)
    layer = nnkern.QConv2d(w, padding=(4, 30, 4, 30), **args)
    got = layer(x)
    assert np.array_equal(got, sparse_conv(x, w, (1, 1), (4, 30, 4, 30), (1, 1), 1, zero=7))
    OH, OW = got.shape[1:3]
    grid = (OH + 4) * (OW + 4) * 4  # (OH - 1) + 5 rows by (OW - 1) + 5 columns of 4 channels (3 padded to 4)
    assert _C.workspace_last_bytes() <= grid + 64 * 4 + 128


@pytest.mark.parametrize("huge", [2**31, 2**63 - 1, 2**64 - 1])
def test_geometry_beyond_2_31_is_refused(huge):
    w = np.ones((4, 3, 3, 2), np.float32)
    for arg in ("stride", "padding", "dilation"):
        with pytest.raises(ValueError, match=arg):
            nnkern.Conv2d(w, **{arg: huge})
        with pytest.raises(ValueError, match=arg):
            nnkern.QConv2d(w, input_scale=0.1, input_zero_point=0, **{arg: huge})
    # the C++ objects behind the layers refuse it too (nnkern._C, not the documented API)
    for i in range(2, 13):
        g = geometry_list(4, 2, 3, 3)
        g[i] = huge
        with pytest.raises(ValueError, match="geometry"):
            _C.PackedConv2d(w, g, None, 0, "accurate")
        with pytest.raises(ValueError, match="geometry"):
            _C.PackedQConv2d(np.ones((1, 18, 4), np.int8), g, 0, None, None, False, 0.0, 0.0, 0)


def test_call_sizes_that_overflow_are_refused():
    """Input shapes whose element or byte counts overflow 64 bits (asked of the C++ objects directly, since no
    array has them): a ValueError naming the overflow, from every query and from every algorithm's sizing."""
    conv = nnkern.Conv2d(np.ones((16, 3, 3, 3), np.float32), padding=1)
    qconv = nnkern.QConv2d(np.ones((16, 3, 3, 3), np.float32), padding=1, input_scale=0.1, input_zero_point=0,
                           output_dtype=np.int32)
    for n, h, w in [(P63, P63, P63), (2**40, 2**40, 2**40), (1, 2**62, 4), (2**64 - 1, 1, 1)]:
        for alg in ["auto", *_C.algorithms("conv2d")]:
            with pytest.raises(ValueError, match="overflow"):
                conv._packed.workspace_bytes(n, h, w, alg)
        for query in (conv._packed.auto_algorithm, conv._packed.applicable_algorithms,
                      qconv._packed.auto_algorithm, qconv._packed.applicable_algorithms):
            with pytest.raises(ValueError, match="overflow"):
                query(n, h, w)
    with pytest.raises(ValueError, match="overflow"):
        conv.workspace_bytes((2**40, 2**40, 2**40, 3))
    for shape in [(-1, 4, 4, 3), (1, -4, 4, 3), (1, 4, 4, -3), (1.5, 4, 4, 3), (1, 4, 4)]:
        with pytest.raises((ValueError, TypeError)) as e:
            conv.workspace_bytes(shape)
        assert "incompatible function arguments" not in str(e.value)


def test_private_entry_points_refuse_what_would_be_wrong(rng):
    """The C++ objects check what they are handed, whoever calls them: a pixel shuffle factor whose square wraps,
    a K past exact int32 accumulation, a zero point outside the input dtype."""
    layer = nnkern.QConv2d(rng.standard_normal((64, 5, 5, 3)).astype(np.float32), padding=2, input_scale=0.02,
                           input_zero_point=128, output_scale=0.05, output_zero_point=128)
    x = np.zeros((1, 4, 4, 3), np.uint8)
    for r in (0, 2**32, 2**63, 2**64 - 1):
        with pytest.raises(ValueError, match="r\\*r"):
            layer._packed.run_shuffled(x, np.zeros((1, 4, 4, 64), np.uint8), "auto", "", r, False)
    # K = 70000 > 65793 = (2^31 - 1) // (255 * 128): the accumulators would wrap
    K = 70000
    w = np.full((1, K, 4), 127, np.int8)
    big = _C.PackedQConv2d(w, geometry_list(4, K, 1, 1), 0, None, None, False, 0.0, 0.0, 0)
    for alg in _C.algorithms("qconv2d"):
        with pytest.raises(ValueError, match="exceeds"):
            big.run(np.full((1, 1, 1, K), 255, np.uint8), np.zeros((1, 1, 1, 4), np.int32), alg)
    lin = _C.PackedQLinear(np.full((K, 4), 127, np.int8), 0, None, None, False, 0.0, 0.0, 0)  # W: K x N
    with pytest.raises(ValueError, match="exceeds"):
        lin.run(np.full((1, K), 255, np.uint8), np.zeros((1, 4), np.int32))
    with pytest.raises(ValueError, match="exceeds"):
        _C.qgemm(np.full((1, K), 255, np.uint8), 0, 0, np.full((K, 4), 127, np.int8), 1, None, 0,
                 np.zeros((1, 4), np.int32))
    small = _C.PackedQConv2d(np.ones((1, 9, 4), np.int8), geometry_list(4, 1, 3, 3), 0, None, None, False, 0.0, 0.0,
                             200)
    with pytest.raises(ValueError, match="zero point"):  # 200 is no int8 zero point
        small.run(np.zeros((1, 3, 3, 1), np.int8), np.zeros((1, 1, 1, 4), np.int32))
    with pytest.raises(ValueError, match="zero point"):
        _C.qgemm(np.zeros((1, 8), np.int8), 1, 200, np.zeros((8, 4), np.int8), 1, None, 0, np.zeros((1, 4), np.int32))


def test_pooling_and_shuffle_near_2_31_and_2_63():
    x = np.arange(2 * 3 * 3 * 4, dtype=np.float32).reshape(2, 3, 3, 4)
    got = nnkern.max_pool2d(x, 2, stride=P31, ceil_mode=True)
    assert got.shape == (2, 1, 1, 4) and np.array_equal(got[:, 0, 0], x[:, :2, :2].max(axis=(1, 2)))
    for k in (P31, 2**31, 2**63):
        with pytest.raises(ValueError):
            nnkern.max_pool2d(x, k, padding=0)
    assert _C.pool2d_output_size(P31, P31, 1, P31 // 2, P31 // 2, True) == P31
    for args in [(P63, 3, 1, 1, 1, False), (4, P63, 1, 0, 0, False), (4, 2, P63, 0, 0, True),
                 (4, 3, 1, P63, 1, True)]:
        with pytest.raises(ValueError, match="out of range"):
            _C.pool2d_output_size(*args)
    for r in (2**31, 2**32, 2**63):
        with pytest.raises(ValueError):
            nnkern.pixel_shuffle(np.zeros((1, 4, 2, 2), np.float32), r)
        with pytest.raises(ValueError):
            nnkern.pixel_unshuffle(np.zeros((1, 1, 4, 4), np.float32), r)
        with pytest.raises((ValueError, TypeError)):  # TypeError: 2^63 is no ssize_t
            _C.pixel_shuffle(np.zeros((1, 4, 2, 2), np.float32), np.zeros((1, 1, 4, 4), np.float32), r, False)
