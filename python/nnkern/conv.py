"""FP32 2-D convolution on NHWC batches: the prepacked Conv2d layer and the one-call conv2d."""
from __future__ import annotations

from typing import Any

import numpy as np

from . import _C, _convgeom, _precision, bf16
from ._arrays import ArrayIn, aligned_target, as_array, check_algorithm, checked_output, read_only_copy
from .activations import ACTIVATION_METHODS

__all__ = ["Conv2d", "InvertedResidual", "conv2d"]

#: The fused activations, by the number the native layer knows them by.
ACTIVATIONS = {None: 0, "relu": 1, "relu6": 2, "sigmoid": 3, "silu": 4, "hardswish": 5, "hardsigmoid": 6,
               "leaky_relu": 7, "tanh": 8}
#: The parameters (alpha, beta) of the activations that take them, with ONNX's defaults.
ACTIVATION_PARAMETERS = {"leaky_relu": (0.01, None), "hardsigmoid": (0.2, 0.5)}


def _activation(v):
    if v is not None and not isinstance(v, str):
        raise TypeError(f"activation must be None or a str, got {type(v).__name__}")
    if v not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {list(ACTIVATIONS)}, got {v!r}")
    return v


def _activation_parameters(activation, alpha, beta) -> tuple:
    """(alpha, beta) as the layer keeps them: the given ones or the defaults; None where the activation has none."""
    defaults = ACTIVATION_PARAMETERS.get(activation, (None, None))
    out = []
    for name, given, default in (("activation_alpha", alpha, defaults[0]), ("activation_beta", beta, defaults[1])):
        if given is not None and default is None:
            raise ValueError(f"{name} is not a parameter of activation {activation!r}")
        if given is not None and (isinstance(given, bool) or not isinstance(given, (int, float, np.floating))
                                  or not np.isfinite(given)):
            raise ValueError(f"{name} must be a finite number, got {given!r}")
        out.append(None if default is None else float(default if given is None else given))
    return tuple(out)


def _method(v):
    if not isinstance(v, str) or v not in ACTIVATION_METHODS:
        raise ValueError(f"activation_method must be one of {list(ACTIVATION_METHODS)}, got {v!r}")
    return v


def _float32(v, name):
    a = as_array(v, name)
    if a.dtype != np.float32:
        raise TypeError(f"{name} must have dtype float32, got {a.dtype}")
    return a


def _call_nhwc(layer, x, out, run):
    """A layer's call on a float32 NHWC batch: x checked (copied when not C-contiguous and aligned), out from
    ``layer.output_shape`` (new, or the caller's, checked), run(x, target) writing an aligned target; returns the
    output (the caller's own ``out`` when given)."""
    x = _float32(x, "x")
    if x.ndim != 4:
        raise ValueError(f"x must be 4-D NHWC (N, H, W, {layer.in_channels}), got shape {x.shape}")
    out, given = checked_output(out, layer.output_shape(x.shape), np.float32, x=x)
    if out.size == 0:
        return given
    if not (x.flags.c_contiguous and x.flags.aligned):
        x = np.ascontiguousarray(x) if x.flags.aligned else x.copy()
    target = aligned_target(out)
    run(x, target)
    if target is not out:
        np.copyto(out, target)
    return given


class Conv2d(_convgeom.ConvGeometryProperties):
    """FP32 2-D convolution on NHWC batches, weights packed once, bias and activation fused.

    weight: float32 (out_channels, KH, KW, in_channels // groups); from torch's (out, in/groups, KH, KW)
      layout: ``w.permute(0, 2, 3, 1)``, or use :meth:`from_torch`. bias: float32 (out_channels,) or None.
    stride, dilation: an int or (h, w), >= 1. padding: an int, (h, w) or (top, bottom, left, right), >= 0,
      zeros. groups: divides both channel counts (groups == in_channels: depthwise).
    activation: None, "relu", "relu6" (clamped in the kernels' epilogue), "sigmoid", "silu" (x * sigmoid(x)) or
      "tanh", these three through nnkern's sigmoid / tanh kernels with ``activation_method`` ("accurate" by default,
      see :mod:`nnkern.activations` for the bounds of "minimax" and "scalef"), "hardswish" (x * clip(x / 6 + 0.5, 0,
      1)), "hardsigmoid" (clip(alpha x + beta, 0, 1)) or "leaky_relu" (x < 0: alpha x), the last six on each block of
      output just stored. activation_alpha, activation_beta: the parameters of the last two (ONNX's defaults:
      alpha 0.2, beta 0.5 for hardsigmoid, alpha 0.01 for leaky_relu).
    algorithm: "auto" or an entry of ``nnkern._C.algorithms("conv2d")``:
      "mgemm" (the mGEMM convolution: a block of output channels x a run of output pixels of one row in registers,
      reducing over all input channels and the window straight from the NHWC input, the inputs of three adjacent
      kernel columns loaded once per channel; stride == dilation along W, AVX2 / AVX-512 / NEON only), "direct" (the
      same without the input reuse, any stride; a scalar kernel elsewhere), "depthwise" (groups == in_channels ==
      out_channels: channels in vector lanes), "dot" (a few output channels in registers, the input channels in
      vector lanes, each output one horizontal sum: the low-output-channel layers), all four with no workspace and
      no padding read (taps are clipped to the image; so a padded layer with an Inf or NaN weight, where 0 x Inf
      must give NaN at the border, runs indirect or im2col instead: the four do not apply to it); "indirect" (the
      GEMM kernels' indirect form reading each window through an indirection buffer of input-row offsets, built
      once per input shape and cached in the layer, at most 8 shapes and 64 MiB beyond the one in use, least
      recently used dropped first; padding taps read a shared zero row) and "im2col" (the baseline: each output pixel's window copied into a workspace row, then the
      packed FP32 GEMM; a 1x1, stride-1, unpadded convolution is a plain GEMM on the input rows, no copy);
      "winograd" (F(4x4, 3x3): 36 multiplies per 16 outputs and channel pair instead of 144) and "winograd_2x2"
      (F(2x2, 3x3): 16 instead of 36), for 3x3 stride-1 undilated layers with finite weights, under their own
      error bound (below).
      auto, in this order: "depthwise" for depthwise layers; "im2col" (the plain GEMM) for 1x1 stride-1
      unpadded layers; "dot" for at most 8 output channels per group over at least 16 input channels where its
      kernel is SIMD; with AVX-512 or NEON: "mgemm" where it applies and an output row holds at least two whole
      tiles of its kernel inside the image, else "direct" for outputs at least 14 wide (or with at most 4 input
      channels per group); "indirect" for the rest, which is also the rule on AVX2 (where the GEMM kernel is
      ahead of the direct and mGEMM ones) and scalar (the measurements: docs/performance.md, "Conv2d: auto's
      rule"). :meth:`algorithm_for` says which one a shape gets, ``_packed.applicable_algorithms(n, h, w)``
      which apply. The Winograd algorithms come first in auto's order but only at ``precision`` "high" or
      "medium": where a group has at least 16 input and 16 output channels and the output is at least 4x4,
      "winograd" where the tiles covering the output take at most 0.8x the products of "winograd_2x2"'s (7x7 and
      larger outputs) unless its weights, more than 8 times the L2 cache, would serve at most 16 tiles (a call
      bound by reading them: 7x7 and 14x14 at 512 channels, batch 1), "winograd_2x2" for the rest (5x5, 6x6).
      "bf16": the windows as rows (as "im2col") and the weights rounded to bf16, their products summed in float32
      on the bf16 GEMM kernels (:mod:`nnkern.bf16`); auto takes it at ``precision`` "medium" for every layer but
      the depthwise ones, ahead of Winograd.
    precision: None (the process-wide setting at each call, :func:`nnkern.set_float32_precision`, "highest" by
      default), "highest", "high" or "medium": what "auto" may pick. An explicit algorithm runs at any setting.

    Accuracy: every output before the activation is a float32 sum of the bias and K = KH * KW * in_channels //
    groups products, in an order that depends on the algorithm and the ISA but never on the thread count; per
    element |y - exact| <= (2 K + 2) eps sum |x w| + 2 eps |bias|, eps = 2**-24 (sgemm's bound; the tests check
    it against a float64 convolution). sigmoid / silu / tanh add their method's error (nnkern.activations).
    "bf16" is within (K + 2) eps sum |x' w'| + 2 eps |bias| of the exact convolution of the rounded x' and w',
    and adds (2**-7 + 2**-16) sum |x w| against the float32 operands.
    Winograd's transforms reorder the sum through constants up to 8, so its bound replaces sum |x w| by the
    magnitude carried through them: per m x m output tile, with the input patch d_c and filter g_c of channel c,
    |y - exact| <= (2 K + 24) eps |A^T| [ sum_c (|G| |g_c| |G^T|) (.) (|B^T| |d_c| |B|) ] |A| + 2 eps |bias|
    (A, B, G: the F(m x m, 3 x 3) matrices of kernels/f32_winograd.h; K as above; at most in_channels // groups
    + 12 roundings along any term: 4 in the input transform, 1 rounding the transformed weight, one per product in
    the sum over input channels, 6 in the output transform, 1 adding the bias; doubled, as the direct bound). The
    bound is a worst case: on uniform data tests/test_winograd.py holds the largest error of F(4x4) to 0.25 K eps
    sum |x w| and of F(2x2) to 0.03 (the direct algorithms' scale). A tile whose transforms meet Inf, NaN or an
    overflow is recomputed by the direct sum: non-finite values propagate as in the other algorithms.
    Calling the layer on x (N, H, W, in_channels) float32 (non-contiguous x is copied) returns (N, OH, OW,
    out_channels) float32, OH = (H + top + bottom - dilation_h * (KH - 1) - 1) // stride_h + 1 (likewise OW);
    ``out=`` a C-contiguous float32 array of that shape, not overlapping x. Thread-safe; pickles.
    """

    def __init__(self, weight: ArrayIn, bias: ArrayIn | None = None, *, stride: int | tuple[int, int] = 1,
                 padding: int | tuple[int, ...] = 0, dilation: int | tuple[int, int] = 1, groups: int = 1,
                 activation: str | None = None, activation_method: str = "accurate",
                 algorithm: str = "auto", activation_alpha: float | None = None,
                 activation_beta: float | None = None, precision: str | None = None) -> None:
        self._algorithm = check_algorithm(algorithm, "conv2d")
        self._precision = _precision.check_precision(precision, allow_none=True)
        self._activation = _activation(activation)
        self._alpha, self._beta = _activation_parameters(self._activation, activation_alpha, activation_beta)
        self._method = _method(activation_method)
        weight = _float32(weight, "weight")
        self._geometry = _convgeom.geometry(weight.shape, stride, padding, dilation, groups)
        OC = self._geometry[0]
        if bias is not None:
            bias = _float32(bias, "bias")
            if bias.shape != (OC,):
                raise ValueError(f"bias must have shape ({OC},), got {bias.shape}")
            bias = read_only_copy(bias)
        self._weight = read_only_copy(weight)
        self._bias = bias
        self._packed = _C.PackedConv2d(self._weight, list(self._geometry), bias, ACTIVATIONS[self._activation],
                                       self._method, self._alpha or 0.0, self._beta or 0.0)

    @classmethod
    def from_torch(cls, module: Any, **kwargs: Any) -> Conv2d:
        """A Conv2d from a float32 ``torch.nn.Conv2d`` (padding_mode "zeros"): its weight permuted to
        (out, KH, KW, in/groups), its bias, stride, padding ("valid", "same" or numbers), dilation and groups;
        ``kwargs``: activation, activation_method, activation_alpha, activation_beta, algorithm."""
        w, b, geo = _convgeom.torch_conv_args("Conv2d", module)
        return cls(w, b, **geo, **kwargs)

    activation = property(lambda self: self._activation, doc="the fused activation (None or a name of ACTIVATIONS)")
    activation_alpha = property(lambda self: self._alpha, doc="the activation's alpha, or None where it has none")
    activation_beta = property(lambda self: self._beta, doc="the activation's beta, or None where it has none")
    activation_method = property(lambda self: self._method,
                                 doc="the sigmoid / tanh kernels' method for sigmoid / silu / tanh")
    weight = property(lambda self: self._weight, doc="the weights (out, KH, KW, in // groups), read-only")
    bias = property(lambda self: self._bias, doc="the bias, read-only, or None")
    precision = property(lambda self: self._precision,
                         doc="the layer's float32 precision, or None: the process-wide one at each call")

    def workspace_bytes(self, input_shape: tuple[int, int, int, int], algorithm: str | None = None) -> int:
        """The scratch bytes a call on this NHWC input shape takes with `algorithm` (default: the layer's);
        the packed weights and cached indirection buffers are not scratch."""
        self.output_shape(input_shape)
        N, H, W, _ = _convgeom.input_shape4(input_shape)
        algorithm = self._algorithm if algorithm is None else check_algorithm(algorithm, "conv2d")
        return self._packed.workspace_bytes(N, H, W, algorithm, _precision.resolve(self._precision))

    def algorithm_for(self, input_shape: tuple[int, int, int, int]) -> str:
        """The algorithm "auto" runs for this NHWC input shape (at the layer's precision, else the current one)."""
        self.output_shape(input_shape)
        N, H, W, _ = _convgeom.input_shape4(input_shape)
        return self._packed.auto_algorithm(N, H, W, _precision.resolve(self._precision))

    def __call__(self, x: ArrayIn, out: ArrayIn | None = None, *, residual: ArrayIn | None = None,
                 layout: str = "NHWC") -> np.ndarray:
        """The layer on x (N, H, W, in_channels) float32; returns (N, OH, OW, out_channels) float32.

        residual: float32 of the output's shape (a ResNet shortcut), added to the convolution and its bias before
        the activation, as the block's add would be: activation(conv(x) + bias + residual), the same values as the
        layer without activation, then the add, then the activation (each rounded once). It must not share memory
        with ``out``.
        layout="NCHW": x, out and residual in torch's (N, C, H, W) order instead, for convenience: x is copied to
        NHWC, the layer runs, and the result is copied back, so each call pays transposing copies that an NHWC
        model does not. The values are identical to the NHWC call's.
        x may be a bf16 array (``ml_dtypes.bfloat16``, a torch bfloat16 tensor: :mod:`nnkern.bf16`), widened to
        float32 exactly first; ``out`` may be a bf16 array, the float32 result rounded into it."""
        bits = bf16.bf16_bits(x)
        if bits is not None:
            x = bf16.from_bf16(bits)
        out_bits = None if out is None else bf16.bf16_bits(out)
        if out_bits is not None:
            bf16.to_bf16(self(x, residual=residual, layout=layout), out_bits)  # checks out's shape and layout
            return out
        if _convgeom.check_layout(layout) == "NHWC":
            return self._run(x, out, self._algorithm, "", residual)
        if residual is not None:
            residual = np.ascontiguousarray(np.moveaxis(_float32(residual, "residual"), 1, -1))
        return _convgeom.nchw_call(lambda xt, _: self._run(xt, None, self._algorithm, "", residual), self.in_channels,
                                   x, out, np.float32)

    def _run(self, x, out, algorithm, kernel, residual=None):
        """The call with an explicit algorithm and GEMM kernel name ("" = dispatched; a test hook)."""
        algorithm = check_algorithm(algorithm, "conv2d")
        precision = _precision.resolve(self._precision)
        if residual is not None:
            residual = _float32(residual, "residual")
            if not (residual.flags.c_contiguous and residual.flags.aligned):
                residual = np.ascontiguousarray(residual) if residual.flags.aligned else residual.copy()
        return _call_nhwc(self, x, out,
                          lambda xc, target: self._packed.run(xc, target, algorithm, kernel, precision, residual))

    def __getstate__(self):
        OC, IC, KH, KW, groups, sh, sw, dh, dw, pt, pb, pl, pr = self._geometry
        return {"weight": self._weight, "bias": self._bias, "stride": (sh, sw), "padding": (pt, pb, pl, pr),
                "dilation": (dh, dw), "groups": groups, "activation": self._activation,
                "activation_method": self._method, "algorithm": self._algorithm, "activation_alpha": self._alpha,
                "activation_beta": self._beta, "precision": self._precision}

    def __setstate__(self, state):
        state = dict(state)
        self.__init__(state.pop("weight"), state.pop("bias"), **state)

    def __repr__(self):
        OC, IC, KH, KW, groups = self._geometry[:5]
        return (f"Conv2d(in_channels={IC}, out_channels={OC}, kernel_size=({KH}, {KW}), stride={self.stride}, "
                f"padding={self.padding}, dilation={self.dilation}, groups={groups}, "
                f"activation={self.activation!r}, algorithm={self.algorithm!r}"
                + (f", precision={self._precision!r})" if self._precision is not None else ")"))


def conv2d(x: ArrayIn, weight: ArrayIn, bias: ArrayIn | None = None, *, stride: int | tuple[int, int] = 1,
           padding: int | tuple[int, ...] = 0, dilation: int | tuple[int, int] = 1, groups: int = 1,
           activation: str | None = None, activation_method: str = "accurate", algorithm: str = "auto",
           out: ArrayIn | None = None, layout: str = "NHWC", activation_alpha: float | None = None,
           activation_beta: float | None = None, precision: str | None = None) -> np.ndarray:
    """One FP32 convolution: :class:`Conv2d` built with these arguments and called once on x (layout as its
    call). It packs the weights on every call; a layer called more than once should be a Conv2d."""
    return Conv2d(weight, bias, stride=stride, padding=padding, dilation=dilation, groups=groups,
                  activation=activation, activation_method=activation_method, algorithm=algorithm,
                  activation_alpha=activation_alpha, activation_beta=activation_beta,
                  precision=precision)(x, out, layout=layout)


class InvertedResidual:
    """MobileNet-v2's inverted-residual block fused: ``project(depthwise(expand(x))) (+ x)`` computed in bands of
    output rows, each band through all three layers while its slices of the expanded and depthwise activations are
    in the cache (about 1 MB per band), instead of writing whole intermediate tensors to memory and reading them
    back (112 x 112 x 96 floats are 4.8 MB). Bands run on the thread pool in parallel.

    expand: a :class:`Conv2d` 1x1, stride 1, unpadded, groups 1 (in -> hidden channels), or None (no expansion);
    depthwise: a depthwise Conv2d on the hidden channels (groups = in = out channels; any window, stride,
    padding, dilation); project: a Conv2d 1x1, stride 1, unpadded, groups 1 (hidden -> out channels). Each keeps
    its bias, activation and algorithm. residual: add x to the output (needs in == out channels and a depthwise layer that
    keeps the spatial size). The layers are shared, not copied. ValueError if they do not chain.

    The result equals the three layers called one after the other (and ``+ x``) bit for bit: each layer runs the
    algorithm and kernel it runs alone, on a band of rows instead of the whole image. Calling it on x (N, H, W, in)
    float32 returns (N, OH, OW, out) float32; ``out=`` a C-contiguous float32 array of that shape not overlapping x.
    """

    def __init__(self, expand: Conv2d | None, depthwise: Conv2d, project: Conv2d, *, residual: bool = False) -> None:
        for name, layer in (("expand", expand), ("depthwise", depthwise), ("project", project)):
            if not (layer is None and name == "expand") and not isinstance(layer, Conv2d):
                raise TypeError(f"{name} must be an nnkern.Conv2d{' or None' if name == 'expand' else ''}, "
                                f"got {type(layer).__name__}")
        if not isinstance(residual, (bool, np.bool_)):
            raise TypeError(f"residual must be a bool, got {type(residual).__name__}")
        try:
            self._block = _C.InvertedResidual(None if expand is None else expand._packed, depthwise._packed,
                                              project._packed, bool(residual),
                                              ["auto" if expand is None else expand.algorithm, depthwise.algorithm,
                                               project.algorithm])
        except ValueError as e:
            raise ValueError(str(e).replace("inverted residual: ", "InvertedResidual: ")) from None
        self.expand, self.depthwise, self.project, self.residual = expand, depthwise, project, bool(residual)
        self.in_channels = depthwise.in_channels if expand is None else expand.in_channels
        self.out_channels = project.out_channels

    def output_shape(self, input_shape: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
        """(N, OH, OW, out_channels) for an NHWC input shape; ValueError if the window does not fit."""
        N, H, W, C = input_shape
        if C != self.in_channels:
            raise ValueError(f"x has {C} channels, this InvertedResidual expects {self.in_channels} (NHWC input)")
        _, OH, OW, _ = self.depthwise.output_shape((N, H, W, self.depthwise.in_channels))
        return N, OH, OW, self.out_channels

    def __call__(self, x: ArrayIn, out: ArrayIn | None = None) -> np.ndarray:
        return _call_nhwc(self, x, out, self._block.run)

    def __repr__(self):
        return (f"InvertedResidual(in_channels={self.in_channels}, out_channels={self.out_channels}, "
                f"hidden={self.depthwise.in_channels}, stride={self.depthwise.stride}, residual={self.residual})")
