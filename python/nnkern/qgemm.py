"""Integer matrix products: qgemm (uint8/int8 x int8 -> int32), qgemm16 (int16 x int16 -> int32), and the
prepacked QLinear layer with its fused requantization."""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from . import _C
from ._arrays import (ArrayIn, aligned_target, as_array, as_bool, c_aligned, check_algorithm, check_no_overlap,
                      checked_output, is_real_scalar, read_only_copy)
from ._quant_params import (A8, B8, I16, I32_MAX, OUT_KIND, QTYPE, RANGE, column_zero_points, int_scalar,
                            output_stage, positive_scale, quantized_weights, require, zero_point)

__all__ = ["qgemm", "qgemm16", "QLinear", "qgemm_max_k"]


def qgemm_max_k(a_dtype: npt.DTypeLike, a_zero_point: int = 0, b_zero_point: int | ArrayIn = 0) -> int:
    """The largest K for which every uint8/int8 x int8 product sum_k (a - za)(b - zb) fits int32:
    (2**31 - 1) // (max |a - za| * max |b - zb|) over the whole value ranges of the dtypes
    (b_zero_point may be per column: the worst column counts). E.g. 65793 for za = zb = 0, uint8."""
    try:
        adt = np.dtype(a_dtype) if a_dtype is not None else None
    except TypeError:
        adt = None
    if adt not in A8:
        raise TypeError(f"a_dtype must be numpy.uint8 or numpy.int8, got {a_dtype!r}")
    alo, ahi = RANGE[adt]
    za = zero_point(a_zero_point, "a_zero_point", adt)
    da = max(za - alo, ahi - za)
    if is_real_scalar(b_zero_point) or not isinstance(b_zero_point, (list, tuple, np.ndarray)):
        zb = zero_point(b_zero_point, "b_zero_point", B8[0])
        db = max(zb + 128, 127 - zb)
    else:
        _, zbs = column_zero_points(b_zero_point, "b_zero_point", B8[0], np.size(b_zero_point))
        db = int(max(np.max(zbs + 128), np.max(127 - zbs))) if zbs.size else 128
    return I32_MAX // (da * db)


def _output(out, M, N):
    return checked_output(out, (M, N), np.int32)[0]


def _algorithm(v):
    return check_algorithm(v, "qgemm")


_AUTO = "auto"  # the default, by identity: a call that leaves it may take the C++ fast path (_C.qgemm_fast)


def qgemm(a: ArrayIn, b: ArrayIn, *, a_zero_point: int = 0, b_zero_point: int | ArrayIn = 0,
          out: ArrayIn | None = None, algorithm: str = _AUTO) -> npt.NDArray[np.int32]:
    """Exact integer matrix product: C[m, n] = sum_k (a[m, k] - a_zero_point) * (b[k, n] - b_zero_point[n]).

    a: uint8 or int8 (M, K) activations; b: int8 (K, N) weights; result int32 (M, N), bit-exact (it
    equals the int64 numpy computation). a_zero_point: an integer in a's range; b_zero_point: an
    integer in [-128, 127] or one per column (length N). Zero points are folded into row/column-sum
    corrections, and int8 activations are shifted to uint8 (+128) internally for VNNI, with the
    compensation applied for you.
    K must satisfy K <= qgemm_max_k(a.dtype, a_zero_point, b_zero_point) (65793 with zero points 0 and
    uint8 a), so that every possible result fits int32; a larger K raises ValueError.
    Non-contiguous inputs are copied. out: optional int32 (M, N) C-contiguous array, not overlapping
    the inputs. The result allocated when out is None starts on a 64-byte cache line from 64 KiB up; an
    out= array that does not (numpy's own large arrays start 16 bytes past one) is written correctly but
    slower by the AMX kernel, which stores whole 64-byte tile rows.
    algorithm: "auto", or one path of ``nnkern._C.algorithms("qgemm")``: "gemv" (small M on CPUs with a
    GEMV kernel: M <= 12 with AVX-512 VNNI or AMX, M <= 4 with AVX2; B read once, unpacked), "pack_per_panel"
    (each task packs the panel of B it uses; auto's choice while B's rows fit a page), "pack_all" (all of B
    packed first). Every path gives the same exact result; a path that does not apply raises ValueError.
    """
    if algorithm is _AUTO and type(a_zero_point) is int and type(b_zero_point) is int and \
            -256 < a_zero_point < 256 and -256 < b_zero_point < 256:
        fast = _C.qgemm_fast(a, b, a_zero_point, b_zero_point, out)  # None unless every check below would pass
        if fast is not None:
            return fast
    algorithm = _algorithm(algorithm)
    a = require(a, "a", A8)
    b = require(b, "b", B8)
    M, K = a.shape
    Kb, N = b.shape
    if K != Kb:
        raise ValueError(f"qgemm: inner dimensions differ: a of shape {a.shape} and b of shape {b.shape}")
    za = zero_point(a_zero_point, "a_zero_point", a.dtype)
    zb, zb_arr = column_zero_points(b_zero_point, "b_zero_point", B8[0], N)
    kmax = qgemm_max_k(a.dtype, za, zb_arr if zb_arr is not None else zb)
    if K > kmax:
        raise ValueError(f"K = {K} exceeds {kmax}, the largest K whose results all fit int32 with these "
                         f"dtypes and zero points")
    given = out
    out = _output(out, M, N)
    given = out if given is None else given
    if np.may_share_memory(out, a) or np.may_share_memory(out, b):
        check_no_overlap(out, "out", a=a, b=b)
    if out.size == 0:
        return given
    target = aligned_target(out)
    _C.qgemm(c_aligned(a), QTYPE[a.dtype], za, c_aligned(b), 1, zb_arr, zb, target, algorithm)
    if target is not out:
        np.copyto(out, target)
    return given


def qgemm16(a: ArrayIn, b: ArrayIn, *, a_zero_point: int = 0, b_zero_point: int | ArrayIn = 0,
            out: ArrayIn | None = None, algorithm: str = "auto") -> npt.NDArray[np.int32]:
    """Exact int16 x int16 -> int32 product (VPDPWSSD where available, VPMADDWD otherwise):
    C[m, n] = sum_k (a[m, k] - a_zero_point) * (b[k, n] - b_zero_point[n]).

    a: int16 (M, K); b: int16 (K, N); zero points in the int16 range (b's scalar or per column).
    Bound: full-range int16 products overflow int32 after two terms, so the check uses the data:
    K * max|a - za| * max|b - zb| must be <= 2**31 - 1, else ValueError (computed from a and b,
    an O(MK + KN) pass). Under that bound the result is bit-exact. algorithm: as for :func:`qgemm`.
    """
    algorithm = _algorithm(algorithm)
    a = require(a, "a", I16)
    b = require(b, "b", I16)
    M, K = a.shape
    Kb, N = b.shape
    if K != Kb:
        raise ValueError(f"qgemm16: inner dimensions differ: a of shape {a.shape} and b of shape {b.shape}")
    za = zero_point(a_zero_point, "a_zero_point", I16[0])
    zb, zb_arr = column_zero_points(b_zero_point, "b_zero_point", I16[0], N)
    given = out
    out = _output(out, M, N)
    given = out if given is None else given
    check_no_overlap(out, "out", a=a, b=b)
    if out.size == 0:
        return given
    if K:
        da = max(abs(int(a.max()) - za), abs(int(a.min()) - za))
        bz = zb_arr.astype(np.int64) if zb_arr is not None else np.int64(zb)
        db = int(np.max(np.maximum(np.abs(b.max(axis=0).astype(np.int64) - bz),
                                   np.abs(b.min(axis=0).astype(np.int64) - bz))))
        if K * da * db > I32_MAX:
            raise ValueError(f"qgemm16: K * max|a - za| * max|b - zb| = {K} * {da} * {db} exceeds 2**31 - 1: "
                             f"the result may not fit int32")
    target = aligned_target(out)
    _C.qgemm(c_aligned(a), 2, za, c_aligned(b), 2, zb_arr, zb, target, algorithm)
    if target is not out:
        np.copyto(out, target)
    return given


class QLinear:
    """Quantized ``y = x @ W.T + bias`` (torch.nn.Linear layout), weights packed once, requantization fused.

    weight: float32 (out_features, in_features), quantized per output channel at construction as
      :func:`nnkern.quantize_weights` does (int8, scale max|w|/127); or int8 with ``weight_scale`` (scalar or
      per output channel) taken as given (symmetric: weight zero point 0).
    bias: float (out_features,) or None, in real units.
    input_scale, input_zero_point: the quantization of x (uint8 or int8, chosen per call by x's dtype;
      the zero point must lie in that dtype's range).
      ``input_scale=None`` (and no input_zero_point): *dynamic* quantization. Each call takes float32 x,
      quantizes it to uint8 with its own range as onnxruntime's DynamicQuantizeLinear does (one scale and
      zero point for the whole x; see :func:`nnkern.dynamic_quantization_params`) and returns float32:
      y = float(sum_k (xq - zx) wq) * float32(sx * weight_scale[n]) + bias[n] (one fused multiply-add),
      which is onnxruntime's DynamicQuantizeLinear + MatMulInteger + Mul graph bit for bit without bias
      (with bias within one float32 rounding). NaN in x is quantized to the zero point; Inf raises
      ValueError.
    output_dtype: uint8 / int8: requantized with output_scale, output_zero_point (required scale);
      float32: the real result; int32: the exact accumulator sum_k (x - zx) wq (bias must be None; with relu,
      max(acc, 0): the ReLU of the real result in accumulator units, the scales being positive).
      Default: uint8 (static), float32 (dynamic, the only choice there). The float32 factor input_scale *
      weight_scale (/ output_scale) of each channel must be a normal float32 or 0 (a zero channel): one that
      overflows, or underflows below 1.2e-38 (an output that no longer depends on x), is a ValueError.
    relu: max(y, 0), fused (for uint8/int8 it is exactly the clamp at the output zero point).

    One call runs the GEMM and, on the int32 accumulators in registers (seed I12): float conversion,
    one FMA ``acc * factor[n] + offset[n]`` with the precomputed factor = input_scale * weight_scale[n] /
    output_scale and offset = bias[n] / output_scale + output_zero_point (float32), ReLU, clamp to the
    output range, round half to even, store. (float32 output: factor = input_scale * weight_scale[n],
    offset = bias[n].) The results are exactly those float32 operations; they match a float64 evaluation
    of the same formula except within one float32 rounding of a .5 tie.
    Safe to call from several threads at once. Pickling and ``copy.deepcopy`` store the int8 weights and
    parameters and repack on load (results bit-identical).
    """

    def __init__(self, weight: ArrayIn, bias: ArrayIn | None = None, *, weight_scale: float | ArrayIn | None = None,
                 input_scale: float | None = None, input_zero_point: int | None = None,
                 output_scale: float | None = None, output_zero_point: int = 0,
                 output_dtype: npt.DTypeLike | None = None, relu: bool = False) -> None:
        relu = as_bool(relu, "relu")
        weight = as_array(weight, "weight")
        if weight.ndim != 2:
            raise ValueError(f"weight must be 2-D (out_features, in_features), got shape {weight.shape}")
        N, K = weight.shape
        wq, ws = quantized_weights(weight, weight_scale)
        dynamic = input_scale is None
        if dynamic:
            if input_zero_point is not None:
                raise ValueError("input_zero_point without input_scale: dynamic quantization (input_scale=None) "
                                 "derives both from each call's x")
            if output_dtype is None:
                output_dtype = np.float32
            sx, zx = None, None
        else:
            sx = float(positive_scale(input_scale, "input_scale"))
            if input_zero_point is None:
                raise ValueError("static quantization (input_scale given) needs input_zero_point")
            zx = int_scalar(input_zero_point, "input_zero_point")
            if not -128 <= zx <= 255:
                raise ValueError(f"input_zero_point must be in [-128, 255], got {zx}")
            if output_dtype is None:
                output_dtype = np.uint8
        try:
            odt = np.dtype(output_dtype)
        except TypeError:
            odt = None
        if odt not in OUT_KIND:
            raise TypeError(f"output_dtype must be uint8, int8, float32 or int32, got {output_dtype!r}")
        if dynamic and odt != np.dtype(np.float32):
            raise ValueError(f"dynamic quantization (input_scale=None) returns float32, not {odt}")
        bias, factor, offset, lo, hi = output_stage(ws, bias, sx, output_scale, output_zero_point, odt, relu,
                                                     dynamic)
        if dynamic and K > qgemm_max_k(np.uint8, 0, 0):
            raise ValueError(f"in_features = {K} exceeds {qgemm_max_k(np.uint8, 0, 0)}, the largest K whose "
                             f"accumulators all fit int32 for uint8 input with any zero point")
        self._dynamic = dynamic
        self._output_dtype = odt
        self._relu = relu
        self._input_scale, self._input_zero_point = sx, zx
        self._output_scale = None if output_scale is None else float(output_scale)
        self._output_zero_point = output_zero_point
        self._bias = None if bias is None else read_only_copy(bias)
        self._weight_q = read_only_copy(np.asarray(wq, np.int8))  # (out, in) int8
        self._weight_scale = read_only_copy(np.asarray(ws, np.float32))
        self._factor, self._offset = factor, offset
        self._lo, self._hi = float(lo), float(hi)  # the output clamp (ReLU folded in)
        self._checked = set()  # (input dtype, zero point) pairs whose range and K bound were checked
        # The C++ object copies the weights, factor and offset and holds every size a call uses: the
        # attributes below are read-only, and no change to them could make a call go out of bounds.
        self._packed = _C.PackedQLinear(np.ascontiguousarray(self._weight_q.T), OUT_KIND[odt], self._factor,
                                        self._offset, self._relu, float(lo), float(hi), 0 if dynamic else zx)

    @classmethod
    def from_torch(cls, module: Any, **quantization: Any) -> QLinear:
        """A QLinear from a float32 ``torch.nn.Linear``: its weight quantized per output channel, its bias
        kept in real units; ``quantization`` holds the other keyword arguments of :class:`QLinear`
        (none: dynamic quantization, float32 output)."""
        from .gemm import _torch_linear_params
        weight, bias = _torch_linear_params(module, "QLinear.from_torch")
        if "weight_scale" in quantization:
            raise ValueError("QLinear.from_torch quantizes the float weight itself: no weight_scale")
        return cls(weight, bias, **quantization)

    in_features = property(lambda self: self._packed.in_features, doc="K, the features of each input row")
    out_features = property(lambda self: self._packed.out_features, doc="N, the features of each output row")
    output_dtype = property(lambda self: self._output_dtype, doc="uint8, int8, float32 or int32")
    relu = property(lambda self: self._relu, doc="whether ReLU is fused")
    dynamic = property(lambda self: self._dynamic, doc="True: each call quantizes its float32 x with its own range")
    input_scale = property(lambda self: self._input_scale, doc="the scale of the quantized input (None: dynamic)")
    input_zero_point = property(lambda self: self._input_zero_point,
                                doc="the zero point of the quantized input (None: dynamic)")
    weight = property(lambda self: self._weight_q, doc="the int8 weights (out_features, in_features), read-only")
    weight_q = property(lambda self: self._weight_q, doc="the int8 weights (out_features, in_features), read-only")
    weight_scale = property(lambda self: self._weight_scale, doc="per output channel float32 scales, read-only")
    bias = property(lambda self: self._bias, doc="the bias as given (real units), read-only, or None")
    factor = property(lambda self: self._factor,
                      doc="float32 per-channel requantization factor (None for int32 output; dynamic: the "
                          "weight scales, times each call's input scale), read-only")
    offset = property(lambda self: self._offset,
                      doc="float32 per-channel requantization offset (None for int32 output), read-only")

    @property
    def kernel(self) -> str:
        """The micro-kernel the weights were packed for."""
        return self._packed.kernel_name

    def __call__(self, x: ArrayIn, out: ArrayIn | None = None) -> np.ndarray:
        if not self._dynamic:
            y = self._packed.run_fast(x, out)  # None unless x (and out) pass every check below as they are
            if y is not None:
                return y
        x = as_array(x, "x")
        if self._dynamic:
            if x.dtype != np.float32:
                raise TypeError(f"x must have dtype float32 (this QLinear quantizes its input dynamically), "
                                f"got {x.dtype}")
        elif x.dtype not in A8:
            raise TypeError(f"x must have dtype uint8 or int8, got {x.dtype}")
        K, N = self.in_features, self.out_features
        if x.ndim < 1 or x.shape[-1] != K:
            raise ValueError(f"x must have shape (..., {K}), got {x.shape}")
        if not self._dynamic:
            self._check_static_input(x.dtype)
        lead = x.shape[:-1]
        shape = lead + (N,)
        out, given = checked_output(out, shape, self._output_dtype, x=x)
        if out.size == 0:
            return given
        rows = math.prod(lead)
        target = aligned_target(out)
        if self._dynamic:
            from .quantize import quantize_dynamic
            xq, sx, zx = quantize_dynamic(x)
            self._packed.run_dynamic(xq.reshape(rows, K), target.reshape(rows, N), zx, float(sx))
        else:
            x2 = x.reshape(rows, K)
            if not x2.flags.c_contiguous:
                x2 = np.ascontiguousarray(x2)
            self._packed.run(x2, target.reshape(rows, N))
        if target is not out:
            np.copyto(out, target)
        return given

    def _check_static_input(self, dtype):
        zx = self._input_zero_point
        key = (dtype, zx)
        if key in self._checked:
            return
        lo, hi = RANGE[dtype]
        if not lo <= zx <= hi:
            raise ValueError(f"input_zero_point {zx} is outside the range of {dtype} input")
        kmax = qgemm_max_k(dtype, zx, 0)
        if self.in_features > kmax:
            raise ValueError(f"in_features = {self.in_features} exceeds {kmax}, the largest K whose "
                             f"accumulators all fit int32 for {dtype} input with zero point {zx}")
        self._checked.add(key)

    def __getstate__(self):
        # The quantized weights and the arguments as given: construction from them repeats the same
        # float operations, so the restored layer's factor, offset and outputs are bit-identical.
        return {"weight": self._weight_q, "bias": self._bias, "weight_scale": self._weight_scale,
                "input_scale": self._input_scale, "input_zero_point": self._input_zero_point,
                "output_scale": self._output_scale, "output_zero_point": self._output_zero_point,
                "output_dtype": self._output_dtype, "relu": self._relu}

    def __setstate__(self, state):
        state = dict(state)
        self.__init__(state.pop("weight"), state.pop("bias"), **state)

    def __repr__(self):
        mode = ", dynamic" if self._dynamic else ""
        return (f"QLinear(in_features={self.in_features}, out_features={self.out_features}, "
                f"output_dtype={self.output_dtype.name}, relu={self.relu}{mode}, kernel={self.kernel!r})")
