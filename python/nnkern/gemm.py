"""FP32 matrix products: sgemm (BLAS semantics), matmul, and the prepacked Linear layer."""
from __future__ import annotations

import math

import numpy as np

from . import _C
from ._arrays import (F32, aligned_target, as_bool, as_float_scalar, c_aligned, check_no_overlap, require_array,
                      require_ndim)

__all__ = ["sgemm", "matmul", "Linear"]

# Error bound of the float32 kernels against the exact result, per element (the tests check it):
# |C - exact| <= (GEMM_ERROR_FACTOR * K + 2) eps |alpha| (|op(A)| @ |op(B)|) + 2 eps |beta C|,
# eps = 2**-24: K roundings of the dot product, then alpha * acc, beta * C and their sum.
GEMM_ERROR_FACTOR = 2.0


def sgemm(a, b, *, trans_a=False, trans_b=False, alpha=1.0, beta=0.0, c=None, algorithm="auto"):
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
      trans_b; auto's choice there), "rows" (M == 1), "tiles" (the register-tile driver, any shape). All
      keep the error bound below; a path that does not apply raises ValueError.
    Error bound per element: |C - exact| <= (2 K + 2) eps |alpha| (|op(A)| @ |op(B)|) + 2 eps |beta C|,
    eps = 2**-24.
    """
    _check_matrix(a, "a")
    _check_matrix(b, "b")
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
    if c is None:
        c = np.empty((M, N), F32)
        beta = 0.0
    else:
        _check_output(c, "c", (M, N), a, b)
    if M and N:
        _C.sgemm(a, trans_a, b, trans_b, c, alpha, beta, None, False, algorithm)
    return c


def _algorithm(v):
    names = ["auto", *_C.algorithms("sgemm")]
    if not isinstance(v, str):
        raise TypeError(f"algorithm must be a str, one of {names}, got {type(v).__name__}")
    if v not in names:
        raise ValueError(f"algorithm must be one of {names}, got {v!r}")
    return v


def _check_matrix(x, name):
    # The common case costs three attribute tests; anything else gets the full, named diagnosis.
    if type(x) is not np.ndarray or x.dtype is not F32 or x.ndim != 2:
        require_array(x, name, F32)
        require_ndim(x, name, (2,))


def _check_output(out, name, shape, a, b):
    if type(out) is not np.ndarray or out.dtype is not F32:
        require_array(out, name, F32)
    if out.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {out.shape}")
    if not out.flags.writeable:
        raise ValueError(f"{name} is read-only")
    if _C.may_overlap(out, a) or _C.may_overlap(out, b):
        check_no_overlap(out, name, a=a, b=b)


def matmul(a, b, out=None):
    """``a @ b`` for float32 matrices and vectors, like numpy.matmul for 1-D and 2-D operands.

    A 1-D ``a`` is a row vector, a 1-D ``b`` a column vector (the added dimension is removed from the
    result). Arrays of more than 2 dimensions raise ValueError. ``out`` must have the result's shape.
    """
    for x, name in ((a, "a"), (b, "b")):
        if type(x) is not np.ndarray or x.dtype is not F32 or x.ndim not in (1, 2):
            require_array(x, name, F32)
            require_ndim(x, name, (1, 2))
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    (M, K), (Kb, N) = a2.shape, b2.shape
    if K != Kb:
        raise ValueError(f"matmul: shapes {a.shape} and {b.shape} are not aligned ({K} != {Kb})")
    res_shape = (M, N)
    if a.ndim == 1 or b.ndim == 1:
        res_shape = tuple(d for d, squeeze in zip(res_shape, (a.ndim == 1, b.ndim == 1)) if not squeeze)
    if out is None:
        out = np.empty(res_shape, F32)
    else:
        _check_output(out, "out", res_shape, a, b)
    if M and N:
        out2 = out[None] if a.ndim == 1 else out  # views, never copies: the result lands in out
        out2 = out2[..., None] if b.ndim == 1 else out2
        _C.sgemm(a2, False, b2, False, out2, 1.0, 0.0, None, False)
    return out


class Linear:
    """``y = x @ weight.T + bias`` with the weight packed once, like torch.nn.Linear (inference).

    weight: float32 (out_features, in_features); bias: float32 (out_features,) or None;
    activation: None or "relu", fused into the store of the GEMM.
    The weight is copied and packed for the kernel the dispatcher picks at construction; under a
    different ISA cap later, calls stay correct but unpack per call. Safe to call from several threads.
    """

    def __init__(self, weight, bias=None, *, activation=None):
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
        # The C++ object copies weight and bias and holds every size a call uses; the attributes below
        # are read-only views of it, so no Python-side change can make a call read or write out of bounds.
        self._packed = _C.PackedLinear(c_aligned(weight), bias, activation == "relu")

    in_features = property(lambda self: self._packed.in_features, doc="K, the features of each input row")
    out_features = property(lambda self: self._packed.out_features, doc="N, the features of each output row")
    activation = property(lambda self: self._activation, doc="None or 'relu' (fused)")
    bias = property(lambda self: self._packed.bias, doc="a copy of the float32 bias, or None")

    @property
    def kernel(self) -> str:
        """The micro-kernel the weight was packed for."""
        return self._packed.kernel_name

    def __call__(self, x, out=None):
        x = require_array(x, "x", F32)
        K, N = self.in_features, self.out_features
        if x.ndim < 1 or x.shape[-1] != K:
            raise ValueError(f"x must have shape (..., {K}), got {x.shape}")
        lead = x.shape[:-1]
        shape = lead + (N,)
        if out is None:
            out = np.empty(shape, F32)
        else:
            out = require_array(out, "out", F32)
            if out.shape != shape:
                raise ValueError(f"out must have shape {shape}, got {out.shape}")
            if not out.flags.c_contiguous or not out.flags.writeable:
                raise ValueError("out must be a writeable C-contiguous array")
            check_no_overlap(out, "out", x=x)
        if out.size == 0:
            return out
        rows = math.prod(lead)
        x2 = c_aligned(x.reshape(rows, K))
        target = aligned_target(out)
        self._packed.run(x2, target.reshape(rows, N))
        if target is not out:
            np.copyto(out, target)
        return out

    def __repr__(self):
        return f"Linear(in_features={self.in_features}, out_features={self.out_features}, kernel={self.kernel!r})"
