"""Whole ONNX models on nnkern's kernels: ``nnkern.onnx.InferenceSession`` mirrors onnxruntime's.

    import nnkern.onnx
    session = nnkern.onnx.InferenceSession("model.onnx")        # was: onnxruntime.InferenceSession(...)
    outputs = session.run(None, {"input": x})
    print(session.describe())                                    # the compiled plan, step by step
    print(session.profile({"input": x}))                         # where the time goes, by op

Needs the ``onnx`` package (``pip install "nnkern[onnx]"``). ``nnkern.onnx.backend`` is an
``onnx.backend.base.Backend``, so ONNX's own backend test suite runs against nnkern.
"""
from __future__ import annotations

try:
    import onnx as _onnx  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError('nnkern.onnx needs the onnx package: pip install "nnkern[onnx]"') from e

from .. import _C
from ._compile import DEFAULT_OFF, OPTIMIZATIONS
from ._session import InferenceSession, NodeArg, Profile

__all__ = ["DEFAULT_OFF", "OPTIMIZATIONS", "InferenceSession", "NodeArg", "Profile", "supported_ops"]


def supported_ops() -> list:
    """The ONNX operators a session can run (the default domain's, plus com.microsoft's quantized ones)."""
    from ._session import _LOWERED
    return sorted(op for op in set(_C.graph_ops()) | _LOWERED if not op.startswith("nnkern."))
