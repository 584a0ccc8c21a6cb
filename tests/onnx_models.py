"""Whole ONNX models for testing and benchmarking ``nnkern.onnx.InferenceSession``.

Two sets of builders, each returning an ``onnx.ModelProto`` (opset 17), deterministic (fixed seeds):

* torch-defined architectures, at their "test" size, from the package's ``nnkern.bench.models`` (see there:
  ResNet-18, MobileNet-v2, MobileNet-v3-small, SqueezeNet 1.1, ShuffleNet-v2 x0.5, a YOLO-style detector, ESPCN,
  LSTM text classifiers and a small transformer encoder, following torchvision's structure with random weights and
  measured BatchNorm statistics, exported with torch's TorchScript-based exporter).
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

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from nnkern.bench import models as _models
from nnkern.bench.models import (NUM_CLASSES, OPSET, QUANT_KINDS, Feeds, export_torch, output_scales,  # noqa: F401
                                 torch_model)

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


def hard_activations() -> onnx.ModelProto:
    """The activations convolutions fuse beyond ReLU: Conv+HardSwish, a depthwise Conv+LeakyRelu(0.1), a
    squeeze-excite gate (GlobalAveragePool, Conv+Relu, Conv+HardSigmoid with torch's alpha 1/6, Mul), Conv+Sigmoid."""
    g = _Graph(105)
    x = g.node("HardSwish", [g.conv("image", 3, 16, 3, stride=2)])
    x = g.node("LeakyRelu", [g.conv(x, 16, 16, 3, group=16)], alpha=0.1)
    s = g.node("Relu", [g.conv(g.node("GlobalAveragePool", [x]), 16, 8, 1)])
    s = g.node("HardSigmoid", [g.conv(s, 8, 16, 1)], alpha=1.0 / 6, beta=0.5)
    x = g.node("Mul", [x, s])
    g.node("Sigmoid", [g.conv(x, 16, 4, 1)], output="mask")
    return g.model("hard_activations", [_image_input("image", 3)],
                   [helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["N", 4, "H2", "W2"])])


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
    "hard_activations": (hard_activations, Feeds("image", "image", 3, 32, 20), False),
    # torch-defined (nnkern.bench.models, test size)
    **{name: (_torch_builder(name), _models.feeds(name), True) for name in _models.SPECS},
}


#: Models only the exhaustive test run uses (seconds to build and quantize).
HEAVY = {"resnet18_full", "resnet50"}


def build(name: str) -> onnx.ModelProto:
    return MODELS[name][0]()


def op_types(model: onnx.ModelProto) -> list:
    return sorted({n.op_type if not n.domain or n.domain == "ai.onnx" else f"{n.domain}.{n.op_type}"
                   for n in model.graph.node})


# ---------------------------------------------------------------------------------------------------- quantization
def quantize(model, kind: str, feeds=None, reduce_range: bool = True) -> onnx.ModelProto:
    """nnkern.bench.models.quantize; a name is looked up in MODELS (its builder and Feeds)."""
    if isinstance(model, str):
        feeds = feeds or MODELS[model][1]
        model = build(model)
    return _models.quantize(model, kind, feeds, reduce_range)
