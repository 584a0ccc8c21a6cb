"""quantize / dequantize / quantize_weights: bit-exact against the numpy formulation on every ISA path."""
from __future__ import annotations

import numpy as np
import pytest

import nnkern
from nnkern import _C
from conftest import kernel_params, require_level

@pytest.fixture(params=kernel_params("quantize"))
def zisa(request):
    """Each level of the quantize kernel list, with the dispatch cap set to it."""
    name = request.param
    require_level(name)
    with nnkern.max_isa(name):
        yield name


def np_quantize(x, scale, zp, dtype, axis=None):
    lo, hi = (0, 255) if dtype == np.uint8 else (-128, 127)
    shape = [1] * x.ndim
    if axis is not None:
        shape[axis] = -1
    s = np.asarray(scale, np.float32).reshape(shape) if axis is not None else np.float32(scale)
    z = np.asarray(zp, np.float32).reshape(shape) if axis is not None else np.float32(zp)
    with np.errstate(all="ignore"):
        v = np.clip(np.rint(x / s) + z, np.float32(lo), np.float32(hi))
    v = np.where(np.isnan(x), z, v)
    return v.astype(dtype)


def np_dequantize(q, scale, zp, axis=None):
    shape = [1] * q.ndim
    if axis is not None:
        shape[axis] = -1
    s = np.asarray(scale, np.float32).reshape(shape) if axis is not None else np.float32(scale)
    z = np.asarray(zp, np.float32).reshape(shape) if axis is not None else np.float32(zp)
    return (q.astype(np.float32) - z) * s


@pytest.mark.parametrize("dtype,zp", [(np.uint8, 0), (np.uint8, 128), (np.uint8, 255), (np.int8, 0), (np.int8, -128),
                                      (np.int8, 127)])
def test_per_tensor_bit_exact(zisa, rng, dtype, zp):
    for n in list(range(0, 72)) + [1000, 100_003]:  # every tail after one and two 32-float steps
        x = (rng.standard_normal(n) * 60).astype(np.float32)
        for scale in (0.37, 1.0, 1e-3):
            q = nnkern.quantize(x, scale, zp, dtype)
            assert q.dtype == dtype
            assert np.array_equal(q, np_quantize(x, scale, zp, dtype)), f"{zisa} n={n} scale={scale}"
            assert np.array_equal(nnkern.dequantize(q, scale, zp), np_dequantize(q, scale, zp))


def test_ties_round_half_to_even(zisa):
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 126.5, 127.5, -127.5, 3.5] * 5, np.float32)
    q = nnkern.quantize(x, 1.0, 0, np.int8)
    assert np.array_equal(q, np.rint(x).clip(-128, 127).astype(np.int8))
    assert q[:10].tolist() == [0, 2, 2, 0, -2, -2, 126, 127, -128, 4]
    q = nnkern.quantize(x, 0.5, 10, np.uint8)  # x / 0.5 integral: no ties, exact doubling
    assert np.array_equal(q, np_quantize(x, 0.5, 10, np.uint8))


def test_nan_inf_saturation(zisa):
    # 70 values: the 32-float loop of one scale sees them, then the 8-float loop and the tail
    x = np.array([np.nan, np.inf, -np.inf, 1e30, -1e30, 3e38, -0.0, 0.0, 255.49, 255.5] * 7, np.float32)
    q = nnkern.quantize(x, 1.0, 7, np.uint8)
    assert q[:10].tolist() == [7, 255, 0, 255, 0, 255, 7, 7, 255, 255]
    assert np.array_equal(q, np_quantize(x, 1.0, 7, np.uint8))
    q = nnkern.quantize(x, 1.0, -3, np.int8)
    assert q[:10].tolist() == [-3, 127, -128, 127, -128, 127, -3, -3, 127, 127]
    assert np.array_equal(q, np_quantize(x, 1.0, -3, np.int8))


@pytest.mark.parametrize("dtype,zp", [(np.uint8, 0), (np.uint8, 131), (np.int8, 0), (np.int8, -7)])
def test_planes_to_nhwc_bit_exact(zisa, rng, dtype, zp):
    """quantize_planes (a network input's QuantizeLinear and NCHW -> NHWC transpose in one pass): 1-4 planes, every
    pixel tail of the 8-pixel steps, two images, NaN / Inf / ties among them, against numpy's quantize transposed."""
    special = np.array([np.nan, np.inf, -np.inf, 2.5, -2.5, 0.5, 1e30, -0.0], np.float32)
    for K in (1, 2, 3, 4):
        for hw in list(range(0, 42)) + [1031]:
            x = (rng.standard_normal((2, K, 1, hw)) * 60).astype(np.float32)
            flat = x.reshape(-1)
            if flat.size:
                flat[rng.integers(0, flat.size, 6)] = rng.choice(special, 6)
            q = np.empty((2, 1, hw, K), np.uint8)
            _C.quantize_to_nhwc(x, q, 0.37, zp, dtype == np.int8)
            want = np_quantize(x, 0.37, zp, dtype).transpose(0, 2, 3, 1)
            assert np.array_equal(q.view(dtype), want), f"{zisa} K={K} hw={hw}"
    x = rng.standard_normal((3, 3, 61, 67)).astype(np.float32)  # several tasks per image
    q = np.empty((3, 61, 67, 3), np.uint8)
    _C.quantize_to_nhwc(x, q, 0.05, 128, False)
    assert np.array_equal(q, np_quantize(x, 0.05, 128, np.uint8).transpose(0, 2, 3, 1))


def test_planes_to_nhwc_checks_its_arrays():
    x = np.zeros((1, 5, 2, 2), np.float32)
    with pytest.raises(ValueError, match="1 to 4 channels"):
        _C.quantize_to_nhwc(x, np.zeros((1, 2, 2, 5), np.uint8), 1.0, 0, False)
    with pytest.raises(ValueError):
        _C.quantize_to_nhwc(x[:, :3], np.zeros((1, 2, 2, 4), np.uint8), 1.0, 0, False)


@pytest.mark.parametrize("shape,axis", [((5, 7), 0), ((5, 7), 1), ((3, 4, 33), 1), ((3, 4, 33), -1), ((2, 1, 9), 2),
                                        ((70,), 0), ((4, 3, 2, 1), 2)])
def test_per_channel(zisa, rng, shape, axis):
    x = (rng.standard_normal(shape) * 20).astype(np.float32)
    C = shape[axis]
    scale = rng.uniform(0.05, 2.0, C).astype(np.float32)
    for dtype in (np.uint8, np.int8):
        lo, hi = (0, 255) if dtype == np.uint8 else (-128, 127)
        zp = rng.integers(lo, hi + 1, C)
        q = nnkern.quantize(x, scale, zp, dtype, axis=axis)
        assert np.array_equal(q, np_quantize(x, scale, zp, dtype, axis % len(shape)))
        assert np.array_equal(nnkern.dequantize(q, scale, zp, axis=axis), np_dequantize(q, scale, zp, axis % len(shape)))


def test_quantize_weights(rng):
    w = rng.standard_normal((6, 11)).astype(np.float32)
    w[2] = 0.0  # an all-zero channel
    q, s = nnkern.quantize_weights(w)
    assert q.dtype == np.int8 and s.dtype == np.float32 and s.shape == (6,)
    assert s[2] > 0 and (q[2] == 0).all()
    want_s = (np.abs(w).max(axis=1).astype(np.float64) / 127).astype(np.float32)
    assert np.array_equal(s[[0, 1, 3, 4, 5]], want_s[[0, 1, 3, 4, 5]])
    assert np.array_equal(q, np_quantize(w, s, np.zeros(6), np.int8, 0))
    assert np.abs(q).max() == 127 and q.min() >= -127
    assert np.allclose(q * s[:, None], w, atol=s.max() / 2 + 1e-7)
    q1, s1 = nnkern.quantize_weights(w, axis=1)
    assert s1.shape == (11,)
    with pytest.raises(ValueError, match="NaN"):
        nnkern.quantize_weights(np.array([[np.nan]], np.float32))


def test_bad_inputs():
    x = np.zeros(4, np.float32)
    with pytest.raises(TypeError):
        nnkern.quantize(x.astype(np.float64), 1.0)
    with pytest.raises(TypeError):
        nnkern.quantize(x, 1.0, 0, np.int16)
    for bad in (0.0, -1.0, np.nan, np.inf, 1e-60):
        with pytest.raises(ValueError, match="scale"):
            nnkern.quantize(x, bad)
    with pytest.raises(ValueError, match="zero_point"):
        nnkern.quantize(x, 1.0, 256)
    with pytest.raises(ValueError, match="zero_point"):
        nnkern.quantize(x, 1.0, -1, np.uint8)
    with pytest.raises(ValueError, match="zero_point"):
        nnkern.quantize(x, 1.0, 128, np.int8)
    with pytest.raises(TypeError, match="zero_point"):
        nnkern.quantize(x, 1.0, 0.5)
    with pytest.raises(ValueError, match="axis"):
        nnkern.quantize(x, 1.0, axis=1)
    with pytest.raises(ValueError, match="scale"):
        nnkern.quantize(x, [1.0, 2.0], axis=0)
    with pytest.raises(ValueError, match="per-tensor"):
        nnkern.quantize(x, np.ones(4))
    with pytest.raises(TypeError):
        nnkern.dequantize(x, 1.0)
    with pytest.raises(ValueError, match="scale"):
        nnkern.dequantize(np.zeros(3, np.uint8), 0.0)
