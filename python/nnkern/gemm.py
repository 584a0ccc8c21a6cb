"""FP32 matrix products: sgemm (BLAS semantics), matmul, and the prepacked Linear layer."""
from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np

from . import _C, _precision, bf16
from ._arrays import (ArrayIn, F32, F32Array, aligned_target, as_bool, as_float_scalar, as_output, c_aligned,
                      check_algorithm, check_no_overlap, checked_output, read_only_copy, require_array,
                      require_ndim)

__all__ = ["sgemm", "matmul", "Linear"]

# Error bound of the float32 kernels against the exact result, per element (the tests check it):
# |C - exact| <= (GEMM_ERROR_FACTOR * K + 2) eps |alpha| (|op(A)| @ |op(B)|) + 2 eps |beta C|,
# eps = 2**-24: K roundings of the dot product, then alpha * acc, beta * C and their sum.
GEMM_ERROR_FACTOR = 2.0


# The defaults, by identity: a call that leaves them may take the C++ fast path (_C.sgemm_fast).
_ONE = 1.0
_ZERO = 0.0
_AUTO = "auto"


def sgemm(a: ArrayIn, b: ArrayIn, *, trans_a: bool = False, trans_b: bool = False, alpha: float = _ONE,
          beta: float = _ZERO, c: ArrayIn | None = None, algorithm: str = _AUTO,
          precision: str | None = None) -> F32Array:
    """C = alpha * op(A) @ op(B) + beta * C, in float32, with BLAS semantics.

    a, b: 2-D float32 arrays (any other dtype raises TypeError: convert with ``.astype(np.float32)``).
      Row- and column-major views are used in place; other strides are copied first.
    trans_a, trans_b: use A.T / B.T.
    alpha, beta: real numbers, used in float32: a finite value beyond float32's range raises ValueError
      (not a silent inf), and so does a non-zero beta that rounds to 0 in float32 (it would ignore c).
    c: optional (M, N) float32 output, written in place and returned. beta == 0 ignores its contents
      (NaN included); with c=None a new array is returned. c must not overlap a or b.
    K == 0 gives beta * C. NaN and Inf propagate as in numpy.
    algorithm: "auto", or one path of ``nnkern._C.algorithms("sgemm")``: "dot" (small N, or M == 1 with
      trans_b; auto's choice there), "rows" (B's rows streamed; M <= 3, or M <= 16
      with AVX2 / AVX-512, where groups of rows share one pass over B; auto's choice for M == 1, for M <= 3
      where B's rows are 4 KiB or more apart, for M <= 8 where B is larger than L2 and, with AVX2, for
      M <= 8 always), "tiles" (the register-tile driver, any shape). All keep the
      error bound below; a path that does not apply raises ValueError.
    Error bound per element: |C - exact| <= (2 K + 2) eps |alpha| (|op(A)| @ |op(B)|) + 2 eps |beta C|,
    eps = 2**-24.
    precision: None (the process-wide setting) or a level of :func:`nnkern.set_float32_precision`: at "medium"
      (and algorithm "auto") op(A) and op(B) are rounded to bf16 and their products summed in float32, as
      :func:`matmul` does; the bound then holds for the rounded operands.
    """
    if precision is not None:
        _precision.check_precision(precision)
    medium = (_precision._current if precision is None else precision) == "medium" and algorithm == "auto"
    if alpha is _ONE and beta is _ZERO and algorithm is _AUTO and (trans_a is False or trans_a is True) and \
            (trans_b is False or trans_b is True) and not medium:
        fast = _C.sgemm_fast(a, b, trans_a, trans_b, c)  # None unless every check below would pass
        if fast is not None:
            return fast
    a = _check_matrix(a, "a")
    b = _check_matrix(b, "b")
    trans_a, trans_b = as_bool(trans_a, "trans_a"), as_bool(trans_b, "trans_b")
    algorithm = _algorithm(algorithm)
    alpha = as_float_scalar(alpha, "alpha")
    beta = as_float_scalar(beta, "beta")
    if beta != 0.0 and np.float32(beta) == 0.0 and c is not None:
        raise ValueError(f"beta = {beta} rounds to 0 in float32, which would ignore c (NaN included): pass "
                         f"beta=0.0 to ignore c, or scale c first")
    M, K = a.shape[::-1] if trans_a else a.shape
    Kb, N = b.shape[::-1] if trans_b else b.shape
    if K != Kb:
        sa = f"a{'.T' if trans_a else ''} of shape {(M, K)}"
        sb = f"b{'.T' if trans_b else ''} of shape {(Kb, N)}"
        raise ValueError(f"sgemm: inner dimensions differ: {sa} and {sb}")
    given = c
    if c is None:
        c = given = np.empty((M, N), F32)
        beta = 0.0
    else:
        c = _check_output(c, "c", (M, N), a, b)
    if M and N and medium:
        target = c if c.flags.c_contiguous and c.flags.aligned else np.array(c, order="C")
        _C.bf16_gemm(_strided(a), trans_a, _strided(b), trans_b, target, alpha, beta, None, False)
        if target is not c:
            c[...] = target
    elif M and N:
        _C.sgemm(a, trans_a, b, trans_b, c, alpha, beta, None, False, algorithm)
    return given


def _algorithm(v):
    return check_algorithm(v, "sgemm")


def _check_matrix(x, name):
    # The common case costs three attribute tests; anything else gets the full, named diagnosis.
    if type(x) is not np.ndarray or x.dtype is not F32 or x.ndim != 2:
        x = require_array(x, name, F32)
        require_ndim(x, name, (2,))
    return x


def _check_output(out, name, shape, a, b):
    """The NumPy view of the output argument, after checking it."""
    if type(out) is not np.ndarray or out.dtype is not F32:
        out = require_array(as_output(out, name), name, F32)
    if out.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {out.shape}")
    if not out.flags.writeable:
        raise ValueError(f"{name} is read-only")
    if _C.may_overlap(out, a) or _C.may_overlap(out, b):
        check_no_overlap(out, name, a=a, b=b)
    return out


def matmul(a: ArrayIn, b: ArrayIn, out: ArrayIn | None = None, *, precision: str | None = None) -> F32Array:
    """``a @ b`` for float32 (or bf16) arrays, as numpy.matmul: (..., M, K) @ (..., K, N) -> (..., M, N).

    The batch dimensions (all but the last two) broadcast against each other as in numpy. A 1-D ``a`` is
    a row vector and a 1-D ``b`` a column vector, the added dimension removed from the result. 0-D
    operands raise ValueError (numpy does too). ``out`` (float32, the result's shape, not overlapping
    a or b) is written and returned. When b has no batch dimensions, a's batch is one GEMM; otherwise
    one GEMM per batch entry.

    precision: None (the process-wide setting) or a level of :func:`nnkern.set_float32_precision`. "medium" rounds
    both operands to bf16 (to nearest even) and sums their products in float32 (bf16 kernels: vdpbf16ps, BFDOT,
    or an exact FMA fallback on CPUs without them); the other levels compute in float32. bf16 operands
    (``ml_dtypes.bfloat16`` arrays, torch bfloat16 tensors: :mod:`nnkern.bf16`) are accepted at every level: at
    "medium" they go to the bf16 kernels as they are, at the others they are widened to float32 (exact). The
    result is float32, or rounded into ``out`` when out is a bf16 array.
    """
    medium = (precision if precision is not None else _precision.get_float32_precision()) == "medium"
    if precision is not None:
        _precision.check_precision(precision)
    # None unless a, b (and out) are 2-D float32 and pass every check below
    fast = _C.bf16_matmul_fast(a, b, out) if medium else _C.sgemm_fast(a, b, False, False, out)
    if fast is not None:
        return fast
    out_bits = None if out is None else bf16.bf16_bits(out)
    if out_bits is not None:  # a bf16 out: the float32 result, rounded into it (to_bf16 checks out)
        bf16.to_bf16(matmul(a, b, precision=precision), out_bits)
        return out
    operands = []
    for x, name in ((a, "a"), (b, "b")):
        bits = bf16.bf16_bits(x)
        if bits is not None:
            x = bits if medium else bf16.from_bf16(bits)
        elif type(x) is not np.ndarray or x.dtype is not F32:
            x = require_array(x, name, F32)
        if x.ndim == 0:
            raise ValueError(f"matmul: {name} is 0-D: use multiplication for scalars (as numpy.matmul)")
        operands.append(x)
    a, b = operands
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    (M, K), (Kb, N) = a2.shape[-2:], b2.shape[-2:]
    if K != Kb:
        raise ValueError(f"matmul: shapes {a.shape} and {b.shape} are not aligned ({K} != {Kb})")
    try:
        batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    except ValueError:
        raise ValueError(f"matmul: batch dimensions {a2.shape[:-2]} and {b2.shape[:-2]} do not broadcast "
                         f"(shapes {a.shape} and {b.shape})") from None
    res_shape = batch + ((M,) if a.ndim > 1 else ()) + ((N,) if b.ndim > 1 else ())
    given = out
    if out is None:
        out = given = np.empty(res_shape, F32)
    else:
        out = _check_output(out, "out", res_shape, a, b)
    out_full = out.reshape(batch + (M, N))  # only length-1 axes added: a view, the result lands in out
    if not (M and N and out.size):
        return given

    def gemm(x, w, c):
        if medium:
            _C.bf16_gemm(_strided(x), False, _strided(w), False, c)
        else:
            _C.sgemm(x, False, w, False, c, 1.0, 0.0, None, False)

    if b2.ndim == 2 and out_full.flags.c_contiguous:
        # One GEMM: a's batch rows stacked (a copy only where a's layout cannot be viewed so).
        rows = math.prod(a2.shape[:-1])
        gemm(a2.reshape(rows, K), b2, out_full.reshape(rows, N))
    else:
        ab = np.broadcast_to(a2, batch + (M, K))
        bb = np.broadcast_to(b2, batch + (K, N))
        for idx in np.ndindex(*batch):
            if medium and not out_full[idx].flags.c_contiguous:
                c = np.empty((M, N), F32)
                gemm(ab[idx], bb[idx], c)
                out_full[idx] = c
            else:
                gemm(ab[idx], bb[idx], out_full[idx])
    return given


def _strided(x: np.ndarray) -> np.ndarray:
    """x as the bf16 GEMM reads it: strides that are whole, non-negative elements (a copy otherwise)."""
    if all(s >= 0 and s % x.itemsize == 0 for s in x.strides) and x.flags.aligned:
        return x
    return np.ascontiguousarray(x)


class Linear:
    """``y = x @ weight.T + bias`` with the weight packed once, like torch.nn.Linear (inference).

    weight: float32 (out_features, in_features); bias: float32 (out_features,) or None (ndarrays, or CPU
    DLPack / buffer-protocol arrays such as torch tensors); activation: None or "relu", fused into the
    store of the GEMM. The weight is copied and packed for the kernel the dispatcher picks at
    construction; under a different ISA cap later, calls stay correct but unpack per call. Safe to call
    from several threads. ``weight`` and ``bias`` are read-only copies; pickling and ``copy.deepcopy``
    store them and repack on load (results bit-identical under the same ISA cap). precision: the layer's float32
    precision (:func:`nnkern.set_float32_precision`) or None (the process-wide one at each call); at "medium" the
    weight, rounded to bf16, is packed once on first use and each input is rounded to bf16 as it is read, the
    products summed in float32 (see :func:`matmul`). x may be a bf16 array at any level, and ``out`` a bf16 array.
    """

    def __init__(self, weight: ArrayIn, bias: ArrayIn | None = None, *, activation: str | None = None,
                 precision: str | None = None) -> None:
        self._precision = _precision.check_precision(precision, allow_none=True)
        weight = require_array(weight, "weight", F32)
        require_ndim(weight, "weight", (2,))
        out_features = weight.shape[0]
        if bias is not None:
            bias = require_array(bias, "bias", F32)
            if bias.shape != (out_features,):
                raise ValueError(f"bias must have shape ({out_features},), got {bias.shape}")
            bias = c_aligned(bias)
        if not (activation is None or (isinstance(activation, str) and activation == "relu")):
            raise ValueError(f"activation must be None or 'relu', got {activation!r}")
        self._activation = activation
        self._weight = read_only_copy(weight)  # kept for .weight and pickling (the packed copy is opaque)
        # The C++ object copies weight and bias and holds every size a call uses; the attributes below
        # are read-only views of it, so no Python-side change can make a call read or write out of bounds.
        self._packed = _C.PackedLinear(self._weight, bias, activation == "relu")
        self._bf16 = None  # the bf16 packing (precision "medium"), made on first use
        self._bf16_lock = threading.Lock()

    @classmethod
    def from_torch(cls, module: Any, *, activation: str | None = None) -> Linear:
        """The same layer as a float32 ``torch.nn.Linear`` (its weight and bias copied)."""
        weight, bias = _torch_linear_params(module, "Linear.from_torch")
        return cls(weight, bias, activation=activation)

    in_features = property(lambda self: self._packed.in_features, doc="K, the features of each input row")
    out_features = property(lambda self: self._packed.out_features, doc="N, the features of each output row")
    activation = property(lambda self: self._activation, doc="None or 'relu' (fused)")
    weight = property(lambda self: self._weight, doc="the float32 weight (out_features, in_features), read-only")
    bias = property(lambda self: self._packed.bias, doc="a copy of the float32 bias, or None")
    precision = property(lambda self: self._precision, doc="the layer's float32 precision, or None")

    @property
    def kernel(self) -> str:
        """The micro-kernel the weight was packed for."""
        return self._packed.kernel_name

    def __call__(self, x: ArrayIn, out: ArrayIn | None = None) -> F32Array:
        medium = _precision.resolve(self._precision) == "medium"
        # None unless x (and out) pass every check below as they are
        y = self._bf16_packed().run_fast(x, out) if medium else self._packed.run_fast(x, out)
        if y is not None:
            return y
        out_bits = None if out is None else bf16.bf16_bits(out)
        if out_bits is not None:  # a bf16 out: the float32 result, rounded into it (to_bf16 checks out)
            bf16.to_bf16(self(x), out_bits)
            return out
        bits = bf16.bf16_bits(x)
        if bits is not None:
            x = bits if medium else bf16.from_bf16(bits)
        else:
            x = require_array(x, "x", F32)
        K, N = self.in_features, self.out_features
        if x.ndim < 1 or x.shape[-1] != K:
            raise ValueError(f"x must have shape (..., {K}), got {x.shape}")
        lead = x.shape[:-1]
        shape = lead + (N,)
        out, given = checked_output(out, shape, F32, x=x)
        if out.size == 0:
            return given
        rows = math.prod(lead)
        x2 = c_aligned(x.reshape(rows, K))
        target = aligned_target(out)
        if medium:
            self._bf16_packed().run(x2, target.reshape(rows, N))
        else:
            self._packed.run(x2, target.reshape(rows, N))
        if target is not out:
            np.copyto(out, target)
        return given

    def _bf16_packed(self):
        """The weight packed for the bf16 kernels, made on the first call at precision "medium"."""
        with self._bf16_lock:
            if self._bf16 is None:
                self._bf16 = _C.PackedLinearBf16(self._weight, self.bias, self._activation == "relu")
            return self._bf16

    @property
    def bf16_kernel(self) -> str:
        """The bf16 micro-kernel of precision "medium" (the weight is packed for it on first use)."""
        return self._bf16_packed().kernel_name

    def __getstate__(self):
        return {"weight": self._weight, "bias": self.bias, "activation": self._activation,
                "precision": self._precision}

    def __setstate__(self, state):
        self.__init__(state["weight"], state["bias"], activation=state["activation"],
                      precision=state.get("precision"))

    def __repr__(self):
        return f"Linear(in_features={self.in_features}, out_features={self.out_features}, kernel={self.kernel!r})"


def _torch_linear_params(module, what):
    """(weight, bias or None) of a float32 torch.nn.Linear as NumPy copies; TypeError for anything else (_torch.py)."""
    from ._torch import float32_array, require_module
    require_module(module, "Linear", what)
    return float32_array(module.weight, what, "weight"), float32_array(module.bias, what, "bias")
