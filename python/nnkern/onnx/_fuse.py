"""Post-op fusion: an activation that is the only reader of a convolution's output runs in the convolution's epilogue
(Relu, Clip to [0, 6] or [0, inf), Sigmoid, x * sigmoid(x) as SiLU, Tanh, HardSwish, HardSigmoid, LeakyRelu: the
same formulas as the separate ops, so the same bits); a float32 MatMul's or Gemm's, in the GEMM's epilogue (Relu),
and the bias Add after a float32 MatMul. And GELU as torch exports it (x / sqrt 2 -> Erf -> + 1 -> x * -> * 0.5,
five elementwise passes) as one Gelu op (float32: the gelu kernel, erf in the same loop). And MobileNet-v2's
inverted residual blocks as one step that runs band by band in cache (ops/conv/block.h), and residual Adds (with the
activation after them) in the epilogue of the convolution that produces one operand. And ShuffleNet's Concat /
channel shuffle / Slices in NHWC as one nnkern.ChannelShuffle pass. And a nearest upsampling read by a convolution
through its indirection buffer."""
from __future__ import annotations

import numpy as np

from .. import _C
from ._graph import Node, constant, cpp_constant
from ._layout import dims, slice_params

#: The activations each op's epilogue runs.
FUSABLE = {"nnkern.Conv": {"relu", "relu6", "sigmoid", "silu", "hardswish", "hardsigmoid", "leaky_relu", "tanh"},
           "Gemm": {"relu"}, "MatMul": {"relu"}}
#: ONNX activations fused as they are: (the epilogue's name, {the op's attribute: (the conv's attribute, default)}).
SIMPLE = {"Relu": ("relu", {}), "Sigmoid": ("sigmoid", {}), "Tanh": ("tanh", {}), "HardSwish": ("hardswish", {}),
          "HardSigmoid": ("hardsigmoid", {"alpha": ("activation_alpha", 0.2), "beta": ("activation_beta", 0.5)}),
          "LeakyRelu": ("leaky_relu", {"alpha": ("activation_alpha", 0.01)})}


def fuse_activations(net) -> None:
    changed = True
    while changed:
        changed = False
        users = net.consumers()
        for conv in net.nodes:
            if conv.op not in FUSABLE or conv.attr("activation", "none") != "none":
                continue
            y = conv.outputs[0]
            readers = users.get(y, [])
            if y in net.outputs:
                continue
            found = _activation(net, y, readers)
            if found is None or found[0] not in FUSABLE[conv.op] or net.values[y].dtype != 1:
                continue
            act, absorbed, out, params = found
            conv.attrs = dict(conv.attrs, activation=("s", act), **params)
            conv.outputs = [out]
            conv.sources = "+".join([conv.sources] + [n.sources for n in absorbed])
            dropped = {id(n) for n in absorbed[:-1]} | {id(conv)}
            # Where the last absorbed node was: after the residual's producer, which may follow the conv.
            net.nodes = [conv if n is absorbed[-1] else n for n in net.nodes if id(n) not in dropped]
            net.infer(conv)
            changed = True
            break


def _activation(net, y: str, readers: list):
    """(activation, the nodes it replaces, the value the fused conv produces, its parameters as the conv's
    attributes) or None."""
    if len(readers) == 2:
        sig = next((n for n in readers if n.op == "Sigmoid"), None)
        mul = next((n for n in readers if n.op == "Mul"), None)
        if sig is not None and mul is not None and sorted(mul.inputs) == sorted([y, sig.outputs[0]]):
            if sig.outputs[0] not in net.outputs and len(net.consumers().get(sig.outputs[0], [])) == 1:
                return "silu", [sig, mul], mul.outputs[0], {}
        return None
    if len(readers) != 1:
        return None
    n = readers[0]
    if n.op in SIMPLE:
        act, names = SIMPLE[n.op]
        params = {conv_attr: ("f", float(n.attr(attr, default))) for attr, (conv_attr, default) in names.items()}
        return act, [n], n.outputs[0], params
    if n.op == "Clip":
        lo = net.const(n.inputs[1]) if len(n.inputs) > 1 and n.inputs[1] else None
        hi = net.const(n.inputs[2]) if len(n.inputs) > 2 and n.inputs[2] else None
        if (len(n.inputs) > 1 and n.inputs[1] and lo is None) or (len(n.inputs) > 2 and n.inputs[2] and hi is None):
            return None  # bounds known only while running
        lo = float(lo) if lo is not None else -np.inf
        hi = float(hi) if hi is not None else np.inf
        if lo == 0.0 and hi == 6.0:
            return "relu6", [n], n.outputs[0], {}
        if lo == 0.0 and hi >= 3.4e38:
            return "relu", [n], n.outputs[0], {}
    return None


def _scalar(net, name: str):
    """The float value of a one-element constant, else None."""
    c = net.const(name)
    return float(c.reshape(-1)[0]) if c is not None and c.size == 1 else None


def _other(node, name: str):
    """The input of a two-input node that is not `name` (None if both or neither are)."""
    a, b = node.inputs[:2] if len(node.inputs) == 2 else ("", "")
    return b if a == name and b != name else a if b == name and a != name else None


def _only_reader(net, users: dict, v: str):
    """The one node reading v (v not a graph output), else None."""
    readers = users.get(v, [])
    return readers[0] if len(readers) == 1 and v not in net.outputs else None


def _replace_chain(net, node, chain: list) -> None:
    """`node` stands for the nodes of `chain` (it may be one of them): it takes the last one's place, after the
    producers of every input the chain read; the others go. Its outputs are typed again."""
    last = chain[-1]
    dropped = {id(n) for n in chain if n is not last} | ({id(node)} if node is not last else set())
    net.nodes = [node if n is last else n for n in net.nodes if id(n) not in dropped]
    net.infer(node)


def fuse_gelu(net) -> None:
    """Div(x, sqrt 2) -> Erf -> Add(., 1) -> Mul(x, .) -> Mul(., 0.5) (operands in either order, each value read by
    the next node only) -> Gelu(x), float32. 0.5 x (1 + erf(x / sqrt 2)) with x / sqrt 2 as x * (1 / sqrt 2): within
    an ulp of the divided value, so within the float bound of the unfused plan (tested)."""
    users = net.consumers()

    def only(v):
        return _only_reader(net, users, v)

    for erf in list(net.nodes):
        if erf.op != "Erf" or net.values[erf.inputs[0]].dtype != 1:
            continue
        div = net.producer.get(erf.inputs[0])
        if div is None or div.op != "Div" or only(div.outputs[0]) is not erf or div.inputs[0] == div.inputs[1]:
            continue
        x, root2 = div.inputs[0], _scalar(net, div.inputs[1])
        if root2 is None or abs(root2 - 2 ** 0.5) > 1e-6:
            continue
        add = only(erf.outputs[0])
        if add is None or add.op != "Add" or _scalar(net, _other(add, erf.outputs[0]) or "") != 1.0:
            continue
        mul = only(add.outputs[0])
        if mul is None or mul.op != "Mul" or _other(mul, add.outputs[0]) != x:
            continue
        half = only(mul.outputs[0])
        if half is None or half.op != "Mul" or _scalar(net, _other(half, mul.outputs[0]) or "") != 0.5:
            continue
        chain = [div, erf, add, mul, half]
        if any(net.values[n.outputs[0]].shape != net.values[x].shape for n in chain):
            continue  # a broadcasting constant changed the shape
        gelu = div.copy()
        gelu.op, gelu.inputs, gelu.outputs = "Gelu", [x], [half.outputs[0]]
        gelu.attrs = {"approximate": ("s", "none")}
        gelu.sources = "+".join(n.sources for n in chain)
        _replace_chain(net, gelu, chain)
        users = net.consumers()


def fuse_matmul_bias(net) -> None:
    """MatMul(A, B) -> Add(., c), float32, c a constant of shape [1, ..., 1, N] (N: B's columns; the product read by
    the Add only, the Add's shape the product's) -> MatMul(A, B, c): the GEMM's epilogue adds c[j] to column j
    (acc + c, the Add's own rounding: the same bits), the product never written and read again. torch exports
    nn.Linear on inputs of three or more dimensions this way (a transformer's projections)."""
    users = net.consumers()
    for mm in list(net.nodes):
        if mm.op != "MatMul" or len(mm.inputs) != 2 or net.values[mm.outputs[0]].dtype != 1:
            continue
        y = mm.outputs[0]
        add = _only_reader(net, users, y)
        b_shape = net.values[mm.inputs[1]].shape
        if (add is None or add.op != "Add" or len(b_shape) < 2
                or net.values[add.outputs[0]].shape != net.values[y].shape):
            continue
        c = _other(add, y)
        bias = net.const(c) if c else None
        n = b_shape[-1]
        if (bias is None or bias.dtype != np.float32 or bias.ndim == 0 or bias.shape[-1] != n
                or bias.size != n or bias.ndim > len(net.values[y].shape)):
            continue
        fused = mm.copy()
        fused.inputs, fused.outputs = list(mm.inputs) + [c], list(add.outputs)
        fused.sources = "+".join([mm.sources, add.sources])
        _replace_chain(net, fused, [mm, add])
        users = net.consumers()


def _pointwise(net, conv) -> bool:
    """A 1x1, stride-1, unpadded nnkern.Conv of one group."""
    w = net.const(conv.inputs[1])
    return (w is not None and w.shape[1:3] == (1, 1) and conv.attr("group", 1) == 1
            and list(conv.attr("strides", [1, 1])) == [1, 1] and not any(conv.attr("pads", [0] * 4))
            and conv.attr("auto_pad", "NOTSET") in ("NOTSET", "VALID"))


def _depthwise(net, conv) -> bool:
    """An nnkern.Conv with one input channel per output channel and group (channel multiplier 1)."""
    w = net.const(conv.inputs[1])
    channels = net.values[conv.inputs[0]].shape[-1]
    return w is not None and w.shape[3] == 1 and conv.attr("group", 1) == w.shape[0] == channels


def fuse_inverted_residual(net) -> None:
    """MobileNet-v2's inverted residual: a 1x1 expansion (optional) -> a depthwise convolution -> a 1x1 projection
    (-> Add of the block's input), float32 nnkern.Conv nodes (activations fused), each intermediate read by the
    next node only, as one nnkern.InvertedResidual: each band of output rows runs through all three layers while
    its slices of the expanded and depthwise tensors are in cache, instead of the whole tensors going to memory
    and back. Every layer runs the kernels it runs alone, so the results are the unfused plan's (tested)."""
    users = net.consumers()

    def only(v):
        return _only_reader(net, users, v)

    def conv(n):  # no residual input of its own
        return n is not None and n.op == "nnkern.Conv" and len(n.inputs) <= 3 and net.values[n.outputs[0]].dtype == 1

    for dw in list(net.nodes):
        if not conv(dw) or not _depthwise(net, dw):
            continue
        expand = net.producer.get(dw.inputs[0])
        if not (conv(expand) and _pointwise(net, expand) and only(expand.outputs[0]) is dw):
            expand = None
        project = only(dw.outputs[0])
        if not (conv(project) and _pointwise(net, project)):
            continue
        x = expand.inputs[0] if expand else dw.inputs[0]
        add, out = only(project.outputs[0]), project.outputs[0]
        residual = (add is not None and add.op == "Add" and _other(add, out) == x
                    and net.values[add.outputs[0]].shape == net.values[x].shape == net.values[out].shape)
        layers = [("expand", expand), ("dw", dw), ("project", project)]
        inputs, attrs = [x], {"residual": ("i", int(residual))}
        for prefix, n in layers:
            inputs += [n.inputs[1], n.inputs[2] if len(n.inputs) > 2 else ""] if n else ["", ""]
            attrs.update({f"{prefix}.{k}": v for k, v in (n.attrs.items() if n else ())})
        chain = [n for _, n in layers if n] + ([add] if residual else [])
        block = dw.copy()
        block.op, block.name, block.inputs = "nnkern.InvertedResidual", net.fresh(f"{dw.name}::block"), inputs
        block.outputs, block.attrs = [chain[-1].outputs[0]], attrs
        block.sources = "+".join(n.sources for n in chain)
        _replace_chain(net, block, chain)
        users = net.consumers()


def fuse_residual_add(net) -> None:
    """An nnkern.Conv whose output only an Add reads, the Add's other operand of the same shape (a ResNet
    shortcut), and the activation after the Add: one convolution with the operand as its residual input, added as
    each tile is stored (the GEMM algorithms' epilogue) or in the post-ops on each block of output just stored
    (the others), then the activation (seed I13): the same formulas as the Add and activation ops, so the same
    bits."""
    changed = True
    while changed:
        changed = False
        users = net.consumers()
        for conv in net.nodes:
            if (conv.op != "nnkern.Conv" or conv.attr("activation", "none") != "none" or len(conv.inputs) > 3
                    or conv.outputs[0] in net.outputs or net.values[conv.outputs[0]].dtype != 1):
                continue
            y = conv.outputs[0]
            add = _only_reader(net, users, y)
            r = _other(add, y) if add is not None and add.op == "Add" else None
            if r is None or net.values[r].shape != net.values[y].shape or net.values[r].dtype != 1:
                continue
            absorbed, out, attrs = [add], add.outputs[0], {}
            found = None if out in net.outputs else _activation(net, out, users.get(out, []))
            if found is not None and found[0] in FUSABLE["nnkern.Conv"]:
                act, nodes, out, params = found
                absorbed += nodes
                attrs = dict(params, activation=("s", act))
            conv.inputs = (conv.inputs + [""])[:3] + [r]
            conv.attrs = dict(conv.attrs, **attrs)
            conv.outputs = [out]
            conv.sources = "+".join([conv.sources] + [n.sources for n in absorbed])
            _replace_chain(net, conv, [conv] + absorbed)  # where the residual's producer has run
            changed = True
            break


def fuse_quantized_residual_add(net) -> None:
    """The INT8 form of fuse_residual_add: an nnkern.QConv with an 8-bit output that only a QLinearAdd reads
    (fuse_qdq's Add between quantizations), the other operand of the same shape and type: the convolution adds it to
    each tile it stores, as the QLinearAdd step would (its parameters, its relu), so the same bits. Inputs 9-15 of
    nnkern.QConv."""
    users = net.consumers()
    for conv in list(net.nodes):
        if conv.op != "nnkern.QConv" or len(conv.inputs) > 9 or conv.outputs[0] in net.outputs:
            continue
        y = conv.outputs[0]
        add = _only_reader(net, users, y)
        if add is None or add.op != "QLinearAdd" or len(add.inputs) < 7:
            continue
        ins = (list(add.inputs) + [""] * 8)[:8]
        mine = 0 if ins[0] == y else 3 if ins[3] == y else None
        if mine is None or ins[0] == ins[3]:
            continue
        r = ins[3 - mine]
        if net.values[r].shape != net.values[y].shape or net.values[r].dtype != net.values[y].dtype:
            continue
        conv.inputs = (conv.inputs + [""] * 9)[:9] + [r] + ins[mine + 1:mine + 3] + ins[4 - mine:6 - mine] + ins[6:8]
        conv.attrs = dict(conv.attrs, add_activation=("s", add.attr("activation", "none")))
        conv.outputs = list(add.outputs)
        conv.sources = "+".join([conv.sources, add.sources])
        _replace_chain(net, conv, [conv, add])
        users = net.consumers()


def fuse_lookup(net) -> None:
    """An nnkern.Lookup (quantized_lookup's table: HardSwish, sigmoid, a requantization ... on the quantized tensor)
    that is the only reader of its input, applied by the step writing that input, to what it has just written: an
    INT8 convolution's output (input 16 of nnkern.QConv), each block it stores; an output of ShuffleNet's
    nnkern.ChannelShuffle (its input 2 + k for output k), each run of rows. The bits of the two steps without the
    Lookup's pass over the tensor."""
    users = net.consumers()
    for node in list(net.nodes):
        if node.op == "nnkern.QConv" and len(node.inputs) <= 9:
            slots = {0: 16}  # output -> the input that takes its table
        elif node.op == "nnkern.ChannelShuffle":
            slots = {k: 2 + k for k in range(len(node.outputs)) if len(node.inputs) <= 2 + k or not node.inputs[2 + k]}
        else:
            continue
        for k, slot in slots.items():
            y = node.outputs[k]
            lookup = _only_reader(net, users, y)
            if lookup is None or lookup.op != "nnkern.Lookup" or lookup.inputs[0] != y:
                continue
            table = lookup.inputs[1]
            if net.const(table) is None or net.values[table].dtype != net.values[y].dtype:
                continue
            node.inputs = (node.inputs + [""] * slot)[:slot] + [table] + node.inputs[slot + 1:]
            node.outputs = node.outputs[:k] + [lookup.outputs[0]] + node.outputs[k + 1:]
            node.sources = "+".join([node.sources, lookup.sources])
            _replace_chain(net, node, [node, lookup])
            users = net.consumers()


def fuse_channel_shuffle(net) -> None:
    """ShuffleNet's unit boundary in NHWC (after push_transposes): Concat(a, b) along the last axis, the channel
    shuffle of two groups (Reshape to (..., 2, c), Transpose of the last two axes, Reshape back), and the two Slices
    that take its halves where they are its only readers, as one nnkern.ChannelShuffle (ops/graph/ops/movement.cc)
    that interleaves a and b straight into the halves: one pass over the data instead of four. Only data moves:
    the same values."""
    users = net.consumers()
    for concat in list(net.nodes):
        if concat.op != "Concat" or len(concat.inputs) != 2:
            continue
        a, b = concat.inputs
        va, vb = net.values[a], net.values[b]
        rank = len(va.shape)
        if rank < 2 or concat.attr("axis", 0) % rank != rank - 1 or va.shape != vb.shape or va.dtype != vb.dtype:
            continue
        lead, c = [int(d) for d in va.shape[:-1]], int(va.shape[-1])
        r1 = _only_reader(net, users, concat.outputs[0])
        if r1 is None or r1.op != "Reshape" or dims(net, r1.outputs[0]) != lead + [2, c]:
            continue
        t = _only_reader(net, users, r1.outputs[0])
        if t is None or t.op != "Transpose" or list(t.attr("perm", [])) != list(range(rank - 1)) + [rank, rank - 1]:
            continue
        r2 = _only_reader(net, users, t.outputs[0])
        if r2 is None or r2.op != "Reshape" or dims(net, r2.outputs[0]) != lead + [2 * c]:
            continue
        halves = _halves(net, users, r2.outputs[0], rank, c)
        chain = [concat, r1, t, r2] + halves
        outs = [n.outputs[0] for n in halves] or [r2.outputs[0]]
        fused = Node("nnkern.ChannelShuffle", concat.name, [a, b], outs, {"splits": ("i", len(outs))},
                     "+".join(n.sources for n in chain))
        dropped = {id(n) for n in chain if n is not r2}
        net.nodes = [fused if n is r2 else n for n in net.nodes if id(n) not in dropped]
        net.infer(fused)
        users = net.consumers()


def _halves(net, users: dict, v: str, rank: int, c: int) -> list:
    """The two Slices reading v (and nothing else) that take [0, c) and [c, 2c) of its last axis, in that order;
    else []."""
    readers = users.get(v, [])
    if len(readers) != 2 or v in net.outputs or any(n.op != "Slice" for n in readers):
        return []
    shape, found = dims(net, v), {}
    for s in readers:
        params = slice_params(net, s)
        if params is None:
            return []
        span = {}  # axis -> [lo, hi) clamped, for steps of 1 only
        for start, end, axis, step in zip(*params):
            d = axis % rank
            if step != 1 or d in span:
                return []
            span[d] = tuple(max(0, min(x + shape[d] if x < 0 else x, shape[d])) for x in (start, end))
        if any(span.get(d, (0, shape[d])) != (0, shape[d]) for d in range(rank - 1)) or rank - 1 not in span:
            return []  # the channels only, every other axis whole
        found[span[rank - 1]] = s
    first, second = found.get((0, c)), found.get((c, 2 * c))
    return [first, second] if first is not None and second is not None else []


#: Resize's coordinate modes whose nearest pixel for an integer factor f is output // f (half_pixel: (o + 0.5) / f
#: - 0.5 lies within 0.5 of o // f, never on a tie).
NEAREST_REPEATS = {("asymmetric", "floor"), ("half_pixel", "round_prefer_floor"), ("half_pixel", "round_prefer_ceil"),
                   ("pytorch_half_pixel", "round_prefer_floor"), ("pytorch_half_pixel", "round_prefer_ceil")}


def fuse_upsampling(net) -> None:
    """A nearest Resize (NHWC, integer factors along H and W) whose one reader is a float convolution: the
    convolution reads the source through its indirection buffer (attribute upsample), the upsampled tensor is
    never written. U-Net and FPN decoders."""
    users = net.consumers()
    for r in list(net.nodes):
        if r.op != "Resize" or r.attr("mode", "nearest") != "nearest":
            continue
        modes = (r.attr("coordinate_transformation_mode", "half_pixel"), r.attr("nearest_mode", "round_prefer_floor"))
        conv = _only_reader(net, users, r.outputs[0])
        if modes not in NEAREST_REPEATS or conv is None or conv.op != "nnkern.Conv" or conv.inputs[0] != r.outputs[0]:
            continue
        if r.outputs[0] in conv.inputs[1:] or "upsample" in conv.attrs:
            continue
        src, up = dims(net, r.inputs[0]), dims(net, r.outputs[0])
        if len(src) != 4 or len(up) != 4 or src[0] != up[0] or src[3] != up[3] or 0 in src:
            continue
        if up[1] % src[1] or up[2] % src[2] or (up[1] == src[1] and up[2] == src[2]):
            continue
        conv.inputs = [r.inputs[0]] + conv.inputs[1:]
        conv.attrs = dict(conv.attrs, upsample=("ints", [up[1] // src[1], up[2] // src[2]]))
        conv.sources = "+".join([r.sources, conv.sources])
        net.nodes = [n for n in net.nodes if n is not r]
        net.infer(conv)
        users = net.consumers()


#: An LSTM's default activations (ONNX's names, compared without case).
_LSTM_DEFAULT_ACTS = ("sigmoid", "tanh", "tanh")


def _default_lstm(net, n) -> bool:
    """An LSTM that runs on nnkern's F32Lstm: the default activations, no clip, peepholes or input_forget, and
    W, R, B constants."""
    acts = n.attr("activations")
    if acts is not None and [a.lower() for a in acts] != list(_LSTM_DEFAULT_ACTS) * (len(acts) // 3 or 1):
        return False
    if n.attr("clip") is not None or n.attr("input_forget", 0) or (len(n.inputs) > 7 and n.inputs[7]):
        return False
    return all(net.const(i) is not None for i in n.inputs[1:4] if i)


#: Per-tensor ops between an embedding's Gather and the LSTM that commute with the Gather: applied to the table.
_ROWWISE = ("QuantizeLinear", "DequantizeLinear")
#: The largest projected table (vocabulary x 4 hidden x directions floats) fuse_embedding_lstm builds: a larger
#: vocabulary keeps the Gather and the per-call projection rather than hold that much memory.
MAX_PROJECTED_TABLE_BYTES = 64 << 20


def fuse_embedding_lstm(net) -> None:
    """Gather of a constant float32 table's rows by int64 token ids whose one reader is an LSTM's X (through the
    Transpose swapping batch and sequence that torch's batch_first export writes, and the QuantizeLinear /
    DequantizeLinear pair of a QDQ model, per tensor: those run on the table instead), the LSTM on the default
    cell: one nnkern.EmbeddingLSTM step, which projects every row of the table once, at load, and copies a token's
    projected row per step instead of the input projection's GEMM (seed I17; the same bits: F32Lstm::project is
    the projection run() computes, and each element of the table goes through the same Q / DQ)."""
    users = net.consumers()
    producer = {o: n for n in net.nodes for o in n.outputs if o}
    for lstm in list(net.nodes):
        if lstm.op != "LSTM" or not lstm.inputs or not lstm.inputs[0] or not _default_lstm(net, lstm):
            continue
        chain, v, transposed = [lstm], lstm.inputs[0], False
        while True:  # back from X through the single-reader moves and per-tensor Q / DQ
            p = producer.get(v)
            if p is None or _only_reader(net, users, v) is not chain[0]:
                p = None
                break
            if p.op == "Transpose" and list(p.attr("perm") or []) == [1, 0, 2] and not transposed:
                transposed = True
            elif not (p.op in _ROWWISE and all(i == "" or (net.const(i) is not None and net.const(i).size == 1)
                                                for i in p.inputs[1:])):
                break
            chain.insert(0, p)
            v = p.inputs[0]
        if p is None or p.op != "Gather" or p.attr("axis", 0) != 0:
            continue
        g = p
        table, ids = net.const(g.inputs[0]), net.values[g.inputs[1]]
        if table is None or table.ndim != 2 or table.dtype != np.float32 or ids.dtype != 7 or len(ids.shape) != 2:
            continue  # float32 rows, int64 (batch, seq) or (seq, batch) ids
        directions, gates = net.values[lstm.inputs[2]].shape[:2]  # R: (directions, 4 hidden, hidden)
        if table.shape[0] * gates * directions * 4 > MAX_PROJECTED_TABLE_BYTES:
            continue
        for n in chain[:-1]:  # the table through the Q / DQ steps, in order
            if n.op in _ROWWISE:
                consts = [constant(table)] + [cpp_constant(net.values[i].const) if i else None for i in n.inputs[1:]]
                table = _C.graph_evaluate(n.op, n.name, n.attrs, consts, 1)[0].numpy()
        if table.dtype != np.float32:
            continue
        rowwise = any(n.op in _ROWWISE for n in chain)
        name = net.add_constant(table, f"{g.inputs[0]}::rows") if rowwise else g.inputs[0]
        inputs = list(lstm.inputs[1:]) + [""] * (8 - len(lstm.inputs))
        ids_batch_first = bool(lstm.attr("layout", 0)) != transposed
        fused = Node("nnkern.EmbeddingLSTM", lstm.name, [g.inputs[1]] + inputs + [name], list(lstm.outputs),
                     dict(lstm.attrs, ids_batch_first=("i", int(ids_batch_first))),
                     "+".join(n.sources for n in [g] + chain))
        _replace_chain(net, fused, [g] + chain)
        users = net.consumers()
        producer = {o: n for n in net.nodes for o in n.outputs if o}
