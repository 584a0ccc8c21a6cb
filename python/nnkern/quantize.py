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

from . import _C
from ._arrays import c_aligned

__all__ = ["quantize", "dequantize", "quantize_weights"]

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


def quantize(x, scale, zero_point=0, dtype=np.uint8, axis=None):
    """q = clip(rint(x / scale) + zero_point, qmin, qmax) as ``dtype`` (uint8: [0, 255], int8: [-128, 127]).

    x: float32 array (any shape; other dtypes raise TypeError). axis=None: per tensor (scalar scale and
    zero_point); axis=i: per channel along x's axis i (scale / zero_point scalars or of length x.shape[i]).
    scale must be finite and > 0; zero_point within the dtype's range. Rounding is half to even (np.rint).
    NaN -> zero_point; +Inf -> qmax; -Inf -> qmin; finite values beyond the range saturate.
    Bit-identical to ``np.clip(np.rint(x / scale) + zero_point, qmin, qmax)`` evaluated in float32.
    """
    if not isinstance(x, np.ndarray) or x.dtype != np.float32:
        raise TypeError(f"x must be a numpy.ndarray of float32, got "
                        f"{x.dtype if isinstance(x, np.ndarray) else type(x).__name__}")
    dt = _qdtype(dtype)
    axis = _axis(x, axis)
    outer, C, inner, s, z = _params(x, scale, zero_point, dt, axis)
    q = np.empty(x.shape, dt)
    if q.size:
        _C.quantize(c_aligned(x), q, outer, C, inner, s, z, dt == np.int8)
    return q


def dequantize(q, scale, zero_point=0, axis=None):
    """x = (q - zero_point) * scale in float32 (q uint8 or int8; parameters as for :func:`quantize`).
    Bit-identical to ``(q.astype(np.float32) - zero_point) * scale`` in float32."""
    if not isinstance(q, np.ndarray) or q.dtype not in _QDTYPES:
        raise TypeError(f"q must be a numpy.ndarray of uint8 or int8, got "
                        f"{q.dtype if isinstance(q, np.ndarray) else type(q).__name__}")
    axis = _axis(q, axis)
    outer, C, inner, s, z = _params(q, scale, zero_point, q.dtype, axis)
    x = np.empty(q.shape, np.float32)
    if x.size:
        _C.dequantize(np.ascontiguousarray(q), x, outer, C, inner, s, z, q.dtype == np.int8)
    return x


def quantize_weights(w, axis=0):
    """Symmetric per-channel int8 weights (seed I4): returns (q int8, scale float32[w.shape[axis]]) with
    scale[c] = max|w[c]| / 127 over all other axes and q = quantize(w, scale, 0, int8, axis), so
    q lies in [-127, 127] and w ~= q * scale. A channel of zeros gets scale 1.0 (any positive scale gives
    q = 0 there; no division by zero). w: finite float32 (NaN / Inf raise ValueError), at least 1-D.
    For torch.nn.Linear's (out_features, in_features) weight, axis=0 is the output channel."""
    if not isinstance(w, np.ndarray) or w.dtype != np.float32:
        raise TypeError(f"w must be a numpy.ndarray of float32, got "
                        f"{w.dtype if isinstance(w, np.ndarray) else type(w).__name__}")
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
