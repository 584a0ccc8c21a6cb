"""Layout: transposes pushed down the graph through ops that do not care about the order of dimensions, until
they meet their inverse and cancel. Lowering wraps every NHWC op in NCHW -> NHWC and NHWC -> NCHW transposes;
after this pass a chain of convolutions, activations, residual adds, concatenations, slices, resizes and channel
shuffles runs in NHWC throughout, converting once where the graph enters it and once where it leaves (or where an
op needs NCHW: another Reshape or a Flatten of a feature map, a MatMul)."""
from __future__ import annotations

import numpy as np

from ._graph import Node

#: One input, same shape out, elementwise: the order of dimensions does not matter (extra inputs are scalars).
UNARY = {"Relu", "LeakyRelu", "Clip", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "Erf", "Abs", "Neg", "Sqrt",
         "Exp", "Log", "Cast", "Identity", "Softplus", "Softsign", "Elu", "Selu", "Celu", "Gelu", "Not", "Floor",
         "Ceil", "Round", "Reciprocal", "Sign", "ThresholdedRelu", "Mish", "IsNaN", "IsInf", "Sin", "Cos",
         "QuantizeLinear", "DequantizeLinear", "nnkern.Lookup"}
#: UNARY ops whose extra input is not data (nnkern.Lookup's table).
NOT_DATA = {"nnkern.Lookup"}
#: Elementwise over broadcast inputs: every input may be permuted alike.
BROADCAST = {"Add", "Sub", "Mul", "Div", "Pow", "Min", "Max", "Sum", "Mean", "Equal", "Less", "Greater",
             "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "Where", "Mod", "PRelu", "BitShift", "QLinearAdd",
             "QLinearMul"}
#: Reductions over the axes of an attribute or a constant input: they run on the untransposed tensor over the
#: permuted axes.
REDUCE = {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
          "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"}


def _inverse(perm):
    return [int(i) for i in np.argsort(perm)]


def _compose(p, q):
    """Transpose(q) after Transpose(p) as one transpose."""
    return [p[i] for i in q]


#: Data movements that can read their input through a transpose of their own (nnkern.<op>, attribute
#: input_perm): a Transpose before them is folded in, one strided copy instead of two.
READ_THROUGH = {"DepthToSpace", "SpaceToDepth"}


def push_transposes(net) -> None:
    for _ in range(4 * len(net.nodes) + 16):
        if not _push_once(net):
            break
    _fold_into_moves(net)


def _fold_into_moves(net) -> None:
    """A Transpose whose one reader is in READ_THROUGH (ESPCN's pixel shuffle after its NHWC convolutions): that
    op reads the transpose's input through the permutation."""
    users = net.consumers()
    producer = {o: n for n in net.nodes for o in n.outputs if o}
    for u in list(net.nodes):
        t = producer.get(u.inputs[0]) if u.op in READ_THROUGH and u.inputs else None
        if t is None or t.op != "Transpose" or t.outputs[0] in net.outputs or len(users[t.outputs[0]]) != 1:
            continue
        perm = t.attr("perm")
        if perm is None or len(perm) != 4:
            continue
        u.op = "nnkern." + u.op
        u.inputs = [t.inputs[0]] + u.inputs[1:]
        u.attrs = dict(u.attrs, input_perm=("ints", [int(p) for p in perm]))
        u.sources = "+".join([t.sources, u.sources])
        net.nodes = [n for n in net.nodes if n is not t]
        net.infer(u)


def quantize_to_nhwc(net) -> None:
    """A QuantizeLinear (one scale, 8-bit) of an NCHW float32 tensor of 1-4 channels whose one reader is the layout
    Transpose to NHWC (an INT8 network's input before its first convolution): one nnkern.QuantizeToNhwc step, which
    quantizes the channel planes and interleaves their bytes in one pass, the same bytes as the two steps."""
    users = net.consumers()
    producer = {o: n for n in net.nodes for o in n.outputs if o}
    for t in list(net.nodes):
        if t.op != "Transpose" or list(t.attr("perm") or []) != [0, 2, 3, 1]:
            continue
        q = producer.get(t.inputs[0])
        if q is None or q.op != "QuantizeLinear" or q.outputs[0] in net.outputs or len(users[q.outputs[0]]) != 1:
            continue
        x, y = net.values[q.inputs[0]], net.values[q.outputs[0]]
        scale = net.const(q.inputs[1])
        if x.dtype != 1 or len(x.shape) != 4 or not 1 <= x.shape[1] <= 4 or y.dtype not in (2, 3):
            continue  # float32 in, uint8 / int8 out
        if scale is None or scale.size != 1:
            continue
        fused = Node("nnkern.QuantizeToNhwc", q.name, list(q.inputs), [t.outputs[0]], dict(q.attrs),
                     "+".join([q.sources, t.sources]))
        net.nodes = [fused if n is t else n for n in net.nodes if n is not q]
        net.infer(fused)


def _push_once(net) -> bool:
    users = net.consumers()
    producer = {o: n for n in net.nodes for o in n.outputs if o}
    for t in net.nodes:
        if t.op != "Transpose" or t.outputs[0] in net.outputs:
            continue
        for u in users.get(t.outputs[0], []):
            if _push(net, t, u, producer):
                return True
    return False


def _push(net, t: Node, u: Node, producer: dict) -> bool:
    perm = list(t.attr("perm"))
    src = t.inputs[0]
    if u.op == "Transpose":
        combined = _compose(perm, list(u.attr("perm")))
        if combined == list(range(len(combined))):
            _replace_uses(net, u.outputs[0], src, keep=u)
        else:
            u.inputs = [src]
            u.attrs = {"perm": ("ints", combined)}
            u.sources = u.sources
            net.infer(u)
        return True
    if u.op in UNARY and len([o for o in u.outputs if o]) == 1:
        if u.op not in NOT_DATA and any(_rank(net, i) not in (0, None) and _size(net, i) != 1
                                        for i in u.inputs[1:] if i):
            return False
        _move_below(net, u, t, {0: src})
        return True
    if u.op in BROADCAST:
        rank = len(net.values[u.outputs[0]].shape)
        if rank != len(perm):
            return False
        new_inputs = {}
        for k, i in enumerate(u.inputs):
            if not i:
                continue
            p = producer.get(i)
            if p is not None and p.op == "Transpose" and list(p.attr("perm")) == perm:
                new_inputs[k] = p.inputs[0]
            elif net.values[i].const is not None:
                c = net.const(i)
                c = c.reshape((1,) * (rank - c.ndim) + c.shape)
                new_inputs[k] = net.add_constant(np.ascontiguousarray(c.transpose(_inverse(perm))), f"{u.name}::c{k}",
                                                 key=("perm", tuple(perm)), source=i)
            elif _size(net, i) == 1 and _rank(net, i) <= rank:
                new_inputs[k] = i
            else:
                return False
        _move_below(net, u, t, new_inputs)
        return True
    if u.op in REDUCE and _push_reduce(net, u, t, perm):
        return True
    if u.op == "Resize" and _push_resize(net, u, perm):
        _move_below(net, u, t, {0: src})
        return True
    if u.op == "Slice" and _push_slice(net, u, perm):
        _move_below(net, u, t, {0: src})
        return True
    if u.op == "Reshape" and _push_channel_shuffle(net, t, u, perm):
        return True
    if u.op == "Concat" and len(perm) == len(net.values[u.outputs[0]].shape):
        sources = []
        for i in u.inputs:
            p = producer.get(i)
            if p is None or p.op != "Transpose" or list(p.attr("perm")) != perm:
                return False
            sources.append(p.inputs[0])
        axis = u.attr("axis") % len(perm)
        u.attrs = dict(u.attrs, axis=("i", perm[axis]))
        _move_below(net, u, t, dict(enumerate(sources)))
        return True
    return False


def _push_resize(net, u: Node, perm: list) -> bool:
    """Resize treats each axis on its own: on the untransposed input it resizes axis perm[i] as it did axis i. Its
    roi / scales / sizes list the axes of its `axes` attribute in order, so only that attribute changes (all axes
    in order when absent). Needs the roi / scales / sizes known (constants). The upsampling between NHWC
    convolutions (YOLO) then runs in NHWC, between transposes that cancel."""
    if any(i and net.values[i].const is None for i in u.inputs[1:]):
        return False
    rank = len(perm)
    axes = u.attr("axes", list(range(rank)))
    if any(not -rank <= a < rank for a in axes):
        return False
    u.attrs = dict(u.attrs, axes=("ints", [int(perm[a % rank]) for a in axes]))
    return True


def slice_params(net, node: Node):
    """A Slice's starts, ends, axes and steps as lists of ints (ONNX's defaults for the inputs left out: every axis
    from 0 in order, steps of 1), or None where one of them is not a constant."""
    inputs = node.inputs + [""] * (5 - len(node.inputs))
    if any(i and net.values[i].const is None for i in inputs[1:]):
        return None
    starts, ends = ([int(v) for v in np.asarray(net.const(i)).reshape(-1)] for i in inputs[1:3])
    axes = [int(v) for v in np.asarray(net.const(inputs[3])).reshape(-1)] if inputs[3] else list(range(len(starts)))
    steps = [int(v) for v in np.asarray(net.const(inputs[4])).reshape(-1)] if inputs[4] else [1] * len(starts)
    return starts, ends, axes, steps


def dims(net, name: str) -> list:
    """A value's shape as ints (a plan's shapes are concrete)."""
    return [int(d) for d in net.values[name].shape]


def _push_slice(net, u: Node, perm: list) -> bool:
    """Slice(Transpose(x, perm)) over axes A is Slice(x) over axes perm[A], the starts / ends / steps unchanged.
    Needs them and the axes known (constants). ShuffleNet's channel split then stays NHWC."""
    params = slice_params(net, u)
    rank = len(perm)
    if params is None or any(not -rank <= a < rank for a in params[2]):
        return False
    moved = [int(perm[a % rank]) for a in params[2]]
    inputs = u.inputs + [""] * (5 - len(u.inputs))
    new_axes = net.add_constant(np.array(moved, np.int64), f"{u.name}::axes", key=("axes", tuple(moved)),
                                source=inputs[3] or inputs[1])
    u.inputs = inputs[:3] + [new_axes] + ([inputs[4]] if inputs[4] else [])
    return True


def _push_channel_shuffle(net, t: Node, u: Node, perm: list) -> bool:
    """The channel shuffle of ShuffleNet on an NCHW view of an NHWC tensor x (t: Transpose(x, [0, 3, 1, 2])):
    Reshape to (N, g, C/g, H, W), Transpose (0, 2, 1, 3, 4), Reshape to (N, C, H, W). On x itself it is Reshape
    to (N, H, W, g, C/g), Transpose (0, 1, 2, 4, 3), Reshape to (N, H, W, C), and the transpose moves after it:
    the same values, in NHWC. Only that exact pattern (each step's only reader the next)."""
    if perm != [0, 3, 1, 2]:
        return False
    users = net.consumers()
    if u.outputs[0] in net.outputs:  # its layout would change
        return False
    v = users.get(u.outputs[0], [])
    if len(v) != 1 or v[0].op != "Transpose" or list(v[0].attr("perm")) != [0, 2, 1, 3, 4]:
        return False
    v = v[0]
    w = users.get(v.outputs[0], [])
    if v.outputs[0] in net.outputs or len(w) != 1 or w[0].op != "Reshape":
        return False
    w = w[0]
    n, c, h, wd = dims(net, t.outputs[0])
    five = dims(net, u.outputs[0])
    if len(five) != 5 or five[0] != n or five[3:] != [h, wd] or five[1] * five[2] != c:
        return False
    if dims(net, w.outputs[0]) != [n, c, h, wd]:
        return False
    g, cg = five[1], five[2]
    u.inputs = [t.inputs[0], net.add_constant(np.array([n, h, wd, g, cg], np.int64), f"{u.name}::nhwc")]
    net.infer(u)
    v.attrs = {"perm": ("ints", [0, 1, 2, 4, 3])}
    net.infer(v)
    out = w.outputs[0]
    inner = net.fresh(f"{w.name}::untransposed")
    w.inputs = [v.outputs[0], net.add_constant(np.array([n, h, wd, c], np.int64), f"{w.name}::nhwc")]
    w.outputs[0] = inner
    net.infer(w)
    moved = Node("Transpose", net.fresh(f"{t.name}::below"), [inner], [out], dict(t.attrs), t.sources)
    net.nodes.insert(net.nodes.index(w) + 1, moved)
    net.infer(moved)
    return True


def _push_reduce(net, u: Node, t: Node, perm: list) -> bool:
    """Reduce(Transpose(x, perm), axes A) is Reduce(x, axes perm[A]); without keepdims its result lists the kept
    axes in x's order, which a smaller transpose puts back where one is needed (none for the global average of an
    NHWC feature map as NCHW's ReduceMean over H and W: the kept axes N, C are in order either way). Float sums
    then run in another order, within the float bound."""
    rank = len(perm)
    axes_input = len(u.inputs) > 1 and u.inputs[1]
    if axes_input:
        axes = net.const(u.inputs[1])
        if axes is None:
            return False
        axes = [int(a) for a in np.asarray(axes).reshape(-1)]
    else:
        axes = u.attr("axes")
    if not axes:
        if u.attr("noop_with_empty_axes", 0):
            return False
        axes = list(range(rank))
    if any(not -rank <= a < rank for a in axes):
        return False
    reduced = sorted({a % rank for a in axes})
    moved = [int(perm[a]) for a in reduced]
    if axes_input:
        u.inputs[1] = net.add_constant(np.array(moved, np.int64), f"{u.name}::axes", key=("axes", tuple(moved)),
                                       source=u.inputs[1])
    else:
        u.attrs = dict(u.attrs, axes=("ints", moved))
    if u.attr("keepdims", 1):
        _move_below(net, u, t, {0: t.inputs[0]})
        return True
    kept = [int(perm[i]) for i in range(rank) if i not in reduced]
    order = [sorted(kept).index(k) for k in kept]
    u.inputs[0] = t.inputs[0]
    if order == list(range(len(order))):
        net.infer(u)
    else:
        _move_below(net, u, Node("Transpose", t.name, [], [], {"perm": ("ints", order)}, t.sources), {})
    return True


def _move_below(net, u: Node, t: Node, new_inputs: dict) -> None:
    """u runs on the untransposed inputs and t's transpose moves after it: u's output keeps its name, now
    produced by a new transpose."""
    for k, v in new_inputs.items():
        u.inputs[k] = v
    out = u.outputs[0]
    inner = net.fresh(f"{u.name}::untransposed")
    u.outputs[0] = inner
    net.infer(u)
    moved = Node("Transpose", net.fresh(f"{t.name}::below"), [inner], [out], dict(t.attrs), t.sources)
    net.nodes.insert(net.nodes.index(u) + 1, moved)
    net.infer(moved)


def _replace_uses(net, old: str, new: str, keep: Node) -> None:
    """Every use of `old` reads `new` instead; a graph output keeps its name through an Identity."""
    if old in net.outputs:
        keep.op, keep.inputs, keep.attrs = "Identity", [new], {}
        net.infer(keep)
        return
    for n in net.nodes:
        n.inputs = [new if i == old else i for i in n.inputs]
    net.nodes.remove(keep)


def _rank(net, name):
    v = net.values.get(name)
    return None if v is None else len(v.shape)


def _size(net, name):
    return int(np.prod(net.values[name].shape, dtype=np.int64))
