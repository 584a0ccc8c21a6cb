"""Quantization (seeds I4, I5, Q1): float32 <-> uint8/int8 with per-tensor or per-channel parameters.

    quantize:   q = NaN(x) ? zero_point : clip(rint(x / scale) + zero_point, qmin, qmax)
    dequantize: x = (q - zero_point) * scale

computed in float32 exactly as written (a correctly rounded division, rint = round half to even as
np.rint, then saturation): the result is bit-identical to that numpy expression on float32 arrays.
+-Inf saturate to qmax / qmin; NaN maps to the zero point (the quantized value of 0.0).
"""
from __future__ import annotations

import numbers

import numpy as np
import numpy.typing as npt

from . import _C
from ._arrays import ArrayIn, as_array, c_aligned

__all__ = ["quantize", "dequantize", "quantize_weights", "quantize_dynamic", "dynamic_quantization_params"]

_QDTYPES = {np.dtype(np.uint8): (0, 255), np.dtype(np.int8): (-128, 127)}


def _qdtype(dtype):
    try:
        if dtype is None:  # np.dtype(None) would be float64
            raise TypeError
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"dtype must be numpy.uint8 or numpy.int8, got {dtype!r}") from None
    if dt not in _QDTYPES:
        raise TypeError(f"dtype must be numpy.uint8 or numpy.int8, got {dt}")
    return dt


def _axis(x, axis):
    if axis is None:
        return None
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (numbers.Integral, np.integer)):
        raise TypeError(f"axis must be an integer or None, got {type(axis).__name__}")
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"axis {axis} is out of range for a {x.ndim}-D array")
    return int(axis) % x.ndim


def _params(x, scale, zero_point, dt, axis):
    """(outer, C, inner, scale float32[C], zp int32[C]) after checking them."""
    C = 1 if axis is None else x.shape[axis]
    s = np.asarray(scale)
    if s.dtype.kind not in "fiu":
        raise TypeError(f"scale must be a real number or an array of them, got dtype {s.dtype}")
    if axis is None and s.ndim != 0:
        raise ValueError(f"per-tensor quantization takes a scalar scale, got shape {s.shape} (pass axis= for "
                         f"per-channel)")
    if s.ndim > 1 or (s.ndim == 1 and s.shape != (C,)):
        raise ValueError(f"scale must be a scalar or have shape ({C},), got {s.shape}")
    s32 = np.broadcast_to(s.astype(np.float32), (C,)).copy()
    if not (np.isfinite(s32).all() and (s32 > 0).all()):
        raise ValueError("scale must be finite and > 0 (in float32)")
    z = np.asarray(zero_point)
    if z.dtype.kind not in "iu":
        raise TypeError(f"zero_point must be an integer or an array of integers, got dtype {z.dtype}")
    if axis is None and z.ndim != 0:
        raise ValueError(f"per-tensor quantization takes a scalar zero_point, got shape {z.shape}")
    if z.ndim > 1 or (z.ndim == 1 and z.shape != (C,)):
        raise ValueError(f"zero_point must be a scalar or have shape ({C},), got {z.shape}")
    lo, hi = _QDTYPES[dt]
    if z.size and (z.min() < lo or z.max() > hi):
        raise ValueError(f"zero_point must be in [{lo}, {hi}] for {dt.name}")
    z32 = np.broadcast_to(z.astype(np.int32), (C,)).copy()
    if axis is None:
        return 1, 1, x.size, s32, z32
    outer = int(np.prod(x.shape[:axis], dtype=np.int64))
    inner = int(np.prod(x.shape[axis + 1:], dtype=np.int64))
    return outer, C, inner, s32, z32


def quantize(x: ArrayIn, scale: float | ArrayIn, zero_point: int | ArrayIn = 0, dtype: npt.DTypeLike = np.uint8,
             axis: int | None = None) -> np.ndarray:
    """q = clip(rint(x / scale) + zero_point, qmin, qmax) as ``dtype`` (uint8: [0, 255], int8: [-128, 127]).

    x: float32 array (any shape; other dtypes raise TypeError). axis=None: per tensor (scalar scale and
    zero_point); axis=i: per channel along x's axis i (scale / zero_point scalars or of length x.shape[i]).
    scale must be finite and > 0; zero_point within the dtype's range. Rounding is half to even (np.rint).
    NaN -> zero_point; +Inf -> qmax; -Inf -> qmin; finite values beyond the range saturate.
    Bit-identical to ``np.clip(np.rint(x / scale) + zero_point, qmin, qmax)`` evaluated in float32.
    """
    x = as_array(x, "x")
    if x.dtype != np.float32:
        raise TypeError(f"x must have dtype float32, got {x.dtype}")
    dt = _qdtype(dtype)
    axis = _axis(x, axis)
    outer, C, inner, s, z = _params(x, scale, zero_point, dt, axis)
    q = np.empty(x.shape, dt)
    if q.size:
        _C.quantize(c_aligned(x), q, outer, C, inner, s, z, dt == np.int8)
    return q


def dequantize(q: ArrayIn, scale: float | ArrayIn, zero_point: int | ArrayIn = 0,
               axis: int | None = None) -> npt.NDArray[np.float32]:
    """x = (q - zero_point) * scale in float32 (q uint8 or int8; parameters as for :func:`quantize`).
    Bit-identical to ``(q.astype(np.float32) - zero_point) * scale`` in float32."""
    q = as_array(q, "q")
    if q.dtype not in _QDTYPES:
        raise TypeError(f"q must have dtype uint8 or int8, got {q.dtype}")
    axis = _axis(q, axis)
    outer, C, inner, s, z = _params(q, scale, zero_point, q.dtype, axis)
    x = np.empty(q.shape, np.float32)
    if x.size:
        _C.dequantize(np.ascontiguousarray(q), x, outer, C, inner, s, z, q.dtype == np.int8)
    return x


def quantize_weights(w: ArrayIn, axis: int = 0) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.float32]]:
    """Symmetric per-channel int8 weights (seed I4): returns (q int8, scale float32[w.shape[axis]]) with
    scale[c] = max|w[c]| / 127 over all other axes and q = quantize(w, scale, 0, int8, axis), so
    q lies in [-127, 127] and w ~= q * scale. A channel of zeros gets scale 1.0 (any positive scale gives
    q = 0 there; no division by zero). w: finite float32 (NaN / Inf raise ValueError), at least 1-D.
    For torch.nn.Linear's (out_features, in_features) weight, axis=0 is the output channel."""
    w = as_array(w, "w")
    if w.dtype != np.float32:
        raise TypeError(f"w must have dtype float32, got {w.dtype}")
    if w.ndim < 1:
        raise ValueError("w must be at least 1-D")
    axis = _axis(w, axis)
    if not np.isfinite(w).all():
        raise ValueError("w contains NaN or Inf")
    others = tuple(i for i in range(w.ndim) if i != axis)
    amax = np.max(np.abs(w), axis=others) if w.size else np.zeros(w.shape[axis], np.float32)
    scale = (amax.astype(np.float64) / 127.0).astype(np.float32)
    tiny = np.finfo(np.float32).tiny
    scale = np.where(amax == 0, np.float32(1.0), np.maximum(scale, tiny)).astype(np.float32)
    return quantize(w, scale, 0, np.int8, axis), scale


_F32_TINY_SCALE = np.float32(2.0 ** -149)  # the smallest positive float32


def dynamic_quantization_params(lo: float, hi: float) -> tuple[np.float32, int]:
    """(scale, zero_point) of asymmetric uint8 quantization for data in [lo, hi], as onnxruntime's
    DynamicQuantizeLinear: the range is widened to include 0, scale = (hi - lo) / 255 (1.0 when hi == lo)
    and zero_point = round_half_even(clip(0 - lo / scale, 0, 255)), all in float32. Deviation: a scale
    that underflows to 0 (every |x| below ~1.8e-43) becomes the smallest float32 instead of dividing by
    0. ValueError if the range is not finite (Inf in the data, or hi - lo overflows float32)."""
    f = np.float32
    lo32, hi32 = min(f(lo), f(0.0)), max(f(hi), f(0.0))
    with np.errstate(over="ignore", invalid="ignore"):
        width = f(hi32 - lo32)
    if not (np.isfinite(lo32) and np.isfinite(hi32) and np.isfinite(width)):
        raise ValueError(f"dynamic quantization needs a finite range, got [{lo}, {hi}] (Inf in x, or a range "
                         f"wider than float32 holds)")
    scale = f(1.0) if hi32 == lo32 else max(f(width / f(255.0)), _F32_TINY_SCALE)
    with np.errstate(over="ignore"):  # lo / a tiny scale: -inf, clipped to 255
        zp = np.rint(np.clip(f(0.0) - f(lo32 / scale), f(0.0), f(255.0)))
    return f(scale), int(zp)


def quantize_dynamic(x: ArrayIn) -> tuple[npt.NDArray[np.uint8], np.float32, int]:
    """onnxruntime's DynamicQuantizeLinear: returns (q uint8, scale float32, zero_point int) with the
    parameters of :func:`dynamic_quantization_params` over the non-NaN values of x (float32, any shape;
    the min/max pass is vectorized and threaded) and q = :func:`quantize` (x, scale, zero_point)."""
    x = as_array(x, "x")
    if x.dtype != np.float32:
        raise TypeError(f"x must have dtype float32, got {x.dtype}")
    xc = c_aligned(x)
    lo, hi = _C.minmax(xc.reshape(-1)) if xc.size else (np.inf, -np.inf)
    scale, zp = dynamic_quantization_params(lo, hi)
    q = np.empty(x.shape, np.uint8)
    if q.size:
        _C.quantize(xc, q, 1, 1, xc.size, np.array([scale], np.float32), np.array([zp], np.int32), False)
    return q, scale, zp
