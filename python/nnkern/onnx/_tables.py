"""Quantized elementwise computation as tables (nnkern.Lookup): what an 8-bit tensor goes through, element by
element, before it is quantized again is a function of its 256 values. Computed at load by the same C++ ops on
those values, the table gives the same bits as the ops, reading and writing one byte per element.

Recognized, in the graph's order (each result may feed the next, tables of tables composed into one):
- DequantizeLinear -> a chain of elementwise float ops -> QuantizeLinear, all per tensor with constant parameters:
  unary ops (LOOKUP_OPS) and binary ones with a constant scalar second operand (x / sqrt(2), x + 1, ...), or no
  op at all (a requantization);
- QLinearAdd / QLinearMul whose operands are one 8-bit tensor, tables of it or constant scalars (x * HardSigmoid(x):
  HardSwish as quantizers write it; GELU's x * (1 + erf(x / sqrt(2))) / 2).
"""
from __future__ import annotations

import numpy as np

from ._graph import Node, constant
from ._quant import _Graph

#: Elementwise float ops whose output element depends on its input element alone (any other input a constant).
LOOKUP_OPS = frozenset({"Relu", "LeakyRelu", "Clip", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "Gelu",
                        "Softplus", "Softsign", "Elu", "Selu", "Celu", "ThresholdedRelu", "Mish", "Erf", "Abs", "Neg",
                        "Exp", "Log", "Sqrt", "Reciprocal", "Sin", "Cos", "Floor", "Ceil", "Round", "Sign"})
#: Binary float ops that are elementwise in one operand when the other is a constant scalar.
SCALAR_BINARY = frozenset({"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"})
QLINEAR_BINARY = ("QLinearAdd", "QLinearMul")


class _Table:
    """A value computed from the 8-bit tensor x: values[i] is its element where x's is the i-th smallest value of
    x's type."""

    def __init__(self, x: str, dtype, values: np.ndarray):
        self.x, self.dtype, self.values = x, np.dtype(dtype), values


def lookup_tables(net) -> None:
    made: dict[str, _Table] = {}
    absorbed: set = set()
    g = _Graph(net)
    for n in list(net.nodes):
        if id(n) in absorbed:
            continue
        found = _from_dequantize(net, g, n) if n.op == "DequantizeLinear" else \
            _from_qlinear(net, made, n) if n.op in QLINEAR_BINARY else None
        if found is None:
            continue
        x, dtype, values, out, replaced = found
        table = _compose(made, _Table(x, dtype, values))
        lookup = Node("nnkern.Lookup", replaced[-1].name, [table.x, net.add_constant(
            table.values, f"{replaced[-1].name}::table")], [out], {}, "+".join(r.sources for r in replaced))
        at = min(i for i, m in enumerate(net.nodes) if any(m is r for r in replaced[1:] or replaced))
        gone = {id(r) for r in replaced[1:]} if n.op == "DequantizeLinear" else {id(r) for r in replaced}
        net.nodes = [m for m in net.nodes if id(m) not in gone]
        net.nodes.insert(min(at, len(net.nodes)), lookup)
        made[out] = table
        absorbed |= gone
        g = _Graph(net)  # readers and producers changed


def _values(dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.arange(info.min, info.max + 1).astype(dtype)


def _run(node: Node, inputs: list) -> np.ndarray:
    from .. import _C
    args = [None if a is None else constant(np.asarray(a)) for a in inputs]
    return _C.graph_evaluate(node.op, node.name, node.attrs, args, 1)[0].numpy()


def _scalar(net, name):
    """A constant of one element and rank 0 or 1 (so it broadcasts to the other operand's shape), as a scalar."""
    c = net.const(name) if name else None
    return None if c is None or c.size != 1 or c.ndim > 1 else c.reshape(())


def _from_dequantize(net, g, d: Node):
    """DequantizeLinear -> elementwise chain -> QuantizeLinear from d: (x, its dtype, the table, the value the
    lookup produces, [d, chain..., q]) or None. d itself stays for its other readers."""
    dq = g.dq(d.outputs[0])
    if dq is None or not dq.per_tensor or dq.zero is None or dq.zero.dtype not in (np.uint8, np.int8):
        return None
    chain, v = [], d.outputs[0]
    while True:
        readers = g.users.get(v, [])
        if v in net.outputs or len(readers) != 1 or len(readers[0].outputs) != 1:
            return None
        n = readers[0]
        if n.op == "QuantizeLinear":
            found = g.q_after(v)
            if found is None or found[2] is None or found[2].dtype not in (np.uint8, np.int8):
                return None
            q, scale, zero = found
            break
        if n.op in LOOKUP_OPS:
            if n.inputs[0] != v or any(i and net.const(i) is None for i in n.inputs[1:]):
                return None
        elif n.op in SCALAR_BINARY:
            if len(n.inputs) != 2 or n.inputs[0] == n.inputs[1] or _scalar(net, n.inputs[1 - n.inputs.index(v)]) \
                    is None:
                return None
        else:
            return None
        chain.append(n)
        v = n.outputs[0]
    f = _run(d, [_values(dq.zero.dtype), dq.scale.reshape(()), dq.zero.reshape(())])
    prev = d.outputs[0]
    for n in chain:
        if n.op in LOOKUP_OPS:
            f = _run(n, [f] + [net.const(i) if i else None for i in n.inputs[1:]])
        else:  # the chain's value where it enters, the constant scalar elsewhere
            f = _run(n, [f if i == prev else _scalar(net, i) for i in n.inputs])
        prev = n.outputs[0]
    table = _run(q, [f, scale.reshape(()), zero.reshape(())])
    return dq.q, dq.zero.dtype, table, q.outputs[0], [d] + chain + [q]


def _from_qlinear(net, made: dict, n: Node):
    """QLinearAdd / QLinearMul of one 8-bit tensor, tables of it and constant scalars: (x, dtype, table, output,
    [n]) or None."""
    if len(n.inputs) < 8 or len(n.outputs) != 1:
        return None
    params = [_scalar(net, n.inputs[i]) for i in (1, 2, 4, 5, 6, 7)]
    if any(p is None for p in params):
        return None
    operands, x, dtype = [], None, None
    for name, zero in ((n.inputs[0], params[1]), (n.inputs[3], params[3])):
        const = _scalar(net, name)
        t = made.get(name, _Table(name, zero.dtype, None))
        if const is None:
            if x is not None and (t.x != x or t.dtype != dtype):
                return None
            x, dtype = t.x, t.dtype
        operands.append((const, t))
    if x is None or dtype not in (np.uint8, np.int8):
        return None
    values = _values(dtype)
    args = [c if c is not None else (values if t.values is None else t.values) for c, t in operands]
    table = _run(n, [args[0], params[0], params[1], args[1], params[2], params[3], params[4], params[5]])
    return x, dtype, table, n.outputs[0], [n]


def _compose(made: dict, t: _Table) -> _Table:
    """A table of a table's output as a table of that table's input (chains collapse to one lookup)."""
    inner = made.get(t.x)
    if inner is None:
        return t
    index = inner.values.astype(np.int64) - np.iinfo(inner.values.dtype).min
    return _Table(inner.x, inner.dtype, t.values[index])
