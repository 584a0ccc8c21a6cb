"""Top-k along an axis (seed I21): the k largest values and their indices, sorted descending."""
from __future__ import annotations


import numpy as np
import numpy.typing as npt

from . import _C
from ._arrays import ArrayIn, F32Array, F32, as_bool, as_int, c_aligned, require_array

__all__ = ["topk"]


def topk(x: ArrayIn, k: int, axis: int | None = None, *, dim: int | None = None,
         largest: bool = True) -> tuple[F32Array, npt.NDArray[np.int64]]:
    """The k largest (or, with ``largest=False``, smallest) elements of a float32 array along ``axis``:
    returns (values, indices), as torch.topk.

    x: float32 ndarray, or a CPU DLPack / buffer-protocol array (a torch tensor), at least 1-D.
    axis (or torch's name ``dim``; not both): default -1. values (float32) and indices (int64) have x's
    shape with ``axis`` of length k, sorted in descending order (ascending for largest=False), as
    ``np.take_along_axis(x, idx, axis)`` for ``idx`` = the first k of a *stable* descending (ascending)
    argsort:
    * ties go to the lower index;
    * -0.0 and +0.0 are equal;
    * NaN is larger than every number (+inf included), as numpy's sort puts NaN last and torch.topk
      ranks it first: NaNs come first for largest=True and last for largest=False, among themselves
      by index;
    * values[i] is x[indices[i]] bit for bit.
    k: an integer, 0 <= k <= x.shape[axis] (ValueError otherwise).
    The AVX-512 kernel (k <= 16) keeps the best 16 in one register (I21); other k and ISAs take a
    selection + sort path. x is read in place when ``axis`` is its contiguous last axis, otherwise
    copied once with that axis moved last. Rows are spread over the thread pool. largest=False runs the
    same kernels on -x (a copy; rows with NaN are sorted by numpy instead).
    """
    x = require_array(x, "x", F32)
    if x.ndim == 0:
        raise ValueError("x must have at least one dimension")
    k = as_int(k, "k")
    if dim is not None and axis is not None:
        raise TypeError("pass axis= or dim= (its torch name), not both")
    name = "dim" if dim is not None else "axis"
    axis = dim if dim is not None else (-1 if axis is None else axis)
    axis = as_int(axis, name)
    largest = as_bool(largest, "largest")
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"{name} {axis} is out of range for a {x.ndim}-D array")
    axis %= x.ndim
    n = x.shape[axis]
    if not 0 <= k <= n:
        raise ValueError(f"k must be in [0, {n}] (the length of axis {axis}), got {k}")
    if n >= 2**32:
        raise ValueError("topk supports axes shorter than 2**32 elements")
    xm = np.moveaxis(x, axis, -1)
    lead = xm.shape[:-1]
    rows = int(np.prod(lead, dtype=np.int64))
    values = np.empty((rows, k), F32)
    indices = np.empty((rows, k), np.int64)
    if rows and k:
        x2 = c_aligned(xm).reshape(rows, n)
        if largest:
            _C.topk(x2, k, values, indices)
        else:
            _smallest(x2, k, values, indices)
    values = np.moveaxis(values.reshape(lead + (k,)), -1, axis)
    indices = np.moveaxis(indices.reshape(lead + (k,)), -1, axis)
    return values, indices


def _smallest(x2, k, values, indices):
    """The k smallest of each row of x2 (rows, n), ascending, ties to the lower index, NaN largest."""
    _C.topk(np.negative(x2), k, values, indices)  # -x's largest; -(+-0) keeps the two zeros equal
    nan_rows = np.flatnonzero(np.isnan(x2).any(axis=1))
    if nan_rows.size:  # -NaN is still NaN and would rank first: a stable ascending sort puts NaN last
        indices[nan_rows] = np.argsort(x2[nan_rows], axis=1, kind="stable")[:, :k]
    values[:] = np.take_along_axis(x2, indices, axis=1)  # x's own bits (NaN payloads, signed zeros)
