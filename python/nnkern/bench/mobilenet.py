"""``python -m nnkern bench --op mobilenet``: MobileNet-v2 (torchvision's layout, random weights, batch norm folded
into the convolutions' biases, 224 x 224, batch 1) end to end: nnkern (NHWC Conv2d layers built once with
``from_torch``, ReLU6 fused, the residual adds in numpy, the global average pool in numpy and the classifier as
nnkern.Linear) against the same torch module (default NCHW and channels_last) and onnxruntime (the module exported
to one ONNX graph). Latency in milliseconds, best of the repeats, the libraries interleaved; each output is compared
with torch's (max |difference| relative to the largest |logit|)."""
from __future__ import annotations

import io
import time
import warnings
from typing import Callable, Dict, List

import numpy as np

import nnkern

from . import anchors as _anchors

# (expansion t, output channels c, repeats n, first stride s): torchvision's MobileNet-v2 settings.
SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
            (6, 320, 1, 1))


def _torch_model(seed: int = 0):
    """The float32 torch module in eval mode: convolutions with biases (batch norm folded), ReLU6."""
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
    with torch.no_grad():  # weights scaled so activations stay O(1) through the depth (He-like, per fan-in)
        for m in model.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                fan_in = m.weight[0].numel()
                m.weight.normal_(0.0, (2.0 / fan_in) ** 0.5 * 0.7)
                m.bias.uniform_(-0.1, 0.1)
    return model


def nnkern_model(model) -> Callable[[np.ndarray], np.ndarray]:
    """The torch module as a function of an NHWC float32 batch, every convolution an nnkern.Conv2d."""
    import torch
    from torch import nn

    def conv(m, act):
        return nnkern.Conv2d.from_torch(m, activation=act)

    def sequence(mods):
        steps, i = [], 0
        while i < len(mods):
            m = mods[i]
            act = "relu6" if i + 1 < len(mods) and isinstance(mods[i + 1], nn.ReLU6) else None
            steps.append(conv(m, act))
            i += 2 if act else 1
        return steps

    feats = list(model.features)
    stem, body, head = sequence(feats[:2]), feats[2:-2], sequence(feats[-2:])
    blocks = [(sequence(list(b.body)), b.residual) for b in body]
    linear = nnkern.Linear.from_torch(model.classifier)
    del torch

    # Three flat buffers of the largest activation, reused round the layers (a runtime's memory plan): a layer
    # writes into one that holds neither its input nor the block's residual, so the working set stays in cache.
    pool: List[np.ndarray] = []

    def call(layer, x, keep):
        shape = layer.output_shape(x.shape)
        size = int(np.prod(shape))
        if not pool or pool[0].size < size:
            pool[:] = [np.empty(max(size, 1 << 16), np.float32) for _ in range(3)]
        buf = next(b for b in pool if not np.shares_memory(b, x) and (keep is None or not np.shares_memory(b, keep)))
        return layer(x, buf[:size].reshape(shape))

    def run(x):
        y = call(stem[0], x, None)
        for convs, residual in blocks:
            z = y
            for c in convs:
                z = call(c, z, y)
            if residual:
                np.add(z, y, out=z)
            y = z
        y = call(head[0], y, None)
        return linear(y.mean(axis=(1, 2), dtype=np.float32))
    return run


def measure(threads: int = 1, repeats: int = 10, seed: int = 0) -> Dict[str, object]:
    """{library: best latency in ms} plus "max_diff" {library: relative max |output - torch's|}."""
    torch = _anchors._torch()
    if torch is None:
        raise RuntimeError("the MobileNet-v2 comparison needs torch (the model is defined there)")
    _anchors.set_threads(threads)
    nnkern.set_num_threads(threads)
    model = _torch_model(seed)
    rng = np.random.default_rng(seed)
    x_nchw = rng.standard_normal((1, 3, 224, 224), dtype=np.float32)
    x_nhwc = np.ascontiguousarray(x_nchw.transpose(0, 2, 3, 1))
    xt = torch.from_numpy(x_nchw)
    model_cl = _torch_model(seed).to(memory_format=torch.channels_last)
    xt_cl = xt.contiguous(memory_format=torch.channels_last)
    runs: Dict[str, Callable[[], np.ndarray]] = {}
    runs["nnkern"] = (lambda f: lambda: f(x_nhwc))(nnkern_model(model))

    def torch_run(m, x):
        def call():
            with torch.no_grad():
                return m(x).numpy()
        return call
    runs["torch"] = torch_run(model, xt)
    runs["torch_channels_last"] = torch_run(model_cl, xt_cl)
    if _anchors._import("onnxruntime") is not None:
        buf = io.BytesIO()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, xt, buf, dynamo=False, opset_version=17, input_names=["x"], output_names=["y"])
        sess = _anchors.ort_session(buf.getvalue(), threads)
        runs["onnxruntime"] = lambda: sess.run(["y"], {"x": x_nchw})[0]
    want = runs["torch"]()
    scale = float(np.abs(want).max())
    diffs = {name: float(np.abs(f() - want).max()) / scale for name, f in runs.items()}  # also the warm-up
    best = {name: float("inf") for name in runs}
    for _ in range(repeats):
        for name, f in runs.items():
            t = time.perf_counter()
            f()
            best[name] = min(best[name], time.perf_counter() - t)
    return {"ms": {k: v * 1e3 for k, v in best.items()}, "max_diff": diffs}


def table(threads=(1, 2), repeats: int = 10) -> str:
    """A markdown table: latency per library and thread count, nnkern's speed-up over the best other."""
    rows = ["| threads | nnkern ms | torch ms | torch channels_last ms | onnxruntime ms | best other / nnkern | "
            "max rel. diff (nnkern vs torch) |", "|---|---|---|---|---|---|---|"]
    for t in threads:
        r = measure(t, repeats)
        ms = r["ms"]
        others = [v for k, v in ms.items() if k != "nnkern"]
        rows.append(f"| {t} | {ms['nnkern']:.2f} | {ms['torch']:.2f} | {ms['torch_channels_last']:.2f} | "
                    f"{ms.get('onnxruntime', float('nan')):.2f} | {min(others) / ms['nnkern']:.2f}x | "
                    f"{r['max_diff']['nnkern']:.1e} |")
    return "\n".join(rows)
