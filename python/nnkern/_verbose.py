"""``NNKERN_VERBOSE=1``: one line per call on stderr, as ONEDNN_VERBOSE prints.

    nnkern_verbose,exec,<op>,<kernel>,<algorithm>,<shapes>,threads:<n>,<milliseconds>

e.g. ``nnkern_verbose,exec,matmul,f32_gemm_16x6__avx2,tiles,a:float32[64x32] b:float32[32x16],threads:2,0.021``.
The time is the op's own (argument checks included, the logging excluded). Decided once, at import: when
the variable is unset or "0" nothing is wrapped, so the ops cost exactly what they cost without this
module. Only the ``nnkern.*`` names (and the layers' calls) are wrapped; the submodules' functions are not.
"""
from __future__ import annotations

import functools
import os
import sys
import threading
import time

import numpy as np

from . import _C, _precision

ENABLED = os.environ.get("NNKERN_VERBOSE", "").strip() not in ("", "0")


def _shape(name, v):
    try:
        a = np.asarray(v) if not isinstance(v, np.ndarray) else v
    except Exception:
        return None
    if a.dtype == object or (a.ndim == 0 and not isinstance(v, np.ndarray)):
        return None
    return f"{name}:{a.dtype}[{'x'.join(map(str, a.shape))}]"


def _shapes(names, args, kwargs):
    parts = []
    for name, v in list(zip(names, args)) + [(k, v) for k, v in kwargs.items() if k in ("out", "c", "h0", "c0")]:
        if v is not None and (hasattr(v, "shape") or hasattr(v, "__dlpack__")):
            s = _shape(name, v)
            if s:
                parts.append(s)
    return " ".join(parts)


def _kernel(family):
    return _C.cpu_info()["kernels"].get(family, "?")


# Ops that run through an algorithm table (csrc/core/algorithm.h): their line names the entry the C++ side
# selected for this call (_C.last_algorithm), not a Python copy of the selection rule.
_TABLE = {"sgemm": "sgemm", "matmul": "sgemm", "qgemm": "qgemm", "qgemm16": "qgemm", "conv2d": "conv2d",
          "Conv2d": "conv2d", "QConv2d": "qconv2d"}
# The kernel family each "conv2d" algorithm runs on.
_CONV_FAMILY = {"im2col": "f32_gemm", "indirect": "f32_gemm", "direct": "f32_conv_direct",
                "mgemm": "f32_conv_mgemm", "depthwise": "f32_dwconv", "dot": "f32_conv_dot", "bf16": "bf16_gemm",
                "winograd": "f32_winograd", "winograd_2x2": "f32_winograd"}


def _table_algorithm(op):
    return _C.last_algorithm(_TABLE[op]) or "none"  # none: the call selected nothing (an empty product)


def _describe(op, args, kwargs, result):
    """(kernel, algorithm, argument names) of one call."""
    if op == "matmul" and _precision.resolve(kwargs.get("precision")) == "medium":
        return _kernel("bf16_gemm"), "bf16", ("a", "b")
    if op in ("sgemm", "matmul"):
        return _kernel("f32_gemm"), _table_algorithm(op), ("a", "b")
    if op in ("to_bf16", "from_bf16"):
        return "convert", "round-nearest-even" if op == "to_bf16" else "exact", ("x",)
    if op in ("sigmoid", "tanh"):
        method = kwargs.get("method", args[1] if len(args) > 1 else "accurate")
        return _kernel("f32_" + op), str(method), ("x",)
    if op == "topk":
        k = kwargs.get("k", args[1] if len(args) > 1 else 0)
        kern = _kernel("f32_topk")
        alg = "register16" if "_16__" in kern and int(k) <= 16 else "select+sort"
        return kern, alg + ("" if kwargs.get("largest", True) else "/smallest"), ("x",)
    if op == "qgemm":
        b = kwargs.get("b", args[1] if len(args) > 1 else None)
        depth = np.shape(b)[0] if b is not None and np.ndim(b) == 2 else None
        return (_C.qgemm_kernel_for(depth) if depth is not None else _kernel("u8s8_gemm"), _table_algorithm(op),
                ("a", "b"))
    if op == "qgemm16":
        return _kernel("s16_gemm"), _table_algorithm(op), ("a", "b")
    if op in ("quantize", "dequantize"):
        axis = kwargs.get("axis", args[4 if op == "quantize" else 3] if len(args) > (4 if op == "quantize" else 3)
                          else None)
        return _kernel("quantize"), "per-tensor" if axis is None else f"per-channel(axis={axis})", ("x",)
    if op == "quantize_dynamic":
        return _kernel("quantize"), "dynamic-uint8", ("x",)
    if op == "Linear":
        layer, x = args[0], args[1]
        if _precision.resolve(layer.precision) == "medium":
            return layer.bf16_kernel, "bf16-packed", ("x",)
        rows = int(np.prod(np.shape(x)[:-1]))
        return layer.kernel, "gemv-packed" if rows == 1 else "gemm-packed", ("x",)
    if op == "QLinear":
        layer = args[0]
        mode = "dynamic" if layer.dynamic else "static"
        return layer.kernel, f"{mode}->{layer.output_dtype}", ("x",)
    if op == "QConv2d":
        layer = args[0]
        return layer.kernel, f"{_table_algorithm(op)}->{layer.output_dtype}", ("x",)
    if op in ("conv2d", "Conv2d"):
        alg = _table_algorithm(op)
        return _kernel(_CONV_FAMILY.get(alg, "f32_gemm")), alg, ("x",) if op == "Conv2d" else ("x", "weight")
    if op == "InvertedResidual":
        layer, x = args[0], args[1]
        return _kernel("f32_dwconv"), f"bands(rows={layer._block.rows_per_band(*np.shape(x)[1:3])})", ("x",)
    if op in ("max_pool2d", "avg_pool2d"):
        return _kernel("pool2d"), op[:3], ("x",)
    if op in ("pixel_shuffle", "pixel_unshuffle"):
        r = kwargs.get("r", args[1] if len(args) > 1 else "?")
        return "copy", f"r={r}:{kwargs.get('layout', 'NCHW')}", ("x",)
    if op in ("LSTM", "LSTM.forward_tokens"):
        layer = args[0]
        return layer.kernel, f"lstm-{layer.activation}", ("x",)
    return "?", "?", ()


def _log(op, args, kwargs, result, seconds):
    from ._threads import get_num_threads
    try:
        kernel, alg, names = _describe(op, args, kwargs, result)
        skip = 1 if op[0].isupper() else 0  # a layer's args start with self
        shapes = _shapes(names, args[skip:], kwargs)
    except Exception as e:  # the log must never break a call that succeeded
        kernel, alg, shapes = "?", f"?({type(e).__name__})", ""
    sys.stderr.write(f"nnkern_verbose,exec,{op},{kernel},{alg},{shapes},threads:{get_num_threads()},"
                     f"{seconds * 1e3:.3f}\n")


_nesting = threading.local()  # ops inside an op (conv2d's Conv2d call) log nothing of their own


def _wrap(op, fn):
    @functools.wraps(fn)
    def logged(*args, **kwargs):
        depth = getattr(_nesting, "depth", 0)
        if depth:
            return fn(*args, **kwargs)
        if op in _TABLE:
            _C.last_algorithm(_TABLE[op])  # forget an earlier call's selection
        _nesting.depth = 1
        try:
            t0 = time.perf_counter()
            result = fn(*args, **kwargs)
            seconds = time.perf_counter() - t0
        finally:
            _nesting.depth = 0
        _log(op, args, kwargs, result, seconds)
        return result
    logged.__wrapped_by_nnkern_verbose__ = True
    return logged


OPS = ("sgemm", "matmul", "sigmoid", "tanh", "topk", "qgemm", "qgemm16", "quantize", "dequantize", "quantize_dynamic",
       "conv2d", "max_pool2d", "avg_pool2d", "pixel_shuffle", "pixel_unshuffle", "to_bf16", "from_bf16")
LAYERS = ("Linear", "QLinear", "Conv2d", "QConv2d", "InvertedResidual", "LSTM")


def install(namespace: dict) -> None:
    """Replace the ops in ``namespace`` (nnkern's globals) and the layers' calls by logging wrappers."""
    for op in OPS:
        namespace[op] = _wrap(op, namespace[op])
    for cls in LAYERS:
        klass = namespace[cls]
        klass.__call__ = _wrap(cls, klass.__call__)
    namespace["LSTM"].forward_tokens = _wrap("LSTM.forward_tokens", namespace["LSTM"].forward_tokens)
