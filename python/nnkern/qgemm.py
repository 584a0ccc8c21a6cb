"""Integer matrix products: qgemm (uint8/int8 x int8 -> int32), qgemm16 (int16 x int16 -> int32), and the
prepacked QLinear layer with its fused requantization."""
from __future__ import annotations

import math
import numbers

import numpy as np

from . import _C
from ._arrays import aligned_target, as_bool, c_aligned, check_no_overlap, is_real_scalar

__all__ = ["qgemm", "qgemm16", "QLinear", "qgemm_max_k"]

I32_MAX = 2 ** 31 - 1
_QTYPE = {np.dtype(np.uint8): 0, np.dtype(np.int8): 1, np.dtype(np.int16): 2}
_RANGE = {np.dtype(np.uint8): (0, 255), np.dtype(np.int8): (-128, 127), np.dtype(np.int16): (-32768, 32767)}


def _require(x, name, dtypes):
    if type(x) is not np.ndarray and not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray, got {type(x).__name__}")
    if x.dtype not in dtypes:
        want = " or ".join(np.dtype(d).name for d in dtypes)
        raise TypeError(f"{name} must have dtype {want}, got {x.dtype}")
    if x.ndim != 2:
        raise ValueError(f"{name} must be 2-D, got a {x.ndim}-D array of shape {x.shape}")
    return x


_A8 = (np.dtype(np.uint8), np.dtype(np.int8))
_B8 = (np.dtype(np.int8),)
_I16 = (np.dtype(np.int16),)


def _int_scalar(v, name):
    if type(v) is int:
        return v
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (numbers.Integral, np.integer)):
        if isinstance(v, np.ndarray) and v.ndim == 0 and v.dtype.kind in "iu":
            return int(v)
        raise TypeError(f"{name} must be an integer, got {type(v).__name__}")
    return int(v)


def _zero_point(v, name, dtype):
    lo, hi = _RANGE[dtype]
    z = _int_scalar(v, name)
    if not lo <= z <= hi:
        raise ValueError(f"{name} must be in [{lo}, {hi}] for {np.dtype(dtype).name} data, got {z}")
    return z


def _column_zero_points(v, name, dtype, N):
    """A scalar, or one zero point per column (length N): returns (scalar, int32 array or None)."""
    if type(v) is int:
        return _zero_point(v, name, dtype), None
    lo, hi = _RANGE[dtype]
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
    return _zero_point(v, name, dtype), None


def qgemm_max_k(a_dtype, a_zero_point=0, b_zero_point=0):
    """The largest K for which every uint8/int8 x int8 product sum_k (a - za)(b - zb) fits int32:
    (2**31 - 1) // (max |a - za| * max |b - zb|) over the whole value ranges of the dtypes
    (b_zero_point may be per column: the worst column counts). E.g. 65793 for za = zb = 0, uint8."""
    try:
        adt = np.dtype(a_dtype) if a_dtype is not None else None
    except TypeError:
        adt = None
    if adt not in _A8:
        raise TypeError(f"a_dtype must be numpy.uint8 or numpy.int8, got {a_dtype!r}")
    alo, ahi = _RANGE[adt]
    za = _zero_point(a_zero_point, "a_zero_point", adt)
    da = max(za - alo, ahi - za)
    if is_real_scalar(b_zero_point) or not isinstance(b_zero_point, (list, tuple, np.ndarray)):
        zb = _zero_point(b_zero_point, "b_zero_point", _B8[0])
        db = max(zb + 128, 127 - zb)
    else:
        _, zbs = _column_zero_points(b_zero_point, "b_zero_point", _B8[0], np.size(b_zero_point))
        db = int(max(np.max(zbs + 128), np.max(127 - zbs))) if zbs.size else 128
    return I32_MAX // (da * db)


def _output(out, M, N):
    if out is None:
        return np.empty((M, N), np.int32)
    if not isinstance(out, np.ndarray) or out.dtype != np.int32:
        raise TypeError(f"out must be a numpy.ndarray of int32, got "
                        f"{out.dtype if isinstance(out, np.ndarray) else type(out).__name__}")
    if out.shape != (M, N):
        raise ValueError(f"out must have shape {(M, N)}, got {out.shape}")
    if not out.flags.c_contiguous or not out.flags.writeable:
        raise ValueError("out must be a writeable C-contiguous array")
    return out


def _algorithm(v):
    names = ["auto", *_C.algorithms("qgemm")]
    if not isinstance(v, str):
        raise TypeError(f"algorithm must be a str, one of {names}, got {type(v).__name__}")
    if v not in names:
        raise ValueError(f"algorithm must be one of {names}, got {v!r}")
    return v


def qgemm(a, b, *, a_zero_point=0, b_zero_point=0, out=None, algorithm="auto"):
    """Exact integer matrix product: C[m, n] = sum_k (a[m, k] - a_zero_point) * (b[k, n] - b_zero_point[n]).

    a: uint8 or int8 (M, K) activations; b: int8 (K, N) weights; result int32 (M, N), bit-exact (it
    equals the int64 numpy computation). a_zero_point: an integer in a's range; b_zero_point: an
    integer in [-128, 127] or one per column (length N). Zero points are folded into row/column-sum
    corrections, and int8 activations are shifted to uint8 (+128) internally for VNNI, with the
    compensation applied for you.
    K must satisfy K <= qgemm_max_k(a.dtype, a_zero_point, b_zero_point) (65793 with zero points 0 and
    uint8 a), so that every possible result fits int32; a larger K raises ValueError.
    Non-contiguous inputs are copied. out: optional int32 (M, N) C-contiguous array, not overlapping
    the inputs.
    algorithm: "auto", or one path of ``nnkern._C.algorithms("qgemm")``: "gemv" (M <= 4 on CPUs with a
    VNNI GEMV kernel: B read once, unpacked), "pack_per_panel" (each task packs the panel of B it uses;
    auto's choice while B's rows fit a page), "pack_all" (all of B packed first). Every path gives the same
    exact result; a path that does not apply raises ValueError.
    """
    algorithm = _algorithm(algorithm)
    a = _require(a, "a", _A8)
    b = _require(b, "b", _B8)
    M, K = a.shape
    Kb, N = b.shape
    if K != Kb:
        raise ValueError(f"qgemm: inner dimensions differ: a of shape {a.shape} and b of shape {b.shape}")
    za = _zero_point(a_zero_point, "a_zero_point", a.dtype)
    zb, zb_arr = _column_zero_points(b_zero_point, "b_zero_point", _B8[0], N)
    kmax = qgemm_max_k(a.dtype, za, zb_arr if zb_arr is not None else zb)
    if K > kmax:
        raise ValueError(f"K = {K} exceeds {kmax}, the largest K whose results all fit int32 with these "
                         f"dtypes and zero points")
    out = _output(out, M, N)
    if np.may_share_memory(out, a) or np.may_share_memory(out, b):
        check_no_overlap(out, "out", a=a, b=b)
    if out.size == 0:
        return out
    target = aligned_target(out)
    _C.qgemm(a if a.flags.c_contiguous else np.ascontiguousarray(a), _QTYPE[a.dtype], za,
             b if b.flags.c_contiguous else np.ascontiguousarray(b), 1, zb_arr, zb, target, algorithm)
    if target is not out:
        np.copyto(out, target)
    return out


def qgemm16(a, b, *, a_zero_point=0, b_zero_point=0, out=None, algorithm="auto"):
    """Exact int16 x int16 -> int32 product (VPDPWSSD where available, VPMADDWD otherwise):
    C[m, n] = sum_k (a[m, k] - a_zero_point) * (b[k, n] - b_zero_point[n]).

    a: int16 (M, K); b: int16 (K, N); zero points in the int16 range (b's scalar or per column).
    Bound: full-range int16 products overflow int32 after two terms, so the check uses the data:
    K * max|a - za| * max|b - zb| must be <= 2**31 - 1, else ValueError (computed from a and b,
    an O(MK + KN) pass). Under that bound the result is bit-exact. algorithm: as for :func:`qgemm`.
    """
    algorithm = _algorithm(algorithm)
    a = _require(a, "a", _I16)
    b = _require(b, "b", _I16)
    M, K = a.shape
    Kb, N = b.shape
    if K != Kb:
        raise ValueError(f"qgemm16: inner dimensions differ: a of shape {a.shape} and b of shape {b.shape}")
    za = _zero_point(a_zero_point, "a_zero_point", _I16[0])
    zb, zb_arr = _column_zero_points(b_zero_point, "b_zero_point", _I16[0], N)
    out = _output(out, M, N)
    check_no_overlap(out, "out", a=a, b=b)
    if out.size == 0:
        return out
    if K:
        da = max(abs(int(a.max()) - za), abs(int(a.min()) - za))
        bz = zb_arr.astype(np.int64) if zb_arr is not None else np.int64(zb)
        db = int(np.max(np.maximum(np.abs(b.max(axis=0).astype(np.int64) - bz),
                                   np.abs(b.min(axis=0).astype(np.int64) - bz))))
        if K * da * db > I32_MAX:
            raise ValueError(f"qgemm16: K * max|a - za| * max|b - zb| = {K} * {da} * {db} exceeds 2**31 - 1: "
                             f"the result may not fit int32")
    target = aligned_target(out)
    _C.qgemm(c_aligned(a), 2, za, c_aligned(b), 2, zb_arr, zb, target, algorithm)
    if target is not out:
        np.copyto(out, target)
    return out


_OUT_KIND = {np.dtype(np.int32): 0, np.dtype(np.float32): 1, np.dtype(np.uint8): 2, np.dtype(np.int8): 3}


def _read_only(a):
    a.flags.writeable = False
    return a


def _positive_scale(v, name, n=None):
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


class QLinear:
    """Quantized ``y = x @ W.T + bias`` (torch.nn.Linear layout), weights packed once, requantization fused.

    weight: float32 (out_features, in_features), quantized per output channel at construction as
      :func:`nnkern.quantize_weights` does (int8, scale max|w|/127); or int8 with ``weight_scale`` (scalar or
      per output channel) taken as given (symmetric: weight zero point 0).
    bias: float (out_features,) or None, in real units.
    input_scale, input_zero_point: the quantization of x (uint8 or int8, chosen per call by x's dtype;
      the zero point must lie in that dtype's range).
    output_dtype: uint8 / int8: requantized with output_scale, output_zero_point (required scale);
      float32: the real result; int32: the exact accumulator sum_k (x - zx) wq (bias must be None).
    relu: max(y, 0), fused (for uint8/int8 it is exactly the clamp at the output zero point).

    One call runs the GEMM and, on the int32 accumulators in registers (seed I12): float conversion,
    one FMA ``acc * factor[n] + offset[n]`` with the precomputed factor = input_scale * weight_scale[n] /
    output_scale and offset = bias[n] / output_scale + output_zero_point (float32), ReLU, clamp to the
    output range, round half to even, store. (float32 output: factor = input_scale * weight_scale[n],
    offset = bias[n].) The results are exactly those float32 operations; they match a float64 evaluation
    of the same formula except within one float32 rounding of a .5 tie.
    Safe to call from several threads at once.
    """

    def __init__(self, weight, bias=None, *, weight_scale=None, input_scale, input_zero_point,
                 output_scale=None, output_zero_point=0, output_dtype=np.uint8, relu=False):
        from .quantize import quantize_weights
        relu = as_bool(relu, "relu")
        if not isinstance(weight, np.ndarray):
            raise TypeError(f"weight must be a numpy.ndarray, got {type(weight).__name__}")
        if weight.ndim != 2:
            raise ValueError(f"weight must be 2-D (out_features, in_features), got shape {weight.shape}")
        N, K = weight.shape
        if weight.dtype == np.float32:
            if weight_scale is not None:
                raise ValueError("weight_scale is only for int8 weights (float32 weights are quantized here)")
            wq, ws = quantize_weights(weight, axis=0)
        elif weight.dtype == np.int8:
            if weight_scale is None:
                raise ValueError("int8 weights need weight_scale (scalar or per output channel)")
            wq = weight
            ws = np.broadcast_to(_positive_scale(weight_scale, "weight_scale", N), (N,)).astype(np.float32)
        else:
            raise TypeError(f"weight must have dtype float32 or int8, got {weight.dtype}")
        sx = float(_positive_scale(input_scale, "input_scale"))
        zx = _int_scalar(input_zero_point, "input_zero_point")
        if not -128 <= zx <= 255:
            raise ValueError(f"input_zero_point must be in [-128, 255], got {zx}")
        try:
            odt = np.dtype(output_dtype)
        except TypeError:
            odt = None
        if odt not in _OUT_KIND:
            raise TypeError(f"output_dtype must be uint8, int8, float32 or int32, got {output_dtype!r}")
        if bias is not None:
            bias = np.asarray(bias)
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
            so = float(_positive_scale(output_scale, "output_scale"))
            zo = _zero_point(output_zero_point, "output_zero_point", odt)
            factor = sx * ws.astype(np.float64) / so
            offset = (bias.astype(np.float64) / so if bias is not None else np.zeros(N)) + zo
            lo, hi = _RANGE[odt]
            if relu:
                lo = max(lo, zo)
        elif odt == np.dtype(np.float32):
            if output_scale is not None:
                raise ValueError("output_scale is only for uint8 / int8 output")
            factor = sx * ws.astype(np.float64)
            offset = bias.astype(np.float64) if bias is not None else np.zeros(N)
        else:
            if bias is not None or output_scale is not None:
                raise ValueError("int32 output is the exact accumulator: no bias or output_scale")
        self._output_dtype = odt
        self._relu = relu
        self._input_scale, self._input_zero_point = sx, zx
        self._weight_q = _read_only(np.array(wq, copy=True))  # (out, in) int8
        self._weight_scale = _read_only(np.array(ws, np.float32))
        self._factor = self._offset = None
        if factor is not None:
            self._factor = _read_only(factor.astype(np.float32))
            self._offset = _read_only(offset.astype(np.float32))
            if not (np.isfinite(self._factor).all() and np.isfinite(self._offset).all()):
                raise ValueError("the combined requantization factor or offset overflows float32")
        self._lo, self._hi = float(lo), float(hi)  # the output clamp (ReLU folded in)
        self._checked = set()  # (input dtype, zero point) pairs whose range and K bound were checked
        # The C++ object copies the weights, factor and offset and holds every size a call uses: the
        # attributes below are read-only, and no change to them could make a call go out of bounds.
        self._packed = _C.PackedQLinear(np.ascontiguousarray(self._weight_q.T), _OUT_KIND[odt], self._factor,
                                        self._offset, self._relu, float(lo), float(hi), zx)

    in_features = property(lambda self: self._packed.in_features, doc="K, the features of each input row")
    out_features = property(lambda self: self._packed.out_features, doc="N, the features of each output row")
    output_dtype = property(lambda self: self._output_dtype, doc="uint8, int8, float32 or int32")
    relu = property(lambda self: self._relu, doc="whether ReLU is fused")
    input_scale = property(lambda self: self._input_scale, doc="the scale of the quantized input")
    input_zero_point = property(lambda self: self._input_zero_point, doc="the zero point of the quantized input")
    weight_q = property(lambda self: self._weight_q, doc="the int8 weights (out_features, in_features), read-only")
    weight_scale = property(lambda self: self._weight_scale, doc="per output channel float32 scales, read-only")
    factor = property(lambda self: self._factor,
                      doc="float32 per-channel requantization factor (None for int32 output), read-only")
    offset = property(lambda self: self._offset,
                      doc="float32 per-channel requantization offset (None for int32 output), read-only")

    @property
    def kernel(self) -> str:
        """The micro-kernel the weights were packed for."""
        return self._packed.kernel_name

    def __call__(self, x, out=None):
        if not isinstance(x, np.ndarray) or x.dtype not in _A8:
            raise TypeError(f"x must be a numpy.ndarray of uint8 or int8, got "
                            f"{x.dtype if isinstance(x, np.ndarray) else type(x).__name__}")
        K, N = self.in_features, self.out_features
        if x.ndim < 1 or x.shape[-1] != K:
            raise ValueError(f"x must have shape (..., {K}), got {x.shape}")
        zx = self._input_zero_point
        key = (x.dtype, zx)
        if key not in self._checked:
            lo, hi = _RANGE[x.dtype]
            if not lo <= zx <= hi:
                raise ValueError(f"input_zero_point {zx} is outside the range of {x.dtype} input")
            kmax = qgemm_max_k(x.dtype, zx, 0)
            if K > kmax:
                raise ValueError(f"in_features = {K} exceeds {kmax}, the largest K whose "
                                 f"accumulators all fit int32 for {x.dtype} input with zero point {zx}")
            self._checked.add(key)
        lead = x.shape[:-1]
        shape = lead + (N,)
        odt = self._output_dtype
        if out is None:
            out = np.empty(shape, odt)
        else:
            if not isinstance(out, np.ndarray) or out.dtype != odt:
                raise TypeError(f"out must be a numpy.ndarray of {odt}")
            if out.shape != shape:
                raise ValueError(f"out must have shape {shape}, got {out.shape}")
            if not out.flags.c_contiguous or not out.flags.writeable:
                raise ValueError("out must be a writeable C-contiguous array")
            if np.may_share_memory(out, x):
                check_no_overlap(out, "out", x=x)
        if out.size == 0:
            return out
        rows = math.prod(lead)
        x2 = x.reshape(rows, K)
        if not x2.flags.c_contiguous:
            x2 = np.ascontiguousarray(x2)
        target = aligned_target(out)
        self._packed.run(x2, target.reshape(rows, N))
        if target is not out:
            np.copyto(out, target)
        return out

    def __repr__(self):
        return (f"QLinear(in_features={self.in_features}, out_features={self.out_features}, "
                f"output_dtype={self.output_dtype.name}, relu={self.relu}, kernel={self.kernel!r})")
