"""``python -m nnkern bench --op espcn``: an ESPCN super-resolution network (Shi et al. 2016; SRGAN's upsampler is
the same sub-pixel convolution) end to end, quantized, batch 1, RGB: 5x5 conv 3 -> 64 + ReLU, 3x3 conv 64 -> 32 +
ReLU, 3x3 conv 32 -> 3 * r * r, pixel shuffle r = 3 (128 x 128 -> 384 x 384). Random weights.

Every library runs the same quantized network on the same uint8 input: int8 weights per output channel, int32
biases (in units of input scale x weight scale, as QLinearConv takes them), uint8 activations whose scales were
calibrated once on the network's own float32 outputs (the hidden layers' zero point 0, so the uint8 clamp is the
ReLU), uint8 output. Compared:
  nnkern        QConv2d layers built once, NHWC, the last one with the pixel shuffle fused (pixel_shuffle=r);
                and "layer by layer": the last QConv2d unfused, then nnkern.pixel_shuffle
  torch         torch.ops.quantized.conv2d (x86 engine) on channels_last quint8 tensors, then
                torch.nn.functional.pixel_shuffle on the quantized result
  onnxruntime   one graph of QLinearConv nodes and DepthToSpace (mode CRD: torch's channel order), NCHW uint8
The outputs are compared once (max |difference| in uint8 steps and the share of elements that differ: the
libraries round the requantization differently, by at most one step per layer).

GOP/s counts 2 x the multiply-adds of the three convolutions.
"""
from __future__ import annotations

import dataclasses
import warnings
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import anchors as _anchors
from . import conv as _conv
from . import harness
from . import yolo as _yolo

SIZE = 128
R = 3
CHANNELS = 3
#: (in channels, out channels, kernel, ReLU) per convolution; the last one's out channels = CHANNELS * r * r.
LAYERS = ((CHANNELS, 64, 5, True), (64, 32, 3, True), (32, None, 3, False))
NAME = "espcn"


@dataclasses.dataclass
class QLayer:
    w: np.ndarray  # int8 (OC, k, k, IC)
    w_scale: np.ndarray  # float32 (OC,)
    bias_q: np.ndarray  # int32 (OC,), units of x_scale * w_scale
    x_scale: float
    x_zero_point: int
    y_scale: float = 1.0
    y_zero_point: int = 0
    relu: bool = False

    @property
    def k(self) -> int:
        return self.w.shape[1]

    @property
    def bias(self) -> np.ndarray:
        return (self.bias_q.astype(np.float64) * self.x_scale * self.w_scale).astype(np.float32)

    def nnkern(self, output_dtype=np.uint8, **kw):
        import nnkern
        q = output_dtype != np.float32
        return nnkern.QConv2d(self.w, self.bias, weight_scale=self.w_scale, padding=self.k // 2,
                              input_scale=self.x_scale, input_zero_point=self.x_zero_point,
                              output_scale=self.y_scale if q else None, output_zero_point=self.y_zero_point if q else 0,
                              output_dtype=output_dtype, relu=self.relu, **kw)


@dataclasses.dataclass
class Net:
    x: np.ndarray  # (1, H, W, CHANNELS) uint8 NHWC
    layers: List[QLayer]
    r: int

    @property
    def shape(self) -> Tuple[int, ...]:
        return tuple(self.x.shape)

    @property
    def out_shape(self) -> Tuple[int, ...]:
        N, H, W, C = self.x.shape
        return (N, H * self.r, W * self.r, C)

    def ops(self) -> float:
        N, H, W, _ = self.x.shape
        return sum(2.0 * N * H * W * q.w.size for q in self.layers)

    def describe(self) -> str:
        N, H, W, C = self.x.shape
        return f"{H}x{W}x{C} -> {H * self.r}x{W * self.r}x{C}"


def make_net(size: int = SIZE, r: int = R, seed: int = _anchors.SEED) -> Net:
    """Random weights (He-like scales), a random image, and each layer's output quantization calibrated on its
    float32 output given the previous layer's uint8 output (nnkern's float32 output stage)."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 256, (1, size, size, CHANNELS), dtype=np.uint8)
    x_scale, x_zp = 1.0 / 255, 0
    layers, y = [], x
    for ic, oc, k, relu in LAYERS:
        oc = oc or CHANNELS * r * r
        w = rng.integers(-127, 128, (oc, k, k, ic), dtype=np.int8)
        w_scale = np.full(oc, (2.0 / (k * k * ic)) ** 0.5 / 73.0, np.float32) * (1 + np.arange(oc) % 5 / 10)
        bias_q = np.round(rng.uniform(-0.1, 0.1, oc) / (x_scale * w_scale)).astype(np.int32)
        q = QLayer(w, w_scale.astype(np.float32), bias_q, x_scale, x_zp, relu=relu)
        real = q.nnkern(np.float32)(y)
        lo, hi = (0.0, float(real.max())) if relu else (float(real.min()), float(real.max()))
        q.y_scale = max(hi - lo, 1e-6) / 255
        q.y_zero_point = int(np.clip(np.round(-lo / q.y_scale), 0, 255))
        y = q.nnkern()(y)
        layers.append(q)
        x_scale, x_zp = q.y_scale, q.y_zero_point
    return Net(x, layers, r)


# --- the libraries ---------------------------------------------------------------------------------------------

def nnkern_call(net: Net, fused: bool = True) -> Callable:
    """The forward pass through QConv2d layers built once, outputs preallocated; ``fused``: the pixel shuffle in
    the last layer's output stage, else the last layer unfused and nnkern.pixel_shuffle. ``call.out``: NHWC."""
    import nnkern
    convs = [q.nnkern() for q in net.layers[:-1]]
    convs.append(net.layers[-1].nnkern(pixel_shuffle=net.r) if fused else net.layers[-1].nnkern())
    bufs, y = [], net.x
    for c in convs:
        bufs.append(np.empty(c.result_shape(y.shape), np.uint8))
        y = bufs[-1]
    out = bufs[-1] if fused else np.empty(net.out_shape, np.uint8)
    x, r = net.x, net.r

    def call():
        y = x
        for c, b in zip(convs, bufs):
            y = c(y, b)
        if not fused:
            nnkern.pixel_shuffle(y, r, layout="NHWC", out=out)
    call()
    call.out = out
    return call


def torch_call(net: Net, threads: int) -> Callable:
    """torch.ops.quantized.conv2d per layer (channels_last quint8), then pixel_shuffle; ``call.out()`` NHWC."""
    import torch
    _anchors.set_threads(threads)
    torch.backends.quantized.engine = "x86" if "x86" in torch.backends.quantized.supported_engines else "fbgemm"
    with warnings.catch_warnings():  # torch 2.13 warns that quantized tensors are deprecated
        warnings.simplefilter("ignore")
        x = torch.from_numpy(np.ascontiguousarray(net.x.transpose(0, 3, 1, 2)))
        qx = torch._make_per_tensor_quantized_tensor(x, net.layers[0].x_scale, net.layers[0].x_zero_point)
        qx = qx.contiguous(memory_format=torch.channels_last)
        packed = []
        for q in net.layers:
            w = torch.from_numpy(np.ascontiguousarray(q.w.transpose(0, 3, 1, 2)))
            qw = torch._make_per_channel_quantized_tensor(w, torch.from_numpy(q.w_scale.astype(np.float64)),
                                                          torch.zeros(w.shape[0], dtype=torch.int64), 0)
            p = [q.k // 2] * 2
            packed.append((torch.ops.quantized.conv2d_prepack(qw, torch.from_numpy(q.bias), [1, 1], p, [1, 1], 1),
                           q.y_scale, q.y_zero_point))
    op, shuffle, r = torch.ops.quantized.conv2d, torch.nn.functional.pixel_shuffle, net.r
    last = {}

    def call():
        y = qx
        for p, s, z in packed:
            y = op(y, p, s, z)
        last["y"] = shuffle(y, r)
    call.out = lambda: last["y"].int_repr().permute(0, 2, 3, 1).numpy()
    return call


def ort_call(net: Net, threads: int) -> Callable:
    """QLinearConv nodes and DepthToSpace (CRD) in one graph, I/O bound to preallocated NCHW uint8 arrays."""
    from onnx import helper, numpy_helper
    nodes, inits, prev = [], [], "A"
    for i, q in enumerate(net.layers):
        names = [f"{n}{i}" for n in ("xs", "xz", "w", "ws", "wz", "ys", "yz", "b")]
        vals = [np.array(q.x_scale, np.float32), np.array(q.x_zero_point, np.uint8),
                np.ascontiguousarray(q.w.transpose(0, 3, 1, 2)), q.w_scale, np.zeros(q.w.shape[0], np.int8),
                np.array(q.y_scale, np.float32), np.array(q.y_zero_point, np.uint8), q.bias_q]
        inits += [numpy_helper.from_array(v, n) for v, n in zip(vals, names)]
        out = f"c{i}"
        nodes.append(helper.make_node("QLinearConv", [prev, *names], [out], name=f"conv{i}",
                                      kernel_shape=[q.k, q.k], pads=[q.k // 2] * 4))
        prev = out
    nodes.append(helper.make_node("DepthToSpace", [prev], ["Y"], blocksize=net.r, mode="CRD"))
    x_nchw = np.ascontiguousarray(net.x.transpose(0, 3, 1, 2))
    N, OH, OW, C = net.out_shape
    y = np.empty((N, C, OH, OW), np.uint8)
    return _anchors.ort_nchw_call(NAME, nodes, inits, x_nchw, y, threads)


LIBRARIES: Dict[str, Callable] = {"torch": torch_call, "onnxruntime": ort_call}


def library_calls(net: Net, threads: int, libraries: Optional[Sequence[str]] = None):
    makers = {lib: (lambda make=make: make(net, threads)) for lib, make in LIBRARIES.items()}
    return _conv.try_libraries(makers, NAME, libraries)


# --- measuring -----------------------------------------------------------------------------------------------

def agreement(a: np.ndarray, b: np.ndarray) -> Tuple[int, float]:
    """(max |a - b| in uint8 steps, share of elements that differ)."""
    d = np.abs(a.astype(np.int16) - b.astype(np.int16))
    return int(d.max()), float((d != 0).mean())


def measure(net: Net, threads: int, *, isa: str, repeats: int = 7, libraries: Optional[Sequence[str]] = None,
            notes: Optional[Dict[str, str]] = None, min_time: float = 0.02) -> List[_conv.ConvResult]:
    """The network at one thread count: nnkern fused and layer by layer, and each library, interleaved."""
    ctx = harness.nnkern_context(isa, threads)
    with ctx():
        nn = {"nnkern/fused": nnkern_call(net, True), "nnkern/layer_by_layer": nnkern_call(net, False)}
    libs, why = library_calls(net, threads, libraries)
    if notes is not None:
        notes.update(why)
    ref = nn["nnkern/fused"].out
    if not np.array_equal(nn["nnkern/layer_by_layer"].out, ref):
        raise AssertionError("espcn: nnkern's fused pixel shuffle differs from layer by layer")
    agree = {name: agreement(f.out(), ref) for name, f in libs.items()}
    agree.update({name: (0, 0.0) for name in nn})  # nnkern's two forms are checked bit-identical above
    out = _yolo.timed_network("espcn", NAME, net.shape, net.ops(), nn, libs, ctx,
                              {name: a[0] for name, a in agree.items()}, threads, isa=isa, repeats=repeats,
                              min_time=min_time, unit="GOP/s", peak_kind="int8")
    for r in out:
        r.differing = agree[r.label][1]
    return out


def run(threads_list: Sequence[int], *, isa: str, repeats: int = 7, libraries: Optional[Sequence[str]] = None,
        size: int = SIZE, progress: Optional[Callable[[str], None]] = print
        ) -> Tuple[List[_conv.ConvResult], Dict[str, str]]:
    net = make_net(size)
    return _yolo.run_threads("espcn", net.describe(), threads_list, progress,
                             lambda t, notes: measure(net, t, isa=isa, repeats=repeats, libraries=libraries,
                                                      notes=notes))


def markdown_table(results: Sequence[_conv.ConvResult], threads: int, notes: Optional[Dict[str, str]] = None) -> str:
    rs = [r for r in results if r.threads == threads]
    if not rs:
        return ""
    mine = next(r for r in rs if r.label == "nnkern/fused")
    N, H, W, C = rs[0].shape
    lines = [f"**espcn: ESPCN x{R} ({H}x{W}x{C} uint8, batch 1), {threads} thread(s)** - "
             f"latency of one forward pass; nnkern on {mine.isa}", "",
             "| library | ms (median) | ms (best) | GOP/s | % of int8 peak | time / nnkern fused | max diff (steps) "
             "| elements differing |", "|---|---|---|---|---|---|---|---|"]
    for r in rs:
        lines.append(f"| {r.label} | {r.seconds * 1e3:.3f} | {r.best_seconds * 1e3:.3f} | {_conv._fmt(r.rate)} | "
                     f"{'-' if r.pct_peak is None else f'{r.pct_peak:.0f}%'} | {r.seconds / mine.seconds:.2f}x | "
                     f"{r.max_diff} | {getattr(r, 'differing', 0.0) * 100:.2f}% |")
    lines += ["", "Notes: random weights; 5x5 3->64 ReLU, 3x3 64->32 ReLU, 3x3 32->3r^2, pixel shuffle; every library "
              "on the same uint8 input, int8 per-channel weights, int32 biases and calibrated uint8 activations. "
              "nnkern/layer_by_layer is bit-identical to nnkern/fused (checked). max diff / elements differing: "
              "against nnkern's output. The host is shared: only ratios within one run mean anything."]
    for name, msg in (notes or {}).items():
        lines.append(f"- {name} skipped: {msg}")
    return "\n".join(lines)

