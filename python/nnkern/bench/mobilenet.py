"""``python -m nnkern bench --op mobilenet``: MobileNet-v2 end to end (torchvision's layout, random weights, batch
norm folded into the convolutions' biases, 224 x 224 x 3, batch 1): the latency of nnkern (NHWC; each
inverted-residual block one nnkern.InvertedResidual, bands of rows through expand, depthwise and project; the stem
and head nnkern.Conv2d; residual adds fused; the global average pool in numpy and the classifier nnkern.Linear),
of the same layers called one by one ("layer by layer": Conv2d per convolution, numpy for the residual adds),
of torch (the nn.Module on channels_last and on the default NCHW layout, under inference_mode) and of
onnxruntime (the module exported to one graph), at 1 and 2 threads, the outputs compared.

GFLOP/s counts 2 x the multiply-adds of the convolutions and the classifier (0.60 GFLOP at 224 x 224).
"""
from __future__ import annotations

import dataclasses
import io
import warnings
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import anchors as _anchors
from . import conv as _conv
from . import harness
from . import yolo as _yolo

# (expansion t, output channels c, repeats n, first stride s): torchvision's MobileNet-v2 settings.
SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
            (6, 320, 1, 1))
SIZE = 224
NAME = "mobilenet-v2"
NOTES = ("Notes: random weights, batch norm folded into biases, ReLU6; nnkern runs each inverted-residual block "
         "fused (nnkern.InvertedResidual) and, as 'layer by layer', every convolution as its own Conv2d call; "
         "the host is shared: only ratios within one run mean anything.")


@dataclasses.dataclass
class Net:
    model: object  # the torch module (eval, float32)
    x: np.ndarray  # (1, size, size, 3) float32 NHWC

    @property
    def shape(self) -> Tuple[int, ...]:
        return tuple(self.x.shape)

    def flops(self) -> float:
        """2 * MACs of the convolutions and the classifier (measured with forward hooks on a zero input)."""
        import torch
        total = [0.0]

        def hook(m, _, out):
            if isinstance(m, torch.nn.Conv2d):
                total[0] += 2.0 * out.numel() * m.weight[0].numel()
            else:
                total[0] += 2.0 * m.weight.numel()
        mods = [m for m in self.model.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
        hs = [m.register_forward_hook(hook) for m in mods]
        with torch.inference_mode():
            self.model(torch.zeros(1, 3, self.x.shape[1], self.x.shape[2]))
        for h in hs:
            h.remove()
        return total[0]

    def describe(self) -> str:
        return f"{self.x.shape[1]}x{self.x.shape[2]}x3 -> 1000"


def _torch_module(seed: int):
    """The float32 module in eval mode: convolutions with biases (batch norm folded), ReLU6."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, inp, out, stride, t):
            super().__init__()
            hidden = inp * t
            layers = [] if t == 1 else [nn.Conv2d(inp, hidden, 1), nn.ReLU6()]
            layers += [nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden), nn.ReLU6(), nn.Conv2d(hidden, out, 1)]
            self.body = nn.Sequential(*layers)
            self.residual = stride == 1 and inp == out

        def forward(self, x):
            y = self.body(x)
            return x + y if self.residual else y

    class MobileNetV2(nn.Module):
        def __init__(self):
            super().__init__()
            layers: List[nn.Module] = [nn.Conv2d(3, 32, 3, 2, 1), nn.ReLU6()]
            inp = 32
            for t, c, n, s in SETTINGS:
                for i in range(n):
                    layers.append(Block(inp, c, s if i == 0 else 1, t))
                    inp = c
            layers += [nn.Conv2d(inp, 1280, 1), nn.ReLU6()]
            self.features = nn.Sequential(*layers)
            self.classifier = nn.Linear(1280, 1000)

        def forward(self, x):
            return self.classifier(self.features(x).mean((2, 3)))

    torch.manual_seed(seed)
    model = MobileNetV2().eval()
    with torch.no_grad():  # He-like scales so the activations keep their magnitude through the depth
        for m in model.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                m.weight.normal_(0.0, (2.0 / m.weight[0].numel()) ** 0.5 * 0.7)
                m.bias.uniform_(-0.1, 0.1)
    return model


def make_net(size: int = SIZE) -> Net:
    rng = np.random.default_rng(_anchors.SEED)
    return Net(_torch_module(_anchors.SEED), rng.random((1, size, size, 3), dtype=np.float32))


# --- the libraries -----------------------------------------------------------------------------------------

def nnkern_call(net: Net, fused: bool = True) -> Callable:
    """The forward pass through nnkern layers built once (``fused``: an InvertedResidual per block, else a Conv2d
    per convolution and numpy residual adds), each writing into its own preallocated output; ``call.out`` the
    logits."""
    import nnkern
    from torch import nn

    def convs(mods):  # Conv2d (+ ReLU6) -> nnkern.Conv2d with the activation fused
        out = []
        for i, m in enumerate(mods):
            if isinstance(m, nn.Conv2d):
                act = "relu6" if i + 1 < len(mods) and isinstance(mods[i + 1], nn.ReLU6) else None
                out.append(nnkern.Conv2d.from_torch(m, activation=act))
        return out

    feats = list(net.model.features)
    # The plan: (layer, index of the earlier step whose output is added after it, or None).
    plan: List[Tuple[Callable, Optional[int]]] = [(convs(feats[:2])[0], None)]
    for b in feats[2:-2]:
        layers = convs(list(b.body))
        if fused:
            plan.append((nnkern.InvertedResidual(*([None] * (3 - len(layers)) + layers), residual=b.residual), None))
            continue
        block_input = len(plan) - 1
        plan += [(c, None) for c in layers[:-1]] + [(layers[-1], block_input if b.residual else None)]
    plan.append((convs(feats[-2:])[0], None))
    linear = nnkern.Linear.from_torch(net.model.classifier)
    logits = np.empty((1, 1000), np.float32)
    bufs: List[np.ndarray] = []
    y = net.x
    for layer, _ in plan:  # the outputs, allocated once
        bufs.append(np.empty(layer.output_shape(y.shape), np.float32))
        y = bufs[-1]
    x = net.x

    def call():
        y = x
        for (layer, add), buf in zip(plan, bufs):
            y = layer(y, buf)
            if add is not None:
                np.add(y, bufs[add], out=y)
        linear(y.mean(axis=(1, 2), dtype=np.float32), out=logits)
    call.out = logits
    return call


def torch_call(net: Net, threads: int, channels_last: bool = True) -> Callable:
    import torch
    _anchors.set_threads(threads)
    model = net.model.to(memory_format=torch.channels_last) if channels_last else net.model
    x = torch.from_numpy(net.x).permute(0, 3, 1, 2)
    x = x.contiguous(memory_format=torch.channels_last) if channels_last else x.contiguous()
    last = {}

    def call():
        with torch.inference_mode():
            last["y"] = model(x)
    call.out = lambda: last["y"].numpy()
    return call


def ort_call(net: Net, threads: int) -> Callable:
    import torch
    buf = io.BytesIO()
    x_nchw = np.ascontiguousarray(net.x.transpose(0, 3, 1, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net.model, torch.from_numpy(x_nchw), buf, dynamo=False, opset_version=17,
                          input_names=["A"], output_names=["Y"])
    sess = _anchors.ort_session(buf.getvalue(), threads)
    y = np.empty((1, 1000), np.float32)
    call = _anchors._ort_call(sess, x_nchw, y)
    call.out = lambda: y
    return call


LIBRARIES: Dict[str, Callable] = {
    "torch_cl": lambda net, threads: torch_call(net, threads, channels_last=True),
    "torch_nchw": lambda net, threads: torch_call(net, threads, channels_last=False),
    "onnxruntime": ort_call,
}


def library_calls(net: Net, threads: int, libraries: Optional[Sequence[str]] = None):
    """({name: call} of the installed libraries that run the network, {name: why it was skipped})."""
    return _yolo.network_library_calls(LIBRARIES, NAME, net, threads, libraries)


# --- measuring ------------------------------------------------------------------------------------------

def measure(net: Net, threads: int, *, isa: str, repeats: int = 7, libraries: Optional[Sequence[str]] = None,
            notes: Optional[Dict[str, str]] = None, min_time: float = 0.02) -> List[_conv.ConvResult]:
    """The network at one thread count: nnkern fused and layer by layer and each library, interleaved."""
    ctx = harness.nnkern_context(isa, threads)
    with ctx():
        fused, unfused = nnkern_call(net, True), nnkern_call(net, False)
    libs, why = library_calls(net, threads, libraries)
    if notes is not None:
        for name, msg in why.items():
            notes.setdefault(name, msg)
    as_library = lambda: unfused()  # noqa: E731 - checked like the other libraries: out() gives the logits
    as_library.out = lambda: unfused.out
    with ctx():
        diffs = _yolo.check(fused, {"nnkern/layer_by_layer": as_library, **libs})
    return _yolo.timed_network("mobilenet", NAME, net.shape, net.flops(),
                               {"nnkern/": fused, "nnkern/layer_by_layer": unfused}, libs, ctx, diffs, threads,
                               isa=isa, repeats=repeats, min_time=min_time)


def run(threads_list: Sequence[int], *, isa: str, repeats: int = 7, libraries: Optional[Sequence[str]] = None,
        size: int = SIZE, progress: Optional[Callable[[str], None]] = print
        ) -> Tuple[List[_conv.ConvResult], Dict[str, str]]:
    net = make_net(size)
    return _yolo.run_threads("mobilenet", net.describe(), threads_list, progress,
                             lambda t, notes: measure(net, t, isa=isa, repeats=repeats, libraries=libraries,
                                                      notes=notes))


def markdown_table(results: Sequence[_conv.ConvResult], threads: int, notes: Optional[Dict[str, str]] = None) -> str:
    return _yolo.markdown_table(results, threads, notes, title="mobilenet: MobileNet-v2", notes_text=NOTES)
