"""Compiling a model for one set of input shapes into a C++ plan (``_C.GraphPlan``).

1. lowering: the convolutional ops become nnkern's NHWC ops between layout transposes (seed I3), batch norm
   folded into the convolution before it (``_lower``);
2. constants folded and every value's type and shape inferred by the C++ ops themselves (``_C.graph_infer``,
   ``_C.graph_evaluate``: the same code the plan runs);
3. the transposes pushed down through layout-agnostic ops until inverse pairs meet and cancel, so a network
   converts its layout once at the input and once at the output; activations fused into the convolutions
   (``_layout``, ``_fuse``);
4. dead nodes dropped, and the plan emitted: steps, constants, inputs and outputs.
"""
from __future__ import annotations

import numpy as np

from .. import _C
from . import _fuse, _layout, _lower, _quant
from ._graph import DTYPES, Model, Node, PermutedConstant, constant, cpp_constant

_OPS = frozenset(_C.graph_ops())
#: Ops never evaluated at compile time even when their inputs are constant (none yet: every op is deterministic).
NO_FOLD: frozenset = frozenset()
#: Ops whose outputs depend only on their input's shape: constants once the plan's shapes are known, whatever the
#: input's values (Shape -> Gather -> Concat -> Reshape chains then fold into a constant shape).
SHAPE_ONLY = frozenset({"Shape", "Size"})
#: Constant outputs larger than this stay computed at run time (a ConstantOfShape of a huge shape, say).
MAX_FOLDED_BYTES = 64 << 20

#: The plan's optimizations, each switchable (``InferenceSession(model, optimize={"fuse_activations": False})``):
#: fold_batch_norm: a BatchNormalization after a convolution folded into its weights; fuse_qdq: DequantizeLinear -> Conv
#: / MatMul / Add / GlobalAveragePool (-> QuantizeLinear) as one quantized op, and the ops that commute with
#: quantization run on the quantized tensor (a DequantizeLinear before a move runs after it); quantized_lookup: the
#: elementwise work between a DequantizeLinear and a QuantizeLinear (_tables) as a 256-entry table on the quantized
#: tensor; push_transposes: the layout transposes around the NHWC ops cancelled between neighbours (and one before a
#: DepthToSpace / SpaceToDepth read through by it); quantize_to_nhwc: an INT8 network input's QuantizeLinear and the
#: layout Transpose after it as one pass that writes the NHWC bytes; fuse_matmul_bias: a float32 MatMul's bias Add run
#: in the GEMM's epilogue; fuse_activations: an activation after a convolution or GEMM run in its epilogue; fuse_gelu:
#: GELU exported as Div / Erf / Add / Mul / Mul run as one Gelu op; fuse_inverted_residual: MobileNet-v2's blocks band
#: by band in cache; fuse_channel_shuffle: ShuffleNet's Concat, channel shuffle and halving Slices in NHWC as one pass
#: (after push_transposes); fuse_residual_add: a shortcut's Add (and the activation after it) in the epilogue of the
#: convolution producing one operand; fuse_quantized_residual_add: the same for an INT8 convolution and the QLinearAdd
#: after it, each tile added as it is stored (off by default: slower so far, bench/decisions.md); fuse_lookup: a table
#: lookup (quantized_lookup's) after an INT8 convolution applied to each block the convolution stores, while it is in
#: cache; fuse_upsampling: a nearest upsampling by integer factors read by one convolution is never written out: the
#: convolution reads the source pixels through its indirection buffer; fuse_embedding_lstm: an embedding table's Gather
#: read by an LSTM as one step that projects the table once and copies its rows per token (seed I17); concat_in_place: a
#: Concat input that only the Concat reads written by its producer (a convolution, a table lookup, a nearest Resize; any
#: step where the input is one contiguous block) straight into its place in the Concat's output, which then copies
#: nothing for it.
OPTIMIZATIONS = ("fold_batch_norm", "fuse_qdq", "quantized_lookup", "push_transposes", "quantize_to_nhwc",
                 "fuse_matmul_bias", "fuse_activations", "fuse_gelu", "fuse_inverted_residual", "fuse_channel_shuffle",
                 "fuse_residual_add", "fuse_quantized_residual_add", "fuse_lookup", "fuse_upsampling",
                 "fuse_embedding_lstm", "concat_in_place")
#: Off unless asked for by name: fuse_quantized_residual_add (its tiles go through the buffered output stage, which
#: costs ResNet-50's convolutions more than the QLinearAdd steps it saves; bench/decisions.md).
DEFAULT_OFF: frozenset = frozenset({"fuse_quantized_residual_add"})


def optimizations(optimize) -> frozenset:
    """The optimizations ``optimize`` asks for: True (the defaults: all but DEFAULT_OFF), False (none), or
    {name: bool} (the defaults, with these turned on or off)."""
    if isinstance(optimize, bool):
        return frozenset(k for k in OPTIMIZATIONS if k not in DEFAULT_OFF) if optimize else frozenset()
    if not isinstance(optimize, dict):
        raise TypeError(f"optimize must be a bool or a dict {{name: bool}}, got {type(optimize).__name__}")
    unknown = [k for k in optimize if k not in OPTIMIZATIONS]
    if unknown:
        raise ValueError(f"unknown optimization {unknown[0]!r}; the plan's optimizations: {list(OPTIMIZATIONS)}")
    if not all(isinstance(v, bool) for v in optimize.values()):
        raise TypeError("optimize's values must be bools")
    return frozenset(k for k in OPTIMIZATIONS if optimize.get(k, k not in DEFAULT_OFF))


class Value:
    __slots__ = ("dtype", "shape", "const")

    def __init__(self, dtype: int, shape: tuple, const=None):
        self.dtype, self.shape, self.const = dtype, tuple(shape), const

    def spec(self):
        """How _C.graph_infer takes it: the constant itself, or (dtype, shape)."""
        return cpp_constant(self.const) if self.const is not None else (self.dtype, list(self.shape))


class Net:
    """One plan's working graph: nodes (kept in a valid order by the passes, re-sorted before emission), values
    with their types, shapes and constant data."""

    def __init__(self, model: Model, shapes: list, values: dict):
        self.model = model
        self.nodes = [n.copy() for n in model.nodes]
        self.inputs = [i.name for i in model.inputs]
        self.outputs = [o.name for o in model.outputs]
        self.values: dict[str, Value] = {}
        for info, shape in zip(model.inputs, shapes):
            if info.name in values:
                c = constant(values[info.name])
                self.values[info.name] = Value(c.dtype, c.shape, c)
            else:
                self.values[info.name] = Value(info.dtype, shape)
        for name, c in model.constants.items():
            self.values[name] = Value(c.dtype, c.shape, c)
        self._names = set(self.values) | {o for n in self.nodes for o in n.outputs}
        self._count = 0
        self.producer: dict[str, Node] = {o: n for n in self.nodes for o in n.outputs if o}

    # -- names and values
    def fresh(self, hint: str) -> str:
        while True:
            self._count += 1
            name = f"{hint}::{self._count}"
            if name not in self._names:
                self._names.add(name)
                return name

    def const(self, name: str):
        v = self.values.get(name) if name else None
        return None if v is None or v.const is None else v.const.numpy()

    def add_constant(self, array, hint: str, key=None, source: str = "") -> str:
        """A new constant value; `key` shares it between the plans of a session (a weight derived from the value
        `source`, which the key then includes by identity: a plan for other values of an input computes its own)."""
        if key is not None and source:
            origin = self.values[source].const
            key = (key, id(origin))
        entry = self.model.derived.get(key) if key is not None else None
        c = entry[1] if entry is not None else None
        if c is None:
            c = constant(array)
            if key is not None:
                # The entry holds the source constant, so its id is not reused while the entry lives.
                self.model.derived[key] = (self.values[source].const if source else None, c)
        name = self.fresh(hint)
        self.values[name] = Value(c.dtype, c.shape, c)
        return name

    def hold_once(self, source: str, derived: str, grouped: tuple, perm: tuple) -> None:
        """The model's constant `source`, whose values the new constant `derived` holds in another layout (the
        source is derived's reshaped to `grouped`, axes permuted by `perm`, reshaped back), kept from now on as a
        view of derived (PermutedConstant), for this plan and the session's next ones: its own bytes are freed."""
        c = self.model.constants.get(source)
        if c is None or isinstance(c, PermutedConstant) or self.values[source].const is not c:
            return  # not the model's own, or already a view
        view = PermutedConstant(self.values[derived].const, grouped, perm, c.shape)
        assert view.dtype == c.dtype and np.prod(grouped) == np.prod(c.shape)
        for key, (origin, made) in list(self.model.derived.items()):
            if origin is c:  # derived entries key on their source's identity, and hold it: now the view's
                del self.model.derived[key]
                self.model.derived[(key[0], id(view))] = (view, made)
        self.model.constants[source] = view
        self.values[source] = Value(c.dtype, c.shape, view)

    def infer(self, node: Node) -> None:
        """Types and shapes of the node's outputs, from the C++ op (which refuses what it cannot run)."""
        specs = [self.values[i].spec() if i else None for i in node.inputs]
        try:
            inferred = _C.graph_infer(node.op, node.name, node.attrs, specs, len(node.outputs))
        except _C.GraphNeedsConstant as e:
            raise self.needs_constant(node, e.args[2], e.args[0]) from None
        for name, (dtype, shape) in zip(node.outputs, inferred):
            if name:
                self.values[name] = Value(dtype, shape)
                self.producer[name] = node

    def needs_constant(self, node: Node, index: int, message: str):
        """The error for an input of `node` that must be known when the plan is built: it names the graph inputs
        the value comes from (the session plans for their values where they are small)."""
        sources, todo, seen = set(), [node.inputs[index] if index < len(node.inputs) else ""], set()
        while todo:
            v = todo.pop()
            if not v or v in seen:
                continue
            seen.add(v)
            if v in self.inputs:
                sources.add(v)
            elif v in self.producer:
                todo.extend(self.producer[v].inputs)
        return _C.GraphNeedsConstant(message, node.name, index, sorted(sources))

    def consumers(self) -> dict:
        users: dict[str, list] = {}
        for n in self.nodes:
            for i in n.inputs:
                if i:
                    users.setdefault(i, []).append(n)
        return users

    # -- passes
    def fold_and_infer(self) -> None:
        """Each node in order: lowered onto nnkern's ops if it is one that is (its inputs' shapes are known by then),
        evaluated if its inputs are all constant, else its outputs' types and shapes inferred."""
        kept = []
        todo = list(reversed(self.nodes))
        while todo:
            n = todo.pop()
            lower = _lower.lowering(n.op)
            if lower is not None:
                todo.extend(reversed(lower(self, n)))
                continue
            missing = [i for i in n.inputs if i and i not in self.values]
            if missing:
                raise ValueError(f"{n.op} node {n.name!r}: input {missing[0]!r} has no value")
            if n.op not in _OPS:
                raise NotImplementedError(f"{n.op} node {n.name!r}: the operator {n.op} is not supported (see "
                                          f"nnkern.onnx.supported_ops())")
            if n.op in SHAPE_ONLY and n.inputs and n.inputs[0]:
                self.infer(n)  # the C++ op checks the node
                c = constant(_shape_value(n, self.values[n.inputs[0]].shape))
                self.values[n.outputs[0]] = Value(c.dtype, c.shape, c)
                continue
            consts = [self.values[i].const if i else None for i in n.inputs]
            if n.op == "Identity" and consts and consts[0] is not None:
                # A constant under another name (torch's export routes shared weights through Identity): the same
                # constant, not an evaluated copy.
                v = self.values[n.inputs[0]]
                self.values[n.outputs[0]] = Value(v.dtype, v.shape, v.const)
                continue
            foldable = n.op not in NO_FOLD and all(c is not None for c, i in zip(consts, n.inputs) if i)
            if foldable:
                self.infer(n)
                if all(not o or _nbytes(self.values[o]) <= MAX_FOLDED_BYTES for o in n.outputs):
                    try:
                        evaluated = _C.graph_evaluate(n.op, n.name, n.attrs, [cpp_constant(c) for c in consts],
                                                      len(n.outputs))
                    except _C.GraphNeedsConstant as e:
                        raise self.needs_constant(n, e.args[2], e.args[0]) from None
                    for name, c in zip(n.outputs, evaluated):
                        if name:
                            self.values[name] = Value(c.dtype, c.shape, c)
                    continue
            else:
                self.infer(n)
            kept.append(n)
        self.nodes = kept

    def drop_dead(self) -> None:
        """The nodes no graph output depends on, removed (in topological order first: fusions may leave a node
        before the producer of an input it took over)."""
        self.sort()
        live = set(self.outputs)
        kept = []
        for n in reversed(self.nodes):
            if any(o in live for o in n.outputs if o):
                kept.append(n)
                live.update(i for i in n.inputs if i)
        self.nodes = kept[::-1]

    def sort(self) -> None:
        """Topological order again after rewrites that appended nodes."""
        produced = {o: n for n in self.nodes for o in n.outputs if o}
        order, state = [], {}

        def visit(n):
            stack = [(n, False)]
            while stack:
                node, done = stack.pop()
                if done:
                    state[id(node)] = 2
                    order.append(node)
                    continue
                if state.get(id(node)):
                    continue
                state[id(node)] = 1
                stack.append((node, True))
                for i in reversed(node.inputs):
                    p = produced.get(i)
                    if p is not None and not state.get(id(p)):
                        stack.append((p, False))

        for n in self.nodes:
            visit(n)
        self.nodes = order


def _shape_value(n: Node, shape: tuple) -> np.ndarray:
    """Shape's or Size's output for an input of this shape (Python's slice clamps start and end as ONNX does)."""
    if n.op == "Size":
        return np.array(int(np.prod(shape, dtype=np.int64)), np.int64)
    return np.array(shape[n.attr("start", 0):n.attr("end", None)], np.int64)


def _nbytes(v: Value) -> int:
    return int(np.prod(v.shape, dtype=np.int64)) * np.dtype(DTYPES[v.dtype]).itemsize


class CompiledPlan:
    """A plan and what the session needs around it: which graph outputs come from where."""

    def __init__(self, plan, outputs: list, input_ids: list, net: Net):
        self.plan = plan
        self.outputs = outputs  # per graph output: ("plan", index) or ("const", array)
        self.input_ids = input_ids
        self.values = {k: (v.dtype, v.shape) for k, v in net.values.items()}


def compile_plan(model: Model, shapes: list, layers, num_threads: int = 0, max_isa: str = "",
                 optimize: frozenset = frozenset(OPTIMIZATIONS), values: dict | None = None,
                 precision: str = "highest", tune: bool = False) -> CompiledPlan:
    """values: the inputs whose values this plan is for (shapes or axes fed as inputs), as constants. optimize:
    the names of OPTIMIZATIONS to apply. precision: the float32 precision each convolution's algorithm is
    chosen at, and at "medium" the MatMul / Gemm / LSTM input products' (bf16, nnkern.set_float32_precision). tune:
    each INT8 convolution's algorithm timed as its step is made (InferenceSession's tune)."""
    net = Net(model, shapes, values or {})
    _lower.prepare(net, optimize)
    net.drop_dead()  # before folding: a weight's DequantizeLinear that fuse_qdq left unread is not evaluated
    net.fold_and_infer()
    if "push_transposes" in optimize:
        _layout.push_transposes(net)
        net.drop_dead()  # the transposes left behind would count as readers
    if "fuse_qdq" in optimize:
        _quant.sink_dequantize(net)
    if "quantize_to_nhwc" in optimize:
        _layout.quantize_to_nhwc(net)
    if "fuse_matmul_bias" in optimize:  # before the activations: MatMul, Add, Relu is then one step
        _fuse.fuse_matmul_bias(net)
    if "fuse_activations" in optimize:
        _fuse.fuse_activations(net)
    if "fuse_gelu" in optimize:
        _fuse.fuse_gelu(net)
    if "fuse_inverted_residual" in optimize:
        _fuse.fuse_inverted_residual(net)
    if "fuse_channel_shuffle" in optimize:
        _fuse.fuse_channel_shuffle(net)
    if "fuse_residual_add" in optimize:  # after the blocks, which take their own
        _fuse.fuse_residual_add(net)
    if "fuse_quantized_residual_add" in optimize:
        _fuse.fuse_quantized_residual_add(net)
    if "fuse_lookup" in optimize:  # after the residual adds, which take a convolution without a table
        _fuse.fuse_lookup(net)
    if "fuse_upsampling" in optimize:  # after the blocks, whose layers read their inputs as they are
        _fuse.fuse_upsampling(net)
    if "fuse_embedding_lstm" in optimize:
        _fuse.fuse_embedding_lstm(net)
    net.drop_dead()
    net.sort()
    if tune:
        for n in net.nodes:
            if n.op == "nnkern.QConv":
                n.attrs = dict(n.attrs, tune=("i", 1))
    if precision != "highest":
        for n in net.nodes:
            if n.op in ("nnkern.Conv", "MatMul", "Gemm", "LSTM"):
                n.attrs = dict(n.attrs, precision=("s", precision))
    return _emit(net, _C.GraphPlan(layers, num_threads, max_isa), "concat_in_place" in optimize)


def _emit(net: Net, plan, join_in_place: bool = True) -> CompiledPlan:
    ids: dict[str, int] = {}
    input_ids = []
    for i, name in enumerate(net.inputs):
        v = net.values[name]
        ids[name] = plan.add_input(v.dtype, list(v.shape), i, name)
        input_ids.append(ids[name])
        if v.const is not None:  # an input whose value this plan is for: its steps read it as a constant
            ids[name] = plan.add_constant(cpp_constant(v.const), name)

    def tensor(name):
        if not name:
            return -1
        if name not in ids:
            ids[name] = plan.add_constant(cpp_constant(net.values[name].const), name)
        return ids[name]

    for n in net.nodes:
        try:
            outs = plan.add_step(n.op, n.name, n.attrs, [tensor(i) for i in n.inputs], len(n.outputs), n.sources,
                                 list(n.outputs))
        except _C.GraphNeedsConstant as e:
            raise net.needs_constant(n, e.args[2], e.args[0]) from None
        for name, t in zip(n.outputs, outs):
            if name:
                ids[name] = t
    outputs, marked, index = [], set(), 0
    steps_out = {o for n in net.nodes for o in n.outputs if o}
    for name in net.outputs:
        v = net.values[name]
        if v.const is not None and name not in steps_out:
            outputs.append(("const", v.const.numpy()))
            continue
        t = ids[name]
        if name not in steps_out or t in marked:  # a graph input, or an output listed twice: a copy of its own
            t = plan.add_step("Identity", f"output::{name}", {}, [t], 1, "", [name])[0]
        plan.mark_output(t, index)
        marked.add(t)
        outputs.append(("plan", index))
        index += 1
    plan.finalize(join_in_place)
    return CompiledPlan(plan, outputs, input_ids, net)
