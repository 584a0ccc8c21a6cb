"""``python -m nnkern bench --op yolo``: YoloV3-Tiny's backbone end to end, batch 1, 416x416x3 input, random
weights: the latency of nnkern (NHWC, its Conv2d layers built once, every output buffer preallocated) against
torch (an nn.Sequential on channels_last and on the default NCHW layout, under inference_mode) and onnxruntime
(one graph, NCHW, intra_op_num_threads = the thread count), at 1 and 2 threads, the outputs compared.

The backbone (darknet's yolov3-tiny.cfg, layers 0-12): seven 3x3 convolutions, stride 1, padding 1, of 16, 32,
64, 128, 256, 512 and 1024 output channels (batch normalization folded into a bias), each followed by the
activation, and between them six 2x2 max pools: five of stride 2 (416 -> 13), the sixth of stride 1 with one
row and column of padding at the bottom and right (13x13 stays 13x13). Output 13x13x1024. The detection heads
are left out (their upsample has no nnkern op).

Substitutions, the same in all three libraries:
* activation: darknet's leaky ReLU (slope 0.1) is replaced by ReLU, because nnkern has no leaky ReLU; nnkern
  fuses it into Conv2d (activation="relu"), torch runs nn.ReLU(inplace=True), onnxruntime a Relu node (which
  its optimizer may fuse into the Conv). The convolutions, the work that matters, are the architecture's.
* the stride-1 pool's bottom / right padding: nnkern.max_pool2d(padding=(0, 1, 0, 1)) and onnxruntime's MaxPool
  (pads [0, 0, 1, 1]) never take a padded position as a tap; torch's max_pool2d pads both sides alike, so torch
  pads with nn.ZeroPad2d((0, 1, 0, 1)) first (as the usual PyTorch ports do): after a ReLU every value is >= 0,
  so the zeros never change a window's maximum and the results agree.
* the other pools: nnkern.max_pool2d, torch's nn.MaxPool2d(2, 2), onnxruntime's MaxPool.

GFLOP/s counts the convolutions' 2 * OH * OW * OC * 9 * IC (3.74 GFLOP at 416x416), not the pools.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import anchors as _anchors
from . import conv as _conv
from . import harness
from . import ops as _ops
from .fconv import onnx_conv, rel_diff

#: darknet yolov3-tiny.cfg layers 0-12: ("conv", out channels) = 3x3/1 p1 + activation; ("pool", stride) = 2x2
#: max pool (stride 1: padded at the bottom / right).
BACKBONE: List[Tuple[str, int]] = [("conv", 16), ("pool", 2), ("conv", 32), ("pool", 2), ("conv", 64), ("pool", 2),
                                   ("conv", 128), ("pool", 2), ("conv", 256), ("pool", 2), ("conv", 512),
                                   ("pool", 1), ("conv", 1024)]
SIZE = 416
NAME = "yolov3-tiny.backbone"


@dataclasses.dataclass
class Backbone:
    size: int  # input height = width (a multiple of 32)
    x: np.ndarray  # (1, size, size, 3) float32 NHWC
    convs: List[Tuple[np.ndarray, np.ndarray]]  # per convolution: weights (OC, 3, 3, IC), bias (OC,)
    stages: List[Tuple[str, int]]  # BACKBONE with the channel counts used

    @property
    def shape(self) -> Tuple[int, ...]:
        """The input's (N, H, W, C) (harness.Result.shape)."""
        return tuple(self.x.shape)

    @property
    def out_shape(self) -> Tuple[int, ...]:
        """(N, OH, OW, OC): the stride-2 pools halve the size, the rest keep it."""
        s = self.size // 2 ** sum(1 for k, v in self.stages if k == "pool" and v == 2)
        return (1, s, s, self.convs[-1][0].shape[0])

    def flops(self) -> float:
        """2 * OH * OW * OC * 9 * IC summed over the convolutions (OH = OW: the size after the pools before it)."""
        total, s = 0.0, self.size
        ci = iter(self.convs)
        for kind, v in self.stages:
            if kind == "pool":
                s //= v
            else:
                w, _ = next(ci)
                total += 2.0 * s * s * w.shape[0] * 9 * w.shape[3]
        return total

    def describe(self) -> str:
        _, oh, ow, oc = self.out_shape
        return f"{self.size}x{self.size}x3 -> {oh}x{ow}x{oc}"


def make_backbone(size: int = SIZE, width_div: int = 1) -> Backbone:
    """Random weights, He-scaled (N(0, 2 / (9 IC)): the activations keep their magnitude through the ReLUs),
    bias N(0, 0.01); x ~ U[0, 1) (an image). width_div divides every channel count (small test networks)."""
    if size % 32:
        raise ValueError(f"the backbone's input size must be a multiple of 32, got {size}")
    rng = np.random.default_rng(_anchors.SEED)
    x = rng.random((1, size, size, 3), dtype=np.float32)
    stages, convs, ic = [], [], 3
    for kind, v in BACKBONE:
        if kind == "conv":
            v = max(1, v // width_div)
            w = rng.standard_normal((v, 3, 3, ic), dtype=np.float32) * np.float32(np.sqrt(2.0 / (9 * ic)))
            convs.append((w, (0.1 * rng.standard_normal(v)).astype(np.float32)))
            ic = v
        stages.append((kind, v))
    return Backbone(size, x, convs, stages)


def _pool_padding(stride: int):
    return 0 if stride == 2 else (0, 1, 0, 1)


# --- the three libraries ---------------------------------------------------------------------------------

def nnkern_call(bb: Backbone) -> Callable:
    """The forward pass through nnkern.Conv2d(activation="relu") layers built once and nnkern.max_pool2d, each
    step writing into its own preallocated output; ``call.out`` the NHWC result."""
    import nnkern
    steps = []
    ci = iter(bb.convs)
    for kind, v in bb.stages:
        if kind == "conv":
            w, b = next(ci)
            layer = nnkern.Conv2d(w, b, padding=1, activation="relu")
            steps.append(lambda x, out, layer=layer: layer(x, out=out))
        else:
            steps.append(lambda x, out, s=v: nnkern.max_pool2d(x, 2, s, _pool_padding(s), out=out))
    bufs, y = [], bb.x
    for step in steps:  # the first pass allocates the outputs
        y = step(y, None)
        bufs.append(y)
    x = bb.x

    def call():
        y = x
        for step, buf in zip(steps, bufs):
            y = step(y, buf)
    call.out = bufs[-1]
    return call


def torch_model(bb: Backbone, channels_last: bool):
    """The backbone as a torch nn.Sequential in eval mode (channels_last memory format or the default)."""
    import torch
    nn = torch.nn
    mods = []
    ci = iter(bb.convs)
    for kind, v in bb.stages:
        if kind == "conv":
            w, b = next(ci)
            m = nn.Conv2d(w.shape[3], w.shape[0], 3, padding=1)
            with torch.no_grad():
                m.weight.copy_(torch.from_numpy(w).permute(0, 3, 1, 2))
                m.bias.copy_(torch.from_numpy(b))
            mods += [m, nn.ReLU(inplace=True)]
        elif v == 2:
            mods.append(nn.MaxPool2d(2, 2))
        else:
            mods += [nn.ZeroPad2d((0, 1, 0, 1)), nn.MaxPool2d(2, 1)]
    model = nn.Sequential(*mods).eval()
    return model.to(memory_format=torch.channels_last) if channels_last else model


def torch_call(bb: Backbone, threads: int, channels_last: bool = True) -> Callable:
    """model(x) under torch.inference_mode; ``call.out()`` the NHWC result."""
    import torch
    _anchors.set_threads(threads)
    model = torch_model(bb, channels_last)
    x = torch.from_numpy(bb.x).permute(0, 3, 1, 2)
    x = x.contiguous(memory_format=torch.channels_last) if channels_last else x.contiguous()
    last = {}

    def call():
        with torch.inference_mode():
            last["y"] = model(x)
    call.out = lambda: last["y"].permute(0, 2, 3, 1).numpy()
    return call


def ort_call(bb: Backbone, threads: int) -> Callable:
    """One graph (Conv, Relu, MaxPool nodes; weights as initializers) run with I/O binding on preallocated NCHW
    input and output; ``call.out()`` the NHWC result."""
    from onnx import helper
    nodes, inits, prev = [], [], "A"
    ci = iter(bb.convs)
    for i, (kind, v) in enumerate(bb.stages):
        out = "Y" if i == len(bb.stages) - 1 else f"t{i}"
        if kind == "conv":
            w, b = next(ci)
            node, ws = onnx_conv(f"conv{i}", prev, f"c{i}", w, b, 1, 1)
            nodes += [node, helper.make_node("Relu", [f"c{i}"], [out], name=f"relu{i}")]
            inits += ws
        else:
            p = 0 if v == 2 else 1
            nodes.append(helper.make_node("MaxPool", [prev], [out], name=f"pool{i}", kernel_shape=[2, 2],
                                          strides=[v, v], pads=[0, 0, p, p]))
        prev = out
    x_nchw = np.ascontiguousarray(bb.x.transpose(0, 3, 1, 2))
    n, oh, ow, oc = bb.out_shape
    y = np.empty((n, oc, oh, ow), np.float32)
    return _anchors.ort_nchw_call("yolov3_tiny_backbone", nodes, inits, x_nchw, y, threads)


LIBRARIES: Dict[str, Callable] = {
    "torch_cl": lambda bb, threads: torch_call(bb, threads, channels_last=True),
    "torch_nchw": lambda bb, threads: torch_call(bb, threads, channels_last=False),
    "onnxruntime": ort_call,
}


def network_library_calls(table: Dict[str, Callable], name: str, net, threads: int,
                          libraries: Optional[Sequence[str]] = None):
    """({library: call} of the installed libraries of ``table`` (library -> make(net, threads)) that run the
    network ``name``, {library: why it was skipped}); shared with nnkern.bench.mobilenet."""
    makers = {lib: (lambda make=make: make(net, threads)) for lib, make in table.items()}
    return _conv.try_libraries(makers, name, libraries)


def library_calls(bb: Backbone, threads: int, libraries: Optional[Sequence[str]] = None):
    """({name: call} of the installed libraries that run the backbone, {name: why it was skipped})."""
    return network_library_calls(LIBRARIES, NAME, bb, threads, libraries)


def check(nn: Callable, libs: Dict[str, Callable]) -> Dict[str, float]:
    """Run every callable once; {library: max |output - nnkern's| / max |nnkern's|}."""
    nn()
    out = {}
    for name, f in libs.items():
        f()
        out[name] = rel_diff(f.out(), nn.out)
    return out


# --- measuring ------------------------------------------------------------------------------------------

def measure(bb: Backbone, threads: int, *, isa: str, repeats: int = 7, libraries: Optional[Sequence[str]] = None,
            checked: Optional[Dict[str, float]] = None, notes: Optional[Dict[str, str]] = None,
            min_time: float = 0.02) -> List[_conv.ConvResult]:
    """The backbone at one thread count: nnkern and each library, interleaved (harness.interleaved). checked:
    the max differences of an earlier thread count (the check runs once); filled when empty."""
    ctx = harness.nnkern_context(isa, threads)
    with ctx():
        nn = nnkern_call(bb)
    libs, why = library_calls(bb, threads, libraries)
    if notes is not None:
        for name, msg in why.items():
            notes.setdefault(name, msg)
    if checked is None or any(name not in checked for name in libs):
        with ctx():
            diffs = check(nn, libs)
        if checked is not None:
            checked.update(diffs)
    else:
        diffs = checked
    return timed_network("yolo", NAME, bb.shape, bb.flops(), {"nnkern/auto": nn}, libs, ctx, diffs, threads,
                         isa=isa, repeats=repeats, min_time=min_time)


def timed_network(op: str, name: str, shape: Tuple[int, ...], work: float, nn_fns: Dict[str, Callable],
                  libs: Dict[str, Callable], ctx, diffs: Dict[str, float], threads: int, *, isa: str, repeats: int,
                  min_time: float, unit: str = "GFLOP/s", peak_kind: str = "f32") -> List[_conv.ConvResult]:
    """nnkern's calls ("nnkern/<variant>", run under ctx) and the libraries', interleaved (harness.interleaved);
    a ConvResult each, ``unit`` (G-operations per second) of ``work``, % of the ``peak_kind`` peak, with its max
    difference from ``diffs``. Shared with nnkern.bench.mobilenet and nnkern.bench.qnet."""
    timings = harness.interleaved({**nn_fns, **libs}, repeats=repeats, min_time=min_time,
                                  contexts={k: ctx for k in nn_fns}, pause_after=_ops._pauses(threads))
    _anchors.set_threads(1)
    out = []
    for label, t in timings.items():
        lib, _, alg = label.partition("/")
        out.append(_conv.ConvResult(op, shape, lib, isa if lib == "nnkern" else "", threads, t.median, t.best,
                                    work / t.median / 1e9, unit, layer=name, algorithm=alg,
                                    max_diff=diffs.get(label)))
    harness.annotate(out, peak_kind)
    return out


def run(threads_list: Sequence[int], *, isa: str, repeats: int = 7, libraries: Optional[Sequence[str]] = None,
        size: int = SIZE, width_div: int = 1, progress: Optional[Callable[[str], None]] = print
        ) -> Tuple[List[_conv.ConvResult], Dict[str, str]]:
    """The backbone at every thread count; returns the results and the skipped libraries' notes."""
    bb = make_backbone(size, width_div)
    checked: Dict[str, float] = {}
    return run_threads("yolo", bb.describe(), threads_list, progress,
                       lambda t, notes: measure(bb, t, isa=isa, repeats=repeats, libraries=libraries,
                                                checked=checked, notes=notes))


def run_threads(op: str, what: str, threads_list: Sequence[int], progress: Optional[Callable[[str], None]],
                measure_at: Callable[[int, Dict[str, str]], List[_conv.ConvResult]]
                ) -> Tuple[List[_conv.ConvResult], Dict[str, str]]:
    """measure_at(threads, notes) for every thread count, a progress line each ("[op t=N] what  label ms ...");
    the results and the skipped libraries' notes. Shared by the network benchmarks (mobilenet, espcn)."""
    results: List[_conv.ConvResult] = []
    notes: Dict[str, str] = {}
    for t in threads_list:
        t0 = time.perf_counter()
        res = measure_at(t, notes)
        results += res
        if progress:
            progress(f"[{op} t={t}] {what}  " + "  ".join(f"{r.label} {r.seconds * 1e3:.2f} ms" for r in res)
                     + f"  ({time.perf_counter() - t0:.1f} s)")
    return results, notes


def markdown_table(results: Sequence[_conv.ConvResult], threads: int, notes: Optional[Dict[str, str]] = None, *,
                   title: str = "yolo: YoloV3-Tiny backbone", notes_text: Optional[str] = None,
                   unit: str = "GFLOP/s", peak_kind: str = "f32") -> str:
    """A row per library: latency (median, best), ``unit``, % of the ``peak_kind`` peak x threads (nnkern), its
    time over nnkern's, the max difference of its output to nnkern's. title / notes_text / unit / peak_kind:
    another network's (mobilenet, qnet)."""
    rs = [r for r in results if r.threads == threads]
    if not rs:
        return ""
    mine = next((r for r in rs if r.library == "nnkern" and not r.algorithm), None) or next(
        (r for r in rs if r.library == "nnkern"), None)
    N, H, W, C = rs[0].shape
    head = ["library", "ms (median)", "ms (best)", unit, f"% of {peak_kind} peak", "time / nnkern's", "max diff"]
    lines = [f"**{title} ({H}x{W}x{C}, batch {N}), {threads} thread(s)** - latency of one "
             f"forward pass, median (best) of the repetitions; nnkern on {mine.isa if mine else '-'}", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rs:
        name = (f"nnkern ({r.isa}{', ' + r.algorithm if r.algorithm and r.algorithm != 'auto' else ''})"
                if r.library == "nnkern" else r.label)
        lines.append("| " + " | ".join([
            name, f"{r.seconds * 1e3:.2f}", f"{r.best_seconds * 1e3:.2f}", _conv._fmt(r.rate),
            f"{r.pct_peak:.0f}%" if r.pct_peak is not None else "-",
            f"{r.seconds / mine.seconds:.2f}x" if mine else "-", _conv._diff(r.max_diff)]) + " |")
    if mine and mine.ratio is not None:
        best = max((r for r in rs if r.library != "nnkern"), key=lambda r: r.rate)
        lines += ["", f"nnkern speed / best other's ({best.label}): {mine.ratio:.2f}x"]
    lines += ["", NOTES if notes_text is None else notes_text]
    for name, msg in (notes or {}).items():
        lines.append(f"- {name} skipped: {msg}")
    return "\n".join(lines)


NOTES = ("Notes: darknet's leaky ReLU replaced by ReLU in all three (nnkern has none; see nnkern/bench/yolo.py); "
         "nnkern NHWC with Conv2d layers built once and preallocated outputs, torch_cl / torch_nchw an "
         "nn.Sequential on channels_last / NCHW under inference_mode, onnxruntime one NCHW graph with "
         "intra_op_num_threads = the thread count; the same weights and input for all. GFLOP/s: the 7 "
         "convolutions' 2 * OH * OW * OC * 9 * IC over the latency. max diff: max |library - nnkern| / max "
         "|nnkern| of the backbone's output, checked once. time / nnkern's > 1: nnkern is faster. The host is "
         "shared: only ratios within one run mean anything.")
