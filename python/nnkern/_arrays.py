"""Argument checking shared by the ops: dtypes, shapes, layouts, aliasing."""
from __future__ import annotations

import numpy as np

from . import _C

F32 = np.dtype(np.float32)


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


def as_float_scalar(v, name: str) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a real number, got {type(v).__name__}") from None
