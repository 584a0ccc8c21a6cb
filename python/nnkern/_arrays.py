"""Argument checking shared by the ops: dtypes, shapes, layouts, aliasing."""
from __future__ import annotations

import math
import numbers

import numpy as np

from . import _C

F32 = np.dtype(np.float32)
F32_MAX = float(np.finfo(np.float32).max)


def require_array(x, name: str, dtype: np.dtype) -> np.ndarray:
    """``x`` must be a NumPy array of ``dtype``: no silent casts (a float64 input would lose precision
    and cost a copy the caller did not ask for)."""
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray of {dtype}, got {type(x).__name__}")
    if x.dtype is not dtype and x.dtype != dtype:
        raise TypeError(f"{name} must have dtype {dtype}, got {x.dtype} (convert with {name}.astype(np.{dtype}))")
    return x


def require_ndim(x: np.ndarray, name: str, ndims: tuple[int, ...]) -> None:
    if x.ndim not in ndims:
        want = " or ".join(f"{d}-D" for d in ndims)
        raise ValueError(f"{name} must be {want}, got a {x.ndim}-D array of shape {x.shape}")


def check_no_overlap(out: np.ndarray, out_name: str, **inputs) -> None:
    """An output that shares memory with an input would be read while written: refuse it."""
    for name, arr in inputs.items():
        if not _C.may_overlap(out, arr):  # cheap bounds test first
            continue
        try:
            overlaps = np.shares_memory(out, arr, max_work=10**6)
        except Exception:  # numpy's TooHardError: assume the worst
            overlaps = True
        if overlaps:
            raise ValueError(f"{out_name} overlaps {name}: pass a separate output array")


def is_real_scalar(v) -> bool:
    """A real number: int, float, numpy integer/floating or a 0-d array of them; never a bool or a str."""
    if isinstance(v, (bool, np.bool_)):
        return False
    if isinstance(v, (numbers.Real, np.integer, np.floating)):
        return True
    return isinstance(v, np.ndarray) and v.ndim == 0 and v.dtype.kind in "iuf"


def as_float_scalar(v, name: str) -> float:
    """A real number as float32 will hold it (the kernels compute in float32): a finite value beyond
    float32's range is an error rather than a silent infinity (inf and nan themselves pass as given)."""
    if not is_real_scalar(v):
        raise TypeError(f"{name} must be a real number, got {type(v).__name__}")
    f = float(v)
    if math.isfinite(f) and abs(f) > F32_MAX:
        raise ValueError(f"{name} = {f} overflows float32 (largest {F32_MAX:.7g})")
    return f


def as_bool(v, name: str) -> bool:
    """A bool or numpy bool: a string such as "False" is an error, not True."""
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    raise TypeError(f"{name} must be a bool, got {type(v).__name__}")


def c_aligned(x: np.ndarray) -> np.ndarray:
    """x itself when C-contiguous and aligned for its dtype, else a C-contiguous aligned copy. (NumPy
    makes arrays at any byte offset; np.ascontiguousarray keeps a misaligned one as it is.)"""
    if x.flags.c_contiguous and x.flags.aligned:
        return x
    return np.array(x, order="C", copy=True)


def aligned_target(out: np.ndarray) -> np.ndarray:
    """Where a kernel writes the C-contiguous ``out``: out itself when aligned, else a temporary that the
    caller copies into out afterwards."""
    return out if out.flags.aligned else np.empty(out.shape, out.dtype)
