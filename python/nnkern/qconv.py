"""INT8 2-D convolution: the prepacked QConv2d layer (NHWC, uint8/int8 activations x int8 weights) with the
fused requantization of QLinear."""
from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from . import _C, _convgeom
from ._qconv_fused import FusedStage
from ._arrays import (ArrayIn, aligned_target, as_array, as_bool, check_algorithm, check_no_overlap, checked_output,
                      read_only_copy)
from ._quant_params import A8, OUT_KIND, RANGE, int_scalar, output_stage, positive_scale, quantized_weights
from .qgemm import qgemm_max_k

__all__ = ["QConv2d"]


def _algorithm(v):
    return check_algorithm(v, "qconv2d")


class QConv2d(_convgeom.ConvGeometryProperties):
    """Quantized 2-D convolution on NHWC batches, weights packed once, requantization fused (as QLinear).

    weight: float32 (out_channels, KH, KW, in_channels // groups), quantized per output channel at
      construction as :func:`nnkern.quantize_weights` does; or int8 with ``weight_scale`` (scalar or per
      output channel). Symmetric (weight zero point 0). From torch's (out, in/groups, KH, KW) layout:
      ``w.permute(0, 2, 3, 1)``, or use :meth:`from_torch`.
    bias: float (out_channels,) or None, in real units.
    stride, dilation: an int or (h, w), >= 1. padding: an int, (h, w) or (top, bottom, left, right), >= 0;
      padded positions hold the input zero point (real value 0).
    groups: divides both channel counts; groups == in_channels is depthwise (out_channels a multiple of it).
    input_scale, input_zero_point: the quantization of x (uint8 or int8, chosen per call by x's dtype; int8
      activations are shifted by +128 internally, exactly, as in qgemm).
    output_scale, output_zero_point, output_dtype, relu: as :class:`nnkern.QLinear`: uint8 / int8 output
      is ``rint(clamp(acc * factor[o] + offset[o]))`` in float32 with factor = input_scale *
      weight_scale[o] / output_scale and offset = bias[o] / output_scale + output_zero_point (ReLU is the
      clamp at the output zero point); float32 output the real value ``acc * input_scale * weight_scale[o]
      + bias[o]``; int32 the exact accumulator ``sum (x - input_zero_point) * wq`` over the window (no bias; with
      relu, max(acc, 0): the ReLU of the real result in accumulator units, the scales being positive).
    algorithm: "auto" or an entry of ``nnkern._C.algorithms("qconv2d")``:
      "im2col" (each output pixel's window copied into a workspace row, then the packed INT8 GEMM; a 1x1,
      stride-1, unpadded convolution runs as a plain GEMM on the input rows, no copy) and "indirect" (the
      GEMM kernels' indirect form reading the window through an indirection buffer of input-row offsets,
      built once per input shape and cached in the layer, at most 8 shapes and 64 MiB beyond the one in use,
      least recently used dropped first; padding taps read a shared row of the zero
      point) and "depthwise" (groups == in_channels only: the depthwise micro-kernels, channels in vector
      lanes, taps in the loop) and "direct" (groups == 1, and a padded copy at most 4 times the input plus
      the windows' reads, so a huge stride or padding never buys a huge copy; VNNI kernels on AVX-VNNI /
      AVX-512 VNNI, the scalar reference kernel elsewhere, which auto never picks:
      one padded uint8 copy of the input walked with strides by kernels holding 6 output pixels x 64 output
      channels in registers over the whole window, weights packed per 64 channels in groups of 4 input
      channels) and "low_ofm" (groups == 1 and out_channels <= 4 only, e.g. an image's RGB output layer, ValueError
      elsewhere: output pixels in vector lanes, 16 per AVX-512 vector, one accumulator per output channel, each
      pixel's input re-laid out on the fly as groups of 4 channels by in-register transposes of pixel loads, or
      vpgatherdd for the groups left over, and multiplied by one channel's 4 weights broadcast (vpdpbusd; an
      exact int16 widening without VNNI); windows of more than one tap re-lay out each input row once into
      the workspace first, so every tap is plain loads; padding columns are masked-off lanes holding the zero
      point and padding rows are skipped, both folded exactly into the column-sum compensation; no padded
      copy. Kernels for AVX2, AVX-VNNI, AVX-512 and AVX-512 VNNI; on aarch64 only the scalar reference kernel
      runs it, so auto keeps indirect / im2col there). auto, in the table's order: "depthwise" for depthwise
      layers of more than one group (a single input channel runs as a plain convolution), else "low_ofm" for
      groups == 1 and out_channels <= 4 where a SIMD low_ofm kernel runs, except where the GEMM runs on AMX and
      the layer has more than 256 input channels, or a stride > 1 with 16 or more and a window under 25 taps,
      else "im2col" for the 1x1 stride-1 unpadded case (below 32 input channels per group only where the GEMM
      kernel runs whole panels in one call, the x86 SIMD ones; the others take "indirect" there), else "direct"
      for windows of >= 25 taps (5x5 and up) over 1-3 input channels where a VNNI direct kernel runs (the 7x7
      stems, a super-resolution network's 5x5 input layer), else "indirect" (the measurements: docs/performance.md,
      "QConv2d: auto's rule").
      ``_packed.applicable_algorithms(n, h, w)`` says which apply to a shape. Every algorithm gives bit-identical
      results on every ISA and thread count.

    residual_scale, residual_zero_point: with them, a call may pass ``residual=`` (uint8 or int8, the
      output's shape, e.g. a ResNet shortcut) whose real value ``(r - residual_zero_point) * residual_scale`` is
      added before the ReLU and the output quantization: with t = fma(float32(acc), factor[o], offset[o])
      as above, y = t + float32(float32(r - residual_zero_point) * rf) (float32, one rounding each), rf =
      float32(residual_scale / output_scale) (float32 output: residual_scale); then ReLU, clamp, round half to
      even as without it. Each tile is finished in the output stage while in cache. Not for int32 output.
    pool="global_avg" (seed I14): the layer returns the global average pooling of its output, (N,
      out_channels) of ``pool_dtype``, without writing the (N, OH, OW, out_channels) tensor: each tile is
      summed per channel as it is stored (int64 for uint8 / int8 / int32 outputs, exact; double for float32,
      in an order fixed by the shape and the algorithm: the same bits for every thread count). What is summed
      is the output as the layer would store it (requantized uint8 / int8 values, float32 real values, int32
      accumulators); with S that sum and count = OH * OW, in float64:
      mean = (S / count - zo) * so (zo, so: output_zero_point, output_scale for uint8 / int8 output; 0, 1 else),
      the mean of the outputs in real units (int32: in accumulator units). pool_dtype float32 (default):
      float32(mean). uint8 / int8: rint(clamp(mean / pool_scale + pool_zero_point)) (half to even), pool_scale /
      pool_zero_point defaulting to the output's (then the rounded mean of the stored integers, as torch's
      quantized average pooling); float32 output needs pool_scale; int32 output pools to float32 only.
    pixel_shuffle=r (seed I16): the output stage stores each tile at its pixel-shuffled place: the layer
      returns (N, OH * r, OW * r, out_channels // (r * r)) of output_dtype, bit-identical to
      ``nnkern.pixel_shuffle(layer_without(x), r, layout="NHWC")`` (torch's channel order: channel
      c * r * r + i * r + j of pixel (oh, ow) goes to channel c of pixel (oh * r + i, ow * r + j)); r >= 1,
      out_channels divisible by r * r. For groups == 1 the weights are packed with their channels in the order
      (i, j, c), so that each pixel's tile row is copied in runs of r * C values.
      Neither goes with a residual (residual_scale: ValueError), nor with each other.
    Calling the layer on x (N, H, W, in_channels), uint8 or int8 (non-contiguous x is copied), returns
    (N, OH, OW, out_channels) of output_dtype, OH = (H + top + bottom - dilation_h * (KH - 1) - 1) //
    stride_h + 1 (likewise OW); ``out=`` a C-contiguous array of that shape and dtype, not overlapping x.
    The window's K = KH * KW * in_channels // groups must satisfy K <= qgemm_max_k(x.dtype, zero point)
    (ValueError otherwise). Thread-safe; pickles (the int8 weights and parameters, repacked on load).
    """

    def __init__(self, weight: ArrayIn, bias: ArrayIn | None = None, *, weight_scale: float | ArrayIn | None = None,
                 stride: int | tuple[int, int] = 1, padding: int | tuple[int, ...] = 0,
                 dilation: int | tuple[int, int] = 1, groups: int = 1, input_scale: float, input_zero_point: int,
                 output_scale: float | None = None, output_zero_point: int = 0,
                 output_dtype: npt.DTypeLike = np.uint8, relu: bool = False, algorithm: str = "auto",
                 residual_scale: float | None = None, residual_zero_point: int = 0, pool: str | None = None,
                 pool_dtype: npt.DTypeLike = np.float32, pool_scale: float | None = None,
                 pool_zero_point: int | None = None, pixel_shuffle: int | None = None) -> None:
        relu = as_bool(relu, "relu")
        self._algorithm = _algorithm(algorithm)
        weight = as_array(weight, "weight")
        geo = _convgeom.geometry(weight.shape, stride, padding, dilation, groups)
        OC, IC, KH, KW, groups = geo[:5]
        ICg = IC // groups
        wq, ws = quantized_weights(weight, weight_scale)
        sx = float(positive_scale(input_scale, "input_scale"))
        zx = int_scalar(input_zero_point, "input_zero_point")
        if not -128 <= zx <= 255:
            raise ValueError(f"input_zero_point must be in [-128, 255], got {zx}")
        try:
            odt = np.dtype(output_dtype)
        except TypeError:
            odt = None
        if odt not in OUT_KIND:
            raise TypeError(f"output_dtype must be uint8, int8, float32 or int32, got {output_dtype!r}")
        bias, factor, offset, lo, hi = output_stage(ws, bias, sx, output_scale, output_zero_point, odt, relu)
        self._residual_scale, self._residual_zero_point, self._residual_factor = None, 0, None
        if residual_scale is not None:
            if odt == np.dtype(np.int32):
                raise ValueError("int32 output is the exact accumulator: no residual")
            sr = float(positive_scale(residual_scale, "residual_scale"))
            zr = int_scalar(residual_zero_point, "residual_zero_point")
            if not -128 <= zr <= 255:
                raise ValueError(f"residual_zero_point must be in [-128, 255], got {zr}")
            # in the output's units: real / output_scale for uint8 / int8, real for float32
            rf = np.float32(sr / float(output_scale) if odt != np.dtype(np.float32) else sr)
            if not np.isfinite(rf) or rf == 0:
                raise ValueError("residual_scale / output_scale is not a finite nonzero float32")
            self._residual_scale, self._residual_zero_point, self._residual_factor = sr, zr, float(rf)
        elif int_scalar(residual_zero_point, "residual_zero_point") != 0:
            raise ValueError("residual_zero_point without residual_scale")
        self._fused = FusedStage(OC, groups, odt, output_scale, output_zero_point, residual_scale, pool, pool_dtype,
                                 pool_scale, pool_zero_point, pixel_shuffle)
        self._geometry = geo
        self._output_dtype = odt
        self._relu = relu
        self._input_scale, self._input_zero_point = sx, zx
        self._output_scale = None if output_scale is None else float(output_scale)
        self._output_zero_point = output_zero_point
        self._bias = None if bias is None else read_only_copy(bias)
        self._weight_q = read_only_copy(np.asarray(wq, np.int8))  # (OC, KH, KW, ICg)
        self._weight_scale = read_only_copy(np.asarray(ws, np.float32))
        self._factor, self._offset = factor, offset
        self._lo, self._hi = float(lo), float(hi)
        self._checked = set()  # input dtypes whose zero-point range and K bound were checked
        # Per group, the GEMM's K x N weights: row (kh * KW + kw) * ICg + c, column o of the group.
        OCg = OC // groups
        w_gemm = self._weight_q.reshape(groups, OCg, KH * KW * ICg).transpose(0, 2, 1)
        perm = self._fused.permutation(OC)  # the fused pixel shuffle's channel order, or None
        if perm is not None:
            w_gemm = w_gemm[..., perm]
            factor, offset = (None, None) if factor is None else (factor[perm], offset[perm])
        self._packed = _C.PackedQConv2d(np.ascontiguousarray(w_gemm), list(self._geometry), OUT_KIND[odt],
                                        factor, offset, relu, float(lo), float(hi), zx)

    @classmethod
    def from_torch(cls, module: Any, input_scale: float, input_zero_point: int, output_scale: float | None = None,
                   output_zero_point: int = 0, **kwargs: Any) -> QConv2d:
        """A QConv2d from a float32 ``torch.nn.Conv2d`` (padding_mode "zeros"): its weight permuted to
        (out, KH, KW, in/groups) and quantized per output channel, its bias kept in real units, its stride,
        padding ("valid", "same" or numbers), dilation and groups; ``kwargs``: output_dtype, relu, algorithm."""
        w, b, geo = _convgeom.torch_conv_args("QConv2d", module)
        return cls(w, b, **geo, input_scale=input_scale, input_zero_point=input_zero_point, output_scale=output_scale,
                   output_zero_point=output_zero_point, **kwargs)

    output_dtype = property(lambda self: self._output_dtype, doc="uint8, int8, float32 or int32")
    relu = property(lambda self: self._relu, doc="whether ReLU is fused")
    input_scale = property(lambda self: self._input_scale, doc="the scale of the quantized input")
    input_zero_point = property(lambda self: self._input_zero_point, doc="the zero point of the quantized input")
    weight = property(lambda self: self._weight_q, doc="the int8 weights (out, KH, KW, in // groups), read-only")
    weight_scale = property(lambda self: self._weight_scale, doc="per output channel float32 scales, read-only")
    bias = property(lambda self: self._bias, doc="the bias as given (real units), read-only, or None")
    factor = property(lambda self: self._factor, doc="float32 per-channel requantization factor (None: int32)")
    offset = property(lambda self: self._offset, doc="float32 per-channel requantization offset (None: int32)")

    @property
    def kernel(self) -> str:
        """The micro-kernel the weights were packed for at construction."""
        return self._packed.kernel_name

    pool = property(lambda self: self._fused.pool, doc='"global_avg" when pooling is fused, else None')
    pool_dtype = property(lambda self: self._fused.pool_dtype, doc="the pooled result's dtype")
    pixel_shuffle = property(lambda self: self._fused.r, doc="the fused pixel shuffle's factor r, or None")

    def result_shape(self, input_shape: tuple[int, int, int, int]) -> tuple[int, ...]:
        """The shape a call returns for an NHWC input shape: output_shape, pooled or pixel-shuffled."""
        shape = self.output_shape(input_shape)
        return self._fused.result_shape(shape) if self._fused.kind else shape

    residual_scale = property(lambda self: self._residual_scale, doc="the scale of residual inputs (None: none)")
    residual_zero_point = property(lambda self: self._residual_zero_point, doc="the zero point of residual inputs")

    def __call__(self, x: ArrayIn, out: ArrayIn | None = None, *, residual: ArrayIn | None = None,
                 layout: str = "NHWC", out_layout: str | None = None) -> np.ndarray:
        """The layer on x (N, H, W, in_channels), uint8 or int8; returns (N, OH, OW, out_channels).

        layout="NCHW": x, residual and out in torch's (N, C, H, W) order instead, for convenience: x is copied
        to NHWC (a transposing copy that an NHWC model does not pay), the output written planar (below); with
        pixel_shuffle, the NHWC result is copied back instead; with pool, only x has a layout. The values are
        identical to the NHWC call's.
        out_layout: the layout of out and residual, "NHWC" or "NCHW" (None: as ``layout``; not settable apart
        from it with pool / pixel_shuffle). "NCHW" gives the planar (N, out_channels, OH, OW) result, e.g. an
        image for a network's RGB output layer, from NHWC x: the "low_ofm" algorithm's kernels store it directly
        (16 consecutive pixels of a channel per vector store, no transpose pass); the other algorithms go
        through an NHWC copy of the output."""
        nchw_in = _convgeom.check_layout(layout) == "NCHW"
        if self._fused.kind:
            if out_layout is not None and _convgeom.check_layout(out_layout) != layout:
                raise ValueError(f"this QConv2d fuses {self._fused.kind}: out_layout must be its layout")
            if not nchw_in:
                return self._run(x, out, self._algorithm, "", residual)
            if self._fused.kind == "pool":  # (N, out_channels): no layout
                return self._run(_convgeom.nchw_input(x, self.in_channels), out, self._algorithm, "", residual)
            return _convgeom.nchw_call(lambda xt, rt: self._run(xt, None, self._algorithm, "", rt), self.in_channels,
                                       x, out, self._output_dtype, residual)
        planar = _convgeom.check_layout(layout if out_layout is None else out_layout) == "NCHW"
        if nchw_in:
            x = _convgeom.nchw_input(x, self.in_channels)
        return self._run(x, out, self._algorithm, "", residual, planar)

    def _run(self, x, out, algorithm, kernel, residual=None, planar=False):
        """The call with an explicit algorithm and micro-kernel name ("" = dispatched; a test hook); planar: out
        (and residual) (N, out_channels, OH, OW)."""
        algorithm = _algorithm(algorithm)
        x = as_array(x, "x")
        if x.dtype not in A8:
            raise TypeError(f"x must have dtype uint8 or int8, got {x.dtype}")
        if x.ndim != 4:
            raise ValueError(f"x must be 4-D NHWC (N, H, W, {self.in_channels}), got shape {x.shape}")
        shape = self.output_shape(x.shape)
        if planar:
            shape = (shape[0], shape[3], shape[1], shape[2])
        self._check_input(x.dtype)
        if self._fused.kind:
            if residual is not None:
                raise ValueError(f"this QConv2d fuses {self._fused.kind}: it takes no residual")
            return self._run_fused(x, out, algorithm, kernel, self._fused.result_shape(shape))
        out, given = checked_output(out, shape, self._output_dtype, x=x)
        if residual is not None:
            residual = self._check_residual(residual, shape)
            if np.may_share_memory(out, residual):
                check_no_overlap(out, "out", residual=residual)
        if out.size == 0:
            return given
        if not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        target = aligned_target(out)
        if residual is None:
            self._packed.run(x, target, algorithm, kernel, planar=planar)
        else:
            self._packed.run(x, target, algorithm, kernel, np.ascontiguousarray(residual), self._residual_zero_point,
                             self._residual_factor, planar)
        if target is not out:
            np.copyto(out, target)
        return given

    def _run_fused(self, x, out, algorithm, kernel, shape):
        out, given = checked_output(out, shape, self._fused.result_dtype(), x=x)
        if out.size == 0:
            return given
        if not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        target = aligned_target(out)
        self._fused.run(self._packed, x, target, algorithm, kernel)
        if target is not out:
            np.copyto(out, target)
        return given

    def _check_residual(self, r, shape):
        r = as_array(r, "residual")
        if self._residual_scale is None:
            raise ValueError("this QConv2d was built without residual_scale: it takes no residual")
        if r.dtype not in A8:
            raise TypeError(f"residual must have dtype uint8 or int8, got {r.dtype}")
        if r.shape != shape:
            raise ValueError(f"residual must have the output's shape {shape}, got {r.shape}")
        lo, hi = RANGE[r.dtype]
        if not lo <= self._residual_zero_point <= hi:
            raise ValueError(f"residual_zero_point {self._residual_zero_point} is outside the range of {r.dtype}")
        return r

    def _check_input(self, dtype):
        if dtype in self._checked:
            return
        zx = self._input_zero_point
        lo, hi = RANGE[dtype]
        if not lo <= zx <= hi:
            raise ValueError(f"input_zero_point {zx} is outside the range of {dtype} input")
        OC, IC, KH, KW, groups = self._geometry[:5]
        K = KH * KW * (IC // groups)
        kmax = qgemm_max_k(dtype, zx, 0)
        if K > kmax:
            raise ValueError(f"KH * KW * in_channels // groups = {K} exceeds {kmax}, the largest K whose "
                             f"accumulators all fit int32 for {dtype} input with zero point {zx}")
        self._checked.add(dtype)

    def __getstate__(self):
        # The int8 weights and the arguments as given: construction repeats the same float operations.
        OC, IC, KH, KW, groups, sh, sw, dh, dw, pt, pb, pl, pr = self._geometry
        return {"weight": self._weight_q, "bias": self._bias, "weight_scale": self._weight_scale,
                "stride": (sh, sw), "padding": (pt, pb, pl, pr), "dilation": (dh, dw), "groups": groups,
                "input_scale": self._input_scale, "input_zero_point": self._input_zero_point,
                "output_scale": self._output_scale, "output_zero_point": self._output_zero_point,
                "output_dtype": self._output_dtype, "relu": self._relu, "algorithm": self._algorithm,
                "residual_scale": self._residual_scale, "residual_zero_point": self._residual_zero_point,
                **self._fused.state()}

    def __setstate__(self, state):
        state = dict(state)
        self.__init__(state.pop("weight"), state.pop("bias"), **state)

    def __repr__(self):
        OC, IC, KH, KW, groups = self._geometry[:5]
        return (f"QConv2d(in_channels={IC}, out_channels={OC}, kernel_size=({KH}, {KW}), stride={self.stride}, "
                f"padding={self.padding}, dilation={self.dilation}, groups={groups}, "
                f"output_dtype={self.output_dtype.name}, relu={self.relu}, algorithm={self.algorithm!r}, "
                f"kernel={self.kernel!r}{self._fused.repr_suffix()})")
