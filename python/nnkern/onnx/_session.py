"""InferenceSession: onnxruntime's interface over plans compiled for each set of input shapes."""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .. import _C, _precision
from .._arrays import as_array, c_aligned
from .._isa import _check_isa_name
from . import _lower, _quant
from ._compile import compile_plan, optimizations
from ._graph import DTYPES, Model
from ._model import MAX_TENSOR_BYTES, load_model, strip_initializers, with_initializers

#: Plans kept per session (one per set of input shapes), least recently used dropped first.
MAX_PLANS = 16
#: An input with at most this many elements may be one whose values a plan depends on (a shape fed as an input).
MAX_SPECIALIZED = 4096


def _declared_elements(info) -> int:
    if info.dims is None or not all(isinstance(d, int) for d in info.dims):
        return MAX_SPECIALIZED  # unknown: decided by the value given (checked when fed)
    return int(np.prod(info.dims, dtype=np.int64))


class NodeArg:
    """An input or output as onnxruntime describes it: name, shape (symbolic dimensions as strings, unknown
    ones as None) and type ("tensor(float)", ...)."""

    def __init__(self, name: str, shape, type_: str):
        self.name, self.shape, self.type = name, shape, type_

    def __repr__(self) -> str:
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape})"


class Profile:
    """One profiled run: each step's time, and the times summed by op kind."""

    def __init__(self, steps: list, total: float):
        self.steps = steps  # dicts: index, op, nodes, detail, seconds
        self.total_seconds = total
        by_op: dict = {}
        for s in steps:
            t = by_op.setdefault(s["op"], [0, 0.0])
            t[0] += 1
            t[1] += s["seconds"]
        self.by_op = dict(sorted(by_op.items(), key=lambda kv: -kv[1][1]))  # op -> [steps, seconds]

    def __str__(self) -> str:
        step_sum = sum(s["seconds"] for s in self.steps) or 1e-30
        lines = [f"{'op':<28}{'steps':>6}{'ms':>10}{'share':>8}"]
        for op, (count, sec) in self.by_op.items():
            lines.append(f"{op:<28}{count:>6}{sec * 1e3:>10.3f}{100 * sec / step_sum:>7.1f}%")
        lines.append(f"{'all steps':<28}{len(self.steps):>6}{step_sum * 1e3:>10.3f}")
        lines.append(f"{'whole run':<28}{'':>6}{self.total_seconds * 1e3:>10.3f}")
        return "\n".join(lines)


class InferenceSession:
    """Runs an ONNX model on nnkern's kernels, as ``onnxruntime.InferenceSession`` does.

    model: a path, the model's bytes or an ``onnx.ModelProto``. num_threads: at most this many threads for this
    session's runs (default: the pool's, ``nnkern.get_num_threads()``). max_isa: an instruction-set cap of the
    session's own (as ``nnkern.max_isa``; the process's cap still applies). optimize: True (the optimizations of
    ``nnkern.onnx.OPTIMIZATIONS`` but those of ``nnkern.onnx.DEFAULT_OFF``, which run only where named), False (none:
    each node as written) or a dict turning some on or off, e.g. ``{"fuse_activations": False}``; float results
    stay within the float bound either way, and integer ones keep their bits (fuse_qdq off runs an INT8 model's
    float emulation instead). mode: "latency" (each run's steps use
    the threads together) or "throughput" (a batch is split into one contiguous part per thread, each part run
    whole on its thread through a one-thread plan, the weights shared: no synchronization between the threads
    inside a network; for models whose inputs share one symbolic first dimension, the batch, whose outputs start
    with it too, and whose outputs for an image depend on that image alone: ValueError otherwise). precision:
    "highest", "high" or "medium", the float32 precision the convolutions' algorithms are chosen at ("high":
    Winograd for 3x3 stride-1 layers, see ``nnkern.set_float32_precision``); None: the process-wide setting when
    the session is created. tune: True times the applicable algorithms of each INT8 convolution when a plan is
    compiled and keeps the fastest, instead of auto's rule (every algorithm gives the same bits, so results do not
    change; compiling takes longer, and each algorithm timed keeps its packed weights). Extra keyword arguments of
    onnxruntime's (``sess_options``, ``providers``, ``provider_options``) are accepted and ignored, so the line
    that creates an onnxruntime session changes only its class.

    The model is read and checked at once; operators, attributes or element types nnkern cannot run raise
    NotImplementedError here, naming the node. A plan is compiled for each set of input shapes on first use and
    cached (all of them at once when the model declares fixed shapes). Sessions are thread-safe and picklable
    (the model's bytes are stored; plans are rebuilt where unpickled).
    """

    def __init__(self, model, *, num_threads: int | None = None, max_isa: str | None = None,
                 optimize: bool | dict = True, mode: str = "latency", precision: str | None = None,
                 tune: bool = False, sess_options=None, providers=None, provider_options=None, **kwargs):
        if num_threads is not None:
            if isinstance(num_threads, bool) or not isinstance(num_threads, (int, np.integer)) or num_threads < 1:
                raise ValueError(f"num_threads must be a positive integer, got {num_threads!r}")
        if max_isa is not None:
            _check_isa_name(max_isa)
        if mode not in MODES:
            raise ValueError(f"mode must be one of {list(MODES)}, got {mode!r}")
        precision = _precision.resolve(_precision.check_precision(precision, allow_none=True))
        if not isinstance(tune, (bool, np.bool_)):
            raise TypeError(f"tune must be a bool, got {type(tune).__name__}")
        self._options = dict(num_threads=None if num_threads is None else int(num_threads), max_isa=max_isa,
                             optimize=optimizations(optimize), mode=mode, precision=precision, tune=bool(tune))
        self._load(load_model(model))
        self._setup()

    def _load(self, proto) -> None:
        """The model's graph and constants from proto. Pickling rebuilds the model from its structure and the
        constants: no serialized copy of the weights is kept. Returns before anything is compiled, so that the proto
        (whose memory outlives its emptied fields) is freed first."""
        self._model = Model(proto)
        self._skeleton, self._initializers = strip_initializers(proto)

    def _setup(self) -> None:
        self._layers = _C.GraphLayers()
        self._plans: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self._inputs = [NodeArg(i.name, i.dims, i.type) for i in self._model.inputs]
        self._outputs = [NodeArg(o.name, o.dims, o.type) for o in self._model.outputs]
        self._input_index = {i.name: k for k, i in enumerate(self._model.inputs)}
        # Per input, what each run checks: name, dtype, the declared dims (None: any shape) and their ONNX type.
        self._input_checks = [(i.name, np.dtype(DTYPES[i.dtype]), None if i.dims is None else tuple(i.dims), i.type)
                              for i in self._model.inputs]
        self._output_index = {o.name: k for k, o in enumerate(self._model.outputs)}
        self._specialized: set = set()  # inputs whose values the plans depend on (shapes, axes, sizes fed as inputs)
        self._workers = None  # throughput mode's (count, ThreadPoolExecutor), started on first use
        self._check_ops()
        if self._options.get("mode") == "throughput":
            self._check_batch_axis()
        static = all(i.dims is not None and all(isinstance(d, int) for d in i.dims) for i in self._model.inputs)
        if static:  # every shape known: compile now, so every error shows at load
            try:
                self._plan(tuple(tuple(i.dims) for i in self._model.inputs), None)
            except _C.GraphNeedsConstant as e:
                if not self._mark_specialized(e):
                    raise NotImplementedError(e.args[0]) from None

    def _check_ops(self) -> None:
        known = set(_C.graph_ops()) | _LOWERED | _FOLDED
        for n in self._model.nodes:
            if n.op not in known:
                raise NotImplementedError(f"{n.op} node {n.name!r}: the operator {n.op} is not supported (see "
                                          f"nnkern.onnx.supported_ops())")

    # -- onnxruntime's interface
    def get_inputs(self) -> list:
        return list(self._inputs)

    def get_outputs(self) -> list:
        return list(self._outputs)

    def get_modelmeta(self):
        return self._model

    def run(self, output_names, input_feed: dict, run_options=None) -> list:
        """The outputs named (all if None), in that order, for the inputs in input_feed {name: array}."""
        arrays, shapes = self._feed(input_feed)
        if self._options.get("mode") == "throughput":
            parts = self._threads()
            if parts > 1 and shapes and shapes[0][0] > 1:
                return self._run_split(output_names, arrays, min(parts, shapes[0][0]))
        compiled = self._plan(shapes, arrays)
        outputs = compiled.plan.run(arrays, _VERBOSE, False)
        return self._select(compiled, outputs, output_names)

    def _run_split(self, output_names, arrays: list, parts: int) -> list:
        """Throughput mode: the batch in `parts` contiguous parts, each through a one-thread plan on a thread of
        its own; the outputs concatenated back in order."""
        bounds = np.linspace(0, arrays[0].shape[0], parts + 1).astype(int)
        chunks = [[a[b:e] for a in arrays] for b, e in zip(bounds[:-1], bounds[1:])]

        def run_part(chunk):
            compiled = self._plan(tuple(a.shape for a in chunk), chunk, threads=1)
            return self._select(compiled, compiled.plan.run(chunk, _VERBOSE, False), output_names)

        with self._lock:
            if self._workers is None or self._workers[0] < parts - 1:
                self._workers = (parts - 1, ThreadPoolExecutor(parts - 1, thread_name_prefix="nnkern-session"))
            workers = self._workers[1]
        later = [workers.submit(run_part, c) for c in chunks[1:]]  # the other parts on the session's threads,
        results = [run_part(chunks[0])] + [f.result() for f in later]  # the first on this one
        for chunk, outs in zip(chunks, results):
            if any(o.ndim == 0 or o.shape[0] != len(chunk[0]) for o in outs):
                raise ValueError("mode='throughput': an output's first dimension is not the batch (a part of "
                                 f"{len(chunk[0])} inputs gave shapes {[o.shape for o in outs]}); use the latency mode")
        return [np.concatenate(outs) for outs in zip(*results)]

    def _threads(self) -> int:
        return self._options["num_threads"] or _C.get_num_threads()

    def _check_batch_axis(self) -> None:
        """The inputs share one symbolic first dimension, the batch; no output declares a fixed first dimension
        (exporters name an output's batch dimension as they like; run checks the parts' outputs)."""
        first = {None if not v.dims else v.dims[0] for v in self._model.inputs}
        fixed = [o.name for o in self._model.outputs if not o.dims or isinstance(o.dims[0], int)]
        if len(first) != 1 or not isinstance(next(iter(first)), str) or fixed:
            raise ValueError("mode='throughput' splits the batch across threads: every input of the model must have "
                             "the same symbolic first dimension (the batch), and every output a first dimension "
                             f"that is not fixed; this model's inputs start with {sorted(map(str, first))}"
                             + (f", outputs {fixed} have a fixed or no first dimension" if fixed else ""))

    # -- nnkern's own
    def profile(self, input_feed: dict, repeats: int = 1) -> Profile:
        """Runs once untimed, then `repeats` times timing each step; returns the fastest run's times."""
        arrays, shapes = self._feed(input_feed)
        compiled = self._plan(shapes, arrays)
        compiled.plan.run(arrays, False, False)
        best = None
        for _ in range(max(1, int(repeats))):
            t0 = time.perf_counter()
            _, times = compiled.plan.run(arrays, False, True)
            total = time.perf_counter() - t0
            if best is None or total < best[1]:
                best = (times, total)
        info = compiled.plan.steps()
        steps = [dict(index=i, op=info[i]["op"], nodes=info[i]["nodes"], detail=info[i]["detail"], seconds=sec)
                 for i, sec in best[0]]
        return Profile(steps, best[1])

    def describe(self, input_feed_or_shapes=None) -> str:
        """The compiled plan, one line per step: the model's nodes it covers, the op, algorithm and kernel, the
        output shape and bytes; then the memory it plans. For the shapes given ({name: shape or array}), else the
        last plan compiled (or the model's declared shapes)."""
        compiled = self._describe_plan(input_feed_or_shapes)
        plan = compiled.plan
        lines = []
        for i, s in enumerate(plan.steps()):
            outs = [plan.desc(t) for t in s["outputs"]]
            shapes = " ".join(f"{np.dtype(DTYPES[d]).name}[{'x'.join(map(str, sh))}]" for d, sh in outs)
            nbytes = sum(int(np.prod(sh, dtype=np.int64)) * np.dtype(DTYPES[d]).itemsize for d, sh in outs)
            detail = f" [{s['detail']}]" if s["detail"] else ""
            lines.append(f"{i:4d} {s['op']}{detail} -> {shapes} {_mib(nbytes)}  <- {s['nodes'] or s['name']}")
        lines.append(f"steps: {len(lines)}; intermediates: {_mib(plan.arena_bytes)} planned "
                     f"({_mib(plan.unplanned_bytes)} unshared); packed layers: {self._layers.count}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<nnkern.onnx.InferenceSession: {len(self._model.nodes)} nodes, inputs {self._inputs}>"

    def __str__(self) -> str:
        try:
            return self.describe()
        except (ValueError, NotImplementedError):
            return repr(self)

    def _model_bytes(self) -> bytes:
        """The model serialized, as loaded (external data included)."""
        constants = {n: self._model.constants[n].numpy() for n in self._initializers}
        return with_initializers(self._skeleton, self._initializers, constants)

    def __getstate__(self):
        return {"bytes": self._model_bytes(), "options": self._options}

    def __setstate__(self, state):
        import onnx
        self._options = state["options"]
        proto = onnx.ModelProto()
        proto.ParseFromString(state["bytes"])
        self._load(proto)
        del proto
        self._setup()

    # -- internals
    def _feed(self, input_feed: dict):
        if not isinstance(input_feed, dict):
            raise TypeError(f"input_feed must be a dict {{input name: array}}, got {type(input_feed).__name__}")
        unknown = [k for k in input_feed if k not in self._input_index]
        if unknown:
            raise ValueError(f"unknown input {unknown[0]!r}; the model's inputs: "
                             f"{[i.name for i in self._inputs]}")
        arrays, shapes, symbols = [], [], {}
        for name, want, dims, onnx_type in self._input_checks:
            if name not in input_feed:
                raise ValueError(f"input {name!r} is missing")
            a = as_array(input_feed[name], name)
            if a.dtype != want:
                raise TypeError(f"input {name!r} must have dtype {want} ({onnx_type}), got {a.dtype}")
            shape = a.shape
            if dims is not None:
                if len(shape) != len(dims):
                    raise ValueError(f"input {name!r} must have rank {len(dims)} (shape {list(dims)}), "
                                     f"got shape {shape}")
                for k, (d, n) in enumerate(zip(dims, shape)):
                    if isinstance(d, int):
                        if d > 0 and d != n:
                            raise ValueError(f"input {name!r}: dimension {k} must be {d}, got {n} "
                                             f"(shape {shape}, the model declares {list(dims)})")
                    elif isinstance(d, str) and symbols.setdefault(d, n) != n:
                        raise ValueError(f"input {name!r}: dimension {k} ({d!r}) is {n}, but {d!r} is "
                                         f"{symbols[d]} in another input")
            if a.nbytes > MAX_TENSOR_BYTES:
                raise ValueError(f"input {name!r} is larger than {MAX_TENSOR_BYTES} bytes")
            arrays.append(c_aligned(a))  # (np.ascontiguousarray keeps a misaligned array as it is)
            shapes.append(shape)
        return arrays, tuple(shapes)

    def _plan(self, shapes: tuple, arrays, threads: int | None = None):
        """The plan for these input shapes (and the values of the inputs plans depend on), compiled on first use.
        An input that turns out to feed a shape, axes or a size (GraphNeedsConstant) joins those inputs."""
        with self._lock:
            while True:
                names = sorted(self._specialized) if self._specialized else ()
                if arrays is None and names:
                    raise _C.GraphNeedsConstant("the plan depends on input values", "", 0)
                values = {n: arrays[self._input_index[n]] for n in names} if names else {}
                key = (shapes, tuple((n, values[n].tobytes()) for n in names) if names else (), threads)
                compiled = self._plans.get(key)
                if compiled is not None:
                    self._plans.move_to_end(key)
                    return compiled
                o = self._options
                try:
                    compiled = compile_plan(self._model, list(shapes), self._layers,
                                            threads if threads is not None else o["num_threads"] or 0,
                                            o["max_isa"] or "", optimize=o["optimize"], values=values,
                                            precision=o.get("precision", "highest"), tune=o.get("tune", False))
                except _C.GraphNeedsConstant as e:
                    if arrays is None or not self._mark_specialized(e):
                        raise
                    continue
                self._plans[key] = compiled
                if len(self._plans) > MAX_PLANS:
                    self._plans.popitem(last=False)
                return compiled

    def _mark_specialized(self, e) -> bool:
        """Marks the graph inputs behind the node input that must be constant (the error names them); False if
        there are none new or they are too large (the value is computed from data)."""
        sources = e.args[3] if len(e.args) > 3 else []
        small = {v for v in sources if _declared_elements(self._model.inputs[self._input_index[v]]) <= MAX_SPECIALIZED}
        new = small - self._specialized
        self._specialized |= new
        return bool(new)

    def _describe_plan(self, arg):
        if arg is None:
            with self._lock:
                if self._plans:
                    return next(reversed(self._plans.values()))
            dims = [i.dims for i in self._model.inputs]
            if any(d is None or not all(isinstance(v, int) for v in d) for d in dims):
                raise ValueError("the model's input shapes are symbolic: pass the shapes to describe "
                                 "({name: shape})")
            return self._plan(tuple(tuple(d) for d in dims), None)
        if all(hasattr(arg[i.name], "shape") for i in self._model.inputs):
            arrays, shapes = self._feed(arg)
            return self._plan(shapes, arrays)
        shapes = [tuple(int(d) for d in arg[i.name]) for i in self._model.inputs]
        return self._plan(tuple(shapes), None)

    def _select(self, compiled, outputs: list, output_names) -> list:
        result = [outputs[v] if kind == "plan" else np.array(v) for kind, v in compiled.outputs]
        if output_names is None:
            return result
        if isinstance(output_names, str):
            raise TypeError("output_names must be a list of names or None")
        picked = []
        for name in output_names:
            if name not in self._output_index:
                raise ValueError(f"unknown output {name!r}; the model's outputs: {[o.name for o in self._outputs]}")
            picked.append(result[self._output_index[name]])
        return picked


#: The session's ways of using its threads (InferenceSession's mode).
MODES = ("latency", "throughput")


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.2f} MiB" if n >= 1 << 20 else f"{n / 1024:.1f} KiB"


#: Operators the compiler rewrites into nnkern's own ops or newer ones (no C++ op of that name): Upsample is read
#: as a Resize (_graph).
_LOWERED = (set(_lower._LOWERINGS) - _lower.INTERNAL) | set(_quant.EXPANSIONS) | {"Constant", "Upsample"}
#: Operators folded into their neighbours where they can be (a BatchNormalization after a Conv).
_FOLDED = {"BatchNormalization"}

from .. import _verbose as _verbose_module  # noqa: E402

_VERBOSE = bool(_verbose_module.ENABLED)
