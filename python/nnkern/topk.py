"""Top-k along an axis (seed I21): the k largest values and their indices, sorted descending."""
from __future__ import annotations

import operator

import numpy as np

from . import _C
from ._arrays import F32, c_aligned, require_array

__all__ = ["topk"]


def topk(x, k, axis=-1):
    """The k largest elements of a float32 array along ``axis``: returns (values, indices).

    values (float32) and indices (int64) have x's shape with ``axis`` of length k, sorted in descending
    order, as ``np.take_along_axis(x, idx, axis)`` for ``idx`` = the first k of a *stable* descending
    argsort:
    * ties go to the lower index;
    * -0.0 and +0.0 are equal;
    * NaN is larger than every number (+inf included), as numpy's sort puts NaN last and torch.topk
      ranks it first: NaNs come first, among themselves by index;
    * values[i] is x[indices[i]] bit for bit.
    k: 0 <= k <= x.shape[axis] (ValueError otherwise). x must have at least one dimension.
    The AVX-512 kernel (k <= 16) keeps the best 16 in one register (I21); other k and ISAs take a
    selection + sort path. x is read in place when ``axis`` is its contiguous last axis, otherwise
    copied once with that axis moved last. Rows are spread over the thread pool.
    """
    x = require_array(x, "x", F32)
    if x.ndim == 0:
        raise ValueError("x must have at least one dimension")
    try:
        k = operator.index(k)
    except TypeError:
        raise TypeError(f"k must be an integer, got {type(k).__name__}") from None
    try:
        axis = operator.index(axis)
    except TypeError:
        raise TypeError(f"axis must be an integer, got {type(axis).__name__}") from None
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"axis {axis} is out of range for a {x.ndim}-D array")
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
        _C.topk(x2, k, values, indices)
    values = np.moveaxis(values.reshape(lead + (k,)), -1, axis)
    indices = np.moveaxis(indices.reshape(lead + (k,)), -1, axis)
    return values, indices
