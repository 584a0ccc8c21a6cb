"""2-D max and average pooling of NHWC (channels-last) tensors, as torch.nn.functional.max_pool2d /
avg_pool2d and torch's quantized avg_pool2d (quint8 / qint8), in uint8, int8 and float32."""
from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from . import _C
from ._arrays import ArrayIn, aligned_target, as_array, as_bool, c_aligned, checked_output, require_ndim
from ._convgeom import pair as _pair, padding4 as _padding
from ._quant_params import int_scalar, positive_scale, zero_point

__all__ = ["max_pool2d", "avg_pool2d"]

LAYOUTS = ("NHWC",)
_DTYPES = (np.dtype(np.uint8), np.dtype(np.int8), np.dtype(np.float32))
_INT32_MAX = 2**31 - 1
_F32_MAX = float(np.finfo(np.float32).max)


def max_pool2d(x: ArrayIn, kernel_size: int | tuple[int, int], stride: int | tuple[int, int] | None = None,
               padding: int | tuple[int, ...] = 0, *, ceil_mode: bool = False, layout: str = "NHWC",
               out: Any = None) -> npt.NDArray[Any]:
    """Max pooling of an NHWC tensor, as torch.nn.functional.max_pool2d (and torch's quantized max_pool2d,
    whose output keeps the input's quantization):

        out[n, oh, ow, c] = max of x[n, ih, iw, c] over ih in [oh*sh - pt, oh*sh - pt + kh) and
                            iw in [ow*sw - pl, ow*sw - pl + kw), within the input (padding is never a tap)

    x: (N, H, W, C) or (H, W, C) (no batch), uint8, int8 or float32 (native byte order): an ndarray, or a
    CPU DLPack / buffer-protocol array (a channels-last torch tensor permuted to NHWC); a non-contiguous or
    misaligned x is copied first. H, W >= 1. kernel_size, stride: an int or (h, w), >= 1; stride=None is
    kernel_size. padding: an int, (h, w) or (top, bottom, left, right), each at most half its kernel
    dimension (torch's rule; ValueError otherwise). ceil_mode: the output length is ceil rather than floor
    of (in + pad_before + pad_after - k) / stride + 1, less a last window that would start in the trailing
    padding (so every window holds an input element); so with ceil_mode a window may reach past the padded
    input, even be larger than it, as torch allows. A geometry with no output (the padded input smaller than
    the kernel without ceil_mode) is a ValueError, as in torch. float32: NaN propagates (a window with a NaN gives
    the last NaN's bits, as torch); -0 and +0 tie, the first one is kept. layout: "NHWC" only (the NCHW
    op is torch's own). out: None, or an array of the result's dtype and shape, C-contiguous, writeable,
    not overlapping x, written and returned as given. Returns a NumPy array (or ``out``); bit-exact, the
    same for any thread count (output rows are spread over the thread pool).
    """
    return _pool(x, kernel_size, stride, padding, ceil_mode, layout, out, average=False, op="max_pool2d")


def avg_pool2d(x: ArrayIn, kernel_size: int | tuple[int, int], stride: int | tuple[int, int] | None = None,
               padding: int | tuple[int, ...] = 0, *, ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = None, input_scale: float | None = None,
               input_zero_point: int | None = None, output_scale: float | None = None,
               output_zero_point: int | None = None, layout: str = "NHWC", out: Any = None) -> npt.NDArray[Any]:
    """Average pooling of an NHWC tensor, as torch.nn.functional.avg_pool2d (float32) and torch's quantized
    avg_pool2d on quint8 / qint8 channels-last tensors (uint8 / int8), bit for bit.

    Geometry, x, kernel_size, stride, padding, ceil_mode, layout and out as :func:`max_pool2d`. Each window's
    divisor d is ``divisor_override`` when given (a nonzero int32; negative too, as torch), else its count of positions within
    the padded input (count_include_pad=True; with ceil_mode a window can reach past the padding, and those
    positions do not count) or of input elements (count_include_pad=False).

    float32: ``out = (((0 + t0) + t1) + ...) / float32(d)``, the taps summed in float32 in row-major window
    order: torch's channels-last float kernel, exactly.

    uint8 / int8: with zi = input_zero_point (default 0), zo = output_zero_point (default zi),
    ``acc = sum(t - zi)`` over the window's input elements (exact; a padded position counts as the real
    value 0, i.e. zi), ``m = float32(float32(input_scale) / float32(output_scale)) / float32(d)`` in float32
    (the ratio is 1 without scales), and

        out = clamp(rne(float32(acc) * m) + zo, 0, 255)      (int8: -128, 127)

    rne: round half to even. This is torch's quantized avg_pool2d on channels_last input: its vector path
    (the channels in whole vectors, every channel when C is a multiple of 16) multiplies by that float32
    m and rounds with vcvtps2dq, bit for bit as here; its leftover channels (C % 16) round
    rne(float32(zo + v)) instead and may differ from it, and from nnkern, by one. It is not always the
    exactly rounded acc / d either: for d = 14, 26, 28, 30, ... some sums whose quotient lies at a half
    round the other way (d = 14: 162 of the 7141 sums in [-255 * 14, 255 * 14]). input_scale / output_scale: both or neither, positive; with them the average is
    requantized to the output's scale in the same single rounding: out = rne((avg - zi) * input_scale /
    output_scale) + zo. Sums run in 16-bit lanes while the window has at most 257 (int8: 256) taps, else
    in int32; windows of 2^23 taps or more are refused.
    """
    return _pool(x, kernel_size, stride, padding, ceil_mode, layout, out, average=True, op="avg_pool2d",
                 count_include_pad=count_include_pad, divisor_override=divisor_override, input_scale=input_scale,
                 input_zero_point=input_zero_point, output_scale=output_scale, output_zero_point=output_zero_point)


def _quantization(dtype, input_scale, input_zero_point, output_scale, output_zero_point):
    """(scale_ratio, zi, zo) of an integer average; ValueError for quantization arguments on float32."""
    given = [n for n, v in (("input_scale", input_scale), ("input_zero_point", input_zero_point),
                            ("output_scale", output_scale), ("output_zero_point", output_zero_point)) if v is not None]
    if dtype == np.float32:
        if given:
            raise ValueError(f"avg_pool2d: {', '.join(given)} apply to uint8 / int8 input only, x is float32")
        return 1.0, 0, 0
    if (input_scale is None) != (output_scale is None):
        raise ValueError("avg_pool2d: give both input_scale and output_scale, or neither")
    ratio = 1.0
    if input_scale is not None:
        si = float(positive_scale(input_scale, "input_scale"))
        so = float(positive_scale(output_scale, "output_scale"))
        if si > _F32_MAX or so > _F32_MAX:
            raise ValueError("avg_pool2d: input_scale and output_scale must fit float32")
        with np.errstate(over="ignore", under="ignore"):
            r = np.float32(si) / np.float32(so)
        if not (np.isfinite(r) and r > 0):
            raise ValueError(f"avg_pool2d: input_scale / output_scale = {si / so:g} is not a finite positive float32")
        ratio = float(r)
    zi = 0 if input_zero_point is None else zero_point(input_zero_point, "input_zero_point", dtype)
    zo = zi if output_zero_point is None else zero_point(output_zero_point, "output_zero_point", dtype)
    return ratio, zi, zo


def _pool(x, kernel_size, stride, padding, ceil_mode, layout, out, *, average: bool, op: str,
          count_include_pad=True, divisor_override=None, input_scale=None, input_zero_point=None,
          output_scale=None, output_zero_point=None):
    x = as_array(x, "x")
    if x.dtype not in _DTYPES or not x.dtype.isnative:
        raise TypeError(f"{op}: x must be uint8, int8 or float32 (native byte order), got {x.dtype}")
    require_ndim(x, "x", (3, 4))
    kh, kw = _pair(kernel_size, "kernel_size")
    sh, sw = (kh, kw) if stride is None else _pair(stride, "stride")
    pt, pb, pl, pr = _padding(padding)
    ceil_mode = as_bool(ceil_mode, "ceil_mode")
    if not isinstance(layout, str):
        raise TypeError(f"layout must be a str, one of {LAYOUTS}, got {type(layout).__name__}")
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS} (torch's NCHW pooling is torch's own), got {layout!r}")
    if max(pt, pb) > kh // 2 or max(pl, pr) > kw // 2:
        raise ValueError(f"{op}: padding (top, bottom, left, right) = {(pt, pb, pl, pr)} must be at most half the "
                         f"kernel ({kh}, {kw}): at most ({kh // 2}, {kw // 2})")
    if kh * kw >= 2**23:
        raise ValueError(f"{op}: the kernel {kh}x{kw} has 2^23 or more taps")
    ratio, zi, zo, divisor = 1.0, 0, 0, 0
    if average:
        count_include_pad = as_bool(count_include_pad, "count_include_pad")
        if divisor_override is not None:
            divisor = int_scalar(divisor_override, "divisor_override")
            if divisor == 0 or abs(divisor) > _INT32_MAX:
                raise ValueError(f"{op}: divisor_override must be a nonzero integer within int32, got {divisor}")
        ratio, zi, zo = _quantization(x.dtype, input_scale, input_zero_point, output_scale, output_zero_point)
    x4 = x if x.ndim == 4 else x[np.newaxis]
    n, h, w, c = x4.shape
    if h < 1 or w < 1:
        raise ValueError(f"{op}: x's height and width must be >= 1, got shape {x.shape}")
    try:
        oh = _C.pool2d_output_size(h, kh, sh, pt, pb, ceil_mode)
        ow = _C.pool2d_output_size(w, kw, sw, pl, pr, ceil_mode)
    except ValueError:
        raise ValueError(f"{op}: the padded input ({h + pt + pb}, {w + pl + pr}) is smaller than the kernel "
                         f"({kh}, {kw}){' even with ceil_mode' if ceil_mode else ''}: no output") from None
    shape4 = (n, oh, ow, c)
    shape = shape4 if x.ndim == 4 else shape4[1:]
    dst, result = checked_output(out, shape, x.dtype, x=x)
    if dst.size == 0:
        return result
    target = aligned_target(dst)
    _C.pool2d(c_aligned(x4), target.reshape(shape4), average, (kh, kw), (sh, sw), (pt, pb, pl, pr), ceil_mode,
              count_include_pad, divisor, ratio, zi, zo)
    if target is not dst:
        dst[...] = target
    return result
