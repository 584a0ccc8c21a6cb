"""A model's graph as the compiler reads it: nodes in topological order, constants as plan constants, attributes
as (kind, value) pairs, and every operator in its newest opset's form (older forms rewritten here, so the C++ ops
implement one form each)."""
from __future__ import annotations

import dataclasses
from collections import defaultdict, deque

import numpy as np
import onnx
from onnx import numpy_helper

from .. import _C

#: ONNX TensorProto element types a plan holds, and their numpy dtypes.
DTYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32, 7: np.int64,
          9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64}
TYPE_STRINGS = {1: "tensor(float)", 2: "tensor(uint8)", 3: "tensor(int8)", 4: "tensor(uint16)", 5: "tensor(int16)",
                6: "tensor(int32)", 7: "tensor(int64)", 9: "tensor(bool)", 10: "tensor(float16)",
                11: "tensor(double)", 12: "tensor(uint32)", 13: "tensor(uint64)"}
DOMAINS = ("", "ai.onnx", "com.microsoft")


def code_of(dtype) -> int:
    dt = np.dtype(dtype)
    for code, d in DTYPES.items():
        if np.dtype(d) == dt:
            return code
    raise NotImplementedError(f"arrays of dtype {dt} are not supported (supported: "
                              f"{', '.join(str(np.dtype(d)) for d in DTYPES.values())})")


def constant(array: np.ndarray) -> _C.GraphConstant:
    a = np.asarray(array)
    code_of(a.dtype)
    return _C.GraphConstant(a if a.flags.c_contiguous else a.copy(order="C"))  # ascontiguousarray makes 0-d 1-d


class PermutedConstant:
    """A model constant whose bytes are another constant's in another layout: its values are base's reshaped to
    `grouped`, axes permuted by `perm`, reshaped to its own shape (a view where strides allow, else a copy). A
    weight the plan keeps in its layer's layout is then held once, while pickling and the next plan still read the
    model's own. An op that reads it gets a copy (cpp())."""
    __slots__ = ("base", "grouped", "perm", "dtype", "shape")

    def __init__(self, base: _C.GraphConstant, grouped: tuple, perm: tuple, shape: list):
        self.base, self.grouped, self.perm = base, tuple(grouped), tuple(perm)
        self.dtype, self.shape = base.dtype, list(shape)

    def numpy(self) -> np.ndarray:
        return self.base.numpy().reshape(self.grouped).transpose(self.perm).reshape(self.shape)

    def cpp(self) -> _C.GraphConstant:
        return constant(self.numpy())


def cpp_constant(c):
    """What a C++ op reads for the constant c: c itself, or a PermutedConstant's values as one of their own."""
    return c.cpp() if isinstance(c, PermutedConstant) else c


@dataclasses.dataclass
class Node:
    op: str
    name: str
    inputs: list       # value names; "" for an optional input left out
    outputs: list
    attrs: dict        # name -> (kind, value), as _C.graph_infer takes them
    sources: str = ""  # the model's nodes this one stands for (describe())

    def attr(self, name, default=None):
        return self.attrs[name][1] if name in self.attrs else default

    def copy(self) -> "Node":
        return dataclasses.replace(self, inputs=list(self.inputs), outputs=list(self.outputs), attrs=dict(self.attrs))


@dataclasses.dataclass
class ValueInfo:
    name: str
    dtype: int
    dims: list          # int, or a str for a symbolic dimension, or None if unknown

    @property
    def type(self) -> str:
        return TYPE_STRINGS.get(self.dtype, f"tensor({self.dtype})")


def _attr(a: onnx.AttributeProto, where: str):
    t = a.type
    if t == onnx.AttributeProto.INT:
        return ("i", int(a.i))
    if t == onnx.AttributeProto.FLOAT:
        return ("f", float(a.f))
    if t == onnx.AttributeProto.STRING:
        return ("s", a.s.decode("utf-8", "replace"))
    if t == onnx.AttributeProto.INTS:
        return ("ints", [int(v) for v in a.ints])
    if t == onnx.AttributeProto.FLOATS:
        return ("floats", [float(v) for v in a.floats])
    if t == onnx.AttributeProto.STRINGS:
        return ("strings", [s.decode("utf-8", "replace") for s in a.strings])
    if t == onnx.AttributeProto.TENSOR:
        return ("tensor", constant(_tensor_array(a.t, where)))
    raise NotImplementedError(f"{where}: attribute {a.name!r} of type "
                              f"{onnx.AttributeProto.AttributeType.Name(t)} is not supported (subgraphs and sparse "
                              f"tensors are not)")


def _tensor_array(t: onnx.TensorProto, where: str) -> np.ndarray:
    if t.data_type not in DTYPES:
        name = onnx.TensorProto.DataType.Name(t.data_type) if t.data_type in onnx.TensorProto.DataType.values() else t.data_type
        raise NotImplementedError(f"{where}: tensor {t.name!r} has element type {name}, which is not supported")
    try:
        return numpy_helper.to_array(t)
    except (ValueError, TypeError) as e:
        raise ValueError(f"{where}: tensor {t.name!r} cannot be read: {e}") from None


def _constant_value(attrs: dict, where: str) -> np.ndarray:
    """A Constant node's value, from whichever of its attributes it has."""
    if len(attrs) != 1:
        raise ValueError(f"{where}: a Constant needs exactly one value attribute, has {sorted(attrs)}")
    (name, (kind, v)), = attrs.items()
    if name == "value":
        return v.numpy()
    if name in ("value_float", "value_floats"):
        return np.array(v, np.float32)
    if name in ("value_int", "value_ints"):
        return np.array(v, np.int64)
    raise NotImplementedError(f"{where}: Constant attribute {name!r} is not supported (strings and sparse tensors "
                              f"are not)")


def _check_schema(n: onnx.NodeProto, opset: int, where: str) -> None:
    """A standard operator's inputs, outputs and attributes against its ONNX schema at the model's opset, as
    onnxruntime checks them: the plan gives some ops inputs and attributes of its own (a MatMul's bias, a fused
    activation), which a model must not carry into it."""
    try:
        schema = onnx.defs.get_schema(n.op_type, opset, "")
    except onnx.defs.SchemaError:
        return  # not an operator at this opset: the plan reports it unsupported
    unknown = [a.name for a in n.attribute if a.name not in schema.attributes]
    if unknown:
        raise ValueError(f"{where}: {unknown[0]!r} is not an attribute of {n.op_type} (opset {opset})")
    if len(n.input) > schema.max_input or len(n.output) > schema.max_output:
        raise ValueError(f"{where}: {len(n.input)} inputs and {len(n.output)} outputs, where {n.op_type} (opset "
                         f"{opset}) takes at most {schema.max_input} and {schema.max_output}")


class Model:
    """The imported graph: inputs, outputs, constants and nodes in topological order, opsets resolved."""

    def __init__(self, proto: onnx.ModelProto):
        g = proto.graph
        self.opset = 1
        for o in proto.opset_import:
            if o.domain in ("", "ai.onnx"):
                self.opset = int(o.version)
        self.constants: dict[str, _C.GraphConstant] = {}
        self.derived: dict = {}  # constants computed from the model's (transposed weights, folded batch norm)
        for t in g.initializer:
            self.constants[t.name] = constant(_tensor_array(t, "initializer"))
        if len(g.sparse_initializer):
            raise NotImplementedError("sparse initializers are not supported")
        self.inputs = [self._value_info(v) for v in g.input if v.name not in self.constants]
        self.outputs = [self._value_info(v, output=True) for v in g.output]
        nodes = []
        names = set()
        for i, n in enumerate(g.node):
            name = n.name or f"{n.op_type}_{i}"
            while name in names:
                name += "_"
            names.add(name)
            if n.domain not in DOMAINS:
                raise NotImplementedError(f"{n.op_type} node {name!r}: operator domain {n.domain!r} is not supported")
            where = f"{n.op_type} node {name!r}"
            if n.domain in ("", "ai.onnx"):
                _check_schema(n, self.opset, where)
            attrs = {a.name: _attr(a, where) for a in n.attribute}
            if n.op_type == "Constant" and n.domain in ("", "ai.onnx"):
                self.constants[n.output[0]] = constant(_constant_value(attrs, where))
                continue
            nodes.append(Node(n.op_type, name, list(n.input), list(n.output), attrs, name))
        self.nodes = _toposort(nodes, set(self.constants) | {v.name for v in self.inputs},
                               [o.name for o in self.outputs])
        self.nodes = self._normalize(self.nodes)

    def _value_info(self, v: onnx.ValueInfoProto, output: bool = False) -> ValueInfo:
        tt = v.type.tensor_type
        if output and not v.type.HasField("value"):  # an output declared without a type: inferred
            return ValueInfo(v.name, 0, None)
        if not v.type.HasField("tensor_type"):
            raise NotImplementedError(f"{'output' if output else 'input'} {v.name!r}: only tensors are supported "
                                      f"(not sequences, maps or optionals)")
        if tt.elem_type not in DTYPES and not (output and tt.elem_type == 0):
            raise NotImplementedError(f"{'output' if output else 'input'} {v.name!r}: element type "
                                      f"{onnx.TensorProto.DataType.Name(tt.elem_type)} is not supported")
        dims = None
        if tt.HasField("shape"):
            dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim]
        return ValueInfo(v.name, tt.elem_type, dims)

    # Older opsets' forms of the operators, rewritten into the newest form: attributes that became inputs.
    def _normalize(self, nodes: list) -> list:
        out = []
        for n in nodes:
            out.extend(_normalize_node(n, self.opset, self.constants))
        return out


def _const_input(constants: dict, node: Node, tag: str, array) -> str:
    name = f"{node.name}::{tag}"
    constants[name] = constant(np.asarray(array))
    return name


def _normalize_node(n: Node, opset: int, constants: dict) -> list:
    op = n.op

    def attr_to_input(attr, index, dtype, tag=None):
        if attr in n.attrs:
            value = n.attrs.pop(attr)[1]
            while len(n.inputs) < index:
                n.inputs.append("")
            n.inputs.insert(index, _const_input(constants, n, tag or attr, np.array(value, dtype)))

    if op == "Clip" and opset < 11:
        lo, hi = n.attrs.pop("min", ("f", -3.4028234663852886e38))[1], n.attrs.pop("max", ("f", 3.4028234663852886e38))[1]
        n.inputs = [n.inputs[0], _const_input(constants, n, "min", np.float32(lo)),
                    _const_input(constants, n, "max", np.float32(hi))]
    elif op == "Split" and opset < 13:
        attr_to_input("split", 1, np.int64)
    elif op in ("Squeeze", "Unsqueeze") and opset < 13:
        attr_to_input("axes", 1, np.int64)
    elif op == "ReduceSum" and opset < 13 or (op.startswith("Reduce") and op != "ReduceSum" and opset < 18):
        attr_to_input("axes", 1, np.int64)
    elif op == "Slice" and opset < 10:
        starts, ends = n.attrs.pop("starts")[1], n.attrs.pop("ends")[1]
        axes = n.attrs.pop("axes", ("ints", list(range(len(starts)))))[1]
        n.inputs = [n.inputs[0], _const_input(constants, n, "starts", np.array(starts, np.int64)),
                    _const_input(constants, n, "ends", np.array(ends, np.int64)),
                    _const_input(constants, n, "axes", np.array(axes, np.int64))]
    elif op == "Pad" and opset < 11:
        pads = n.attrs.pop("pads")[1]
        value = n.attrs.pop("value", ("f", 0.0))[1]
        n.inputs = [n.inputs[0], _const_input(constants, n, "pads", np.array(pads, np.int64)),
                    _const_input(constants, n, "value", np.float32(value))]
    elif op == "TopK" and opset < 10:
        k = n.attrs.pop("k")[1]
        n.inputs = [n.inputs[0], _const_input(constants, n, "k", np.array([k], np.int64))]
    elif op in ("Softmax", "LogSoftmax", "Hardmax") and opset < 13:
        n.attrs["coerce_2d"] = ("i", 1)  # the older form: flattened to 2-D at axis (default 1)
        n.attrs.setdefault("axis", ("i", 1))
    elif op == "Upsample":
        scales = n.inputs[1] if len(n.inputs) > 1 else _const_input(
            constants, n, "scales", np.array(n.attrs.pop("scales")[1], np.float32))
        n.attrs.pop("scales", None)
        mode = n.attr("mode", "nearest")
        n.op = "Resize"
        n.inputs = [n.inputs[0], "", scales]
        n.attrs = {"mode": ("s", "linear" if mode in ("linear", "bilinear") else mode),
                   "coordinate_transformation_mode": ("s", "asymmetric"),
                   "nearest_mode": ("s", "floor")}
    elif op == "Resize" and opset < 11:
        n.inputs = [n.inputs[0], "", n.inputs[1]]
        mode = n.attr("mode", "nearest")
        n.attrs = {"mode": ("s", mode), "coordinate_transformation_mode": ("s", "asymmetric"),
                   "nearest_mode": ("s", "floor")}
    elif op == "BatchNormalization":
        for a in ("spatial", "is_test", "consumed_inputs"):
            n.attrs.pop(a, None)
    elif op == "Dropout" and opset < 12:
        for a in ("ratio", "is_test"):
            n.attrs.pop(a, None)
    return [n]


def _toposort(nodes: list, available: set, outputs: list) -> list:
    """Kahn's order; ValueError naming the problem for an input nothing produces or a cycle."""
    producer = {}
    for n in nodes:
        for o in n.outputs:
            if o:
                if o in producer or o in available:
                    raise ValueError(f"{n.op} node {n.name!r}: output {o!r} is produced twice in the graph")
                producer[o] = n
    waiting = {}
    users = defaultdict(list)
    ready = deque()
    for n in nodes:
        deps = set()
        for i in n.inputs:
            if not i or i in available:
                continue
            if i not in producer:
                raise ValueError(f"{n.op} node {n.name!r}: input {i!r} is not produced by any node, initializer or "
                                 f"graph input")
            deps.add(producer[i].name)
            users[producer[i].name].append(n)
        waiting[n.name] = len(deps)
        if not deps:
            ready.append(n)
    order = []
    seen_dep = defaultdict(set)
    while ready:
        n = ready.popleft()
        order.append(n)
        for u in users[n.name]:
            if n.name in seen_dep[u.name]:
                continue
            seen_dep[u.name].add(n.name)
            waiting[u.name] -= 1
            if waiting[u.name] == 0:
                ready.append(u)
    if len(order) != len(nodes):
        stuck = [n.name for n in nodes if waiting[n.name] > 0]
        raise ValueError(f"the graph has a cycle through nodes {stuck[:5]}")
    for o in outputs:
        if o not in producer and o not in available:
            raise ValueError(f"graph output {o!r} is not produced by any node, initializer or graph input")
    return order
