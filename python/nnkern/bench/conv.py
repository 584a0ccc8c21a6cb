"""``python -m nnkern bench --op qconv``: nnkern.QConv2d per algorithm against torch's quantized conv2d
(x86 engine, channels_last) and onnxruntime's QLinearConv (NCHW), on ResNet-50 and MobileNet-v2 layers and
low-output-channel layers (an image's RGB output: ``--shapes lowoc``) at batch 1.

Every library computes the same layer on the same data: uint8 activations (scale, zero point), int8
weights quantized per output channel (zero point 0), an int32-representable bias, uint8 output.  The
activations stay in [0, 127] (7 bits, as torch's x86 qconfig ``reduce_range``): the AVX2 u8 x s8 kernels
of fbgemm and MLAS pair products in the saturating vpmaddubsw, so full-range data would make them compute
something else (nnkern is exact either way).  Once per layer each library's output is compared with
nnkern's (max |difference| in quantization steps: the requantization roundings differ by at most 1).

The measuring, the tables and the charts are shared with the FP32 convolution benchmark
(``nnkern.bench.fconv``, ``--op conv``): what differs between the two (data, nnkern's call, the other
libraries, the check, the unit and peak) is a :class:`Kind`; ``QCONV`` is this module's.
"""
from __future__ import annotations

import dataclasses
import time
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import anchors as _anchors
from . import harness
from . import ops as _ops  # registers the int8 peak


@dataclasses.dataclass(frozen=True)
class Layer:
    """One convolution at NHWC: square kernel, the same stride and padding on both axes."""
    name: str
    N: int
    H: int
    W: int
    IC: int
    OC: int
    KH: int
    KW: int
    stride: int
    pad: int
    groups: int

    @property
    def out_hw(self) -> Tuple[int, int]:
        return ((self.H + 2 * self.pad - self.KH) // self.stride + 1,
                (self.W + 2 * self.pad - self.KW) // self.stride + 1)

    @property
    def shape(self) -> Tuple[int, ...]:
        """The numbers of the layer (harness.Result.shape)."""
        return dataclasses.astuple(self)[1:]

    def describe(self) -> str:
        """'56x56 64->64 3x3/1 p1' (+ ' dw' for depthwise, ' g<groups>' otherwise)."""
        g = "" if self.groups == 1 else " dw" if self.groups == self.IC else f" g{self.groups}"
        return (f"{self.H}x{self.W} {self.IC}->{self.OC} {self.KH}x{self.KW}/{self.stride} p{self.pad}{g}"
                + (f" N{self.N}" if self.N != 1 else ""))


def conv_ops(layer: Layer) -> float:
    """Operations of one call: 2 per multiply-add, 2 * N * OH * OW * OC * KH * KW * IC / groups."""
    OH, OW = layer.out_hw
    return 2.0 * layer.N * OH * OW * layer.OC * layer.KH * layer.KW * layer.IC / layer.groups


def _L(name, H, IC, OC, k, stride=1, groups=1):
    # "same" padding (k // 2) as in both networks, batch 1, square inputs
    return Layer(name, 1, H, H, IC, OC, k, k, stride, k // 2, groups)


#: ResNet-50 (torchvision, stride on the 3x3): the stem and per stage the bottleneck's 1x1 reduce, 3x3
#: and 1x1 expand ("b1": the first block's reduce, whose input is the previous stage's output).
RESNET50: List[Layer] = [
    _L("rn50.stem", 224, 3, 64, 7, stride=2),
    _L("rn50.s2.reduce.b1", 56, 64, 64, 1),
    _L("rn50.s2.3x3", 56, 64, 64, 3),
    _L("rn50.s2.expand", 56, 64, 256, 1),
    _L("rn50.s2.reduce", 56, 256, 64, 1),
    _L("rn50.s3.reduce.b1", 56, 256, 128, 1),
    _L("rn50.s3.3x3/2", 56, 128, 128, 3, stride=2),
    _L("rn50.s3.3x3", 28, 128, 128, 3),
    _L("rn50.s3.expand", 28, 128, 512, 1),
    _L("rn50.s3.reduce", 28, 512, 128, 1),
    _L("rn50.s4.3x3", 14, 256, 256, 3),
    _L("rn50.s4.expand", 14, 256, 1024, 1),
    _L("rn50.s4.reduce", 14, 1024, 256, 1),
    _L("rn50.s5.3x3", 7, 512, 512, 3),
    _L("rn50.s5.expand", 7, 512, 2048, 1),
    _L("rn50.s5.reduce", 7, 2048, 512, 1),
]

#: MobileNet-v2: an expand and a project 1x1 and the depthwise 3x3 (stride 1 and 2) of several stages.
MOBILENET_V2: List[Layer] = [
    _L("mbv2.expand", 56, 24, 144, 1),
    _L("mbv2.dw.112x32", 112, 32, 32, 3, groups=32),
    _L("mbv2.dw/2.112x96", 112, 96, 96, 3, stride=2, groups=96),
    _L("mbv2.dw.14x384", 14, 384, 384, 3, groups=384),
    _L("mbv2.project", 56, 144, 24, 1),
]

#: Low output-channel counts (a GAN's / super-resolution network's RGB output layer, seed I11): the "low_ofm"
#: algorithm's layers.
LOW_OC: List[Layer] = [
    _L("lowoc.1x1.128x64.oc3", 128, 64, 3, 1),
    _L("lowoc.3x3.128x64.oc3", 128, 64, 3, 3),
    _L("lowoc.3x3.256x64.oc3", 256, 64, 3, 3),
]

SUITE: List[Layer] = RESNET50 + MOBILENET_V2 + LOW_OC
#: --quick: a 3x3, a 1x1 (the plain-GEMM path of im2col) and a depthwise layer.
QUICK: List[Layer] = [l for l in SUITE if l.name in ("rn50.s2.3x3", "rn50.s2.expand", "mbv2.dw.14x384")]


def select(names: Optional[Sequence[str]], quick: bool = False, kind: Optional["Kind"] = None,
           batches: Sequence[int] = (1,)) -> List[Layer]:
    """The layers of ``kind``'s suite (qconv's by default) whose name contains one of ``names`` (all, or
    its quick list, when none given), at each batch (a batch other than 1 named '<layer>.n<batch>')."""
    kind = kind or QCONV
    if not names:
        chosen = list(kind.quick if quick else kind.suite)
    else:
        chosen = [l for l in kind.suite if any(n in l.name for n in names)]
    if not chosen:
        raise SystemExit(f"no {kind.op} layer matches {list(names)}; layers: {', '.join(l.name for l in kind.suite)}")
    return [l if b == 1 else dataclasses.replace(l, name=f"{l.name}.n{b}", N=b) for l in chosen for b in batches]


# --- the data every library gets ---------------------------------------------------------------------

@dataclasses.dataclass
class ConvData:
    x: np.ndarray  # uint8 NHWC
    w: np.ndarray  # int8 (OC, KH, KW, IC / groups)
    w_scale: np.ndarray  # float32 (OC,)
    bias_q: np.ndarray  # int32 (OC,), in units of x_scale * w_scale[o]
    x_scale: float = 0.02
    x_zero_point: int = 64
    y_scale: float = 1.0
    y_zero_point: int = 128

    @property
    def bias(self) -> np.ndarray:
        """The bias in real units (what nnkern and torch take)."""
        return (self.bias_q.astype(np.float64) * self.x_scale * self.w_scale).astype(np.float32)


def make_data(layer: Layer) -> ConvData:
    rng = np.random.default_rng(_anchors.SEED)
    x = rng.integers(0, 128, (layer.N, layer.H, layer.W, layer.IC), dtype=np.uint8)  # 7 bits: see the top
    w = rng.integers(-127, 128, (layer.OC, layer.KH, layer.KW, layer.IC // layer.groups), dtype=np.int8)
    w_scale = (0.01 * (1 + (np.arange(layer.OC) % 7) / 7)).astype(np.float32)
    K = layer.KH * layer.KW * layer.IC // layer.groups
    sigma = np.sqrt(K) * 37.0 * 73.0  # accumulator std: (x - zp) ~ U[-64, 63], w ~ U[-127, 127]
    bias_q = rng.integers(-int(sigma), int(sigma) + 1, layer.OC).astype(np.int32)
    d = ConvData(x, w, w_scale, bias_q)
    d.y_scale = float(4 * sigma * d.x_scale * w_scale.mean() / 127)  # +-4 sigma fill the uint8 range
    return d


# --- nnkern --------------------------------------------------------------------------------------------

def algorithms(layer: Optional["Layer"] = None) -> List[str]:
    """The qconv2d algorithms and "auto"; for a layer, those C++ says apply to it at the current ISA cap, except a
    scalar reference kernel (direct's where no VNNI kernel runs), which auto never picks and is not timed."""
    from .. import _C
    names = list(_C.algorithms("qconv2d")) + ["auto"]
    if layer is None:
        return names
    import nnkern
    probe = nnkern.QConv2d(np.zeros((layer.OC, layer.KH, layer.KW, layer.IC // layer.groups), np.int8), None,
                           weight_scale=1.0, stride=layer.stride, padding=layer.pad, groups=layer.groups,
                           input_scale=1.0, input_zero_point=0, output_scale=1.0, output_zero_point=0,
                           output_dtype=np.uint8)
    applicable = set(probe._packed.applicable_algorithms(layer.N, layer.H, layer.W)) | {"auto"}
    if _C.cpu_info()["kernels"]["u8s8_conv_direct"].endswith("__scalar"):
        applicable.discard("direct")
    return [a for a in names if a in applicable]


def nnkern_layer(layer: Layer, d: ConvData, algorithm: str):
    import nnkern
    return nnkern.QConv2d(d.w, d.bias, weight_scale=d.w_scale, stride=layer.stride, padding=layer.pad,
                          groups=layer.groups, input_scale=d.x_scale, input_zero_point=d.x_zero_point,
                          output_scale=d.y_scale, output_zero_point=d.y_zero_point, output_dtype=np.uint8,
                          algorithm=algorithm)


def nnkern_call(layer: Layer, d: ConvData, algorithm: str) -> Callable:
    """conv(x, out=y), weights prepacked; ``call.out`` is y, ``call.workspace`` the workspace bytes of
    one call (read right after it: the C++ reports the last call's)."""
    from .. import _C
    conv = nnkern_layer(layer, d, algorithm)
    y = np.empty(conv.output_shape(d.x.shape), np.uint8)
    x = d.x

    def call():
        conv(x, out=y)
    call()
    call.out = y
    call.ran = conv._packed.auto_algorithm(*x.shape[:3]) if algorithm == "auto" else algorithm
    call.workspace = int(_C.workspace_last_bytes())
    return call


# --- torch (x86 engine, channels_last) -----------------------------------------------------------------

def torch_call(layer: Layer, d: ConvData, threads: int) -> Callable:
    """torch.ops.quantized.conv2d on a channels_last quint8 input; ``call.out()`` the NHWC uint8 result."""
    import torch
    _anchors.set_threads(threads)
    torch.backends.quantized.engine = "x86" if "x86" in torch.backends.quantized.supported_engines else "fbgemm"
    with warnings.catch_warnings():  # torch 2.13 warns that quantized tensors are deprecated
        warnings.simplefilter("ignore")
        x_nchw = torch.from_numpy(np.ascontiguousarray(d.x.transpose(0, 3, 1, 2)))
        qx = torch._make_per_tensor_quantized_tensor(x_nchw, d.x_scale, d.x_zero_point)
        qx = qx.contiguous(memory_format=torch.channels_last)
        w_oihw = torch.from_numpy(np.ascontiguousarray(d.w.transpose(0, 3, 1, 2)))
        qw = torch._make_per_channel_quantized_tensor(w_oihw, torch.from_numpy(d.w_scale.astype(np.float64)),
                                                      torch.zeros(layer.OC, dtype=torch.int64), 0)
        s, p = [layer.stride] * 2, [layer.pad] * 2
        packed = torch.ops.quantized.conv2d_prepack(qw, torch.from_numpy(d.bias), s, p, [1, 1], layer.groups)
    op = torch.ops.quantized.conv2d
    last = {}

    def call():
        last["y"] = op(qx, packed, d.y_scale, d.y_zero_point)
    call.out = lambda: last["y"].int_repr().permute(0, 2, 3, 1).numpy()
    call.last_q = lambda: last["y"]  # the quantized result itself (nnkern.bench.fused goes on from it)
    return call


# --- onnxruntime QLinearConv (NCHW) ---------------------------------------------------------------------

def ort_call(layer: Layer, d: ConvData, threads: int) -> Callable:
    """A one-node QLinearConv model (weights, scales, bias as initializers) run with I/O binding on
    preallocated NCHW input and output; ``call.out()`` the NHWC uint8 result."""
    from onnx import helper, numpy_helper
    OH, OW = layer.out_hw
    x_nchw = np.ascontiguousarray(d.x.transpose(0, 3, 1, 2))
    y = np.empty((layer.N, layer.OC, OH, OW), np.uint8)
    inits = [numpy_helper.from_array(np.array(d.x_scale, np.float32), "xs"),
             numpy_helper.from_array(np.array(d.x_zero_point, np.uint8), "xz"),
             numpy_helper.from_array(np.ascontiguousarray(d.w.transpose(0, 3, 1, 2)), "w"),
             numpy_helper.from_array(d.w_scale, "ws"),
             numpy_helper.from_array(np.zeros(layer.OC, np.int8), "wz"),
             numpy_helper.from_array(np.array(d.y_scale, np.float32), "ys"),
             numpy_helper.from_array(np.array(d.y_zero_point, np.uint8), "yz"),
             numpy_helper.from_array(d.bias_q, "b")]
    node = helper.make_node("QLinearConv", ["A", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["Y"],
                            kernel_shape=[layer.KH, layer.KW], strides=[layer.stride] * 2,
                            pads=[layer.pad] * 4, group=layer.groups)
    return _anchors.ort_nchw_call("qconv", [node], inits, x_nchw, y, threads)


LIBRARIES: Dict[str, Callable] = {"torch": torch_call, "onnxruntime": ort_call}


def try_libraries(makers: Dict[str, Callable[[], Callable]], what: str,
                  libraries: Optional[Sequence[str]] = None) -> Tuple[Dict[str, Callable], Dict[str, str]]:
    """({name: call} of the makers whose library is installed and runs ``what``, {name: why it was skipped}).
    Each call is run once (warm-up, and proof the library takes it); ``libraries`` restricts the names."""
    calls, notes = {}, {}
    for name, make in makers.items():
        if libraries is not None and name not in libraries:
            continue
        try:
            fn = make()
            fn()
            calls[name] = fn
        except ImportError as e:
            notes[name] = f"not installed ({e.name})"
        except Exception as e:  # the library refuses it: a note, not a failed benchmark
            msg = str(e).splitlines()[0][:120] if str(e) else ""
            notes[name] = f"refused {what}: {type(e).__name__}: {msg}"
    return calls, notes


def library_calls(layer: Layer, d: Any, threads: int, libraries: Optional[Sequence[str]] = None,
                  kind: Optional["Kind"] = None) -> Tuple[Dict[str, Callable], Dict[str, str]]:
    """({name: call} of ``kind``'s installed libraries that run the layer, {name: why it was skipped})."""
    kind = kind or QCONV
    makers = {name: (lambda make=make: make(layer, d, threads)) for name, make in kind.libraries.items()}
    return try_libraries(makers, layer.name, libraries)


# --- measuring ------------------------------------------------------------------------------------------

@dataclasses.dataclass
class ConvResult(harness.Result):
    layer: str = ""
    algorithm: str = ""  # nnkern's algorithm= ("auto" too); "" for the other libraries
    ran: str = ""  # for "auto": the algorithm it picked (same workspace as that one)
    workspace_bytes: Optional[int] = None  # nnkern: the workspace bytes of one call
    max_diff: Optional[float] = None  # max |output - nnkern's| (Kind.check: qconv in uint8 steps, conv relative)

    @property
    def label(self) -> str:
        return f"nnkern/{self.algorithm}" if self.library == "nnkern" else self.library


def check(layer: Layer, nn: Dict[str, Callable], libs: Dict[str, Callable]) -> Dict[str, int]:
    """Run every callable once: nnkern's algorithms must agree bit for bit (AssertionError otherwise);
    returns each other library's max |difference| to nnkern in quantization steps."""
    for f in list(nn.values()) + list(libs.values()):
        f()
    ref = next(iter(nn.values())).out
    for alg, f in nn.items():
        if not np.array_equal(f.out, ref):
            raise AssertionError(f"{layer.name}: nnkern {alg} differs from {next(iter(nn))}")
    return {name: int(np.abs(f.out().astype(np.int16) - ref).max()) for name, f in libs.items()}


def _under(context, call: Callable) -> Callable:
    """``call`` run inside ``context`` (a harness.nnkern_context), its attributes (.out, .ran, ...) kept."""
    def run():
        with context():
            call()
    run.__dict__.update(call.__dict__)
    return run


def measure_layer(layer: Layer, threads: int, *, isa: str, repeats: int = 7,
                  libraries: Optional[Sequence[str]] = None, checked: Optional[Dict[str, Dict]] = None,
                  notes: Optional[Dict[str, str]] = None, min_time: float = 0.02,
                  kind: Optional["Kind"] = None) -> List[ConvResult]:
    """One layer at one thread count: nnkern per algorithm and each library of ``kind`` (qconv by default),
    interleaved. checked: {layer name: max diffs} shared across thread counts, so the check runs once per layer."""
    kind = kind or QCONV
    d = kind.make_data(layer)
    ctx = harness.nnkern_context(isa, threads)
    top = harness.nnkern_context(harness.top_of_kernel_group(isa, kind.kernel_key), threads)
    alg_ctx = {alg: top if alg in kind.top_of_group else ctx for alg in kind.algorithms(layer)}
    nn = {}
    for alg, c in alg_ctx.items():
        with c():  # packs under the cap the calls run at
            nn[alg] = kind.nnkern_call(layer, d, alg)
    libs, why = library_calls(layer, d, threads, libraries, kind)
    if notes is not None:
        for name, msg in why.items():
            notes.setdefault(name, msg)
    diffs = (checked or {}).get(layer.name)
    if diffs is None or any(name not in diffs for name in libs):
        with ctx():  # each nnkern call checked under the cap it is timed at
            diffs = kind.check(layer, {alg: _under(alg_ctx[alg], f) for alg, f in nn.items()}, libs)
        if checked is not None:
            checked[layer.name] = diffs
    fns = {f"nnkern/{alg}": f for alg, f in nn.items()}
    fns.update(libs)
    ctxs = {f"nnkern/{alg}": c for alg, c in alg_ctx.items()}
    timings = harness.interleaved(fns, repeats=repeats, min_time=min_time, contexts=ctxs,
                                  pause_after=_ops._pauses(threads))
    _anchors.set_threads(1)
    work = conv_ops(layer)
    out = []
    for name, t in timings.items():
        lib, _, alg = name.partition("/")
        f = fns[name]
        out.append(ConvResult(kind.op, layer.shape, lib, isa if lib == "nnkern" else "", threads, t.median, t.best,
                              work / t.median / 1e9, kind.unit, layer=layer.name, algorithm=alg,
                              ran=getattr(f, "ran", "") if alg == "auto" else "",
                              workspace_bytes=getattr(f, "workspace", None), max_diff=diffs.get(name)))
    harness.annotate(out, kind.peak_kind)
    return out


def run(layers: Sequence[Layer], threads_list: Sequence[int], *, isa: str, repeats: int = 7,
        libraries: Optional[Sequence[str]] = None, progress: Optional[Callable[[str], None]] = print,
        kind: Optional["Kind"] = None) -> Tuple[List[ConvResult], Dict[str, str]]:
    """Every layer at every thread count; returns the results and the skipped libraries' notes."""
    kind = kind or QCONV
    results, checked, notes = [], {}, {}
    for t in threads_list:
        for i, layer in enumerate(layers):
            t0 = time.perf_counter()
            res = measure_layer(layer, t, isa=isa, repeats=repeats, libraries=libraries, checked=checked,
                                notes=notes, kind=kind)
            results += res
            if progress:
                progress(f"[{kind.op} t={t} {i + 1}/{len(layers)}] {layer.name:>18}  "
                         + "  ".join(f"{r.label} {r.rate:.1f}" for r in res)
                         + f"  ({time.perf_counter() - t0:.1f} s)")
    return results, notes


# --- table and charts -------------------------------------------------------------------------------------

def _bytes(n: Optional[int]) -> str:
    if n is None:
        return "-"
    return f"{n / 1048576:.1f} MiB" if n >= 1048576 else f"{n / 1024:.0f} KiB" if n >= 1024 else f"{n} B"


def _fmt(x: float) -> str:
    return f"{x:.3g}" if x < 10 else f"{x:.1f}" if x < 1000 else f"{x:.0f}"


def _diff(v: Optional[float]) -> str:
    return "-" if v is None else str(v) if isinstance(v, int) or v == 0 else f"{v:.1e}"


def markdown_table(results: Sequence[ConvResult], threads: int, notes: Optional[Dict[str, str]] = None,
                   kind: Optional["Kind"] = None) -> str:
    """A row per layer: the rate per nnkern algorithm (ratio to the best other library, % of ``kind``'s peak
    x threads) and per library, the best other library and nnkern's ratio to it (its best algorithm's, or
    auto's: Kind.ratio_of), the workspace of each algorithm, the check's max differences."""
    kind = kind or QCONV
    rs = [r for r in results if r.threads == threads]
    if not rs:
        return ""
    order = kind.algorithms(None)  # the table's order, auto last, whichever layer came first
    algs = sorted(dict.fromkeys(r.algorithm for r in rs if r.library == "nnkern"),
                  key=lambda a: (a == "auto", order.index(a) if a in order else len(order)))
    libs = list(dict.fromkeys(r.library for r in rs if r.library != "nnkern"))
    layers = list(dict.fromkeys(r.layer for r in rs))
    nn_diffs = any(r.max_diff is not None for r in rs if r.library == "nnkern")
    ratio_head = "nnkern auto / best other" if kind.ratio_of == "auto" else "nnkern best / other"
    auto_col = "auto" in algs and len(algs) > 2  # auto against the fastest explicit algorithm
    reduced = [a for a in kind.reduced_precision if a in algs]
    head = (["layer", "geometry", kind.work_label] + [f"nnkern {a}" for a in algs] + libs
            + ["best other", ratio_head] + (["auto / fastest nnkern"] if auto_col else [])
            + [f"{a} / nnkern best" for a in reduced]
            + [f"ws {a}" for a in algs if a != "auto"]
            + [f"max diff {l}" for l in libs] + (["max diff nnkern algs"] if nn_diffs else []))
    isa = next((r.isa for r in rs if r.library == "nnkern"), "")
    lines = [f"**{kind.op} {kind.unit}, {threads} thread(s)** - median; nnkern ({isa}) cells: {kind.unit} (ratio "
             f"to the best other library, % of the measured {kind.peak_kind} peak x threads); auto: (-> the "
             f"algorithm it ran)", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    by_name = {l.name: l for l in kind.suite}
    slow_auto: List[str] = []
    checked_auto = 0
    for name in layers:
        cell = {r.label: r for r in rs if r.layer == name}
        first = next(iter(cell.values()))
        layer = by_name.get(name) or Layer(name, *first.shape)
        row = [name, layer.describe(), _fmt(conv_ops(layer) / 1e6)]
        for a in algs:
            r = cell.get(f"nnkern/{a}")
            if r is None:
                row.append("-")
                continue
            extra = [f"{r.ratio:.2f}x" if r.ratio is not None else "",
                     f"{r.pct_peak:.0f}%" if r.pct_peak is not None else "", f"-> {r.ran}" if r.ran else ""]
            extra = [e for e in extra if e]
            row.append(_fmt(r.rate) + (f" ({', '.join(extra)})" if extra else ""))
        row += [_fmt(cell[l].rate) if l in cell else "-" for l in libs]
        others = [r for r in cell.values() if r.library != "nnkern"]
        mine = [r for r in cell.values() if r.library == "nnkern" and r.algorithm not in kind.reduced_precision]
        if kind.ratio_of == "auto":
            mine = [r for r in mine if r.algorithm == "auto"]
        bo = max(others, key=lambda r: r.rate) if others else None
        bm = max(mine, key=lambda r: r.rate) if mine else None
        row.append(f"{bo.label} {_fmt(bo.rate)}" if bo else "-")
        row.append(f"{bm.ratio:.2f}x ({bm.ran or bm.algorithm})" if bo and bm and bm.ratio is not None else "-")
        if auto_col:
            auto = cell.get("nnkern/auto")
            explicit = [r for r in cell.values() if r.library == "nnkern" and r.algorithm != "auto"
                        and r.algorithm not in kind.reduced_precision]
            fastest = max(explicit, key=lambda r: r.rate) if explicit else None
            if auto and fastest:
                within = auto.rate / fastest.rate
                row.append(f"{within:.2f}x ({fastest.algorithm})")
                if within < 0.9:
                    slow_auto.append(f"{name} ({within:.2f}x of {fastest.algorithm})")
                checked_auto += 1
            else:
                row.append("-")
        for a in reduced:
            r = cell.get(f"nnkern/{a}")
            row.append(f"{r.rate / bm.rate:.2f}x" if r and bm else "-")
        row += [_bytes(cell[f"nnkern/{a}"].workspace_bytes) if f"nnkern/{a}" in cell else "-"
                for a in algs if a != "auto"]
        row += [_diff(cell[l].max_diff) if l in cell else "-" for l in libs]
        if nn_diffs:
            row.append(_diff(max((r.max_diff for r in cell.values() if r.library == "nnkern"
                                  and r.max_diff is not None), default=None)))
        lines.append("| " + " | ".join(row) + " |")
    if checked_auto:  # the auto rule's check: within 10% of the fastest algorithm the table has for the layer
        lines += ["", f"auto within 10% of nnkern's fastest algorithm on {checked_auto - len(slow_auto)} of "
                      f"{checked_auto} layers" + (f"; not on: {', '.join(slow_auto)}" if slow_auto else "")]
    lines += ["", kind.notes]
    for name, msg in (notes or {}).items():
        lines.append(f"- {name} skipped: {msg}")
    return "\n".join(lines)


NOTES = ("Notes: batch 1; nnkern on NHWC uint8, torch (quantized conv2d, x86 engine) on channels_last quint8, "
         "onnxruntime (QLinearConv) on NCHW as ORT requires; all with int8 per-channel weights, the same data "
         "and uint8 output, activations in [0, 127] (no vpmaddubsw saturation in any library). MOP = 2 * N * OH "
         "* OW * OC * KH * KW * IC / groups. ws: nnkern's workspace bytes per call (workspace_last_bytes). "
         "max diff: max |library - nnkern| in uint8 steps (requantization roundings; <= 1 is the same "
         "computation). The host is shared: only ratios within one run mean anything.")


def scaling_table(results: Sequence[ConvResult], threads: int, base: int) -> str:
    """harness.scaling_table with a row per layer name instead of the layer's numbers."""
    named = [dataclasses.replace(r, shape=(r.layer,)) for r in results]
    op = results[0].op if results else "qconv"
    return harness.scaling_table(named, threads, base, op=op).replace("| M,N,K |", "| layer |", 1)


def charts(results: Sequence[ConvResult], threads_list: Sequence[int]):
    """plot.Chart per thread count: a group of bars per layer, one per column of the table."""
    from . import plot
    out = []
    for t in threads_list:
        rs = [r for r in results if r.threads == t]
        if not rs:
            continue
        cats = list(dict.fromkeys(r.layer for r in rs))
        series: Dict[str, List[Optional[float]]] = {}
        for r in rs:
            series.setdefault(r.label, [None] * len(cats))[cats.index(r.layer)] = r.rate
        out.append(plot.Chart(f"{rs[0].op}, {t} thread(s) (layer)", rs[0].unit, True, cats, series))
    return out


# --- what differs between the INT8 and the FP32 benchmark ---------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Kind:
    """One convolution benchmark: measure_layer, run, select and markdown_table take it (qconv's by default)."""
    op: str  # ConvResult.op and the tables' title: "qconv", "conv"
    unit: str  # "GOP/s", "GFLOP/s"
    work_label: str  # the table's column of the call's operation count, in millions: "MOP", "MFLOP"
    peak_kind: str  # harness.PEAK_FUNCS key of the % of peak: "int8", "f32"
    kernel_key: str  # cpu_info()["kernels"] key: the default ISA is the last of harness.bench_isas(kernel_key)
    suite: Tuple[Layer, ...]
    quick: Tuple[Layer, ...]
    algorithms: Callable[[Layer], List[str]]  # nnkern's algorithms (and "auto") that apply to the layer
    make_data: Callable[[Layer], Any]  # the inputs and weights every library gets
    nnkern_call: Callable[[Layer, Any, str], Callable]  # (layer, data, algorithm): call, with .out, .ran, .workspace
    libraries: Dict[str, Callable[[Layer, Any, int], Callable]]  # name -> (layer, data, threads): call, with .out()
    check: Callable[[Layer, Dict[str, Callable], Dict[str, Callable]], Dict[str, float]]  # -> {column: max diff}
    notes: str  # printed under each table
    ratio_of: str = "best"  # the table's ratio to the best other library: nnkern's "best" algorithm or "auto"
    # nnkern's algorithms of a lower float32 precision (Winograd's): left out of "nnkern best" and of auto's check
    # (auto at the default precision never picks them), each with a column of its own against nnkern's best
    reduced_precision: Tuple[str, ...] = ()
    # nnkern's algorithms whose kernels come from another family (bf16's): run at the highest ISA level with the
    # same kernel_key kernel as the benchmark's level, where vdpbf16ps and the AMX tiles are
    # (harness.top_of_kernel_group)
    top_of_group: Tuple[str, ...] = ()

    def default_isa(self) -> str:
        return harness.bench_isas(self.kernel_key)[-1]


QCONV = Kind("qconv", "GOP/s", "MOP", "int8", "u8s8_gemm", tuple(SUITE), tuple(QUICK), algorithms, make_data,
             nnkern_call, LIBRARIES, check, NOTES)
