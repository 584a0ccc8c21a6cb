"""Pixel shuffle and unshuffle (sub-pixel convolution upsampling, ESPCN): a permutation of the elements,
as torch.nn.functional.pixel_shuffle / pixel_unshuffle, in NCHW or NHWC."""
from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from . import _C
from ._arrays import ArrayIn, aligned_target, as_array, as_int, c_aligned, checked_output, require_ndim

__all__ = ["pixel_shuffle", "pixel_unshuffle"]

LAYOUTS = ("NCHW", "NHWC")
_INTP_MAX = int(np.iinfo(np.intp).max)


def pixel_shuffle(x: ArrayIn, r: int, *, layout: str = "NCHW", out: Any = None) -> npt.NDArray[Any]:
    """Rearrange (N, C*r*r, H, W) into (N, C, H*r, W*r), as torch.nn.functional.pixel_shuffle:

        out[n, c, h*r + i, w*r + j] = x[n, c*r*r + i*r + j, h, w]      (0 <= i, j < r)

    layout="NHWC": (N, H, W, C*r*r) -> (N, H*r, W*r, C), the same permutation in channels-last order
    (transpose to NCHW, shuffle, transpose back):

        out[n, h*r + i, w*r + j, c] = x[n, h, w, c*r*r + i*r + j]

    x: 3-D (no batch) or 4-D, any dtype of 1, 2, 4 or 8 bytes but object (the elements are copied as
    raw bytes, NaN payloads included): an ndarray, or a CPU DLPack / buffer-protocol array (a torch
    tensor); a non-contiguous x is copied first. r: a positive integer; the channel count must be a
    multiple of r*r (ValueError). layout: "NCHW" or "NHWC" exactly. out: None, or an array of the
    result's dtype and shape, C-contiguous, writeable, not overlapping x, written and returned as given.
    Returns a NumPy array (or ``out``). Rows are spread over the thread pool.
    """
    return _shuffle(x, r, layout, out, inverse=False)


def pixel_unshuffle(x: ArrayIn, r: int, *, layout: str = "NCHW", out: Any = None) -> npt.NDArray[Any]:
    """The inverse of :func:`pixel_shuffle`, as torch.nn.functional.pixel_unshuffle: (N, C, H*r, W*r)
    -> (N, C*r*r, H, W) with

        out[n, c*r*r + i*r + j, h, w] = x[n, c, h*r + i, w*r + j]      (0 <= i, j < r)

    layout="NHWC": (N, H*r, W*r, C) -> (N, H, W, C*r*r) with
    out[n, h, w, c*r*r + i*r + j] = x[n, h*r + i, w*r + j, c].

    Height and width must be multiples of r (ValueError); everything else as :func:`pixel_shuffle`.
    pixel_unshuffle(pixel_shuffle(x, r), r) is x bit for bit.
    """
    return _shuffle(x, r, layout, out, inverse=True)


def _shuffle(x, r, layout, out, *, inverse: bool):
    op = "pixel_unshuffle" if inverse else "pixel_shuffle"
    x = as_array(x, "x")
    if x.dtype.hasobject:
        raise TypeError(f"{op}: x must not have dtype object (got {x.dtype})")
    if x.dtype.itemsize not in (1, 2, 4, 8):
        raise TypeError(f"{op}: x's dtype must have 1, 2, 4 or 8 bytes per element, got {x.dtype} "
                        f"({x.dtype.itemsize} bytes)")
    r = as_int(r, "r")
    if r < 1:
        raise ValueError(f"r must be positive, got {r}")
    if not isinstance(layout, str):
        raise TypeError(f"layout must be a str, one of {LAYOUTS}, got {type(layout).__name__}")
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    require_ndim(x, "x", (3, 4))
    nhwc = layout == "NHWC"
    x4 = x if x.ndim == 4 else x[np.newaxis]
    n = x4.shape[0]
    c, h, w = (x4.shape[3], x4.shape[1], x4.shape[2]) if nhwc else x4.shape[1:]
    if not inverse:
        if c % (r * r):
            raise ValueError(f"{op}: the channel count {c} is not divisible by r*r = {r * r}")
        c, h, w = c // (r * r), h * r, w * r
    else:
        if h % r or w % r:
            raise ValueError(f"{op}: height {h} and width {w} must be divisible by r = {r}")
        c, h, w = c * r * r, h // r, w // r
    shape4 = (n, h, w, c) if nhwc else (n, c, h, w)
    if max(shape4) > _INTP_MAX:  # only an empty x gets here with such an r
        raise ValueError(f"{op}: the result's shape {shape4} is too large")
    shape = shape4 if x.ndim == 4 else shape4[1:]
    dst, result = checked_output(out, shape, x.dtype, x=x)
    if dst.size == 0:
        return result
    target = aligned_target(dst)
    fn = _C.pixel_unshuffle if inverse else _C.pixel_shuffle
    fn(c_aligned(x4), target.reshape(shape4), r, nhwc)
    if target is not dst:
        dst[...] = target
    return result
