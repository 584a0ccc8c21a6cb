"""Whole ONNX models for testing and benchmarking ``nnkern.onnx.InferenceSession``.

Two sets of builders, each returning an ``onnx.ModelProto`` (opset 17), deterministic (fixed seeds):

* torch-defined architectures, exported with torch's TorchScript-based exporter (``dynamo=False``; the dynamo
  exporter needs onnxscript): ResNet-18, MobileNet-v2, MobileNet-v3-small, SqueezeNet 1.1, ShuffleNet-v2 x0.5, a
  YOLO-style detector, ESPCN, LSTM text classifiers and a small transformer encoder. torchvision cannot be imported
  here, so the architectures are written below, following torchvision's structure (layer order, channel counts,
  strides, block types), with random weights. BatchNorm layers get running statistics measured on random inputs
  (so activations stay normalized through deep networks, as in a trained network) and random affine parameters;
  the exporter folds eval-mode BatchNorm into the preceding convolution, so the exported graphs contain no
  BatchNormalization node, but the folded weights carry those statistics.
* the core set built with ``onnx.helper`` alone (no torch): a small CNN, a depthwise-separable block, a 1-D
  convolution model, an upsample+concat model and a tiny MLP. They are checked where torch is absent.

Classifiers have 10 classes (torchvision's 1000 would only add weights: the point is the layers' structure), and
inputs are small (64x64 or 96x96 images, 16 tokens from a vocabulary of 100), so each model runs in milliseconds.
torchvision's widths are kept except ResNet-18's, halved in "resnet18" ("resnet18_full" has them; HEAVY lists the
models only the exhaustive tests use). Each image model also takes a second image size (Feeds.alt_size).

``quantize(model, kind, feeds)`` makes INT8 versions (QDQ or QOperator) with onnxruntime's static quantization.
``MODELS`` maps each name to ``(builder, input_feeds_fn, needs_torch)``; ``input_feeds_fn(batch=1, size=None,
seed=0)`` returns ``{input name: array}``, and carries ``.size`` (the default image size or sequence length) and
``.alt_size`` (a second size the model declares dynamic, or None).
"""
from __future__ import annotations

import io
import logging
import os
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
NUM_CLASSES = 10


# ---------------------------------------------------------------------------------------------------- input feeds
class Feeds:
    """Random inputs of one model: ``feeds(batch=1, size=None, seed=0) -> {name: array}``.

    kind "image": float32 standard normal (N, channels, size, size); "sequence": float32 (N, channels, size);
    "tokens": int64 uniform in [0, vocab) of shape (N, size); "vector": float32 (N, channels)."""

    def __init__(self, name: str, kind: str, channels: int = 0, size: int = 0, alt_size: int | None = None,
                 vocab: int = 0):
        self.name, self.kind, self.channels, self.vocab = name, kind, channels, vocab
        self.size, self.alt_size = size, alt_size

    def __call__(self, batch: int = 1, size: int | None = None, seed: int = 0) -> dict:
        rng = np.random.default_rng(seed)
        s = self.size if size is None else size
        if self.kind == "image":
            x = rng.standard_normal((batch, self.channels, s, s), dtype=np.float32)
        elif self.kind == "sequence":
            x = rng.standard_normal((batch, self.channels, s), dtype=np.float32)
        elif self.kind == "tokens":
            x = rng.integers(0, self.vocab, (batch, s), dtype=np.int64)
        elif self.kind == "vector":
            x = rng.standard_normal((batch, self.channels), dtype=np.float32)
        else:
            raise ValueError(self.kind)
        return {self.name: x}

    def __repr__(self) -> str:
        return f"Feeds({self.name!r}, {self.kind!r}, size={self.size}, alt_size={self.alt_size})"


# ---------------------------------------------------------------------------------------------------- torch models
def _torch():
    import torch
    return torch


def _make_divisible(v: float, divisor: int = 8, min_value: int | None = None) -> int:
    """torchvision's channel rounding for MobileNets: to a multiple of divisor, never more than 10% down."""
    min_value = min_value or divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


def _torch_modules():
    """The architectures' classes (defined on first use, so importing this file needs no torch)."""
    torch = _torch()
    nn = torch.nn

    def conv_bn(cin, cout, k, stride=1, groups=1, act=None, eps=1e-5):
        layers = [nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False),
                  nn.BatchNorm2d(cout, eps=eps)]
        if act is not None:
            layers.append(act())
        return nn.Sequential(*layers)

    # -- ResNet-18 (torchvision.models.resnet: BasicBlock, layers [2, 2, 2, 2])
    class BasicBlock(nn.Module):
        def __init__(self, inplanes, planes, stride=1):
            super().__init__()
            self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.downsample = None
            if stride != 1 or inplanes != planes:
                self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False),
                                                nn.BatchNorm2d(planes))

        def forward(self, x):
            identity = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return self.relu(out + identity)

    class ResNet18(nn.Module):
        def __init__(self, width=64, num_classes=NUM_CLASSES):
            super().__init__()
            self.conv1 = nn.Conv2d(3, width, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            layers, inplanes = [], width
            for i in range(4):
                planes = width * 2 ** i
                stride = 1 if i == 0 else 2
                layers.append(nn.Sequential(BasicBlock(inplanes, planes, stride), BasicBlock(planes, planes)))
                inplanes = planes
            self.layer1, self.layer2, self.layer3, self.layer4 = layers
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(inplanes, num_classes)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(torch.flatten(self.avgpool(x), 1))

    # -- MobileNet-v2 (torchvision.models.mobilenetv2)
    class InvertedResidualV2(nn.Module):
        def __init__(self, inp, oup, stride, expand_ratio):
            super().__init__()
            hidden = int(round(inp * expand_ratio))
            self.use_res_connect = stride == 1 and inp == oup
            layers = []
            if expand_ratio != 1:
                layers.append(conv_bn(inp, hidden, 1, act=nn.ReLU6))
            layers += [conv_bn(hidden, hidden, 3, stride, groups=hidden, act=nn.ReLU6),
                       nn.Conv2d(hidden, oup, 1, 1, 0, bias=False), nn.BatchNorm2d(oup)]
            self.conv = nn.Sequential(*layers)

        def forward(self, x):
            return x + self.conv(x) if self.use_res_connect else self.conv(x)

    class MobileNetV2(nn.Module):
        SETTING = [[1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 3, 2], [6, 64, 4, 2], [6, 96, 3, 1], [6, 160, 3, 2],
                   [6, 320, 1, 1]]  # t (expansion), c (channels), n (repeats), s (first stride)

        def __init__(self, width_mult=1.0, num_classes=NUM_CLASSES):
            super().__init__()
            input_channel = _make_divisible(32 * width_mult)
            last_channel = _make_divisible(1280 * max(1.0, width_mult))
            features = [conv_bn(3, input_channel, 3, 2, act=nn.ReLU6)]
            for t, c, n, s in self.SETTING:
                out = _make_divisible(c * width_mult)
                for i in range(n):
                    features.append(InvertedResidualV2(input_channel, out, s if i == 0 else 1, t))
                    input_channel = out
            features.append(conv_bn(input_channel, last_channel, 1, act=nn.ReLU6))
            self.features = nn.Sequential(*features)
            self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(last_channel, num_classes))

        def forward(self, x):
            x = nn.functional.adaptive_avg_pool2d(self.features(x), (1, 1))
            return self.classifier(torch.flatten(x, 1))

    # -- MobileNet-v3-small (torchvision.models.mobilenetv3)
    class SqueezeExcitation(nn.Module):
        def __init__(self, channels, squeeze):
            super().__init__()
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc1 = nn.Conv2d(channels, squeeze, 1)
            self.fc2 = nn.Conv2d(squeeze, channels, 1)
            self.activation = nn.ReLU()
            self.scale_activation = nn.Hardsigmoid()

        def forward(self, x):
            s = self.scale_activation(self.fc2(self.activation(self.fc1(self.avgpool(x)))))
            return s * x

    class InvertedResidualV3(nn.Module):
        def __init__(self, cin, k, expanded, cout, use_se, act, stride):
            super().__init__()
            self.use_res_connect = stride == 1 and cin == cout
            layers = []
            if expanded != cin:
                layers.append(conv_bn(cin, expanded, 1, act=act, eps=0.001))
            layers.append(conv_bn(expanded, expanded, k, stride, groups=expanded, act=act, eps=0.001))
            if use_se:
                layers.append(SqueezeExcitation(expanded, _make_divisible(expanded // 4, 8)))
            layers.append(conv_bn(expanded, cout, 1, eps=0.001))
            self.block = nn.Sequential(*layers)

        def forward(self, x):
            return x + self.block(x) if self.use_res_connect else self.block(x)

    class MobileNetV3Small(nn.Module):
        RE, HS = nn.ReLU, nn.Hardswish
        SETTING = [(16, 3, 16, 16, True, RE, 2), (16, 3, 72, 24, False, RE, 2), (24, 3, 88, 24, False, RE, 1),
                   (24, 5, 96, 40, True, HS, 2), (40, 5, 240, 40, True, HS, 1), (40, 5, 240, 40, True, HS, 1),
                   (40, 5, 120, 48, True, HS, 1), (48, 5, 144, 48, True, HS, 1), (48, 5, 288, 96, True, HS, 2),
                   (96, 5, 576, 96, True, HS, 1), (96, 5, 576, 96, True, HS, 1)]
        # (input channels, kernel, expanded channels, output channels, squeeze-excite, activation, stride)

        def __init__(self, num_classes=NUM_CLASSES):
            super().__init__()
            layers = [conv_bn(3, 16, 3, 2, act=nn.Hardswish, eps=0.001)]
            layers += [InvertedResidualV3(*conf) for conf in self.SETTING]
            layers.append(conv_bn(96, 576, 1, act=nn.Hardswish, eps=0.001))
            self.features = nn.Sequential(*layers)
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.classifier = nn.Sequential(nn.Linear(576, 1024), nn.Hardswish(), nn.Dropout(0.2),
                                            nn.Linear(1024, num_classes))

        def forward(self, x):
            return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))

    # -- SqueezeNet 1.1 (torchvision.models.squeezenet)
    class Fire(nn.Module):
        def __init__(self, inplanes, squeeze, expand1x1, expand3x3):
            super().__init__()
            self.squeeze = nn.Conv2d(inplanes, squeeze, 1)
            self.expand1x1 = nn.Conv2d(squeeze, expand1x1, 1)
            self.expand3x3 = nn.Conv2d(squeeze, expand3x3, 3, padding=1)
            self.relu = nn.ReLU(inplace=True)

        def forward(self, x):
            x = self.relu(self.squeeze(x))
            return torch.cat([self.relu(self.expand1x1(x)), self.relu(self.expand3x3(x))], 1)

    class SqueezeNet11(nn.Module):
        def __init__(self, num_classes=NUM_CLASSES):
            super().__init__()
            pool = lambda: nn.MaxPool2d(3, 2, ceil_mode=True)  # noqa: E731
            self.features = nn.Sequential(
                nn.Conv2d(3, 64, 3, 2), nn.ReLU(inplace=True), pool(),
                Fire(64, 16, 64, 64), Fire(128, 16, 64, 64), pool(),
                Fire(128, 32, 128, 128), Fire(256, 32, 128, 128), pool(),
                Fire(256, 48, 192, 192), Fire(384, 48, 192, 192), Fire(384, 64, 256, 256), Fire(512, 64, 256, 256))
            final_conv = nn.Conv2d(512, num_classes, 1)
            self.classifier = nn.Sequential(nn.Dropout(0.5), final_conv, nn.ReLU(inplace=True),
                                            nn.AdaptiveAvgPool2d((1, 1)))
            for m in self.modules():  # torchvision's initialization
                if isinstance(m, nn.Conv2d):
                    if m is final_conv:
                        nn.init.normal_(m.weight, mean=0.0, std=0.01)
                    else:
                        nn.init.kaiming_uniform_(m.weight)
                    nn.init.uniform_(m.bias, -0.1, 0.1)  # torchvision zeroes them; random here, to test bias

        def forward(self, x):
            return torch.flatten(self.classifier(self.features(x)), 1)

    # -- ShuffleNet-v2 x0.5 (torchvision.models.shufflenetv2)
    def channel_shuffle(x, groups: int):
        b, c, h, w = x.size()
        x = x.view(b, groups, c // groups, h, w)
        x = torch.transpose(x, 1, 2).contiguous()
        return x.view(b, -1, h, w)

    class ShuffleUnit(nn.Module):
        def __init__(self, inp, oup, stride):
            super().__init__()
            self.stride = stride
            bf = oup // 2
            if stride > 1:
                self.branch1 = nn.Sequential(conv_bn(inp, inp, 3, stride, groups=inp),
                                             conv_bn(inp, bf, 1, act=nn.ReLU))
            else:
                self.branch1 = nn.Sequential()
            self.branch2 = nn.Sequential(conv_bn(inp if stride > 1 else bf, bf, 1, act=nn.ReLU),
                                         conv_bn(bf, bf, 3, stride, groups=bf),
                                         conv_bn(bf, bf, 1, act=nn.ReLU))

        def forward(self, x):
            if self.stride == 1:
                x1, x2 = x.chunk(2, dim=1)
                out = torch.cat((x1, self.branch2(x2)), dim=1)
            else:
                out = torch.cat((self.branch1(x), self.branch2(x)), dim=1)
            return channel_shuffle(out, 2)

    class ShuffleNetV2(nn.Module):
        def __init__(self, repeats=(4, 8, 4), channels=(24, 48, 96, 192, 1024), num_classes=NUM_CLASSES):
            super().__init__()
            self.conv1 = conv_bn(3, channels[0], 3, 2, act=nn.ReLU)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            stages, cin = [], channels[0]
            for n, cout in zip(repeats, channels[1:4]):
                stages.append(nn.Sequential(ShuffleUnit(cin, cout, 2), *[ShuffleUnit(cout, cout, 1)
                                                                         for _ in range(n - 1)]))
                cin = cout
            self.stage2, self.stage3, self.stage4 = stages
            self.conv5 = conv_bn(cin, channels[4], 1, act=nn.ReLU)
            self.fc = nn.Linear(channels[4], num_classes)

        def forward(self, x):
            x = self.maxpool(self.conv1(x))
            x = self.conv5(self.stage4(self.stage3(self.stage2(x))))
            return self.fc(x.mean([2, 3]))

    # -- YOLO-style detector (the shape of YOLOv3-tiny, half its widths): Conv-BN-LeakyReLU backbone with max
    # pools, a head at stride 32 and one at stride 16 fed by the upsampled stride-32 features concatenated with the
    # backbone's stride-16 ones; each head's output reshaped to (N, anchors, H, W, 5 + classes).
    def cbl(cin, cout, k):
        return conv_bn(cin, cout, k, act=lambda: nn.LeakyReLU(0.1))

    class YoloHead(nn.Module):
        def __init__(self, cin, anchors, classes):
            super().__init__()
            self.na, self.no = anchors, 5 + classes
            self.conv = nn.Conv2d(cin, anchors * self.no, 1)

        def forward(self, x):
            x = self.conv(x)
            bs, _, ny, nx = x.shape
            return x.view(bs, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2).contiguous()

    class TinyYolo(nn.Module):
        def __init__(self, anchors=3, classes=4):
            super().__init__()
            mp = lambda: nn.MaxPool2d(2, 2)  # noqa: E731
            self.backbone16 = nn.Sequential(cbl(3, 8, 3), mp(), cbl(8, 16, 3), mp(), cbl(16, 32, 3), mp(),
                                            cbl(32, 64, 3), mp(), cbl(64, 128, 3))  # stride 16
            self.backbone32 = nn.Sequential(mp(), cbl(128, 256, 3), cbl(256, 128, 1))  # stride 32
            self.head32 = nn.Sequential(cbl(128, 256, 3), YoloHead(256, anchors, classes))
            self.lateral = cbl(128, 64, 1)
            self.upsample = nn.Upsample(scale_factor=2, mode="nearest")
            self.head16 = nn.Sequential(cbl(64 + 128, 128, 3), YoloHead(128, anchors, classes))

        def forward(self, x):
            route = self.backbone16(x)
            deep = self.backbone32(route)
            up = self.upsample(self.lateral(deep))
            return self.head32(deep), self.head16(torch.cat([up, route], 1))

    # -- ESPCN (Shi et al. 2016): feature convolutions with tanh, then a sub-pixel convolution (PixelShuffle)
    class ESPCN(nn.Module):
        def __init__(self, upscale=3, channels=1):
            super().__init__()
            self.conv1 = nn.Conv2d(channels, 64, 5, padding=2)
            self.conv2 = nn.Conv2d(64, 32, 3, padding=1)
            self.conv3 = nn.Conv2d(32, channels * upscale ** 2, 3, padding=1)
            self.shuffle = nn.PixelShuffle(upscale)

        def forward(self, x):
            x = torch.tanh(self.conv2(torch.tanh(self.conv1(x))))
            return self.shuffle(self.conv3(x))

    # -- LSTM text classifier
    class LSTMClassifier(nn.Module):
        def __init__(self, vocab=100, embed=32, hidden=48, bidirectional=False, classes=4):
            super().__init__()
            self.embedding = nn.Embedding(vocab, embed)
            self.lstm = nn.LSTM(embed, hidden, batch_first=True, bidirectional=bidirectional)
            self.fc = nn.Linear(hidden * (2 if bidirectional else 1), classes)

        def forward(self, tokens):
            out, _ = self.lstm(self.embedding(tokens))
            return self.fc(out[:, -1, :])

    # -- transformer encoder classifier: token and learned position embeddings, two post-norm encoder layers with
    # GELU, the mean over tokens, a linear classifier.
    class TransformerClassifier(nn.Module):
        def __init__(self, vocab=100, length=16, d_model=32, heads=4, ff=64, layers=2, classes=4):
            super().__init__()
            self.embedding = nn.Embedding(vocab, d_model)
            self.position = nn.Parameter(torch.randn(1, length, d_model) * 0.1)
            layer = nn.TransformerEncoderLayer(d_model, heads, ff, dropout=0.0, activation="gelu",
                                               batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.fc = nn.Linear(d_model, classes)

        def forward(self, tokens):
            x = self.encoder(self.embedding(tokens) + self.position)
            return self.fc(x.mean(dim=1))

    return dict(ResNet18=ResNet18, MobileNetV2=MobileNetV2, MobileNetV3Small=MobileNetV3Small,
                SqueezeNet11=SqueezeNet11, ShuffleNetV2=ShuffleNetV2, TinyYolo=TinyYolo, ESPCN=ESPCN,
                LSTMClassifier=LSTMClassifier, TransformerClassifier=TransformerClassifier)


def _randomize_batchnorm(module, example_shape, seed: int, token_vocab: int = 0) -> None:
    """Gives every BatchNorm running statistics measured on random inputs (cumulative averages over a few train-mode
    forward passes, so each layer's output is roughly normalized as in a trained network) and random affine
    parameters; leaves the module in eval mode."""
    torch = _torch()
    bns = [m for m in module.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    g = torch.Generator().manual_seed(seed + 1)
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None  # cumulative average
        with torch.no_grad():
            bn.weight.copy_(torch.rand(bn.num_features, generator=g) + 0.5)
            bn.bias.copy_(torch.randn(bn.num_features, generator=g) * 0.2)
    if bns:
        module.train()
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # the statistics' sums in one order, whatever the thread count
        try:
            with torch.no_grad():
                for _ in range(3):
                    module(torch.randn(*example_shape, generator=g))
        finally:
            torch.set_num_threads(threads)
        for bn in bns:
            with torch.no_grad():  # also move the statistics off the measured ones a little: not a no-op either way
                bn.running_mean.add_(torch.randn(bn.num_features, generator=g) * 0.05)
                bn.running_var.mul_(torch.rand(bn.num_features, generator=g) * 0.2 + 0.9)
    module.eval()


def torch_model(name: str):
    """(the torch module in eval mode, an example input tuple) of a torch-defined model in MODELS."""
    torch = _torch()
    spec = _TORCH_SPECS[name]
    torch.manual_seed(spec["seed"])
    module = _torch_modules()[spec["cls"]](**spec.get("kwargs", {}))
    feeds = MODELS[name][1]
    example = feeds(batch=1, seed=spec["seed"])[feeds.name]
    g = torch.Generator().manual_seed(spec["seed"] + 2)
    for m in module.modules():
        if isinstance(m, torch.nn.LayerNorm):  # random affine parameters, not the identity
            with torch.no_grad():
                m.weight.copy_(torch.rand(m.weight.shape, generator=g) + 0.5)
                m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)
    if feeds.kind == "tokens":
        module.eval()
    else:
        _randomize_batchnorm(module, (4,) + example.shape[1:], spec["seed"])
    return module, (torch.from_numpy(example),)


def export_torch(name: str) -> onnx.ModelProto:
    """The ONNX export of a torch-defined model in MODELS (opset 17, TorchScript exporter), with a dynamic batch
    and, where the architecture allows it, dynamic image size / sequence length."""
    import warnings

    torch = _torch()
    spec = _TORCH_SPECS[name]
    module, args = torch_model(name)
    dynamic_axes = {n: dict(axes) for n, axes in spec["dynamic"].items()}
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation and tracer warnings
        torch.onnx.export(module, args, f, dynamo=False, opset_version=OPSET, input_names=spec["inputs"],
                          output_names=spec["outputs"], dynamic_axes=dynamic_axes)
    model = onnx.load_from_string(f.getvalue())
    model.doc_string = f"nnkern test model {name}"
    return model


_IMAGE_DYNAMIC = {0: "N", 2: "H", 3: "W"}
_TORCH_SPECS = {
    # ResNet-18 at half torchvision's widths (32..256 channels, 2.8M weights): the full one's 11M weights take
    # seconds to initialize, export and quantize. resnet18_full has torchvision's widths (64..512).
    "resnet18": dict(cls="ResNet18", seed=18, kwargs=dict(width=32), inputs=["image"], outputs=["logits"],
                     dynamic={"image": _IMAGE_DYNAMIC, "logits": {0: "N"}}),
    "resnet18_full": dict(cls="ResNet18", seed=18, inputs=["image"], outputs=["logits"],
                          dynamic={"image": _IMAGE_DYNAMIC, "logits": {0: "N"}}),
    "mobilenet_v2": dict(cls="MobileNetV2", seed=2, inputs=["image"], outputs=["logits"],
                         dynamic={"image": _IMAGE_DYNAMIC, "logits": {0: "N"}}),
    "mobilenet_v3_small": dict(cls="MobileNetV3Small", seed=3, inputs=["image"], outputs=["logits"],
                               dynamic={"image": _IMAGE_DYNAMIC, "logits": {0: "N"}}),
    "squeezenet1_1": dict(cls="SqueezeNet11", seed=11, inputs=["image"], outputs=["logits"],
                          dynamic={"image": _IMAGE_DYNAMIC, "logits": {0: "N"}}),
    "shufflenet_v2_x0_5": dict(cls="ShuffleNetV2", seed=5, inputs=["image"], outputs=["logits"],
                               dynamic={"image": _IMAGE_DYNAMIC, "logits": {0: "N"}}),
    "tiny_yolo": dict(cls="TinyYolo", seed=7, inputs=["image"], outputs=["boxes32", "boxes16"],
                      dynamic={"image": _IMAGE_DYNAMIC, "boxes32": {0: "N", 2: "H32", 3: "W32"},
                               "boxes16": {0: "N", 2: "H16", 3: "W16"}}),
    "espcn": dict(cls="ESPCN", seed=9, inputs=["image"], outputs=["upscaled"],
                  dynamic={"image": _IMAGE_DYNAMIC, "upscaled": {0: "N", 2: "H3", 3: "W3"}}),
    "lstm_classifier": dict(cls="LSTMClassifier", seed=21, inputs=["tokens"], outputs=["logits"],
                            dynamic={"tokens": {0: "N", 1: "L"}, "logits": {0: "N"}}),
    "bilstm_classifier": dict(cls="LSTMClassifier", seed=22, kwargs=dict(bidirectional=True), inputs=["tokens"],
                              outputs=["logits"], dynamic={"tokens": {0: "N", 1: "L"}, "logits": {0: "N"}}),
    # The TorchScript exporter bakes the sequence length into nn.MultiheadAttention's reshapes (and the learned
    # positions have one length): only the batch is dynamic.
    "transformer_encoder": dict(cls="TransformerClassifier", seed=31, inputs=["tokens"], outputs=["logits"],
                                dynamic={"tokens": {0: "N"}, "logits": {0: "N"}}),
}


# -------------------------------------------------------------------------------------------- onnx.helper models
class _Graph:
    """A small helper to build graphs node by node with deterministic random initializers."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.count = [], [], 0

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}_{self.count}"

    def const(self, prefix: str, array) -> str:
        n = self.name(prefix)
        self.inits.append(numpy_helper.from_array(np.asarray(array), n))
        return n

    def node(self, op: str, inputs, n_out: int = 1, output: str | None = None, **attrs):
        """Adds a node; its outputs get fresh names, or `output` (a graph output's name) for a single one."""
        outs = [output] if output else [self.name(op.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op, list(inputs), outs, name=self.name(op), **attrs))
        return outs[0] if n_out == 1 else outs

    def weights(self, *shape, fan_in=None):
        fan_in = fan_in or int(np.prod(shape[1:]))
        return (self.rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)

    def conv(self, x, cin, cout, k, stride=1, group=1, bias=True, dims=2, output=None):
        w = self.const("w", self.weights(cout, cin // group, *([k] * dims)))
        inputs = [x, w] + ([self.const("b", self.rng.uniform(-0.1, 0.1, cout).astype(np.float32))] if bias else [])
        return self.node("Conv", inputs, output=output, kernel_shape=[k] * dims, strides=[stride] * dims,
                         pads=[(k - 1) // 2] * (2 * dims), group=group)

    def batchnorm(self, x, c):
        r = self.rng
        scale = r.uniform(0.5, 1.5, c).astype(np.float32)
        bias = r.normal(0, 0.2, c).astype(np.float32)
        mean = r.normal(0, 0.3, c).astype(np.float32)
        var = r.uniform(0.5, 2.0, c).astype(np.float32)
        return self.node("BatchNormalization", [x, self.const("scale", scale), self.const("bias", bias),
                                                self.const("mean", mean), self.const("var", var)], epsilon=1e-5)

    def model(self, name: str, inputs, outputs) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, name, inputs, outputs, self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=8,
                                  producer_name="nnkern tests")
        model.doc_string = f"nnkern test model {name}"
        onnx.checker.check_model(model, full_check=True)
        return model


def _image_input(name, channels):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, ["N", channels, "H", "W"])


def small_cnn() -> onnx.ModelProto:
    """Conv+BatchNormalization+Relu, MaxPool, a residual block (Add), GlobalAveragePool, Flatten, Gemm."""
    g = _Graph(100)
    x = g.node("Relu", [g.batchnorm(g.conv("image", 3, 16, 3, bias=False), 16)])
    x = g.node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    y = g.node("Relu", [g.batchnorm(g.conv(x, 16, 16, 3), 16)])
    y = g.batchnorm(g.conv(y, 16, 16, 3), 16)
    x = g.node("Relu", [g.node("Add", [x, y])])
    x = g.node("Flatten", [g.node("GlobalAveragePool", [x])], axis=1)
    w = g.const("fc_w", g.weights(NUM_CLASSES, 16))
    b = g.const("fc_b", g.rng.uniform(-0.1, 0.1, NUM_CLASSES).astype(np.float32))
    g.node("Gemm", [x, w, b], transB=1, output="logits")
    return g.model("small_cnn", [_image_input("image", 3)],
                   [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", NUM_CLASSES])])


def depthwise_separable() -> onnx.ModelProto:
    """A stem convolution (stride 2), then a depthwise 3x3 and a pointwise 1x1, each with BatchNormalization and
    Clip(0, 6) (ReLU6, min and max as initializers)."""
    g = _Graph(101)
    lo, hi = g.const("min", np.float32(0)), g.const("max", np.float32(6))
    x = g.node("Clip", [g.batchnorm(g.conv("image", 3, 16, 3, stride=2, bias=False), 16), lo, hi])
    x = g.node("Clip", [g.batchnorm(g.conv(x, 16, 16, 3, group=16, bias=False), 16), lo, hi])
    g.node("Clip", [g.batchnorm(g.conv(x, 16, 32, 1, bias=False), 32), lo, hi], output="features")
    return g.model("depthwise_separable", [_image_input("image", 3)],
                   [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["N", 32, "H2", "W2"])])


def conv1d() -> onnx.ModelProto:
    """1-D convolutions over (N, C, L): Conv+Relu, a strided Conv+Relu, MaxPool, GlobalAveragePool, Flatten, Gemm."""
    g = _Graph(102)
    x = g.node("Relu", [g.conv("signal", 4, 16, 5, dims=1)])
    x = g.node("Relu", [g.conv(x, 16, 32, 3, stride=2, dims=1)])
    x = g.node("MaxPool", [x], kernel_shape=[2], strides=[2])
    x = g.node("Flatten", [g.node("GlobalAveragePool", [x])], axis=1)
    w = g.const("fc_w", g.weights(5, 32))
    b = g.const("fc_b", g.rng.uniform(-0.1, 0.1, 5).astype(np.float32))
    g.node("Gemm", [x, w, b], transB=1, output="logits")
    return g.model("conv1d", [helper.make_tensor_value_info("signal", TensorProto.FLOAT, ["N", 4, "L"])],
                   [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 5])])


def upsample_concat() -> onnx.ModelProto:
    """A U-Net-like step: a full-resolution branch and a stride-2 branch upsampled back (Resize nearest, scales
    2x2, torch's asymmetric/floor convention), concatenated on channels, then a 1x1 convolution."""
    g = _Graph(103)
    skip = g.node("Relu", [g.conv("image", 3, 8, 3)])
    down = g.node("Relu", [g.conv(skip, 8, 16, 3, stride=2)])
    scales = g.const("scales", np.array([1, 1, 2, 2], np.float32))
    up = g.node("Resize", [down, "", scales], mode="nearest", coordinate_transformation_mode="asymmetric",
                nearest_mode="floor")
    x = g.node("Concat", [skip, up], axis=1)
    g.conv(x, 24, 3, 1, output="output")
    return g.model("upsample_concat", [_image_input("image", 3)],
                   [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["N", 3, "H", "W"])])


def tiny_mlp() -> onnx.ModelProto:
    """MatMul+Add, Sigmoid, MatMul+Add, Softmax over the classes."""
    g = _Graph(104)
    h = g.node("Add", [g.node("MatMul", ["features", g.const("w1", g.weights(20, 32, fan_in=20))]),
                       g.const("b1", g.rng.uniform(-0.5, 0.5, 32).astype(np.float32))])
    h = g.node("Sigmoid", [h])
    z = g.node("Add", [g.node("MatMul", [h, g.const("w2", g.weights(32, NUM_CLASSES, fan_in=4))]),
                       g.const("b2", g.rng.uniform(-0.5, 0.5, NUM_CLASSES).astype(np.float32))])
    g.node("Softmax", [z], axis=-1, output="probabilities")
    return g.model("tiny_mlp", [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["N", 20])],
                   [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["N", NUM_CLASSES])])


# ---------------------------------------------------------------------------------------------------- registry
def _torch_builder(name):
    def build() -> onnx.ModelProto:
        return export_torch(name)
    build.__name__ = f"export_{name}"
    return build


MODELS = {
    # onnx.helper only
    "small_cnn": (small_cnn, Feeds("image", "image", 3, 32, 24), False),
    "depthwise_separable": (depthwise_separable, Feeds("image", "image", 3, 32, 20), False),
    "conv1d": (conv1d, Feeds("signal", "sequence", 4, 64, 40), False),
    "upsample_concat": (upsample_concat, Feeds("image", "image", 3, 32, 16), False),
    "tiny_mlp": (tiny_mlp, Feeds("features", "vector", 20), False),
    # torch-defined
    "resnet18": (_torch_builder("resnet18"), Feeds("image", "image", 3, 64, 96), True),
    "resnet18_full": (_torch_builder("resnet18_full"), Feeds("image", "image", 3, 64, 96), True),
    "mobilenet_v2": (_torch_builder("mobilenet_v2"), Feeds("image", "image", 3, 64, 96), True),
    "mobilenet_v3_small": (_torch_builder("mobilenet_v3_small"), Feeds("image", "image", 3, 64, 96), True),
    "squeezenet1_1": (_torch_builder("squeezenet1_1"), Feeds("image", "image", 3, 64, 96), True),
    "shufflenet_v2_x0_5": (_torch_builder("shufflenet_v2_x0_5"), Feeds("image", "image", 3, 64, 96), True),
    "tiny_yolo": (_torch_builder("tiny_yolo"), Feeds("image", "image", 3, 96, 64), True),
    "espcn": (_torch_builder("espcn"), Feeds("image", "image", 1, 32, 24), True),
    "lstm_classifier": (_torch_builder("lstm_classifier"), Feeds("tokens", "tokens", size=16, alt_size=9,
                                                                 vocab=100), True),
    "bilstm_classifier": (_torch_builder("bilstm_classifier"), Feeds("tokens", "tokens", size=16, alt_size=9,
                                                                     vocab=100), True),
    "transformer_encoder": (_torch_builder("transformer_encoder"), Feeds("tokens", "tokens", size=16, vocab=100),
                            True),
}


#: Models only the exhaustive test run uses (seconds to build and quantize).
HEAVY = {"resnet18_full"}


def build(name: str) -> onnx.ModelProto:
    return MODELS[name][0]()


def op_types(model: onnx.ModelProto) -> list:
    return sorted({n.op_type if not n.domain or n.domain == "ai.onnx" else f"{n.domain}.{n.op_type}"
                   for n in model.graph.node})


# ---------------------------------------------------------------------------------------------------- quantization
QUANT_KINDS = ("qdq", "qoperator")
CALIBRATION_SAMPLES = 8


def quantize(model, kind: str, feeds=None, reduce_range: bool = True) -> onnx.ModelProto:
    """An INT8 version of `model` by onnxruntime's static quantization: kind "qdq" (QuantizeLinear /
    DequantizeLinear pairs around float ops) or "qoperator" (QLinearConv, QLinearMatMul, ... ops). Activations
    QUInt8, weights QInt8 per channel, MinMax calibration on CALIBRATION_SAMPLES random inputs of batch 1 from
    `feeds` (a Feeds; taken from MODELS when `model` is a name there).

    reduce_range (default): weights in [-64, 63] (7 bits). onnxruntime's u8s8 kernels on x86 without VNNI (AVX2)
    sum pairs of uint8 x int8 products in saturating int16 (vpmaddubsw), so with full-range weights its results
    there are not the exact integer results and it cannot serve as the reference; with 7-bit weights a pair
    sum fits in int16 and every implementation computes the same integers. reduce_range=False gives full-range
    weights (what a user quantizing for a VNNI machine gets).

    The model is first pre-processed as onnxruntime recommends (``quant_pre_process``: shape inference and
    onnxruntime's basic graph optimizations, which fold BatchNormalization into convolutions)."""
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                          quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process

    if isinstance(model, str):
        feeds = feeds or MODELS[model][1]
        model = build(model)
    if feeds is None:
        raise ValueError("quantize needs the model's Feeds (its calibration inputs)")
    if kind not in QUANT_KINDS:
        raise ValueError(f"kind must be one of {QUANT_KINDS}, got {kind!r}")

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.samples = iter([feeds(batch=1, seed=1000 + i) for i in range(CALIBRATION_SAMPLES)])

        def get_next(self):
            return next(self.samples, None)

    root = logging.getLogger()  # onnxruntime.quantization warns on the root logger about every shape tensor
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            src, pre, dst = (os.path.join(tmp, f) for f in ("float.onnx", "pre.onnx", "int8.onnx"))
            onnx.save(model, src)
            cwd = os.getcwd()
            os.chdir(tmp)  # where symbolic shape inference falls short, it saves its model into the working directory
            try:
                quant_pre_process(src, pre)
            except Exception:  # it falls short on some exports (the transformer's reshapes, the detector's heads)
                quant_pre_process(src, pre, skip_symbolic_shape=True)
            finally:
                os.chdir(cwd)
            quantize_static(pre, dst, Reader(),
                            quant_format=QuantFormat.QDQ if kind == "qdq" else QuantFormat.QOperator,
                            per_channel=True, reduce_range=reduce_range, activation_type=QuantType.QUInt8,
                            weight_type=QuantType.QInt8, calibrate_method=CalibrationMethod.MinMax)
            out = onnx.load(dst)
    finally:
        root.setLevel(level)
    out.doc_string = f"{model.doc_string} ({kind} int8)"
    return out


def output_scales(model: onnx.ModelProto) -> dict:
    """{graph output name: the scale of the DequantizeLinear that produces it} (the output's quantization step),
    for the outputs of a quantized model that come from one; others are left out."""
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    producers = {o: n for n in model.graph.node for o in n.output}
    scales = {}
    for out in model.graph.output:
        n = producers.get(out.name)
        while n is not None and n.op_type in ("Identity", "Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze",
                                                 "DepthToSpace"):
            n = producers.get(n.input[0])
        if n is not None and n.op_type == "DequantizeLinear" and n.input[1] in inits:
            scales[out.name] = float(np.max(inits[n.input[1]]))
    return scales
