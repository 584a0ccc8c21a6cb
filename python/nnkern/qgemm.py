"""Integer matrix products: qgemm (uint8/int8 x int8 -> int32), qgemm16 (int16 x int16 -> int32), and the
prepacked QLinear layer with its fused requantization."""
from __future__ import annotations

import math
import numbers

import numpy as np

from . import _C
from ._arrays import check_no_overlap

__all__ = ["qgemm", "qgemm16", "QLinear", "qgemm_max_k"]

I32_MAX = 2 ** 31 - 1
_QTYPE = {np.dtype(np.uint8): 0, np.dtype(np.int8): 1, np.dtype(np.int16): 2}
_RANGE = {np.dtype(np.uint8): (0, 255), np.dtype(np.int8): (-128, 127), np.dtype(np.int16): (-32768, 32767)}


def _require(x, name, dtypes):
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray, got {type(x).__name__}")
    if x.dtype not in [np.dtype(d) for d in dtypes]:
        want = " or ".join(np.dtype(d).name for d in dtypes)
        raise TypeError(f"{name} must have dtype {want}, got {x.dtype}")
    if x.ndim != 2:
        raise ValueError(f"{name} must be 2-D, got a {x.ndim}-D array of shape {x.shape}")
    return x


def _int_scalar(v, name):
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (numbers.Integral, np.integer)):
        if isinstance(v, np.ndarray) and v.ndim == 0 and v.dtype.kind in "iu":
            return int(v)
        raise TypeError(f"{name} must be an integer, got {type(v).__name__}")
    return int(v)


def _zero_point(v, name, dtype):
    lo, hi = _RANGE[np.dtype(dtype)]
    z = _int_scalar(v, name)
    if not lo <= z <= hi:
        raise ValueError(f"{name} must be in [{lo}, {hi}] for {np.dtype(dtype).name} data, got {z}")
    return z


def _column_zero_points(v, name, dtype, N):
    """A scalar, or one zero point per column (length N): returns (scalar, int32 array or None)."""
    lo, hi = _RANGE[np.dtype(dtype)]
    if isinstance(v, (list, tuple, np.ndarray)) and np.ndim(v) == 1:
        arr = np.asarray(v)
        if arr.dtype.kind not in "iu":
            raise TypeError(f"{name} must hold integers, got dtype {arr.dtype}")
        if arr.shape != (N,):
            raise ValueError(f"{name} must be a scalar or have shape ({N},), got {arr.shape}")
        if arr.size and (arr.min() < lo or arr.max() > hi):
            raise ValueError(f"{name} values must be in [{lo}, {hi}] for {np.dtype(dtype).name} data")
        return 0, np.ascontiguousarray(arr, dtype=np.int32)
    if isinstance(v, np.ndarray) and v.ndim > 1:
        raise ValueError(f"{name} must be a scalar or 1-D, got shape {v.shape}")
    return _zero_point(v, name, dtype), None


def qgemm_max_k(a_dtype, a_zero_point=0, b_zero_point=0):
    """The largest K for which every uint8/int8 x int8 product sum_k (a - za)(b - zb) fits int32:
    (2**31 - 1) // (max |a - za| * max |b - zb|) over the whole value ranges of the dtypes
    (b_zero_point may be per column: the worst column counts). E.g. 65793 for za = zb = 0, uint8."""
    alo, ahi = _RANGE[np.dtype(a_dtype)]
    za = int(a_zero_point)
    zbs = np.atleast_1d(np.asarray(b_zero_point, np.int64))
    da = max(za - alo, ahi - za)
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


def qgemm(a, b, *, a_zero_point=0, b_zero_point=0, out=None):
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
    """
    a = _require(a, "a", (np.uint8, np.int8))
    b = _require(b, "b", (np.int8,))
    M, K = a.shape
    Kb, N = b.shape
    if K != Kb:
        raise ValueError(f"qgemm: inner dimensions differ: a of shape {a.shape} and b of shape {b.shape}")
    za = _zero_point(a_zero_point, "a_zero_point", a.dtype)
    zb, zb_arr = _column_zero_points(b_zero_point, "b_zero_point", np.int8, N)
    kmax = qgemm_max_k(a.dtype, za, zb_arr if zb_arr is not None else zb)
    if K > kmax:
        raise ValueError(f"K = {K} exceeds {kmax}, the largest K whose results all fit int32 with these "
                         f"dtypes and zero points")
    out = _output(out, M, N)
    check_no_overlap(out, "out", a=a, b=b)
    if out.size == 0:
        return out
    _C.qgemm(np.ascontiguousarray(a), _QTYPE[a.dtype], za, np.ascontiguousarray(b), 1, zb_arr, zb, out)
    return out


def qgemm16(a, b, *, a_zero_point=0, b_zero_point=0, out=None):
    """Exact int16 x int16 -> int32 product (VPDPWSSD where available, VPMADDWD otherwise):
    C[m, n] = sum_k (a[m, k] - a_zero_point) * (b[k, n] - b_zero_point[n]).

    a: int16 (M, K); b: int16 (K, N); zero points in the int16 range (b's scalar or per column).
    Bound: full-range int16 products overflow int32 after two terms, so the check uses the data:
    K * max|a - za| * max|b - zb| must be <= 2**31 - 1, else ValueError (computed from a and b,
    an O(MK + KN) pass). Under that bound the result is bit-exact.
    """
    a = _require(a, "a", (np.int16,))
    b = _require(b, "b", (np.int16,))
    M, K = a.shape
    Kb, N = b.shape
    if K != Kb:
        raise ValueError(f"qgemm16: inner dimensions differ: a of shape {a.shape} and b of shape {b.shape}")
    za = _zero_point(a_zero_point, "a_zero_point", np.int16)
    zb, zb_arr = _column_zero_points(b_zero_point, "b_zero_point", np.int16, N)
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
    _C.qgemm(np.ascontiguousarray(a), 2, za, np.ascontiguousarray(b), 2, zb_arr, zb, out)
    return out
class QLinear: pass
