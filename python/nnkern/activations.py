"""Elementwise float32 sigmoid and tanh (seeds I18, I19), three speed/accuracy trade-offs.

Accuracy contract (max absolute error against the exact function, over every float32 in [-20, 20] and
beyond; tests/test_activations.py checks it on every ISA path):

============  =========================================  =============  =============
method        scheme                                     sigmoid        tanh
============  =========================================  =============  =============
``minimax``   16 intervals x degree-2 polynomial (I18)   3.0e-4         6.0e-4
``scalef``    e^-x = p(y) 2^n, degree-2 p, rcp (I19)     6.0e-4         1.2e-3
``accurate``  degree-5 p + a Newton step on -abs(x)      2.5e-7         5.0e-7
============  =========================================  =============  =============

tanh by ``minimax`` uses its own 16-interval table fitted to tanh (same structure, on min(8, abs(x)));
``scalef`` and ``accurate`` compute tanh(abs(x)) = 1 - 2 sigmoid(-2 abs(x)) and restore the sign.

All methods, exactly: sigmoid(+-0) = 0.5, sigmoid(+inf) = 1, sigmoid(-inf) = +0, NaN -> NaN, and
0 <= sigmoid(x) <= 1 for every x (so sigmoid(+-1e30) = 1 / 0 and sigmoid(-88), (-89), (-100) are
tiny non-negative numbers, never NaN). tanh is odd by construction (tanh(-x) = -tanh(x), tanh(-0) = -0),
tanh(+-inf) = +-1 and -1 <= tanh(x) <= 1. The bounds are absolute: relative error of outputs near 0
is not bounded for ``minimax`` (1 - f cancels for x < 0) and only the ``scalef``/``accurate`` sigmoid keep a
relative accuracy for small outputs. On AVX2, outputs below 1.2e-38 (x < -87.68) flush to 0.
"""
from __future__ import annotations

import numpy as np

from . import _C
from ._arrays import ArrayIn, F32Array, F32, as_array, as_output, c_aligned, require_array

__all__ = ["sigmoid", "tanh", "ACTIVATION_METHODS", "SIGMOID_MAX_ABS_ERROR", "TANH_MAX_ABS_ERROR"]

ACTIVATION_METHODS = ("minimax", "scalef", "accurate")
#: The documented bounds (the tests assert them).
SIGMOID_MAX_ABS_ERROR = {"minimax": 3.0e-4, "scalef": 6.0e-4, "accurate": 2.5e-7}
TANH_MAX_ABS_ERROR = {"minimax": 6.0e-4, "scalef": 1.2e-3, "accurate": 5.0e-7}


def _apply(function, x, method, out):
    # The common calls (contiguous float32 arrays, in place or into a separate out) are checked and run in
    # C++; anything else, errors included, takes the general path below.
    if type(x) is np.ndarray and type(method) is str and method in ACTIVATION_METHODS:
        if out is None:
            out = np.empty(x.shape, F32)  # C order whatever x's layout
        if type(out) is np.ndarray and _C.activation(function, method, x, out):
            return out
    if type(x) is np.ndarray and (out is None or type(out) is np.ndarray):
        return _apply_general(function, x, method, out)
    # DLPack / buffer-protocol arguments: computed on NumPy views of their memory; an out= object is
    # returned as given (it now holds the result).
    xa = as_array(x, "x")
    if out is None:
        return _apply_general(function, xa, method, None)
    outa = xa if out is x else as_output(out, "out")
    _apply_general(function, xa, method, outa)
    return out


def _apply_general(function, x, method, out):
    if not isinstance(method, str):
        raise TypeError(f"method must be a str, one of {ACTIVATION_METHODS}, got {type(method).__name__}")
    if method not in ACTIVATION_METHODS:
        raise ValueError(f"method must be one of {ACTIVATION_METHODS}, got {method!r}")
    if type(x) is not np.ndarray or (x.dtype is not F32 and x.dtype != F32):
        require_array(x, "x", F32)
    if out is None:
        out = np.empty(x.shape, F32)  # C order whatever x's layout
    elif out is not x:
        if type(out) is not np.ndarray or (out.dtype is not F32 and out.dtype != F32):
            require_array(out, "out", F32)
        if out.shape != x.shape:
            raise ValueError(f"out must have the shape of x {x.shape}, got {out.shape}")
    if _C.activation(function, method, x, out):
        return out
    if not out.flags.writeable:
        raise ValueError("out is read-only")
    if x.size == 0:
        return out
    same = out is x
    if not same and np.may_share_memory(out, x):
        same = (out.__array_interface__["data"][0] == x.__array_interface__["data"][0]
                and out.strides == x.strides)
    if not same and np.may_share_memory(out, x):
        try:
            overlaps = np.shares_memory(out, x, max_work=10**6)
        except Exception:
            overlaps = True
        if overlaps:
            if _C.may_overlap(out, x) and _extent(out) == _extent(x):
                raise ValueError("out covers x's memory in another order (such as x[::-1]): pass out=x (in place) "
                                 "or a separate array")
            raise ValueError("out partially overlaps x: pass out=x (in place) or a separate array")
    src = c_aligned(x)  # misaligned data is copied: the kernels read whole floats
    if out.flags.c_contiguous and out.flags.aligned:
        _run(function, method, src, out)
    elif same and src is not x:  # strided in place: compute in the copy, write back
        _run(function, method, src, src)
        np.copyto(out, src)
    else:
        tmp = np.empty(x.shape, F32)
        _run(function, method, src, tmp)
        np.copyto(out, tmp)
    return out


def _extent(a):
    """The byte range [lo, hi) of a's elements."""
    lo = hi = a.__array_interface__["data"][0]
    for n, st in zip(a.shape, a.strides):
        if st < 0:
            lo += (n - 1) * st
        else:
            hi += (n - 1) * st
    return lo, hi + a.itemsize


def _run(function, method, x, out):
    """x and out C-contiguous, out writeable, out is x or disjoint from it: always runs."""
    if not _C.activation(function, method, x, out):
        raise RuntimeError("internal: the activation kernel refused contiguous, disjoint arrays")


def sigmoid(x: ArrayIn, method: str = "accurate", out: ArrayIn | None = None) -> F32Array:
    """Logistic function 1 / (1 + exp(-x)) of a float32 array, elementwise.

    x: float32 array of any shape and strides (other dtypes raise TypeError): an ndarray, or a CPU
      DLPack / buffer-protocol array (a torch tensor) read without a copy. A C-contiguous x is read in
      place; any other layout is first copied to a contiguous temporary.
    method: "accurate" (the default, max abs error 2.5e-7), or the faster "minimax" (3e-4) and "scalef"
      (6e-4, keeps relative accuracy of small outputs); see the module docstring for the full contract.
    out: optional float32 array of x's shape; out=x computes in place. A C-contiguous out is written
      directly, other layouts (and misaligned arrays) through a temporary. An out that overlaps x other than
      as x itself (out=x) raises ValueError.
    Returns out as given (a new C-contiguous ndarray if out is None). Splits over the thread pool above 64K elements.
    """
    return _apply("sigmoid", x, method, out)


def tanh(x: ArrayIn, method: str = "accurate", out: ArrayIn | None = None) -> F32Array:
    """Hyperbolic tangent of a float32 array, elementwise: sign(x) p(|x|) with a 16-interval table fitted to
    tanh (minimax), or sign(x) (1 - 2 sigmoid(-2 |x|)) (scalef, accurate).

    Arguments and layout rules as for :func:`sigmoid`. Max abs error: 5e-7 (accurate, the default),
    6e-4 (minimax), 1.2e-3 (scalef). Odd by construction; tanh(+-inf) = +-1, NaN -> NaN, -1 <= tanh(x) <= 1.
    """
    return _apply("tanh", x, method, out)
