"""``python -m nnkern bench --op networks``: whole networks through ``nnkern.onnx.InferenceSession`` against
onnxruntime and torch, float and INT8, at each batch size and thread count.

Each network of ``nnkern.bench.models`` (its "bench" size: ImageNet-style 224x224 classifiers, YOLOv3-tiny at 416,
ESPCN 128 -> 384; ``--quick``: the small "test" size) is built once per run from its torch definition (random
weights, measured BatchNorm statistics) and exported to an ONNX file in a temporary folder; its INT8 version is
the QDQ model of ``models.quantize`` (onnxruntime's static quantization, 7-bit weights). Compared, on the same
deterministic inputs and timed interleaved (``harness.interleaved``):

  nnkern       nnkern.onnx.InferenceSession(file, num_threads=threads)
  onnxruntime  the same file, all graph optimizations, intra_op_num_threads=threads
  torch        float: the torch module (eager, inference_mode, channels_last images, torch.set_num_threads);
               int8: torch's eager static quantization of the same definition (``models.torch_quantized``: x86
               engine, its own calibration on the same inputs), image networks only

max diff: max |output - onnxruntime's| / max |onnxruntime's| over the outputs (INT8: also in steps of the output's
quantization; torch's INT8 model is its own quantization, so its difference includes both quantizations'). top-1:
the arg-max of a classifier's logits equals onnxruntime's on k of AGREEMENT inputs. A network nnkern.onnx cannot
run yet (an operator it lacks) is skipped with a note, as is a library that is missing or refuses a network.

Two optional reports (``run(profile=True, memory=True)``, the CLI's --profile and --memory), kept as records of
their own ops so the "networks" records stay as they are:

  networks-profile  nnkern's time by op kind at batch 1 (``InferenceSession.profile``), before (optimize=False:
                    each node as written) and after (optimize=True: every optimization); ``profile_tables``
  networks-memory   each library's peak resident memory growth over creating its session and running it once on
                    the batch, in a fresh process per library (so neither's allocations count for the other);
                    ``memory_table``
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import anchors as _anchors
from . import harness, models
from . import ops as _ops
from .model import _ort_session

NETWORKS = tuple(n for n in models.SPECS if n != "resnet18_full")  # resnet18's bench size is the full one
PRECISIONS = ("float", "int8")
BATCHES = (1, 8)
AGREEMENT = 16  # inputs of the top-1 agreement
#: the former per-network benchmarks, now selections: --op NAME -> (networks, precisions)
ALIASES = {"yolo": (("tiny_yolo",), ("float",)), "mobilenet": (("mobilenet_v2",), ("float",)),
           "qnet": (("resnet18", "mobilenet_v2"), ("int8",)), "espcn": (("espcn",), ("int8",))}


@dataclasses.dataclass
class NetResult(harness.Result):
    network: str = ""
    precision: str = ""
    batch: int = 1
    max_diff: Optional[float] = None  # vs onnxruntime, relative to its max |output|
    steps: Optional[float] = None  # int8: the same difference in steps of the output's quantization
    top1: Optional[Tuple[int, int]] = None  # (agreeing, inputs)


@dataclasses.dataclass
class ProfileResult(NetResult):
    """op "networks-profile": nnkern's fastest profiled run at batch 1; isa "before" (optimize=False) or "after"
    (optimize=True); seconds: the whole run."""
    by_op: Dict[str, List] = dataclasses.field(default_factory=dict)  # op kind -> [steps, seconds]
    plan_steps: int = 0


@dataclasses.dataclass
class MemoryResult(NetResult):
    """op "networks-memory": rate is the peak resident memory growth in MiB (unit "MiB") over creating the
    library's session and running it once, in a fresh process; seconds: that creation and run. planned: nnkern's
    intermediates as describe() plans them."""
    planned: str = ""


class Skip(Exception):
    """nnkern.onnx cannot run this network (yet)."""


class Network:
    """One network at one size: its torch module, its ONNX files (written to ``workdir`` once) and its inputs."""

    def __init__(self, name: str, size: str, workdir: str, input_size: Optional[int] = None):
        import onnx
        self.name, self.size, self.workdir = name, size, workdir
        self.module, _ = models.torch_model(name, size)
        self.feeds = models.feeds(name, size)
        self.input_size = input_size if input_size and self.feeds.kind == "image" else self.feeds.size
        self.paths = {"float": os.path.join(workdir, f"{name}.onnx")}
        onnx.save(models.export_torch(name, size, module=self.module), self.paths["float"])
        self._torch: Dict[str, object] = {}
        self.scales: List[Optional[float]] = []  # per output of the INT8 model: its quantization step

    @property
    def image(self) -> bool:
        return self.feeds.kind == "image"

    def path(self, precision: str) -> str:
        if precision not in self.paths:
            import onnx
            q = models.quantize(onnx.load(self.paths["float"]), "qdq", self.feeds)
            scales = models.output_scales(q)
            self.scales = [scales.get(o.name) for o in q.graph.output]
            self.paths[precision] = os.path.join(self.workdir, f"{self.name}.qdq.onnx")
            onnx.save(q, self.paths[precision])
        return self.paths[precision]

    def inputs(self, batch: int, seed: int = 0) -> dict:
        return self.feeds(batch=batch, size=self.input_size, seed=seed)

    def describe_input(self) -> str:
        f = self.feeds
        return f"{f.channels}x{self.input_size}x{self.input_size}" if self.image else f"{self.input_size} tokens"

    def torch_module(self, precision: str):
        """The float module (channels_last for images) or torch's quantized one, made once."""
        if precision not in self._torch:
            import torch
            if precision == "float":
                m = self.module.to(memory_format=torch.channels_last) if self.image else self.module
            elif not self.image:
                raise NotImplementedError("no eager static quantization of embeddings, LSTMs or attention in torch")
            else:
                m = models.torch_quantized(self.module, self.feeds)
            self._torch[precision] = m
        return self._torch[precision]


def _arrays(y) -> List[np.ndarray]:
    if isinstance(y, (list, tuple)):
        return [np.asarray(a.numpy() if hasattr(a, "numpy") else a) for a in y]
    return [y.numpy()]


#: The call of nnkern's session in throughput mode; its records are nnkern's, with isa "throughput".
THROUGHPUT = "nnkern throughput"
#: The float networks' sessions at a reduced float32 precision ("high": Winograd for 3x3 stride-1 convolutions;
#: "medium": bf16 products), where run() is asked for them; their records are nnkern's, with that isa.
ALSO = ("high", "medium")
#: The records' isa field of each extra nnkern call.
EXTRA_CALLS = {THROUGHPUT: "throughput", **{f"nnkern {p}": p for p in ALSO}}


def nnkern_call(net: Network, precision: str, feeds: dict, threads: int, mode: str = "latency",
                float32_precision: str = "highest") -> Callable:
    """The session's run on the feeds; Skip where nnkern.onnx cannot load or plan the network."""
    import nnkern.onnx
    try:
        sess = nnkern.onnx.InferenceSession(net.path(precision), num_threads=threads, mode=mode,
                                            precision=float32_precision)
        sess.run(None, feeds)
    except NotImplementedError as e:
        raise Skip(str(e).splitlines()[0]) from None
    return lambda: sess.run(None, feeds)


def ort_call(net: Network, precision: str, feeds: dict, threads: int) -> Callable:
    with open(net.path(precision), "rb") as f:
        sess = _ort_session(f.read(), threads)
    return lambda: sess.run(None, feeds)


def torch_call(net: Network, precision: str, feeds: dict, threads: int) -> Callable:
    return _torch_runner(net, net.torch_module(precision), feeds, threads)


def _torch_runner(net: Network, module, feeds: dict, threads: int) -> Callable:
    """The module's call on the feeds (channels_last images), inference mode, `threads` threads."""
    import torch
    _anchors.set_threads(threads)
    x = torch.from_numpy(feeds[net.feeds.name])
    if net.image:
        x = x.contiguous(memory_format=torch.channels_last)

    def call():
        with torch.inference_mode():
            return module(x)
    return call


def torch_compile_call(net: Network, precision: str, feeds: dict, threads: int) -> Callable:
    """torch.compile (inductor) of the float module, where it works on the machine (it needs a C++ compiler); the
    first call, in library_calls, compiles."""
    if precision != "float":
        raise NotImplementedError("float only (torch's INT8 model is its eager quantization)")
    import torch
    if "compiled" not in net._torch:
        net._torch["compiled"] = torch.compile(net.torch_module("float"))
    return _torch_runner(net, net._torch["compiled"], feeds, threads)


MAKERS = {"onnxruntime": ort_call, "torch": torch_call, "torch.compile": torch_compile_call}


def library_calls(net: Network, precision: str, feeds: dict, threads: int,
                  libraries: Optional[Sequence[str]] = None,
                  also: Sequence[str] = ()) -> Tuple[Dict[str, Callable], Dict[str, str]]:
    """({"nnkern": call, library: call...}, {library: why it was left out}); each call has run once. also: float32
    precisions of ALSO a float network also runs at ("nnkern high", "nnkern medium")."""
    calls = {"nnkern": nnkern_call(net, precision, feeds, threads)}
    for level in also if precision == "float" else ():
        calls[f"nnkern {level}"] = nnkern_call(net, precision, feeds, threads, float32_precision=level)
    notes = {}
    if threads > 1 and next(iter(feeds.values())).shape[0] > 1:  # the batch split across the threads too
        try:
            calls[THROUGHPUT] = nnkern_call(net, precision, feeds, threads, mode="throughput")
        except ValueError as e:  # a model the mode cannot split: a note, not a failure
            notes[THROUGHPUT] = f"refused {precision} {net.name}: {str(e).splitlines()[0][:160]}"
    for lib, make in MAKERS.items():
        if libraries is not None and lib not in libraries:
            continue
        try:
            fn = make(net, precision, feeds, threads)
            fn()
            calls[lib] = fn
        except ImportError as e:
            notes[lib] = f"not installed ({e.name})"
        except Exception as e:  # noqa: BLE001 - a library that refuses the network: a note, not a failure
            notes[lib] = f"refused {precision} {net.name}: {type(e).__name__}: {str(e).splitlines()[0][:160]}"
    return calls, notes


def difference(ours: List[np.ndarray], ref: List[np.ndarray]) -> float:
    """max over the outputs of max |ours - ref| / max |ref|."""
    worst = 0.0
    for a, b in zip(ours, ref):
        if a.shape != b.shape:
            return float("inf")
        d = float(np.max(np.abs(a.astype(np.float64) - b))) if b.size else 0.0
        scale = float(np.max(np.abs(b))) if b.size else 0.0
        worst = max(worst, d / scale if scale else (0.0 if d == 0 else float("inf")))
    return worst


def agreement(net: Network, precision: str, threads: int, libraries: Optional[Sequence[str]] = None,
              samples: int = AGREEMENT, also: Sequence[str] = ()) -> Dict[str, Tuple[int, int]]:
    """{library: (inputs whose top-1 class equals onnxruntime's, inputs)} for a classifier (one (N, classes)
    output), over ``samples`` inputs in one batch; {} for other networks or without onnxruntime."""
    if libraries is not None and "onnxruntime" not in libraries:
        return {}
    feeds = net.inputs(samples, seed=1)
    calls, _ = library_calls(net, precision, feeds, threads, libraries, also)
    outs = {lib: _arrays(fn()) for lib, fn in calls.items()}
    ref = outs.get("onnxruntime")
    if ref is None or len(ref) != 1 or ref[0].ndim != 2:
        return {}
    top = ref[0].argmax(axis=1)
    return {lib: (int((y[0].argmax(axis=1) == top).sum()), samples) for lib, y in outs.items() if lib != "onnxruntime"}


def measure(net: Network, precision: str, batch: int, threads: int, *, repeats: int = 7,
            libraries: Optional[Sequence[str]] = None, notes: Optional[Dict[str, str]] = None,
            min_time: float = 0.02, also: Sequence[str] = ()) -> List[NetResult]:
    """One network, precision, batch and thread count: nnkern and each library, interleaved."""
    feeds = net.inputs(batch)
    calls, why = library_calls(net, precision, feeds, threads, libraries, also)
    if notes is not None:
        for lib, msg in why.items():
            notes.setdefault(f"{lib} ({precision} {net.name})", msg)
    timings = harness.interleaved(calls, repeats=repeats, min_time=min_time,
                                  pause_after=_ops._pauses(threads))
    outs = {lib: _arrays(fn()) for lib, fn in calls.items()}
    ref = outs.get("onnxruntime")
    shape = tuple(next(iter(feeds.values())).shape)
    results = []
    for lib, tm in timings.items():
        library, isa = ("nnkern", EXTRA_CALLS[lib]) if lib in EXTRA_CALLS else (lib, "")
        r = NetResult(op="networks", shape=shape, library=library, isa=isa, threads=threads, seconds=tm.median,
                      best_seconds=tm.best, rate=1.0 / tm.median, unit="runs/s", network=net.name,
                      precision=precision, batch=batch)
        if ref is not None and lib != "onnxruntime":
            r.max_diff = difference(outs[lib], ref)
            if precision == "int8" and net.scales and all(net.scales) and r.max_diff != float("inf"):
                r.steps = max(float(np.max(np.abs(a.astype(np.float64) - b))) / s
                              for a, b, s in zip(outs[lib], ref, net.scales))
        results.append(r)
    return results


def profiles(net: Network, precision: str, threads: int, repeats: int = 7) -> List[ProfileResult]:
    """nnkern's time by op kind at batch 1, before (optimize=False) and after (optimize=True) the optimizations."""
    import nnkern.onnx
    feeds = net.inputs(1)
    out = []
    for when, optimize in (("before", False), ("after", True)):
        sess = nnkern.onnx.InferenceSession(net.path(precision), num_threads=threads, optimize=optimize)
        p = sess.profile(feeds, repeats=repeats)
        out.append(ProfileResult(op="networks-profile", shape=tuple(next(iter(feeds.values())).shape),
                                 library="nnkern", isa=when, threads=threads, seconds=p.total_seconds,
                                 best_seconds=p.total_seconds, rate=1.0 / p.total_seconds, unit="runs/s",
                                 network=net.name, precision=precision, batch=1,
                                 by_op={op: list(v) for op, v in p.by_op.items()}, plan_steps=len(p.steps)))
    return out


#: Run by ``peak_memory`` in a fresh process: argv = library, model, inputs (.npz), threads; prints one JSON line.
_MEMORY_CHILD = r"""
import json, resource, sys, time
import numpy as np
lib, path, inputs, threads = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])


def peak_kib():
    # Linux's ru_maxrss keeps the peak of the process this one was forked from (the benchmark's, torch loaded)
    # across exec; VmHWM is this program's own
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return kib / 1024 if sys.platform == "darwin" else kib  # bytes there


try:
    if lib == "nnkern":
        import nnkern.onnx
    else:
        import onnxruntime as ort
    feeds = dict(np.load(inputs))
    before = peak_kib()
    t0 = time.perf_counter()
    if lib == "nnkern":
        sess = nnkern.onnx.InferenceSession(path, num_threads=threads)
    else:  # as model._ort_session (not imported: it would load nnkern into this process)
        so = ort.SessionOptions()
        so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    sess.run(None, feeds)
    out = dict(seconds=time.perf_counter() - t0, kib=peak_kib() - before)
    if lib == "nnkern":
        last = sess.describe(feeds).splitlines()[-1]  # "steps: S; intermediates: X planned (...); ..."
        out["planned"] = last.split("intermediates: ")[1].split(" planned")[0]
except ImportError as e:
    out = dict(error=f"not installed ({e.name})")
except Exception as e:
    out = dict(error=f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:160]}")
print(json.dumps(out))
"""

MEMORY_LIBRARIES = ("nnkern", "onnxruntime")


def peak_memory(net: Network, precision: str, batch: int, threads: int, *,
                libraries: Optional[Sequence[str]] = None,
                timeout: float = 300.0) -> Tuple[List[MemoryResult], Dict[str, str]]:
    """Each library's peak memory growth of loading the network and running it once on the batch, in a fresh
    process each; the results and {library: why it has none}."""
    feeds = net.inputs(batch)
    inputs = os.path.join(net.workdir, f"{net.name}.N{batch}.npz")
    np.savez(inputs, **feeds)
    results, notes = [], {}
    for lib in MEMORY_LIBRARIES:
        if lib != "nnkern" and libraries is not None and lib not in libraries:
            continue
        args = [sys.executable, "-c", _MEMORY_CHILD, lib, net.path(precision), inputs, str(threads)]
        try:
            p = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            notes[lib] = f"no memory figure: timed out after {timeout:g} s"
            continue
        try:
            out = json.loads(p.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):  # the process died without its line (a crash, killed)
            err = (p.stderr.strip().splitlines() or [""])[-1][:160]
            notes[lib] = f"no memory figure: the process exited with {p.returncode} {err}".rstrip()
            continue
        if "error" in out:
            notes[lib] = f"no memory figure: {out['error']}"
            continue
        results.append(MemoryResult(op="networks-memory", shape=tuple(next(iter(feeds.values())).shape),
                                    library=lib, isa="", threads=threads, seconds=out["seconds"],
                                    best_seconds=out["seconds"], rate=out["kib"] / 1024, unit="MiB",
                                    network=net.name, precision=precision, batch=batch,
                                    planned=out.get("planned", "")))
    return results, notes


def select(tokens: Optional[Sequence[str]], op: str = "networks"
           ) -> Tuple[List[str], List[str], Optional[int]]:
    """--shapes: network names, precisions (float, int8) and an input size (the image side), defaulting to every
    network, both precisions and each network's own size; --op yolo / mobilenet / qnet / espcn change the
    defaults to their networks and precision (ALIASES)."""
    tokens = list(tokens or ())
    bad = [t for t in tokens if t not in NETWORKS and t not in PRECISIONS and not (t.isdigit() and int(t) > 0)]
    if bad:
        raise SystemExit(f"--op {op}: --shapes takes network names {NETWORKS}, precisions {PRECISIONS} and an "
                         f"input size, got {bad[0]!r}")
    names, precisions = ALIASES.get(op, (NETWORKS, PRECISIONS))
    sizes = [int(t) for t in tokens if t.isdigit()]
    return ([t for t in tokens if t in NETWORKS] or list(names),
            [p for p in PRECISIONS if p in tokens] or list(precisions), sizes[-1] if sizes else None)


def run(names: Sequence[str], threads_list: Sequence[int], *, precisions: Sequence[str] = PRECISIONS,
        batches: Sequence[int] = BATCHES, size: str = "bench", input_size: Optional[int] = None, repeats: int = 7,
        libraries: Optional[Sequence[str]] = None, min_time: float = 0.02, profile: bool = False,
        memory: bool = False, memory_timeout: float = 300.0, also: Sequence[str] = (),
        progress: Optional[Callable[[str], None]] = print) -> Tuple[List[NetResult], Dict[str, str]]:
    """Every network, precision, batch and thread count; the results and the notes (skipped networks and
    libraries). profile: also the "networks-profile" records (batch 1, each thread count); memory: also the
    "networks-memory" records (each batch and thread count, nnkern and onnxruntime unless ``libraries`` leaves it
    out); also: float32 precisions of ALSO the float networks also run at (nnkern's records with that isa)."""
    results: List[NetResult] = []
    notes: Dict[str, str] = {}
    say = progress or (lambda s: None)
    with tempfile.TemporaryDirectory(prefix="nnkern-networks-") as workdir:
        for name in names:
            t0 = time.perf_counter()
            try:
                net = Network(name, size, workdir, input_size)
            except ImportError as e:
                raise SystemExit(f"the networks are defined in torch and exported with onnx: {e.name} is missing "
                                 f"(pip install torch onnx onnxruntime)") from None
            say(f"[networks] {name} ({net.describe_input()}): built and exported ({time.perf_counter() - t0:.1f} s)")
            for precision in precisions:
                try:
                    net.path(precision)  # the INT8 version: onnxruntime's quantizer
                except ImportError as e:
                    notes[f"{name} {precision}"] = f"skipped: {e.name} is not installed"
                    continue
                except Exception as e:  # noqa: BLE001 - the quantizer refuses the export: a note, not a failure
                    notes[f"{name} {precision}"] = f"skipped: quantize failed: {type(e).__name__}: {e}"
                    continue
                try:
                    top1 = agreement(net, precision, max(threads_list), libraries, also=also)
                    for batch in batches:
                        for t in threads_list:
                            t0 = time.perf_counter()
                            res = measure(net, precision, batch, t, repeats=repeats, libraries=libraries,
                                          notes=notes, min_time=min_time, also=also)
                            calls_by_isa = {isa: call for call, isa in EXTRA_CALLS.items()}
                            for r in res:
                                r.top1 = top1.get(calls_by_isa.get(r.isa, r.library) if r.library == "nnkern"
                                                  else r.library)
                            results += res
                            say(f"[networks {name} {precision} N={batch} t={t}]  " + "  ".join(
                                f"{_label(r)} {r.seconds * 1e3:.2f} ms" for r in res)
                                + f"  ({time.perf_counter() - t0:.1f} s)")
                    for t in threads_list if profile else []:
                        try:
                            results += profiles(net, precision, t, repeats)
                            say(f"[networks {name} {precision} N=1 t={t}] profiled before / after the optimizations")
                        except NotImplementedError as e:  # optimize=False may lack a kernel optimize=True fuses
                            notes[f"{name} {precision} profile"] = f"skipped: {str(e).splitlines()[0]}"
                    for batch, t in [(b, t) for b in batches for t in threads_list] if memory else []:
                        res, why = peak_memory(net, precision, batch, t, libraries=libraries, timeout=memory_timeout)
                        results += res
                        for lib, msg in why.items():
                            notes.setdefault(f"{lib} ({precision} {name} N={batch} t={t} memory)", msg)
                        say(f"[networks {name} {precision} N={batch} t={t}] peak memory growth  " + "  ".join(
                            f"{r.library} {r.rate:.1f} MiB" for r in res))
                except Skip as e:
                    notes[f"{name} {precision}"] = f"skipped: nnkern.onnx cannot run it yet ({e})"
                    say(f"[networks] {name} {precision}: skipped: {e}")
    return results, notes


def _label(r: NetResult) -> str:
    return f"{r.library} ({r.isa})" if r.isa else r.library


def _cell(v: Optional[float], fmt: str = "{:.2g}") -> str:
    return "-" if v is None else fmt.format(v)


def markdown_table(results: Sequence[NetResult], threads: int, notes: Optional[Dict[str, str]] = None) -> str:
    """One table per thread count: a row per network, precision, batch and library."""
    rs = [r for r in results if r.threads == threads and r.op == "networks"]
    lines = [f"**networks, {threads} thread(s)** - median latency; time / nnkern's > 1: nnkern is faster; max diff: "
             "max |output - onnxruntime's| / max |onnxruntime's| (INT8: and in output quantization steps); top-1: "
             "the classifier's arg-max equals onnxruntime's", "",
             "| network | input | precision | batch | library | ms | time / nnkern's | max diff | top-1 |",
             "|---|---|---|---|---|---|---|---|---|"]
    groups: Dict[tuple, List[NetResult]] = {}
    for r in rs:
        groups.setdefault((r.network, r.precision, r.batch), []).append(r)
    for (network, precision, batch), group in groups.items():
        ours = next((r for r in group if r.library == "nnkern" and not r.isa), None)
        for r in sorted(group, key=lambda r: (r.library != "nnkern", r.library, r.isa)):
            ratio = f"{r.seconds / ours.seconds:.2f}x" if ours else "-"
            diff = _cell(r.max_diff) + (f" ({r.steps:.0f} steps)" if r.steps is not None else "")
            top1 = f"{r.top1[0]}/{r.top1[1]}" if r.top1 else "-"
            lines.append(f"| {network} | {'x'.join(map(str, r.shape[1:]))} | {precision} | {batch} | {_label(r)} | {r.seconds * 1e3:.3f} | "
                         f"{ratio} | {diff} | {top1} |")
    if notes:
        lines += [""] + [f"- {k}: {v}" for k, v in notes.items()]
    lines += ["", "Random weights; torch's INT8 model is its own quantization of the definition (7-bit activations), "
              "onnxruntime's and nnkern's the QDQ file (7-bit weights). The host is shared: only ratios within one "
              "run mean anything."]
    return "\n".join(lines)


def charts(results: Sequence[NetResult], threads_list: Sequence[int]):
    """plot.Chart per thread count: ms per library for each network, precision and batch (lower is better)."""
    from . import plot
    out = []
    for t in threads_list:
        rs = [r for r in results if r.threads == t and r.op == "networks"]
        cats = list(dict.fromkeys(f"{r.network} {r.precision} N{r.batch}" for r in rs))
        series: Dict[str, List[Optional[float]]] = {}
        for r in rs:
            series.setdefault(_label(r), [None] * len(cats))[cats.index(f"{r.network} {r.precision} N{r.batch}")] = \
                r.seconds * 1e3
        if cats:
            out.append(plot.Chart(f"networks, {t} thread(s)", "ms", False, cats, series))
    return out


def profile_tables(results: Sequence[NetResult]) -> str:
    """One table per network, precision and thread count of the "networks-profile" records: a row per op kind
    (most time first), its steps, ms and share of all steps' time before and after the optimizations."""
    import nnkern.onnx
    groups: Dict[tuple, Dict[str, ProfileResult]] = {}
    for r in results:
        if isinstance(r, ProfileResult):
            groups.setdefault((r.network, r.precision, r.threads), {})[r.isa] = r
    tables = []
    for (network, precision, threads), g in groups.items():
        runs = (g["before"], g["after"])
        sums = [sum(sec for _, sec in r.by_op.values()) or 1e-30 for r in runs]
        kinds = sorted(set(runs[0].by_op) | set(runs[1].by_op),
                       key=lambda op: -max(r.by_op.get(op, (0, 0.0))[1] for r in runs))
        defaults = [o for o in nnkern.onnx.OPTIMIZATIONS if o not in nnkern.onnx._compile.DEFAULT_OFF]
        lines = [f"**{network} {precision}, batch 1, {threads} thread(s)** - nnkern's time by op kind, before "
                 f"(optimize=False: each node as written) and after (optimize=True: "
                 f"{', '.join(defaults)}); the fastest profiled run; share: of all steps' time", "",
                 "| op | steps before | ms before | share before | steps after | ms after | share after |",
                 "|---|---|---|---|---|---|---|"]
        for op in kinds:
            cells = []
            for r, total in zip(runs, sums):
                n, sec = r.by_op.get(op, (0, 0.0))
                cells += [str(n), f"{sec * 1e3:.3f}", f"{100 * sec / total:.1f}%"] if n else ["-", "-", "-"]
            lines.append(f"| {op} | " + " | ".join(cells) + " |")
        lines.append("| all steps | " + " | ".join(f"{r.plan_steps} | {total * 1e3:.3f} | 100%"
                                                      for r, total in zip(runs, sums)) + " |")
        lines.append(f"| whole run | | {runs[0].seconds * 1e3:.3f} | | | {runs[1].seconds * 1e3:.3f} | |")
        tables.append("\n".join(lines))
    return "\n\n".join(tables)


def memory_table(results: Sequence[NetResult], notes: Optional[Dict[str, str]] = None) -> str:
    """The "networks-memory" records: a row per network, precision, batch and thread count."""
    rows: Dict[tuple, Dict[str, MemoryResult]] = {}
    for r in results:
        if isinstance(r, MemoryResult):
            rows.setdefault((r.network, r.precision, r.batch, r.threads), {})[r.library] = r
    lines = ["**peak memory** - growth of the process's peak resident set (VmHWM, else ru_maxrss) over creating "
             "the session and running it once, each library in a fresh process; nnkern planned: its plan's "
             "intermediates (describe())", "",
             "| network | precision | batch | threads | nnkern MiB | nnkern planned | onnxruntime MiB | "
             "nnkern / onnxruntime |", "|---|---|---|---|---|---|---|---|"]
    for (network, precision, batch, threads), libs in rows.items():
        ours, ort = libs.get("nnkern"), libs.get("onnxruntime")
        ratio = f"{ours.rate / ort.rate:.2f}x" if ours and ort and ort.rate > 0 else "-"
        lines.append(f"| {network} | {precision} | {batch} | {threads} | {_cell(ours and ours.rate, '{:.1f}')} | "
                     f"{ours.planned if ours else '-'} | {_cell(ort and ort.rate, '{:.1f}')} | {ratio} |")
    memory_notes = {k: v for k, v in (notes or {}).items() if "memory" in k}
    if memory_notes:
        lines += [""] + [f"- {k}: {v}" for k, v in memory_notes.items()]
    return "\n".join(lines)
