"""INT8 graphs in both of ONNX's formats.

QDQ (QuantizeLinear / DequantizeLinear around float ops): ``fuse_qdq`` turns DequantizeLinear -> Conv / MatMul /
Gemm (-> Relu / Clip) (-> QuantizeLinear) into one quantized op with the requantization fused (never a float
convolution between two (de)quantizations), DequantizeLinear x2 -> Add -> QuantizeLinear into QLinearAdd,
DequantizeLinear -> GlobalAveragePool -> QuantizeLinear into one pooling of the 8-bit tensor, and runs MaxPool,
Concat and the shape ops directly on the quantized tensor where the QuantizeLinear after them has the same
parameters as the DequantizeLinear before (exact: they commute with a monotone affine map). What is left of the
pattern runs as it is written (DequantizeLinear, the float op, QuantizeLinear).

QOperator: QLinearConv and ConvInteger are lowered onto nnkern.QConv (NHWC) like Conv; QLinearMatMul,
MatMulInteger and QLinearAdd / QLinearMul run as they are; onnxruntime's other com.microsoft QLinear ops become
DequantizeLinear -> float op -> QuantizeLinear (``expand``).
"""
from __future__ import annotations

import numpy as np

from ._graph import Node

#: Ops that commute with a per-tensor affine quantization: on the quantized tensor directly when the parameters
#: before and after match.
PASSTHROUGH = {"MaxPool", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Identity", "Concat",
               "Slice", "Split", "DepthToSpace", "SpaceToDepth", "Resize"}


class _DQ:
    """A DequantizeLinear whose scale and zero point are constants."""

    def __init__(self, node: Node, scale: np.ndarray, zero):
        self.node, self.q, self.scale, self.zero = node, node.inputs[0], scale, zero
        self.scale_name = node.inputs[1]
        self.zero_name = node.inputs[2] if len(node.inputs) > 2 else ""

    @property
    def per_tensor(self) -> bool:
        return self.scale.size == 1

    def same(self, other) -> bool:
        return (self.scale.size == other.scale.size and np.array_equal(self.scale, other.scale)
                and np.array_equal(_zp(self.zero), _zp(other.zero)))


def _zp(z):
    return np.zeros(1, np.int64) if z is None else np.asarray(z).astype(np.int64).reshape(-1)


class _Graph:
    def __init__(self, net):
        self.net = net
        self.producer = {o: n for n in net.nodes for o in n.outputs if o}
        self.users = net.consumers()

    def dq(self, name):
        n = self.producer.get(name)
        if n is None or n.op != "DequantizeLinear" or n.attr("block_size", 0):
            return None
        scale = self.net.const(n.inputs[1])
        zero = self.net.const(n.inputs[2]) if len(n.inputs) > 2 and n.inputs[2] else None
        if scale is None or (len(n.inputs) > 2 and n.inputs[2] and zero is None):
            return None
        return _DQ(n, scale, zero)

    def q_after(self, name):
        """The QuantizeLinear that is the only reader of `name` (constant per-tensor parameters), or None."""
        readers = self.users.get(name, [])
        if len(readers) != 1 or name in self.net.outputs:
            return None
        q = readers[0]
        if q.op != "QuantizeLinear" or q.inputs[0] != name:
            return None
        scale = self.net.const(q.inputs[1])
        zero = self.net.const(q.inputs[2]) if len(q.inputs) > 2 and q.inputs[2] else None
        if scale is None or scale.size != 1 or (len(q.inputs) > 2 and q.inputs[2] and zero is None):
            return None
        return q, scale, zero

    def single_reader(self, name, op):
        readers = self.users.get(name, [])
        if len(readers) == 1 and readers[0].op == op and name not in self.net.outputs:
            return readers[0]
        return None


#: Ops that only move elements (their other inputs constants): a per-tensor DequantizeLinear before one runs after
#: it instead, so the move carries the 8-bit values (ESPCN's pixel shuffle after its last convolution).
MOVES = {"Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Identity", "DepthToSpace", "SpaceToDepth",
         "nnkern.DepthToSpace", "nnkern.SpaceToDepth"}


def sink_dequantize(net) -> None:
    """DequantizeLinear (per tensor, its one reader a move) -> move  =>  move -> DequantizeLinear: the same values
    (each element dequantized alike), a quarter of the bytes moved."""
    for _ in range(len(net.nodes) + 1):
        g = _Graph(net)
        for m in net.nodes:
            d = g.dq(m.inputs[0]) if m.op in MOVES and m.inputs else None
            if d is None or not d.per_tensor or g.single_reader(m.inputs[0], m.op) is not m or \
                    any(i and net.const(i) is None for i in m.inputs[1:]):
                continue
            moved, out = d.node.outputs[0], m.outputs[0]  # the move now makes `moved` (8-bit), the DQ `out`
            m.inputs = [d.q] + m.inputs[1:]
            m.outputs = [moved]
            d.node.inputs = [moved] + d.node.inputs[1:]
            d.node.outputs = [out]
            net.nodes = [n for n in net.nodes if n is not d.node]
            net.nodes.insert(net.nodes.index(m) + 1, d.node)
            net.infer(m)
            net.infer(d.node)
            break
        else:
            return


def fuse_qdq(net) -> None:
    for _ in range(len(net.nodes) + 1):
        g = _Graph(net)
        if not any(_fuse_one(net, g, n) for n in net.nodes):
            return


def _fuse_one(net, g: _Graph, n: Node) -> bool:
    if n.op == "Conv":
        return _fuse_conv(net, g, n)
    if n.op in ("MatMul", "Gemm"):
        return _fuse_matmul(net, g, n)
    if n.op in ("Add", "Mul"):
        return _fuse_binary(net, g, n)
    if n.op in PASSTHROUGH:
        return _fuse_passthrough(net, g, n)
    if n.op == "GlobalAveragePool":
        return _fuse_global_pool(net, g, n)
    return False


def _tail(net, g: _Graph, y: str):
    """What follows a fused op's float output: (activation attrs, the nodes absorbed, the QuantizeLinear found or
    None, the value the fused op produces)."""
    attrs, absorbed = {}, []
    act = g.single_reader(y, "Relu")
    if act is not None:
        attrs["activation"] = ("s", "relu")
    else:
        act = g.single_reader(y, "Clip")
        if act is not None:
            lo = net.const(act.inputs[1]) if len(act.inputs) > 1 and act.inputs[1] else None
            hi = net.const(act.inputs[2]) if len(act.inputs) > 2 and act.inputs[2] else None
            if (len(act.inputs) > 1 and act.inputs[1] and lo is None) or (len(act.inputs) > 2 and act.inputs[2] and hi is None):
                act = None
            else:
                if lo is not None:
                    attrs["clip_min"] = ("f", float(lo))
                if hi is not None:
                    attrs["clip_max"] = ("f", float(hi))
    if act is not None:
        absorbed.append(act)
        y = act.outputs[0]
    found = g.q_after(y)
    if found is None:
        if act is not None and "activation" not in attrs:
            return {}, [], None, None  # a Clip only folds into a quantized output
        return attrs, absorbed, None, y
    q, _, _ = found
    absorbed.append(q)
    return attrs, absorbed, q, q.outputs[0]


def _replace(net, fused: Node, old: Node, absorbed: list) -> None:
    i = net.nodes.index(old)
    net.nodes[i] = fused
    gone = {id(a) for a in absorbed}
    net.nodes = [n for n in net.nodes if id(n) not in gone]


def _fuse_conv(net, g: _Graph, n: Node) -> bool:
    x = g.dq(n.inputs[0])
    w = g.dq(n.inputs[1])
    if x is None or w is None or not x.per_tensor or net.const(w.q) is None:
        return False
    if w.scale.size != 1 and w.node.attr("axis", 1) not in (0, -net.const(w.q).ndim):
        return False
    bias = _bias(net, g, n.inputs[2] if len(n.inputs) > 2 else "", x, w)
    if bias is None:
        return False
    attrs, absorbed, q, out = _tail(net, g, n.outputs[0])
    if out is None:
        return False
    node_attrs = dict(n.attrs)
    node_attrs.update(attrs)
    if q is None:
        node_attrs["output"] = ("s", "float32")
    inputs = [x.q, x.scale_name, x.zero_name, w.q, w.scale_name, w.zero_name,
              q.inputs[1] if q else "", (q.inputs[2] if q is not None and len(q.inputs) > 2 else ""), bias]
    fused = Node("QLinearConv", n.name, inputs, [out], node_attrs,
                 "+".join([x.node.sources, w.node.sources, n.sources] + [a.sources for a in absorbed]))
    _replace(net, fused, n, absorbed)
    return True


def _bias(net, g: _Graph, name: str, x: _DQ, w: _DQ):
    """The bias input of a fused op: "" (none), the int32 constant of its DequantizeLinear, or a float constant in
    real units; None if it is neither (known only while running)."""
    if not name:
        return ""
    b = g.dq(name)
    if b is not None and net.const(b.q) is not None and net.const(b.q).dtype == np.int32 and not _zp(b.zero).any():
        expected = np.float64(x.scale.reshape(-1)[0]) * w.scale.astype(np.float64).reshape(-1)
        if np.allclose(b.scale.astype(np.float64).reshape(-1), expected, rtol=1e-6, atol=0):
            return b.q
        return net.add_constant((net.const(b.q).astype(np.float64) * b.scale.astype(np.float64)).astype(np.float32),
                                f"{name}::real")
    c = net.const(name)
    if c is not None and c.dtype == np.float32:
        return name
    return None


def _fuse_matmul(net, g: _Graph, n: Node) -> bool:
    a = g.dq(n.inputs[0])
    b = g.dq(n.inputs[1])
    if a is None or b is None or not a.per_tensor:
        return False
    wq = net.const(b.q)
    if wq is None or wq.ndim != 2:
        return False
    bias_name = ""
    y = n.outputs[0]
    absorbed_bias = []
    if n.op == "Gemm":
        if n.attr("transA", 0) or n.attr("alpha", 1.0) != 1.0 or (n.attr("beta", 1.0) != 1.0 and len(n.inputs) > 2):
            return False
        trans_b = bool(n.attr("transB", 0))
        axis_ok = b.scale.size == 1 or b.node.attr("axis", 1) in ((0, -2) if trans_b else (1, -1))
        if not axis_ok:
            return False
        if len(n.inputs) > 2 and n.inputs[2]:
            c = net.values.get(n.inputs[2])
            bias_name = _bias(net, g, n.inputs[2], a, b)
            if bias_name is None or (c is not None and c.const is not None and c.const.numpy().size != wq.shape[0 if trans_b else 1]):
                return False
        if trans_b:
            wq = np.ascontiguousarray(wq.T)
    else:
        trans_b = False
        if b.scale.size != 1 and b.node.attr("axis", 1) not in (1, -1):
            return False
        add = g.single_reader(y, "Add")
        if add is not None:
            other = add.inputs[1] if add.inputs[0] == y else add.inputs[0]
            candidate = _bias(net, g, other, a, b)
            shape = net.values[other].shape if other in net.values else None
            if candidate not in (None, "") and shape is not None and len(shape) == 1 and shape[0] == wq.shape[1]:
                bias_name, y = candidate, add.outputs[0]
                absorbed_bias = [add]
    attrs, absorbed, q, out = _tail(net, g, y)
    if out is None:
        return False
    weights = b.q if not trans_b else net.add_constant(wq, f"{n.name}::wT", key=("qgemm_wT", n.name), source=b.q)
    node_attrs = dict(attrs)
    if q is None:
        node_attrs["output"] = ("s", "float32")
    inputs = [a.q, a.scale_name, a.zero_name, weights, b.scale_name, b.zero_name,
              q.inputs[1] if q else "", (q.inputs[2] if q is not None and len(q.inputs) > 2 else ""), bias_name]
    fused = Node("nnkern.QGemm", n.name, inputs, [out], node_attrs,
                 "+".join([a.node.sources, b.node.sources, n.sources] + [x.sources for x in absorbed_bias + absorbed]))
    _replace(net, fused, n, absorbed_bias + absorbed)
    return True


def _fuse_binary(net, g: _Graph, n: Node) -> bool:
    a, b = g.dq(n.inputs[0]), g.dq(n.inputs[1])
    if a is None or b is None or not a.per_tensor or not b.per_tensor:
        return False
    if a.zero is not None and b.zero is not None and a.zero.dtype != b.zero.dtype:
        return False
    attrs, absorbed, q, out = _tail(net, g, n.outputs[0])
    if q is None or "clip_min" in attrs or "clip_max" in attrs:
        return False
    qz = net.const(q.inputs[2]) if len(q.inputs) > 2 and q.inputs[2] else None
    types = {np.dtype(z.dtype) for z in (a.zero, b.zero, qz) if z is not None}
    if len(types) > 1:
        return False
    inputs = [a.q, a.scale_name, a.zero_name, b.q, b.scale_name, b.zero_name, q.inputs[1],
              q.inputs[2] if len(q.inputs) > 2 else ""]
    fused = Node("QLinearAdd" if n.op == "Add" else "QLinearMul", n.name, inputs, [out], attrs,
                 "+".join([a.node.sources, b.node.sources, n.sources] + [x.sources for x in absorbed]))
    _replace(net, fused, n, absorbed)
    return True


def _fuse_global_pool(net, g: _Graph, n: Node) -> bool:
    """DequantizeLinear -> GlobalAveragePool -> QuantizeLinear (per tensor) as QGlobalAveragePool: the pooling reads
    the 8-bit tensor, no float copy of it is written (its C++ op repeats the three steps' float operations)."""
    x = g.dq(n.inputs[0])
    found = g.q_after(n.outputs[0])
    if x is None or not x.per_tensor or found is None:
        return False
    q = found[0]
    inputs = [x.q, x.scale_name, x.zero_name, q.inputs[1], q.inputs[2] if len(q.inputs) > 2 else ""]
    fused = Node("QGlobalAveragePool", n.name, inputs, [q.outputs[0]], {},
                 "+".join([x.node.sources, n.sources, q.sources]))
    _replace(net, fused, n, [q])
    return True


def _fuse_passthrough(net, g: _Graph, n: Node) -> bool:
    data = n.inputs if n.op == "Concat" else n.inputs[:1]
    dqs = [g.dq(i) for i in data]
    if any(d is None or not d.per_tensor for d in dqs) or len(n.outputs) != 1:
        return False
    found = g.q_after(n.outputs[0])
    if found is None:
        return False
    q, scale, zero = found
    ref = _DQ(q, scale, zero)
    # Concat only moves values: its inputs quantized with other parameters are requantized to the output's first
    # (their DequantizeLinear, then a QuantizeLinear like the one after the Concat: per element what the float
    # Concat's QuantizeLinear gives; quantized_lookup makes each pair a table). The other ops need them equal.
    if n.op != "Concat" and not all(d.same(ref) for d in dqs):
        return False
    qz = net.const(q.inputs[2]) if len(q.inputs) > 2 and q.inputs[2] else None
    # The element types must match: known from the zero points (a DequantizeLinear without one may read either).
    if qz is None or any(d.zero is None or d.zero.dtype != qz.dtype for d in dqs):
        return False
    sources = []
    for k, d in enumerate(dqs):
        if d.same(ref):
            sources.append(d.q)
            continue
        requant = Node("QuantizeLinear", net.fresh(f"{n.name}::requantize"), [data[k]] + list(q.inputs[1:]),
                       [net.fresh(f"{n.name}::requantized")], dict(q.attrs), d.node.sources)
        net.nodes.insert(net.nodes.index(n), requant)  # typed with the rest, after the fusions
        sources.append(requant.outputs[0])
    fused = n.copy()
    fused.inputs = sources + list(n.inputs[len(data):])
    fused.outputs = [q.outputs[0]]
    fused.sources = "+".join([d.node.sources for d in dqs] + [n.sources, q.sources])
    _replace(net, fused, n, [q])
    return True


# -- QOperator

def lower_qlinear_conv(net, n: Node) -> list:
    """QLinearConv / ConvInteger (NCHW) -> transpose -> nnkern.QConv (NHWC) -> transpose."""
    from ._lower import _spatial_attrs, _wrap_nhwc
    integer = n.op == "ConvInteger"
    w_index = 1 if integer else 3
    w = net.const(n.inputs[w_index])
    if w is None:
        raise net.needs_constant(n, w_index, f"{n.op} node {n.name!r}: the weight must be a constant")
    if w.ndim not in (3, 4):
        raise NotImplementedError(f"{n.op} node {n.name!r}: only 1-D and 2-D convolutions are supported")
    spatial = w.ndim - 2
    strides, dilations, pads = _spatial_attrs(n, spatial, list(w.shape[2:]))
    group = n.attr("group", 1)
    if not isinstance(group, int) or group < 1 or w.shape[0] % group:
        raise ValueError(f"{n.op} node {n.name!r}: group {group} does not divide the weight's {w.shape[0]} output "
                         f"channels")
    # The layer's layout (groups, KH, KW, IC / groups, OC / groups); the model's weight a view of it from now on.
    w4 = w if spatial == 2 else w[:, :, None, :]
    grouped = (group, w4.shape[2], w4.shape[3], w4.shape[1], w4.shape[0] // group)
    layer = w4.reshape(group, grouped[4], *w4.shape[1:]).transpose(0, 3, 4, 2, 1)
    weight = net.add_constant(np.ascontiguousarray(layer), f"{n.name}::w", key=("qconv_w", n.name),
                              source=n.inputs[w_index])
    del w4, layer
    net.hold_once(n.inputs[w_index], weight, grouped, (0, 4, 3, 1, 2))
    attrs = {k: v for k, v in n.attrs.items() if k in ("activation", "clip_min", "clip_max", "output")}
    attrs.update({"strides": ("ints", strides), "dilations": ("ints", dilations), "pads": ("ints", pads),
                  "group": ("i", n.attr("group", 1)), "auto_pad": ("s", n.attr("auto_pad", "NOTSET"))})
    if integer:
        x_zp = n.inputs[2] if len(n.inputs) > 2 else ""
        w_zp = n.inputs[3] if len(n.inputs) > 3 else ""
        inputs = ["", x_zp, weight, "", w_zp, "", "", ""]
        attrs["output"] = ("s", "int32")
    else:
        inputs = list(n.inputs[1:]) + [""] * (9 - len(n.inputs))
        inputs[2] = weight
    return _wrap_nhwc(net, n, "nnkern.QConv", inputs, attrs, rank=spatial + 2)


def _dq_op_q(net, n: Node, op: str, data: list, y_scale: str, y_zero: str, attrs: dict) -> list:
    """DequantizeLinear of each (x, scale, zero) in data -> op -> QuantizeLinear(y_scale, y_zero)."""
    nodes, floats = [], []
    for k, (x, s, z) in enumerate(data):
        f = net.fresh(f"{n.name}::dq{k}")
        nodes.append(Node("DequantizeLinear", f"{n.name}::dq{k}", [x, s, z], [f], {}, n.sources))
        floats.append(f)
    y = net.fresh(f"{n.name}::float")
    nodes.append(Node(op, f"{n.name}::{op}", floats, [y], attrs, n.sources))
    nodes.append(Node("QuantizeLinear", f"{n.name}::q", [y, y_scale, y_zero], [n.outputs[0]], {}, n.sources))
    return nodes


def _expand_unary(op):
    def expand(net, n: Node) -> list:
        attrs = {k: v for k, v in n.attrs.items() if k != "channels_last"}
        inner = op
        if n.attr("channels_last", 0):
            raise NotImplementedError(f"{n.op} node {n.name!r}: channels_last is not supported")
        x, xs, xz, ys = n.inputs[:4]
        yz = n.inputs[4] if len(n.inputs) > 4 else ""
        return _dq_op_q(net, n, inner, [(x, xs, xz)], ys, yz, attrs)
    return expand


def _expand_concat(net, n: Node) -> list:
    ys, yz = n.inputs[0], n.inputs[1]
    rest = n.inputs[2:]
    data = [tuple(rest[i:i + 3]) for i in range(0, len(rest), 3)]
    return _dq_op_q(net, n, "Concat", data, ys, yz, {"axis": n.attrs.get("axis", ("i", 0))})


def _lower_qgemm(net, n: Node) -> list:
    """onnxruntime's QGemm (A, a_scale, a_zero, B, b_scale, b_zero, C, y_scale, y_zero) onto nnkern.QGemm."""
    if n.attr("transA", 0) or n.attr("alpha", 1.0) != 1.0:
        raise NotImplementedError(f"QGemm node {n.name!r}: transA and alpha other than 1 are not supported")
    inputs = list(n.inputs) + [""] * (9 - len(n.inputs))
    a, sa, za, b, sb, zb, c, sy, zy = inputs[:9]
    if n.attr("transB", 0):
        w = net.const(b)
        if w is None:
            raise net.needs_constant(n, 3, f"QGemm node {n.name!r}: B must be a constant")
        b = net.add_constant(np.ascontiguousarray(w.T), f"{n.name}::bT", key=("qgemmT", n.name), source=b)
    attrs = {} if sy else {"output": ("s", "float32")}
    return [Node("nnkern.QGemm", n.name, [a, sa, za, b, sb, zb, sy, zy, c], list(n.outputs[:1]), attrs, n.sources)]


EXPANSIONS = {
    "QLinearGlobalAveragePool": _expand_unary("GlobalAveragePool"),
    "QLinearAveragePool": _expand_unary("AveragePool"),
    "QLinearSigmoid": _expand_unary("Sigmoid"),
    "QLinearLeakyRelu": _expand_unary("LeakyRelu"),
    "QLinearSoftmax": _expand_unary("Softmax"),
    "QLinearConcat": _expand_concat,
    "QGemm": _lower_qgemm,
}


def expand(net) -> None:
    out = []
    for n in net.nodes:
        f = EXPANSIONS.get(n.op)
        out.extend(f(net, n) if f else [n])
    net.nodes = out
