"""``python -m nnkern bench --op qnet``: quantized ResNet-18 and MobileNet-v2 end to end, 224 x 224 x 3, batch 1
and 8, random weights (nothing downloaded): the latency of nnkern, torch's quantized model and onnxruntime's QDQ
model in one run, and the top-1 agreement of the three.

The networks are torchvision's architectures written out here in torch (batch norm folded into the convolutions'
biases, He-scaled random weights). MobileNet-v2 uses ReLU for ReLU6, as torchvision's quantizable MobileNet-v2
does.

* torch: eager-mode static quantization with the x86 engine (conv + ReLU fused, per-channel symmetric int8
  weights, uint8 activations from min/max observers over CALIBRATION random images, full range); the model runs
  on channels_last input under inference_mode, QuantStub to DeQuantStub.
* nnkern: the same quantized model, layer by layer through nnkern ops built once from torch's quantized modules
  (their int8 weights, scales and zero points): nnkern.quantize of the input, nnkern.QConv2d (ReLU fused; a
  residual block's second convolution fuses the shortcut add and its ReLU through ``residual=``, requantizing
  once to the add's scale where torch requantizes the convolution's output first), nnkern.max_pool2d,
  nnkern.avg_pool2d (the global pool, uint8), nnkern.QLinear to float32 logits; NHWC, outputs preallocated.
* onnxruntime: the float model exported to ONNX and quantized by onnxruntime.quantization.quantize_static (QDQ,
  per-channel int8 weights, uint8 activations, min/max calibration on the same images), which its optimizer
  fuses into QLinearConv / QLinearAdd nodes.

All three start from the float32 image and end with float32 logits. GOP/s counts 2 x the multiply-adds of the
convolutions and the classifier. Top-1 agreement: the arg-max of the logits of each pair of libraries (and of the
float model) over AGREEMENT random images.
"""
from __future__ import annotations

import copy
import dataclasses
import io
import logging
import os
import tempfile
import time
import warnings
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import anchors as _anchors
from . import conv as _conv
from . import harness
from . import mobilenet as _mobilenet
from . import yolo as _yolo

NETWORKS = ("resnet18", "mobilenet_v2")
BATCHES = (1, 8)
SIZE = 224
CALIBRATION = 16  # random images the observers (torch) and the calibrator (onnxruntime) see
AGREEMENT = 32  # random images of the top-1 agreement
RESNET18_STAGES = ((64, 1), (64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1))  # BasicBlocks


# --- the float models (quantizable: QuantStub, DeQuantStub, FloatFunctional adds) --------------------------

def _conv_relu(nn, *args, **kw):
    """Conv2d + ReLU as a two-module Sequential, the pair torch fuses."""
    return nn.Sequential(nn.Conv2d(*args, **kw), nn.ReLU())


def _resnet18(nn, tq, nnq):
    class BasicBlock(nn.Module):
        def __init__(self, inp, out, stride):
            super().__init__()
            self.conv1 = _conv_relu(nn, inp, out, 3, stride, 1)
            self.conv2 = nn.Conv2d(out, out, 3, 1, 1)
            self.down = nn.Conv2d(inp, out, 1, stride) if stride != 1 or inp != out else None
            self.add = nnq.FloatFunctional()

        def forward(self, x):
            shortcut = x if self.down is None else self.down(x)
            return self.add.add_relu(self.conv2(self.conv1(x)), shortcut)

    class ResNet18(nn.Module):
        def __init__(self):
            super().__init__()
            self.quant, self.dequant = tq.QuantStub(), tq.DeQuantStub()
            self.stem = _conv_relu(nn, 3, 64, 7, 2, 3)
            self.pool = nn.MaxPool2d(3, 2, 1)
            blocks, inp = [], 64
            for out, stride in RESNET18_STAGES:
                blocks.append(BasicBlock(inp, out, stride))
                inp = out
            self.blocks = nn.Sequential(*blocks)
            self.gap = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(512, 1000)

        def forward(self, x):
            x = self.blocks(self.pool(self.stem(self.quant(x))))
            return self.dequant(self.fc(self.gap(x).flatten(1)))
    return ResNet18()


def _mobilenet_v2(nn, tq, nnq):
    class InvertedResidual(nn.Module):
        def __init__(self, inp, out, stride, t):
            super().__init__()
            hidden = inp * t
            self.expand = _conv_relu(nn, inp, hidden, 1) if t != 1 else None
            self.dw = _conv_relu(nn, hidden, hidden, 3, stride, 1, groups=hidden)
            self.project = nn.Conv2d(hidden, out, 1)
            self.residual = stride == 1 and inp == out
            self.add = nnq.FloatFunctional()

        def forward(self, x):
            y = self.project(self.dw(x if self.expand is None else self.expand(x)))
            return self.add.add(y, x) if self.residual else y

    class MobileNetV2(nn.Module):
        def __init__(self):
            super().__init__()
            self.quant, self.dequant = tq.QuantStub(), tq.DeQuantStub()
            self.stem = _conv_relu(nn, 3, 32, 3, 2, 1)
            blocks, inp = [], 32
            for t, c, n, s in _mobilenet.SETTINGS:
                for i in range(n):
                    blocks.append(InvertedResidual(inp, c, s if i == 0 else 1, t))
                    inp = c
            self.blocks = nn.Sequential(*blocks)
            self.head = _conv_relu(nn, inp, 1280, 1)
            self.gap = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(1280, 1000)

        def forward(self, x):
            x = self.head(self.blocks(self.stem(self.quant(x))))
            return self.dequant(self.fc(self.gap(x).flatten(1)))
    return MobileNetV2()


def float_model(name: str, seed: int = _anchors.SEED):
    """The float32 network ``name`` in eval mode, He-scaled random weights and small random biases."""
    import torch
    import torch.ao.nn.quantized as nnq
    import torch.ao.quantization as tq
    from torch import nn
    if name not in NETWORKS:
        raise ValueError(f"unknown network {name!r}; expected one of {NETWORKS}")
    torch.manual_seed(seed)
    model = (_resnet18 if name == "resnet18" else _mobilenet_v2)(nn, tq, nnq).eval()
    with torch.no_grad():  # the activations keep their magnitude through the depth
        for m in model.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                m.weight.normal_(0.0, (2.0 / m.weight[0].numel()) ** 0.5 * 0.7)
                m.bias.uniform_(-0.1, 0.1)
    return model


def images(n: int, size: int, seed: int) -> np.ndarray:
    """n random images, (n, 3, size, size) float32 in [0, 1): uniform noise times a random gain per image and
    channel (images that differ in more than their noise)."""
    rng = np.random.default_rng(seed)
    return rng.random((n, 3, size, size), dtype=np.float32) * rng.random((n, 3, 1, 1), dtype=np.float32)


def torch_quantized(model, calibration: np.ndarray):
    """torch's eager static quantization of a float model (a copy): x86 engine, conv + ReLU fused, per-channel
    symmetric int8 weights, full-range uint8 activations observed by min / max over ``calibration``."""
    import torch
    import torch.ao.quantization as tq
    from torch import nn
    torch.backends.quantized.engine = "x86"
    q = copy.deepcopy(model)
    pairs = [m for m in q.modules() if isinstance(m, nn.Sequential) and len(m) == 2
             and isinstance(m[0], nn.Conv2d) and isinstance(m[1], nn.ReLU)]
    for m in pairs:  # collected first: fusing replaces modules
        tq.fuse_modules(m, [["0", "1"]], inplace=True)
    q.qconfig = tq.QConfig(
        activation=tq.MinMaxObserver.with_args(dtype=torch.quint8),
        weight=tq.PerChannelMinMaxObserver.with_args(dtype=torch.qint8, qscheme=torch.per_channel_symmetric))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tq.prepare(q, inplace=True)
        with torch.inference_mode():
            for i in range(0, len(calibration), 8):
                q(torch.from_numpy(calibration[i:i + 8]))
        tq.convert(q, inplace=True)
    return q


# --- nnkern's forward pass, built from torch's quantized modules --------------------------------------------

class Program:
    """Steps run in order, each ``fn(*inputs, out)`` on earlier steps' outputs (index 0: the network's input),
    writing into its own buffer (allocated on the first run, reused after)."""

    def __init__(self):
        self.steps: List[Tuple[Callable, Tuple[int, ...]]] = []
        self.bufs: List[Optional[np.ndarray]] = []

    def add(self, fn: Callable, *inputs: int) -> int:
        self.steps.append((fn, inputs))
        self.bufs.append(None)
        return len(self.steps)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        vals = [x]
        for i, (fn, inputs) in enumerate(self.steps):
            vals.append(fn(*(vals[j] for j in inputs), self.bufs[i]))
            self.bufs[i] = vals[-1]
        return vals[-1]


def _qparams(m) -> Tuple[float, int]:
    """(scale, zero point) of a torch quantized module's output (a QuantStub's converted form included)."""
    scale, zp = m.scale, m.zero_point
    return float(scale.item() if hasattr(scale, "item") else scale), int(zp.item() if hasattr(zp, "item") else zp)


def _weights(m):
    """(int8 weights, per-channel float32 scales, float32 bias) of a torch quantized conv / linear module."""
    import torch
    w = m.weight()
    if w.qscheme() not in (torch.per_channel_symmetric, torch.per_channel_affine):
        raise ValueError(f"expected per-channel weights, got {w.qscheme()}")
    if int(w.q_per_channel_zero_points().abs().max()) != 0:
        raise ValueError("expected symmetric weights (zero point 0)")
    return (w.int_repr().numpy(), w.q_per_channel_scales().numpy().astype(np.float32),
            m.bias().detach().numpy().astype(np.float32))


def qconv_from(m, x_q: Tuple[float, int], relu: bool, out_q: Optional[Tuple[float, int]] = None,
               residual_q: Optional[Tuple[float, int]] = None):
    """nnkern.QConv2d of a torch quantized Conv2d / ConvReLU2d with input quantization x_q, output quantization
    out_q (default the module's own) and, given residual_q, a fused residual add of that quantization."""
    import nnkern
    w, ws, b = _weights(m)
    out_scale, out_zp = out_q or _qparams(m)
    extra = {} if residual_q is None else {"residual_scale": residual_q[0], "residual_zero_point": residual_q[1]}
    return nnkern.QConv2d(np.ascontiguousarray(w.transpose(0, 2, 3, 1)), b, weight_scale=ws, stride=m.stride,
                          padding=m.padding, dilation=m.dilation, groups=m.groups, input_scale=x_q[0],
                          input_zero_point=x_q[1], output_scale=out_scale, output_zero_point=out_zp, relu=relu,
                          **extra)


def _conv_step(layer) -> Callable:
    return lambda x, out: layer(x, out)


def _quantize_step(x_q: Tuple[float, int]) -> Callable:
    import nnkern
    return lambda x, out: nnkern.quantize(x, x_q[0], x_q[1])


def _residual_step(layer) -> Callable:
    return lambda x, r, out: layer(x, out, residual=r)


def _classifier_steps(prog: Program, last: int, q, x_q: Tuple[float, int]) -> int:
    """The uint8 global average pool (the input's quantization kept, as torch's) and the classifier to float32."""
    import nnkern
    w, ws, b = _weights(q.fc)
    fc = nnkern.QLinear(w, b, weight_scale=ws, input_scale=x_q[0], input_zero_point=x_q[1],
                        output_dtype=np.float32)
    pooled = prog.add(lambda x, out: nnkern.avg_pool2d(x, x.shape[1:3], out=out), last)
    return prog.add(lambda x, out: fc(x.reshape(x.shape[0], -1), out=out), pooled)


def _resnet18_program(q) -> Program:
    import nnkern
    prog = Program()
    x_q = _qparams(q.quant)
    last = prog.add(_quantize_step(x_q), 0)
    last = prog.add(_conv_step(qconv_from(q.stem[0], x_q, True)), last)
    x_q = _qparams(q.stem[0])
    last = prog.add(lambda x, out: nnkern.max_pool2d(x, 3, 2, 1, out=out), last)  # keeps the quantization
    for b in q.blocks:
        shortcut, short_q = last, x_q
        if b.down is not None:
            shortcut, short_q = prog.add(_conv_step(qconv_from(b.down, x_q, False)), last), _qparams(b.down)
        mid = prog.add(_conv_step(qconv_from(b.conv1[0], x_q, True)), last)
        add_q = _qparams(b.add)
        last = prog.add(_residual_step(qconv_from(b.conv2, _qparams(b.conv1[0]), True, add_q, short_q)), mid,
                        shortcut)
        x_q = add_q
    _classifier_steps(prog, last, q, x_q)
    return prog


def _mobilenet_program(q) -> Program:
    prog = Program()
    x_q = _qparams(q.quant)
    last = prog.add(_quantize_step(x_q), 0)
    last = prog.add(_conv_step(qconv_from(q.stem[0], x_q, True)), last)
    x_q = _qparams(q.stem[0])
    for b in q.blocks:
        block_in, in_q, h = last, x_q, last
        if b.expand is not None:
            h = prog.add(_conv_step(qconv_from(b.expand[0], x_q, True)), h)
            x_q = _qparams(b.expand[0])
        h = prog.add(_conv_step(qconv_from(b.dw[0], x_q, True)), h)
        x_q = _qparams(b.dw[0])
        if b.residual:
            add_q = _qparams(b.add)
            last = prog.add(_residual_step(qconv_from(b.project, x_q, False, add_q, in_q)), h, block_in)
            x_q = add_q
        else:
            last = prog.add(_conv_step(qconv_from(b.project, x_q, False)), h)
            x_q = _qparams(b.project)
    last = prog.add(_conv_step(qconv_from(q.head[0], x_q, True)), last)
    _classifier_steps(prog, last, q, _qparams(q.head[0]))
    return prog


def nnkern_program(name: str, q) -> Program:
    """nnkern's forward pass of the torch quantized network ``q`` (float32 NHWC images in, float32 logits out)."""
    return (_resnet18_program if name == "resnet18" else _mobilenet_program)(q)


# --- the network and its three runners --------------------------------------------------------------------

@dataclasses.dataclass
class QNet:
    name: str
    model: object  # the float torch module
    qmodel: object  # torch's quantized module
    calibration: np.ndarray  # (CALIBRATION, 3, size, size) float32
    size: int
    _ort_model: Optional[bytes] = None

    def shape(self, batch: int) -> Tuple[int, ...]:
        return (batch, self.size, self.size, 3)

    def ops(self, batch: int) -> float:
        """2 * MACs of the convolutions and the classifier (forward hooks on the float model)."""
        return batch * _mobilenet.Net(self.model, np.zeros((1, self.size, self.size, 3), np.float32)).flops()

    def ort_model(self) -> bytes:
        """The float model exported to ONNX (dynamic batch) and quantized by onnxruntime (QDQ), built once."""
        if self._ort_model is None:
            self._ort_model = ort_quantized(self.model, self.calibration)
        return self._ort_model


def make_net(name: str, size: int = SIZE) -> QNet:
    model = float_model(name)
    calibration = images(CALIBRATION, size, _anchors.SEED + 1)
    return QNet(name, model, torch_quantized(model, calibration), calibration, size)


def ort_quantized(model, calibration: np.ndarray) -> bytes:
    import torch
    from onnxruntime import quantization as oq
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, torch.from_numpy(calibration[:1]), buf, dynamo=False, opset_version=17,
                          input_names=["A"], output_names=["Y"], dynamic_axes={"A": {0: "n"}, "Y": {0: "n"}})

    class Reader(oq.CalibrationDataReader):
        def __init__(self):
            self.batches = iter([{"A": calibration[i:i + 8]} for i in range(0, len(calibration), 8)])

        def get_next(self):
            return next(self.batches, None)

    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "float.onnx"), os.path.join(d, "qdq.onnx")
        with open(src, "wb") as f:
            f.write(buf.getvalue())
        level = logging.getLogger().level
        logging.getLogger().setLevel(logging.ERROR)  # its advice to pre-process, printed on every call
        try:
            oq.quantize_static(src, dst, Reader(), quant_format=oq.QuantFormat.QDQ, per_channel=True,
                               activation_type=oq.QuantType.QUInt8, weight_type=oq.QuantType.QInt8,
                               calibrate_method=oq.CalibrationMethod.MinMax)
        finally:
            logging.getLogger().setLevel(level)
        with open(dst, "rb") as f:
            return f.read()


def nnkern_call(net: QNet, x_nchw: np.ndarray) -> Callable:
    """The nnkern program on x (given NCHW; it runs on an NHWC copy made once); ``call.out`` the logits (the
    buffer every call writes, allocated by a first run here)."""
    prog = nnkern_program(net.name, net.qmodel)
    x = np.ascontiguousarray(x_nchw.transpose(0, 2, 3, 1))

    def call():
        prog(x)
    call()
    call.out = prog.bufs[-1]
    return call


def torch_call(net: QNet, x_nchw: np.ndarray, threads: int) -> Callable:
    import torch
    _anchors.set_threads(threads)
    torch.backends.quantized.engine = "x86"
    x = torch.from_numpy(x_nchw).contiguous(memory_format=torch.channels_last)
    last = {}

    def call():
        with torch.inference_mode():
            last["y"] = net.qmodel(x)
    call.out = lambda: last["y"].numpy()
    return call


def ort_call(net: QNet, x_nchw: np.ndarray, threads: int) -> Callable:
    sess = _anchors.ort_session(net.ort_model(), threads)
    y = np.empty((x_nchw.shape[0], 1000), np.float32)
    call = _anchors._ort_call(sess, np.ascontiguousarray(x_nchw), y)
    call.out = lambda: y
    return call


def float_call(net: QNet, x_nchw: np.ndarray) -> Callable:
    import torch
    last = {}

    def call():
        with torch.inference_mode():
            last["y"] = net.model(torch.from_numpy(x_nchw))
    call.out = lambda: last["y"].numpy()
    return call


LIBRARIES: Dict[str, Callable] = {"torch": torch_call, "onnxruntime": ort_call}


def library_calls(net: QNet, x_nchw: np.ndarray, threads: int, libraries: Optional[Sequence[str]] = None):
    """({library: call} of the installed libraries that run the network, {library: why it was skipped})."""
    makers = {lib: (lambda make=make: make(net, x_nchw, threads)) for lib, make in LIBRARIES.items()}
    return _conv.try_libraries(makers, f"quantized {net.name}", libraries)


def agreement(net: QNet, libraries: Optional[Sequence[str]] = None, samples: int = AGREEMENT) -> Dict[str, object]:
    """Top-1 agreement over ``samples`` random images, in batches of 8, of nnkern, the float model and the
    installed libraries. Random weights make the logits nearly independent of the input (one class wins for
    every image), so the agreement is also taken on the *centred* logits (each library's minus their mean over
    the images: the part that depends on the input). {"raw" / "centred": {(a, b): matches}, "samples": n,
    "classes": {"raw" / "centred": distinct top-1 classes of the float model}}."""
    xs = images(samples, net.size, _anchors.SEED + 2)
    logits: Dict[str, List[np.ndarray]] = {}
    for i in range(0, samples, 8):
        x = xs[i:i + 8]
        calls = {"nnkern": nnkern_call(net, x), "float": float_call(net, x)}
        calls.update(library_calls(net, x, 1, libraries)[0])
        for lib, f in calls.items():
            f()
            logits.setdefault(lib, []).append(np.array(f.out if lib == "nnkern" else f.out()))
    ys = {lib: np.concatenate(v) for lib, v in logits.items()}
    out: Dict[str, object] = {"samples": samples, "classes": {}}
    names = list(ys)
    for kind in ("raw", "centred"):
        top = {lib: (y if kind == "raw" else y - y.mean(axis=0)).argmax(axis=1) for lib, y in ys.items()}
        out[kind] = {(a, b): int((top[a] == top[b]).sum()) for i, a in enumerate(names) for b in names[i + 1:]}
        out["classes"][kind] = len(np.unique(top["float"]))
    return out


def check(nn: Callable, libs: Dict[str, Callable]) -> Dict[str, float]:
    """{library: max |logits - nnkern's| / max |nnkern's|} of one run each."""
    return _yolo.check(nn, libs)


# --- measuring ------------------------------------------------------------------------------------------

def measure(net: QNet, batch: int, threads: int, *, isa: str, repeats: int = 7,
            libraries: Optional[Sequence[str]] = None, notes: Optional[Dict[str, str]] = None,
            min_time: float = 0.02) -> List[_conv.ConvResult]:
    """One network at one batch size and thread count: nnkern and each library, interleaved."""
    x = images(batch, net.size, _anchors.SEED)
    ctx = harness.nnkern_context(isa, threads)
    with ctx():
        nn = nnkern_call(net, x)
    libs, why = library_calls(net, x, threads, libraries)
    if notes is not None:
        for name, msg in why.items():
            notes.setdefault(name, msg)
    with ctx():
        diffs = check(nn, libs)
    return _yolo.timed_network("qnet", net.name, net.shape(batch), net.ops(batch), {"nnkern/auto": nn}, libs, ctx,
                               diffs, threads, isa=isa, repeats=repeats, min_time=min_time, unit="GOP/s",
                               peak_kind="int8")


def select(tokens: Optional[Sequence[str]]) -> Tuple[List[str], List[int]]:
    """--shapes: network names (resnet18, mobilenet_v2) and batch sizes, each defaulting to all."""
    names, batches = [], []
    for t in tokens or ():
        if t.isdigit() and int(t) > 0:
            batches.append(int(t))
        elif t in NETWORKS:
            names.append(t)
        else:
            raise ValueError(f"--op qnet: --shapes takes network names {NETWORKS} and batch sizes, got {t!r}")
    return names or list(NETWORKS), batches or list(BATCHES)


def run(threads_list: Sequence[int], *, isa: str, repeats: int = 7, libraries: Optional[Sequence[str]] = None,
        names: Sequence[str] = NETWORKS, batches: Sequence[int] = BATCHES, size: int = SIZE,
        progress: Optional[Callable[[str], None]] = print
        ) -> Tuple[List[_conv.ConvResult], Dict[str, str], Dict[str, Dict[str, object]]]:
    """Every network at every batch size and thread count; the results, the skipped libraries' notes and each
    network's top-1 agreement."""
    results, notes, agree = [], {}, {}
    for name in names:
        net = make_net(name, size)
        with harness.nnkern_context(isa, 1)():
            agree[name] = agreement(net, libraries)
        for batch in batches:
            for t in threads_list:
                t0 = time.perf_counter()
                res = measure(net, batch, t, isa=isa, repeats=repeats, libraries=libraries, notes=notes)
                results += res
                if progress:
                    progress(f"[qnet {name} N={batch} t={t}]  " + "  ".join(
                        f"{r.label} {r.seconds * 1e3:.2f} ms" for r in res) + f"  ({time.perf_counter() - t0:.1f} s)")
    return results, notes, agree


NOTES = ("Notes: random weights (He-scaled), batch norm folded, ReLU for MobileNet-v2's ReLU6 (as torchvision's "
         "quantizable model); torch = eager static quantization, x86 engine, channels_last; nnkern = the same "
         "quantized layers through QConv2d / max_pool2d / avg_pool2d / QLinear (residual adds fused into the "
         "second convolution, one requantization where torch has two); onnxruntime = quantize_static QDQ of the "
         "float model (its own calibration on the same images). Every library starts from the float32 image and "
         "ends with float32 logits. max diff: max |logits - nnkern's| / max |nnkern's|. time / nnkern's > 1: "
         "nnkern is faster. The host is shared: only ratios within one run mean anything.")


def markdown_table(results: Sequence[_conv.ConvResult], name: str, batch: int, threads: int,
                   notes: Optional[Dict[str, str]] = None) -> str:
    rs = [r for r in results if r.layer == name and r.shape[0] == batch]
    return _yolo.markdown_table(rs, threads, notes, title=f"qnet: quantized {name}", notes_text=NOTES,
                                unit="GOP/s", peak_kind="int8")


def agreement_table(agree: Dict[str, Dict[str, object]]) -> str:
    lines = ["**Top-1 agreement** (arg-max of the logits over the same random images; centred: the logits minus "
             "their mean over the images)", "",
             "| network | pair | raw | centred |", "|---|---|---|---|"]
    for name, a in agree.items():
        n = a["samples"]
        for pair, raw in a["raw"].items():
            lines.append(f"| {name} | {pair[0]} / {pair[1]} | {raw}/{n} | {a['centred'][pair]}/{n} |")
        lines.append(f"| {name} | distinct top-1 classes of the float model | {a['classes']['raw']} | "
                     f"{a['classes']['centred']} |")
    return "\n".join(lines)
