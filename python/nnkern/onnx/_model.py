"""Reading a model: a path, bytes or an ``onnx.ModelProto``, checked before anything is compiled."""
from __future__ import annotations

import os
import pathlib

import numpy as np
import onnx
import onnx.numpy_helper
from google.protobuf.message import DecodeError

#: The largest tensor a model may declare or a plan may hold (bytes): far above any model, far below what
#: would overflow the size arithmetic.
MAX_TENSOR_BYTES = 1 << 40


def load_model(model) -> onnx.ModelProto:
    """The model, external data loaded and checked."""
    base_dir = None
    if isinstance(model, (str, os.PathLike)):
        path = pathlib.Path(model)
        if not path.is_file():
            raise FileNotFoundError(f"no ONNX model at {str(path)!r}")
        data = path.read_bytes()
        base_dir = path.resolve().parent
    elif isinstance(model, (bytes, bytearray, memoryview)):
        data = bytes(model)
    elif isinstance(model, onnx.ModelProto):
        proto = onnx.ModelProto()
        proto.CopyFrom(model)
        _check_model(proto)
        _load_external(proto, None)
        return proto
    else:
        raise TypeError(f"model must be a path, bytes or an onnx.ModelProto, got {type(model).__name__}")
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as e:
        raise ValueError(f"not an ONNX model (the protobuf does not parse: {e})") from None
    _check_model(proto)
    _load_external(proto, base_dir)
    return proto


def strip_initializers(proto: onnx.ModelProto) -> tuple[bytes, list[str]]:
    """The model without its initializers, serialized, and their names in order: what a session keeps for pickling
    (the weights themselves it holds once, as the plan's constants). Empties proto's initializers."""
    names = [t.name for t in proto.graph.initializer]
    del proto.graph.initializer[:]
    return proto.SerializeToString(), names


def with_initializers(skeleton: bytes, names: list[str], constants: dict) -> bytes:
    """strip_initializers undone: the serialized model with each named initializer from constants (name -> array)."""
    proto = onnx.ModelProto()
    proto.ParseFromString(skeleton)
    proto.graph.initializer.extend(onnx.numpy_helper.from_array(np.asarray(constants[n]), n) for n in names)
    return proto.SerializeToString()


def _check_model(proto: onnx.ModelProto) -> None:
    if not proto.HasField("graph") or (not proto.graph.node and not proto.graph.output):
        raise ValueError("not an ONNX model: it has no graph (a truncated or foreign file?)")
    if proto.ir_version <= 0:
        raise ValueError("not an ONNX model: ir_version is missing")


def _external_tensors(proto: onnx.ModelProto):
    for t in proto.graph.initializer:
        if t.data_location == onnx.TensorProto.EXTERNAL:
            yield t
    for node in proto.graph.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_location == onnx.TensorProto.EXTERNAL:
                yield a.t


def _load_external(proto: onnx.ModelProto, base_dir: pathlib.Path | None) -> bool:
    """Loads external tensor data from files inside the model's folder; refuses paths that leave it."""
    tensors = list(_external_tensors(proto))
    if not tensors:
        return False
    if base_dir is None:
        raise ValueError("the model keeps tensors in external files: load it from its path, not from bytes")
    for t in tensors:
        info = {e.key: e.value for e in t.external_data}
        location = info.get("location", "")
        target = (base_dir / location).resolve()
        if not location or pathlib.PurePath(location).is_absolute() or base_dir not in target.parents:
            raise ValueError(f"tensor {t.name!r}: external data path {location!r} leaves the model's folder")
        if not target.is_file():
            raise ValueError(f"tensor {t.name!r}: external data file {location!r} does not exist")
        size = target.stat().st_size
        offset, length = int(info.get("offset", 0)), int(info.get("length", size))
        if offset < 0 or length < 0 or offset + length > size:
            raise ValueError(f"tensor {t.name!r}: external data range [{offset}, {offset + length}) is past the end "
                             f"of {location!r} ({size} bytes)")
    onnx.external_data_helper.load_external_data_for_model(proto, str(base_dir))
    return True
