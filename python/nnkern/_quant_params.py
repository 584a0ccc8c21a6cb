"""Argument checks and tables shared by the quantized ops and layers (qgemm, QLinear, QConv2d, pooling): dtypes,
zero points, scales, and the fused output stage's factor and offset."""
from __future__ import annotations

import numbers

import numpy as np

from ._arrays import as_array, is_real_scalar, read_only_copy

I32_MAX = 2 ** 31 - 1
QTYPE = {np.dtype(np.uint8): 0, np.dtype(np.int8): 1, np.dtype(np.int16): 2}
RANGE = {np.dtype(np.uint8): (0, 255), np.dtype(np.int8): (-128, 127), np.dtype(np.int16): (-32768, 32767)}


def require(x, name, dtypes):
    x = as_array(x, name)
    if x.dtype not in dtypes:
        want = " or ".join(np.dtype(d).name for d in dtypes)
        raise TypeError(f"{name} must have dtype {want}, got {x.dtype}")
    if x.ndim != 2:
        raise ValueError(f"{name} must be 2-D, got a {x.ndim}-D array of shape {x.shape}")
    return x


A8 = (np.dtype(np.uint8), np.dtype(np.int8))
B8 = (np.dtype(np.int8),)
I16 = (np.dtype(np.int16),)


def int_scalar(v, name):
    if type(v) is int:
        return v
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (numbers.Integral, np.integer)):
        if isinstance(v, np.ndarray) and v.ndim == 0 and v.dtype.kind in "iu":
            return int(v)
        raise TypeError(f"{name} must be an integer, got {type(v).__name__}")
    return int(v)


def zero_point(v, name, dtype):
    lo, hi = RANGE[dtype]
    z = int_scalar(v, name)
    if not lo <= z <= hi:
        raise ValueError(f"{name} must be in [{lo}, {hi}] for {np.dtype(dtype).name} data, got {z}")
    return z


def column_zero_points(v, name, dtype, N):
    """A scalar, or one zero point per column (length N): returns (scalar, int32 array or None)."""
    if type(v) is int:
        return zero_point(v, name, dtype), None
    lo, hi = RANGE[dtype]
    if isinstance(v, (list, tuple, np.ndarray)) and np.ndim(v) == 1:
        arr = np.asarray(v)
        if arr.dtype.kind not in "iu" and not (arr.size == 0 and arr.dtype.kind in "fb"):  # [] is float64
            raise TypeError(f"{name} must hold integers, got dtype {arr.dtype}")
        if arr.shape != (N,):
            raise ValueError(f"{name} must be a scalar or have shape ({N},), got {arr.shape}")
        if arr.size and (arr.min() < lo or arr.max() > hi):
            raise ValueError(f"{name} values must be in [{lo}, {hi}] for {np.dtype(dtype).name} data")
        return 0, np.array(arr, dtype=np.int32)  # a fresh, aligned copy
    if isinstance(v, np.ndarray) and v.ndim > 1:
        raise ValueError(f"{name} must be a scalar or 1-D, got shape {v.shape}")
    return zero_point(v, name, dtype), None


OUT_KIND = {np.dtype(np.int32): 0, np.dtype(np.float32): 1, np.dtype(np.uint8): 2, np.dtype(np.int8): 3}


def positive_scale(v, name, n=None):
    if not is_real_scalar(v):
        ok = isinstance(v, (list, tuple, np.ndarray)) and np.asarray(v).dtype.kind in "iuf"
        if not ok:
            raise TypeError(f"{name} must be a positive real number{'' if n is None else ' or an array of them'}, "
                            f"got {type(v).__name__}")
    arr = np.asarray(v, np.float64)
    if arr.ndim > 1 or (arr.ndim == 1 and (n is None or arr.shape != (n,))):
        raise ValueError(f"{name} must be a scalar{'' if n is None else f' or have shape ({n},)'}, got {arr.shape}")
    if not (np.isfinite(arr).all() and (arr > 0).all()):
        raise ValueError(f"{name} must be finite and > 0")
    return arr


def quantized_weights(weight, weight_scale):
    """(int8 weights, float32 per-output-channel scales) of a layer's weight (output channels on axis 0):
    float32 quantized per channel by quantize_weights, or int8 with weight_scale (scalar or per channel)."""
    from .quantize import quantize_weights
    N = weight.shape[0]
    if weight.dtype == np.float32:
        if weight_scale is not None:
            raise ValueError("weight_scale is only for int8 weights (float32 weights are quantized here)")
        if not np.isfinite(weight).all():
            raise ValueError("weight contains NaN or Inf: a float32 weight must be finite to be quantized")
        return quantize_weights(weight, axis=0)
    if weight.dtype == np.int8:
        if weight_scale is None:
            raise ValueError("int8 weights need weight_scale (scalar or per output channel)")
        return weight, np.broadcast_to(positive_scale(weight_scale, "weight_scale", N), (N,)).astype(np.float32)
    raise TypeError(f"weight must have dtype float32 or int8, got {weight.dtype}")


def output_stage(ws, bias, sx, output_scale, output_zero_point, odt, relu, dynamic=False):
    """The fused output stage of the quantized layers (QLinear, QConv2d), from the weight scales ws (N,):
    (bias checked, float32 factor, float32 offset, lo, hi); factor / offset None for int32 output.
    acc * factor[n] + offset[n] in float32, then clamped to [lo, hi] (ReLU folded in) for uint8 / int8."""
    N = ws.shape[0]
    if bias is not None:
        bias = as_array(bias, "bias")
        if bias.dtype.kind != "f":
            raise TypeError(f"bias must be a float array, got dtype {bias.dtype}")
        if bias.shape != (N,):
            raise ValueError(f"bias must have shape ({N},), got {bias.shape}")
        if not np.isfinite(bias).all():
            raise ValueError("bias contains NaN or Inf")
    factor = offset = None
    lo = hi = 0.0
    if odt in (np.dtype(np.uint8), np.dtype(np.int8)):
        if output_scale is None:
            raise ValueError("uint8 / int8 output needs output_scale")
        so = float(positive_scale(output_scale, "output_scale"))
        zo = zero_point(output_zero_point, "output_zero_point", odt)
        factor = sx * ws.astype(np.float64) / so
        offset = (bias.astype(np.float64) / so if bias is not None else np.zeros(N)) + zo
        lo, hi = RANGE[odt]
        if relu:
            lo = max(lo, zo)
    elif odt == np.dtype(np.float32):
        if output_scale is not None:
            raise ValueError("output_scale is only for uint8 / int8 output")
        # dynamic: the per-call factor is weight_scale * that call's input scale (C++ run_dynamic)
        factor = ws.astype(np.float64) if dynamic else sx * ws.astype(np.float64)
        offset = bias.astype(np.float64) if bias is not None else np.zeros(N)
    else:
        if bias is not None or output_scale is not None:
            raise ValueError("int32 output is the exact accumulator: no bias or output_scale")
    if factor is not None:
        factor64 = factor
        factor = read_only_copy(factor.astype(np.float32))
        offset = read_only_copy(offset.astype(np.float32))
        if not (np.isfinite(factor).all() and np.isfinite(offset).all()):
            raise ValueError("the combined requantization factor or offset overflows float32")
        # A factor below float32's normal range would make the output (nearly) independent of the input.
        tiny = (factor64 != 0) & (np.abs(factor) < np.finfo(np.float32).tiny)
        if tiny.any() and not dynamic:
            what = "input_scale * weight_scale" + (" / output_scale" if output_scale is not None else "")
            raise ValueError(f"the combined requantization factor {what} = {float(factor64[tiny][0]):g} underflows "
                             f"float32 (below {np.finfo(np.float32).tiny:g})")
    return bias, factor, offset, lo, hi
