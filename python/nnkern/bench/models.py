"""Whole networks, defined in torch and exported to ONNX, for ``nnkern.bench.networks`` and the ONNX session's
tests (tests/onnx_models.py adds the onnx.helper-built models and the test registry).

The architectures follow torchvision's structure (layer order, channel counts, strides, block types) with random
weights (torchvision is not needed, nothing is downloaded): ResNet-18, MobileNet-v2, MobileNet-v3-small, SqueezeNet
1.1, ShuffleNet-v2 x0.5, a YOLOv3-tiny-style detector, ESPCN, LSTM text classifiers and a transformer encoder.
BatchNorm layers get running statistics measured on random inputs (so activations stay normalized through deep
networks, as in a trained network) and random affine parameters; the exporter (TorchScript-based, opset 17) folds
eval-mode BatchNorm into the preceding convolution. Everything is deterministic (fixed seeds).

Each network comes in two sizes (``size=``): "test" (10 classes, half-width ResNet-18 and YOLO, 64x64 or 96x96
images, 16 tokens: milliseconds per run) and "bench" (the real ones: 1000 classes and 224x224 images for the
classifiers, full-width ResNet-18, YOLOv3-tiny at 416x416 with 80 classes, ESPCN 128x128x3 -> 384x384x3,
sequence models of 64 / 128 tokens).

INT8: ``quantize(model, kind, feeds)`` (onnxruntime's static quantization, QDQ or QOperator) and
``torch_quantized(module, feeds)`` (torch's eager static quantization of the same definition).
"""
from __future__ import annotations

import copy
import io
import logging
import os
import tempfile
import warnings

import numpy as np

OPSET = 17
NUM_CLASSES = 10  # the "test" size's classifiers
SIZES = ("test", "bench")
CALIBRATION_SAMPLES = 8  # random inputs of batch 1 the INT8 versions are calibrated on
QUANT_KINDS = ("qdq", "qoperator")


# ---------------------------------------------------------------------------------------------------- input feeds
class Feeds:
    """Random inputs of one model: ``feeds(batch=1, size=None, seed=0) -> {name: array}``.

    kind "image": float32 standard normal (N, channels, size, size); "sequence": float32 (N, channels, size);
    "tokens": int64 uniform in [0, vocab) of shape (N, size); "vector": float32 (N, channels). ``size`` is the
    default image size or sequence length, ``alt_size`` a second one the model declares dynamic (or None)."""

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
    """The architectures' classes (defined on first use, so importing this module needs no torch). Adds,
    products and concatenations go through FloatFunctional (they export as Add / Mul / Concat) and FUSE names
    the (conv, bn[, relu]) attribute groups outside nn.Sequential, so torch's eager static quantization takes the
    same definitions (torch_quantized)."""
    torch = _torch()
    nn = torch.nn
    from torch.ao.nn.quantized import FloatFunctional

    def conv_bn(cin, cout, k, stride=1, groups=1, act=None, eps=1e-5):
        layers = [nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False),
                  nn.BatchNorm2d(cout, eps=eps)]
        if act is not None:
            layers.append(act())
        return nn.Sequential(*layers)

    # -- ResNet-18 (torchvision.models.resnet: BasicBlock, layers [2, 2, 2, 2])
    class BasicBlock(nn.Module):
        FUSE = (("conv1", "bn1", "relu"), ("conv2", "bn2"))
        EXPANSION = 1

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
            self.add_relu = FloatFunctional()

        def forward(self, x):
            identity = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return self.add_relu.add_relu(out, identity)

    # -- ResNet-50 (torchvision.models.resnet v1.5: Bottleneck with the stride on the 3x3, layers [3, 4, 6, 3])
    class Bottleneck(nn.Module):
        FUSE = (("conv1", "bn1", "relu1"), ("conv2", "bn2", "relu2"), ("conv3", "bn3"))
        EXPANSION = 4

        def __init__(self, inplanes, planes, stride=1):
            super().__init__()
            out = planes * self.EXPANSION
            self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.relu1 = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.relu2 = nn.ReLU(inplace=True)
            self.conv3 = nn.Conv2d(planes, out, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(out)
            self.downsample = None
            if stride != 1 or inplanes != out:
                self.downsample = nn.Sequential(nn.Conv2d(inplanes, out, 1, stride, bias=False), nn.BatchNorm2d(out))
            self.add_relu = FloatFunctional()

        def forward(self, x):
            identity = x if self.downsample is None else self.downsample(x)
            y = self.relu2(self.bn2(self.conv2(self.relu1(self.bn1(self.conv1(x))))))
            return self.add_relu.add_relu(self.bn3(self.conv3(y)), identity)

    class ResNet(nn.Module):  # torchvision's stem, four stages of `block` (the first strided from stage 2) and head
        FUSE = (("conv1", "bn1", "relu"),)

        def __init__(self, block, stages, width=64, num_classes=NUM_CLASSES):
            super().__init__()
            self.conv1 = nn.Conv2d(3, width, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            layers, inplanes = [], width
            for i, blocks in enumerate(stages):
                planes = width * 2 ** i
                seq = [block(inplanes, planes, 1 if i == 0 else 2)]
                inplanes = planes * block.EXPANSION
                seq += [block(inplanes, planes) for _ in range(blocks - 1)]
                layers.append(nn.Sequential(*seq))
            self.layer1, self.layer2, self.layer3, self.layer4 = layers
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(inplanes, num_classes)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(torch.flatten(self.avgpool(x), 1))

    class ResNet18(ResNet):
        def __init__(self, width=64, num_classes=NUM_CLASSES):
            super().__init__(BasicBlock, (2, 2, 2, 2), width, num_classes)

    class ResNet50(ResNet):
        def __init__(self, width=64, num_classes=NUM_CLASSES):
            super().__init__(Bottleneck, (3, 4, 6, 3), width, num_classes)

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
            self.add = FloatFunctional()

        def forward(self, x):
            return self.add.add(x, self.conv(x)) if self.use_res_connect else self.conv(x)

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
        FUSE = (("fc1", "activation"),)

        def __init__(self, channels, squeeze):
            super().__init__()
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc1 = nn.Conv2d(channels, squeeze, 1)
            self.fc2 = nn.Conv2d(squeeze, channels, 1)
            self.activation = nn.ReLU()
            self.scale_activation = nn.Hardsigmoid()
            self.mul = FloatFunctional()

        def forward(self, x):
            s = self.scale_activation(self.fc2(self.activation(self.fc1(self.avgpool(x)))))
            return self.mul.mul(s, x)

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
            self.add = FloatFunctional()

        def forward(self, x):
            return self.add.add(x, self.block(x)) if self.use_res_connect else self.block(x)

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
            self.cat = FloatFunctional()

        def forward(self, x):
            x = self.relu(self.squeeze(x))
            return self.cat.cat([self.relu(self.expand1x1(x)), self.relu(self.expand3x3(x))], 1)

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
            self.cat = FloatFunctional()

        def forward(self, x):
            if self.stride == 1:
                x1, x2 = x.chunk(2, dim=1)
                out = self.cat.cat([x1, self.branch2(x2)], 1)
            else:
                out = self.cat.cat([self.branch1(x), self.branch2(x)], 1)
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

    # -- YOLO-style detector (YOLOv3-tiny's shape): Conv-BN-LeakyReLU backbone with max pools, a head at stride 32
    # and one at stride 16 fed by the upsampled stride-32 features concatenated with the backbone's stride-16 ones;
    # each head's output reshaped to (N, anchors, H, W, 5 + classes). width 16 with full=True is YOLOv3-tiny
    # (darknet's yolov3-tiny.cfg, 80 classes: its stride-1 max pool, padded at the bottom and right, and the
    # 1024-channel layer included); the default is half its widths without those two layers.
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
        def __init__(self, anchors=3, classes=4, width=8, full=False):
            super().__init__()
            mp = lambda: nn.MaxPool2d(2, 2)  # noqa: E731
            w = width
            self.backbone16 = nn.Sequential(cbl(3, w, 3), mp(), cbl(w, 2 * w, 3), mp(), cbl(2 * w, 4 * w, 3), mp(),
                                            cbl(4 * w, 8 * w, 3), mp(), cbl(8 * w, 16 * w, 3))  # stride 16
            deep = [nn.ZeroPad2d((0, 1, 0, 1)), nn.MaxPool2d(2, 1), cbl(32 * w, 64 * w, 3)] if full else []
            self.backbone32 = nn.Sequential(mp(), cbl(16 * w, 32 * w, 3), *deep,
                                            cbl((64 if full else 32) * w, 16 * w, 1))  # stride 32
            self.head32 = nn.Sequential(cbl(16 * w, 32 * w, 3), YoloHead(32 * w, anchors, classes))
            self.lateral = cbl(16 * w, 8 * w, 1)
            self.upsample = nn.Upsample(scale_factor=2, mode="nearest")
            self.head16 = nn.Sequential(cbl(8 * w + 16 * w, 16 * w, 3), YoloHead(16 * w, anchors, classes))
            self.cat = FloatFunctional()

        def forward(self, x):
            route = self.backbone16(x)
            deep = self.backbone32(route)
            up = self.upsample(self.lateral(deep))
            return self.head32(deep), self.head16(self.cat.cat([up, route], 1))

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

    return dict(ResNet18=ResNet18, ResNet50=ResNet50, MobileNetV2=MobileNetV2, MobileNetV3Small=MobileNetV3Small,
                SqueezeNet11=SqueezeNet11, ShuffleNetV2=ShuffleNetV2, TinyYolo=TinyYolo, ESPCN=ESPCN,
                LSTMClassifier=LSTMClassifier, TransformerClassifier=TransformerClassifier)




def _randomize_batchnorm(module, example_shape, seed: int) -> None:
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


def _image(size: int, alt_size: int | None = None, channels: int = 3) -> Feeds:
    return Feeds("image", "image", channels, size, alt_size)


def _tokens(size: int, vocab: int, alt_size: int | None = None) -> Feeds:
    return Feeds("tokens", "tokens", size=size, alt_size=alt_size, vocab=vocab)


_IMAGE_DYNAMIC = {0: "N", 2: "H", 3: "W"}
_CLASSIFIER = dict(inputs=["image"], outputs=["logits"], dynamic={"image": _IMAGE_DYNAMIC, "logits": {0: "N"}})
_TEXT = dict(inputs=["tokens"], outputs=["logits"], dynamic={"tokens": {0: "N", 1: "L"}, "logits": {0: "N"}})
_IMAGENET = dict(num_classes=1000)
_LSTM_BENCH = dict(kwargs=dict(vocab=1000, embed=128, hidden=256), feeds=_tokens(64, 1000))

#: name -> the test size (cls, seed, kwargs, feeds, inputs, outputs, dynamic axes) and "bench": what the bench
#: size changes (kwargs added, feeds replaced).
SPECS = {
    # ResNet-18 at half torchvision's widths in the test size (32..256 channels: the full one's 11M weights take
    # seconds to initialize, export and quantize); resnet18_full has torchvision's widths (64..512).
    "resnet18": dict(cls="ResNet18", seed=18, kwargs=dict(width=32), feeds=_image(64, 96), **_CLASSIFIER,
                     bench=dict(kwargs=dict(width=64, **_IMAGENET), feeds=_image(224))),
    "resnet18_full": dict(cls="ResNet18", seed=18, feeds=_image(64, 96), **_CLASSIFIER,
                          bench=dict(kwargs=_IMAGENET, feeds=_image(224))),
    # ResNet-50 at a quarter of torchvision's widths in the test size (16..512 channels out of the blocks).
    "resnet50": dict(cls="ResNet50", seed=50, kwargs=dict(width=16), feeds=_image(64, 96), **_CLASSIFIER,
                     bench=dict(kwargs=dict(width=64, **_IMAGENET), feeds=_image(224))),
    "mobilenet_v2": dict(cls="MobileNetV2", seed=2, feeds=_image(64, 96), **_CLASSIFIER,
                         bench=dict(kwargs=_IMAGENET, feeds=_image(224))),
    "mobilenet_v3_small": dict(cls="MobileNetV3Small", seed=3, feeds=_image(64, 96), **_CLASSIFIER,
                               bench=dict(kwargs=_IMAGENET, feeds=_image(224))),
    "squeezenet1_1": dict(cls="SqueezeNet11", seed=11, feeds=_image(64, 96), **_CLASSIFIER,
                          bench=dict(kwargs=_IMAGENET, feeds=_image(224))),
    "shufflenet_v2_x0_5": dict(cls="ShuffleNetV2", seed=5, feeds=_image(64, 96), **_CLASSIFIER,
                               bench=dict(kwargs=_IMAGENET, feeds=_image(224))),
    "tiny_yolo": dict(cls="TinyYolo", seed=7, feeds=_image(96, 64), inputs=["image"], outputs=["boxes32", "boxes16"],
                      dynamic={"image": _IMAGE_DYNAMIC, "boxes32": {0: "N", 2: "H32", 3: "W32"},
                               "boxes16": {0: "N", 2: "H16", 3: "W16"}},
                      bench=dict(kwargs=dict(width=16, full=True, classes=80), feeds=_image(416))),
    "espcn": dict(cls="ESPCN", seed=9, feeds=_image(32, 24, channels=1), inputs=["image"], outputs=["upscaled"],
                  dynamic={"image": _IMAGE_DYNAMIC, "upscaled": {0: "N", 2: "H3", 3: "W3"}},
                  bench=dict(kwargs=dict(channels=3), feeds=_image(128))),
    "lstm_classifier": dict(cls="LSTMClassifier", seed=21, feeds=_tokens(16, 100, 9), **_TEXT, bench=_LSTM_BENCH),
    "bilstm_classifier": dict(cls="LSTMClassifier", seed=22, kwargs=dict(bidirectional=True),
                              feeds=_tokens(16, 100, 9), **_TEXT, bench=_LSTM_BENCH),
    # The TorchScript exporter bakes the sequence length into nn.MultiheadAttention's reshapes (and the learned
    # positions have one length): only the batch is dynamic. Bench size: BERT-mini's shape (4 layers, 256 wide).
    "transformer_encoder": dict(cls="TransformerClassifier", seed=31, feeds=_tokens(16, 100), inputs=["tokens"],
                                outputs=["logits"], dynamic={"tokens": {0: "N"}, "logits": {0: "N"}},
                                bench=dict(kwargs=dict(vocab=1000, length=128, d_model=256, heads=4, ff=1024,
                                                       layers=4),
                                           feeds=_tokens(128, 1000))),
}


def spec(name: str, size: str = "test") -> dict:
    """The model's definition at a size: cls, seed, kwargs, feeds (a Feeds), inputs, outputs, dynamic."""
    if name not in SPECS:
        raise ValueError(f"unknown model {name!r}; expected one of {sorted(SPECS)}")
    if size not in SIZES:
        raise ValueError(f"size must be one of {SIZES}, got {size!r}")
    s = {k: v for k, v in SPECS[name].items() if k != "bench"}
    s["kwargs"] = dict(s.get("kwargs", {}))
    if size == "bench":
        s["kwargs"].update(SPECS[name]["bench"].get("kwargs", {}))
        s["feeds"] = SPECS[name]["bench"]["feeds"]
    return s


def feeds(name: str, size: str = "test") -> Feeds:
    return spec(name, size)["feeds"]


def torch_model(name: str, size: str = "test"):
    """(the torch module in eval mode, an example input tuple) of the model ``name`` at ``size``."""
    torch = _torch()
    s = spec(name, size)
    torch.manual_seed(s["seed"])
    module = _torch_modules()[s["cls"]](**s["kwargs"])
    f = s["feeds"]
    example = f(batch=1, seed=s["seed"])[f.name]
    g = torch.Generator().manual_seed(s["seed"] + 2)
    for m in module.modules():
        if isinstance(m, torch.nn.LayerNorm):  # random affine parameters, not the identity
            with torch.no_grad():
                m.weight.copy_(torch.rand(m.weight.shape, generator=g) + 0.5)
                m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)
    if f.kind == "tokens":
        module.eval()
    else:
        _randomize_batchnorm(module, (4,) + example.shape[1:], s["seed"])
    return module, (torch.from_numpy(example),)


def export_torch(name: str, size: str = "test", module=None):
    """The ONNX export (an onnx.ModelProto; opset 17, TorchScript exporter) of the model ``name`` at ``size`` (or
    of ``module``, its torch_model), with a dynamic batch and, where the architecture allows it, dynamic image size
    / sequence length."""
    import onnx
    torch = _torch()
    s = spec(name, size)
    if module is None:
        module, args = torch_model(name, size)
    else:
        f = s["feeds"]
        args = (torch.from_numpy(f(batch=1, seed=s["seed"])[f.name]),)
    dynamic_axes = {n: dict(axes) for n, axes in s["dynamic"].items()}
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation and tracer warnings
        torch.onnx.export(module, args, buf, dynamo=False, opset_version=OPSET, input_names=s["inputs"],
                          output_names=s["outputs"], dynamic_axes=dynamic_axes)
    model = onnx.load_from_string(buf.getvalue())
    model.doc_string = f"nnkern test model {name}" if size == "test" else f"nnkern model {name} ({size} size)"
    return model


# ---------------------------------------------------------------------------------------------------- INT8
def _calibration(feeds: Feeds) -> list:
    return [feeds(batch=1, seed=1000 + i) for i in range(CALIBRATION_SAMPLES)]


def quantize(model, kind: str, feeds: Feeds | None = None, reduce_range: bool = True):
    """An INT8 version of ``model`` (an onnx.ModelProto, or a name in SPECS: its test size) by onnxruntime's static
    quantization: kind "qdq" (QuantizeLinear / DequantizeLinear pairs around float ops) or "qoperator"
    (QLinearConv, QLinearMatMul, ... ops). Activations QUInt8, weights QInt8 per channel, MinMax calibration on
    CALIBRATION_SAMPLES random inputs of batch 1 from ``feeds`` (the model's Feeds).

    reduce_range (default): weights in [-64, 63] (7 bits). onnxruntime's u8s8 kernels on x86 without VNNI (AVX2)
    sum pairs of uint8 x int8 products in saturating int16 (vpmaddubsw), so with full-range weights its results
    there are not the exact integer results and it cannot serve as the reference; with 7-bit weights a pair
    sum fits in int16 and every implementation computes the same integers. reduce_range=False gives full-range
    weights (what a user quantizing for a VNNI machine gets).

    The model is first pre-processed as onnxruntime recommends (``quant_pre_process``: shape inference and
    onnxruntime's basic graph optimizations, which fold BatchNormalization into convolutions)."""
    import onnx
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                          quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process

    if isinstance(model, str):
        feeds = feeds or spec(model)["feeds"]
        model = export_torch(model)
    if feeds is None:
        raise ValueError("quantize needs the model's Feeds (its calibration inputs)")
    if kind not in QUANT_KINDS:
        raise ValueError(f"kind must be one of {QUANT_KINDS}, got {kind!r}")

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.samples = iter(_calibration(feeds))

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


def output_scales(model) -> dict:
    """{graph output name: the scale of the DequantizeLinear that produces it} (the output's quantization step),
    for the outputs of a quantized model that come from one; others are left out."""
    from onnx import numpy_helper
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


def _fusion_groups(module) -> list:
    """(parent, [child names]) of the groups torch's eager quantization fuses: each module's FUSE, and in every
    nn.Sequential a Conv2d followed by BatchNorm2d and / or ReLU."""
    nn = _torch().nn
    groups = []
    for m in module.modules():
        groups += [(m, list(names)) for names in getattr(m, "FUSE", ())]
        if not isinstance(m, nn.Sequential):
            continue
        kids = list(m.named_children())
        i = 0
        while i < len(kids):
            kinds = [type(c) for _, c in kids[i:i + 3]]
            n = 0
            if kinds[0] is nn.Conv2d and kinds[1:2] == [nn.BatchNorm2d]:
                n = 3 if kinds[2:3] == [nn.ReLU] else 2
            elif kinds[0] is nn.Conv2d and kinds[1:2] == [nn.ReLU]:
                n = 2
            if n:
                groups.append((m, [k for k, _ in kids[i:i + n]]))
            i += max(n, 1)
    return groups


def torch_quantized(module, feeds: Feeds):
    """torch's eager static quantization of a copy of ``module`` (a torch_model of an image network), as torch's
    quantization tutorial does it: x86 engine, QuantStub / DeQuantStub around it, conv + batch norm (+ ReLU)
    fused, per-channel symmetric int8 weights, uint8 activations in [0, 127] (reduce_range, as torch's default x86
    qconfig: fbgemm's AVX2 kernels sum pairs of products in saturating int16) from min / max observers over the
    calibration inputs quantize() uses. Float in, float out (a tuple for several outputs)."""
    torch = _torch()
    import torch.ao.quantization as tq
    nn = torch.nn

    class Quantized(nn.Module):
        def __init__(self, model):
            super().__init__()
            self.quant, self.model, self.dequant = tq.QuantStub(), model, tq.DeQuantStub()

        def forward(self, x):
            y = self.model(self.quant(x))
            return tuple(self.dequant(t) for t in y) if isinstance(y, tuple) else self.dequant(y)

    torch.backends.quantized.engine = "x86"
    q = Quantized(copy.deepcopy(module)).eval()
    for parent, names in _fusion_groups(q):  # collected first: fusing replaces modules
        tq.fuse_modules(parent, [names], inplace=True)
    q.qconfig = tq.QConfig(
        activation=tq.MinMaxObserver.with_args(dtype=torch.quint8, reduce_range=True),
        weight=tq.PerChannelMinMaxObserver.with_args(dtype=torch.qint8, qscheme=torch.per_channel_symmetric))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tq.prepare(q, inplace=True)
        with torch.inference_mode():
            for sample in _calibration(feeds):
                q(torch.from_numpy(sample[feeds.name]))
        tq.convert(q, inplace=True)
    return q
