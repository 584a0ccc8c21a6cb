"""What the FP32 and INT8 convolution layers share: parsing the geometry arguments, the output shape, the
arguments of a ``torch.nn.Conv2d``, and the NCHW convenience call."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ._arrays import as_array, checked_output
from ._quant_params import int_scalar

#: Strides, paddings and dilations above this are refused: far beyond any image, and a bigger value would
#: reach the C++ geometry as an overflowing size.
GEOMETRY_MAX = 2**31 - 1


def positive_int(v, name):
    v = int_scalar(v, name)
    if v < 1:
        raise ValueError(f"{name} must be >= 1, got {v}")
    return v


def _ints(v, name, lengths, minimum):
    """An int or a tuple/list of ints of one of `lengths`, each in [minimum, GEOMETRY_MAX]: returns a tuple."""
    if isinstance(v, (tuple, list)):
        if len(v) not in lengths:
            raise ValueError(f"{name} must be an int or a sequence of {' or '.join(map(str, lengths))} ints, "
                             f"got {len(v)} values")
        vals = tuple(int_scalar(x, name) for x in v)
    else:
        vals = (int_scalar(v, name),)
    if any(x < minimum or x > GEOMETRY_MAX for x in vals):
        raise ValueError(f"{name} values must be in [{minimum}, {GEOMETRY_MAX}], got {v!r}")
    return vals


def pair(v, name):
    vals = _ints(v, name, (2,), 1)
    return vals * 2 if len(vals) == 1 else vals


def padding4(v):
    """int -> all four sides; (h, w); (top, bottom, left, right)."""
    vals = _ints(v, "padding", (2, 4), 0)
    if len(vals) == 1:
        return vals * 4
    if len(vals) == 2:
        return (vals[0], vals[0], vals[1], vals[1])
    return vals


def geometry(weight_shape, stride, padding, dilation, groups):
    """(OC, IC, KH, KW, groups, sh, sw, dh, dw, pt, pb, pl, pr) from a 4-D (OC, KH, KW, IC // groups) weight."""
    if len(weight_shape) != 4:
        raise ValueError(f"weight must be 4-D (out_channels, KH, KW, in_channels // groups), got shape "
                         f"{tuple(weight_shape)}")
    if 0 in weight_shape:
        raise ValueError(f"weight must have no zero-size dimension, got shape {tuple(weight_shape)}")
    OC, KH, KW, ICg = weight_shape
    groups = positive_int(groups, "groups")
    if OC % groups:
        raise ValueError(f"groups = {groups} must divide out_channels = {OC}")
    sh, sw = pair(stride, "stride")
    dh, dw = pair(dilation, "dilation")
    pt, pb, pl, pr = padding4(padding)
    return (OC, ICg * groups, KH, KW, groups, sh, sw, dh, dw, pt, pb, pl, pr)


def input_shape4(input_shape):
    """An NHWC shape given as a sequence of 4 non-negative ints: a tuple; TypeError / ValueError otherwise."""
    if isinstance(input_shape, (str, bytes)) or not hasattr(input_shape, "__len__") or len(input_shape) != 4:
        raise ValueError(f"input_shape must be 4 ints (N, H, W, C), got {input_shape!r}")
    shape = tuple(int_scalar(v, "input_shape") for v in input_shape)
    if min(shape) < 0:
        raise ValueError(f"input_shape must have no negative dimension, got {shape}")
    return shape


def output_shape(geo, input_shape, what):
    """(N, OH, OW, out_channels) for an NHWC input shape; ValueError if the kernel does not fit."""
    N, H, W, C = input_shape4(input_shape)
    OC, IC, KH, KW, _, sh, sw, dh, dw, pt, pb, pl, pr = geo
    if C != IC:
        raise ValueError(f"x has {C} channels, this {what} expects {IC} (NHWC input)")
    if H < 1 or W < 1:
        raise ValueError(f"x must have H, W >= 1, got shape {tuple(input_shape)}")
    span_h, span_w = dh * (KH - 1) + 1, dw * (KW - 1) + 1
    if H + pt + pb < span_h or W + pl + pr < span_w:
        raise ValueError(f"the (dilated) kernel {span_h}x{span_w} is larger than the padded input "
                         f"{H + pt + pb}x{W + pl + pr}")
    return N, (H + pt + pb - span_h) // sh + 1, (W + pl + pr - span_w) // sw + 1, OC


class ConvGeometryProperties:
    """The geometry a convolution layer exposes, read from its ``_geometry`` (OC, IC, KH, KW, groups, sh, sw, dh,
    dw, pt, pb, pl, pr) and ``_algorithm``; shared by Conv2d and QConv2d."""

    in_channels = property(lambda self: self._geometry[1], doc="input channels (all groups)")
    out_channels = property(lambda self: self._geometry[0], doc="output channels (all groups)")
    kernel_size = property(lambda self: self._geometry[2:4], doc="(KH, KW)")
    groups = property(lambda self: self._geometry[4], doc="channel groups (in_channels: depthwise)")
    stride = property(lambda self: self._geometry[5:7], doc="(stride_h, stride_w)")
    dilation = property(lambda self: self._geometry[7:9], doc="(dilation_h, dilation_w)")
    padding = property(lambda self: self._geometry[9:13], doc="(top, bottom, left, right)")
    algorithm = property(lambda self: self._algorithm, doc="the algorithm calls use (\"auto\" by default)")

    def output_shape(self, input_shape: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
        """(N, OH, OW, out_channels) for an NHWC input shape; ValueError if the kernel does not fit."""
        return output_shape(self._geometry, input_shape, type(self).__name__)


def torch_conv_args(cls_name: str, module: Any) -> tuple[np.ndarray, np.ndarray | None, dict]:
    """A float32 ``torch.nn.Conv2d`` (padding_mode "zeros") as (weight (out, KH, KW, in/groups), bias or None,
    geometry keyword arguments); "valid" and "same" padding become numbers (torch's "same": the extra one at
    the end)."""
    from ._torch import float32_array, require_module
    what = f"{cls_name}.from_torch"
    require_module(module, "Conv2d", what)
    if module.padding_mode != "zeros":
        raise ValueError(f"{what}: padding_mode {module.padding_mode!r} is not supported (zeros only)")
    w = np.ascontiguousarray(float32_array(module.weight, what, "weight").transpose(0, 2, 3, 1))
    b = float32_array(module.bias, what, "bias")
    KH, KW = w.shape[1], w.shape[2]
    dil = tuple(module.dilation)
    pad = module.padding
    if pad == "valid":
        pad = 0
    elif pad == "same":
        th, tw = dil[0] * (KH - 1), dil[1] * (KW - 1)
        pad = (th // 2, th - th // 2, tw // 2, tw - tw // 2)
    return w, b, {"stride": tuple(module.stride), "padding": pad, "dilation": dil, "groups": module.groups}


def check_layout(layout) -> str:
    if not isinstance(layout, str):
        raise TypeError(f'layout must be "NHWC" or "NCHW", got {type(layout).__name__}')
    if layout not in ("NHWC", "NCHW"):
        raise ValueError(f'layout must be "NHWC" or "NCHW", got {layout!r}')
    return layout


def nchw_input(x, in_channels: int):
    """An NCHW x (N, in_channels, H, W) checked and viewed as NHWC (the layer copies it)."""
    x = as_array(x, "x")
    if x.ndim != 4 or x.shape[1] != in_channels:
        raise ValueError(f"x must be 4-D NCHW (N, {in_channels}, H, W), got shape {x.shape}")
    return x.transpose(0, 2, 3, 1)


def nchw_call(run: Callable, in_channels: int, x, out, dtype, residual=None):
    """The NCHW convenience: x (and a residual) copied to NHWC, run(x_nhwc, residual_nhwc) -> NHWC result,
    copied back into out (N, C, H, W)."""
    x = as_array(x, "x")
    nchw_input(x, in_channels)
    if residual is not None:
        residual = as_array(residual, "residual")
        if residual.ndim != 4:
            raise ValueError(f"residual must be 4-D NCHW, got shape {residual.shape}")
        residual = residual.transpose(0, 2, 3, 1)
    y = run(x.transpose(0, 2, 3, 1), residual).transpose(0, 3, 1, 2)
    out, given = checked_output(out, y.shape, dtype, x=x)
    np.copyto(out, y)
    return given
