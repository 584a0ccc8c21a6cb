"""Whole models (tests/onnx_models.py) through nnkern.onnx.InferenceSession, against onnxruntime.

Float: nnkern's outputs against onnxruntime's (all graph optimizations, one thread) at batch 1 and 3 (every model
declares a dynamic batch) and, where the model declares its image size or sequence length dynamic, at a second
size, within

    max |nnkern - ort| <= FLOAT_RTOL * max |ort| + FLOAT_ATOL     (per output; 1e-4 and 1e-5)

Two correct float32 implementations differ by the order of their sums (convolution algorithms, GEMM blockings,
fused BatchNormalization) and by their exp / erf / tanh approximations. On these models onnxruntime against torch
(other convolution algorithms), and onnxruntime with against without its graph optimizations, differ by at most
1.4e-5 * max |output| (ShuffleNet-v2: 60 layers deep; the others 1e-7 .. 6e-6): the bound leaves a margin of 7
over the worst of them.

INT8 (quantize(): static QDQ and QOperator models, per-channel weights in [-64, 63], uint8 activations): nnkern
against onnxruntime running the same quantized model, over INT8_INPUTS random inputs at batch 1 and one batch of 3.
Two exact integer implementations differ only by the rounding of requantization (a half-way case: one step), and
such one-step differences grow through deep networks. How much they grow here was measured by running each QDQ
model through onnxruntime's integer kernels (graph optimizations on: QLinearConv, ...) and through its float
emulation of the same graph (optimizations off: DequantizeLinear -> float op -> QuantizeLinear), on these inputs:
the outputs differ by 0 or 1 step for the onnx.helper models, SqueezeNet, ESPCN and the LSTMs, 2 for ShuffleNet-v2
and the transformer, 4 for the YOLO-style detector and the full-width ResNet-18, 7 for the half-width ResNet-18, 15
for the quarter-width ResNet-50 (16 bottleneck blocks) and 22 for MobileNet-v2 (17 inverted residual blocks), and the top-1 class is the same on 7 of 8 inputs or more.
MobileNet-v3-small and ShuffleNet-v2 (onnxruntime 1.32's two modes agree on them) were measured against nnkern
itself: equal on most inputs, but on some one half-way rounding in the stem convolution (1 of 16,384 outputs, one
step) grows through the HardSwish / squeeze-excite products and channel shuffles to 10 and 14 steps at the logits. The
bounds: at most INT8_STEPS steps of the output's quantization (the scale of the DequantizeLinear producing it; per
model, twice that measurement rounded up to a power of two, at least 4), and the top-1 class (models with
(N, classes) outputs) the same on at least INT8_TOP1 of the inputs. Each comparison is printed (`pytest -s`), with
onnxruntime's INT8 outputs' distance to the float model's for reference.

The torch-exported models are skipped where torch is missing; heavy variants (ResNet-18 at full width, the INT8
versions of the deeper torch models) run only with `pytest --exhaustive`. Where nnkern lacks an operator a model
uses, its tests fail with NotImplementedError naming the operator.
"""
from __future__ import annotations

import functools

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import nnkern.onnx  # noqa: E402
from conftest import exhaustive_only  # noqa: E402
from helpers import EXHAUSTIVE  # noqa: E402
from onnx_models import HEAVY, MODELS, QUANT_KINDS, output_scales, quantize  # noqa: E402

FLOAT_RTOL, FLOAT_ATOL = 1e-4, 1e-5
INT8_INPUTS = 8 if EXHAUSTIVE else 4  # the default run: half the random inputs
INT8_TOP1 = 0.75
INT8_STEPS = {"mobilenet_v2": 64, "mobilenet_v3_small": 32, "resnet18": 16, "resnet18_full": 8, "resnet50": 32,
              "shufflenet_v2_x0_5": 32, "tiny_yolo": 8}  # others: 4
#: INT8 versions run only in the exhaustive run: their quantization takes seconds.
INT8_HEAVY = {"resnet18", "resnet18_full", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "shufflenet_v2_x0_5"}


def _torch_available() -> bool:
    try:
        import torch  # noqa: F401 (only whether it imports)
    except Exception:  # a missing or broken torch
        return False
    return True


TORCH = _torch_available()


def _params(names, extra=((),), ids=lambda e: [str(v) for v in e]):
    """pytest params (name, *e) for each name and each tuple e of extra; torch-exported models skipped without
    torch."""
    params = []
    for name in names:
        marks = [pytest.mark.skip(reason="needs torch (to export the model)")] if MODELS[name][2] and not TORCH else []
        for e in extra:
            params.append(pytest.param(name, *e, marks=marks, id="-".join([name, *ids(e)])))
    return params


LIGHT = [n for n in MODELS if n not in HEAVY]
LIGHT_INT8 = [n for n in LIGHT if n not in INT8_HEAVY]
HEAVY_INT8 = [n for n in MODELS if n in HEAVY or n in INT8_HEAVY]


@functools.lru_cache(maxsize=None)
def float_model(name: str):
    if MODELS[name][2]:
        import torch
        torch.set_num_threads(1)
    return MODELS[name][0]()


@functools.lru_cache(maxsize=None)
def int8_model(name: str, kind: str):
    return quantize(float_model(name), kind, MODELS[name][1])


@functools.lru_cache(maxsize=None)
def _ort_session(model_bytes: bytes):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])


def ort_run(model, feeds):
    return _ort_session(model.SerializeToString()).run(None, feeds)


@functools.lru_cache(maxsize=None)
def _nnkern_session(model_bytes: bytes):
    return nnkern.onnx.InferenceSession(model_bytes, num_threads=1)


def nnkern_run(model, feeds):
    return _nnkern_session(model.SerializeToString()).run(None, feeds)


def _sizes(name):
    feeds = MODELS[name][1]
    return [None] + ([feeds.alt_size] if feeds.alt_size else [])


def _float_params(names):
    return [p for name in names
            for p in _params([name], [(batch, size) for batch in (1, 3) for size in _sizes(name)],
                             lambda e: [f"b{e[0]}"] + ([f"size{e[1]}"] if e[1] else []))]


def _check_float(ours, theirs, what: str):
    assert len(ours) == len(theirs), what
    for k, (a, b) in enumerate(zip(ours, theirs)):
        assert a.dtype == b.dtype and a.shape == b.shape, (what, k, a.dtype, a.shape, b.dtype, b.shape)
        err, scale = float(np.max(np.abs(a.astype(np.float64) - b))), float(np.max(np.abs(b)))
        bound = FLOAT_RTOL * scale + FLOAT_ATOL
        assert np.all(np.isfinite(a)), f"{what}: output {k} has non-finite values"
        assert err <= bound, f"{what}: output {k}: max |diff| {err:.3g} > {bound:.3g} (max |ref| {scale:.3g})"


# ---------------------------------------------------------------------------------------------------- the builders
@pytest.mark.parametrize("name", _params(LIGHT))
def test_builder(name):
    """The model is valid ONNX, onnxruntime runs it at both batches (batch 3 in the default run) and sizes with the
    declared dynamic dims, and a torch-exported one computes what its torch module computes (within the float
    bound)."""
    model = float_model(name)
    onnx.checker.check_model(model)
    feeds_fn = MODELS[name][1]
    dims = model.graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param, f"{name}: the batch is not declared dynamic"
    if feeds_fn.alt_size:
        assert all(d.dim_param for d in dims[1 if feeds_fn.kind == "tokens" else 2:]), f"{name}: size not dynamic"
    for size in _sizes(name):
        for batch in (1, 3) if EXHAUSTIVE else (3,):  # the default run: the dynamic batch once
            feeds = feeds_fn(batch=batch, size=size, seed=1)
            outs = ort_run(model, feeds)
            assert all(o.shape[0] == batch and np.all(np.isfinite(o)) for o in outs), name
            if MODELS[name][2]:
                import torch

                from onnx_models import torch_model
                module, _ = torch_model(name)
                with torch.no_grad():
                    ref = module(torch.from_numpy(feeds[feeds_fn.name]))
                ref = [r.numpy() for r in (ref if isinstance(ref, tuple) else (ref,))]
                _check_float(outs, ref, f"{name} onnxruntime vs torch, batch {batch}, size {size}")


@exhaustive_only
@pytest.mark.parametrize("name", _params(sorted(HEAVY)))
def test_builder_exhaustive(name):
    test_builder(name)


# ---------------------------------------------------------------------------------------------------- float
@pytest.mark.parametrize("name, batch, size", _float_params(LIGHT))
def test_float(name, batch, size):
    model = float_model(name)
    feeds = MODELS[name][1](batch=batch, size=size, seed=batch)
    _check_float(nnkern_run(model, feeds), ort_run(model, feeds), f"{name} batch {batch} size {size}")


@exhaustive_only
@pytest.mark.parametrize("name, batch, size", _float_params(sorted(HEAVY)))
def test_float_exhaustive(name, batch, size):
    test_float(name, batch, size)


# ---------------------------------------------------------------------------------------------------- int8
@pytest.mark.parametrize("name, kind", _params(LIGHT_INT8, [(k,) for k in QUANT_KINDS]))
def test_int8(name, kind):
    model = int8_model(name, kind)
    feeds_fn = MODELS[name][1]
    scales = output_scales(model)
    steps_bound = INT8_STEPS.get(name, 4)
    outputs = [o.name for o in model.graph.output]
    agree = counted = 0
    worst = {o: 0.0 for o in outputs}
    to_float = 0.0
    for seed in range(INT8_INPUTS):
        feeds = feeds_fn(batch=1, seed=seed)
        ours, theirs = nnkern_run(model, feeds), ort_run(model, feeds)
        ref = ort_run(float_model(name), feeds)
        for o, a, b, r in zip(outputs, ours, theirs, ref):
            assert a.dtype == b.dtype and a.shape == b.shape, (o, a.dtype, a.shape, b.dtype, b.shape)
            worst[o] = max(worst[o], float(np.max(np.abs(a.astype(np.float64) - b))))
            to_float = max(to_float, float(np.max(np.abs(b.astype(np.float64) - r))))
        if theirs[0].ndim == 2:
            counted += 1
            agree += int(np.argmax(ours[0]) == np.argmax(theirs[0]))
    # batch 3 at once: the same per-sample results as batch 1 would give (the plan for another shape)
    feeds = feeds_fn(batch=3, seed=100)
    for o, a, b in zip(outputs, nnkern_run(model, feeds), ort_run(model, feeds)):
        worst[o] = max(worst[o], float(np.max(np.abs(a.astype(np.float64) - b))))
    report = []
    for o in outputs:
        scale = scales.get(o)
        steps = worst[o] / scale if scale else float("nan")
        report.append(f"{o}: max |nnkern - ort| {worst[o]:.4g} = {steps:.1f} steps of {scale:.4g}" if scale else
                      f"{o}: max |nnkern - ort| {worst[o]:.4g}")
    top1 = f"top-1 agrees on {agree}/{counted}" if counted else "no class output"
    print(f"\n{name} {kind}: {'; '.join(report)}; {top1}; (ort int8 vs float: max diff {to_float:.4g})")
    for o in outputs:
        scale = scales.get(o)
        assert scale, f"{name} {kind}: output {o} does not come from a DequantizeLinear"
        assert worst[o] <= steps_bound * scale * (1 + 1e-6), \
            f"{name} {kind}: output {o} differs by {worst[o] / scale:.1f} steps > {steps_bound}"
    if counted:
        assert agree >= INT8_TOP1 * counted, f"{name} {kind}: top-1 agrees on {agree}/{counted} < {INT8_TOP1}"


@exhaustive_only
@pytest.mark.parametrize("name, kind", _params(HEAVY_INT8, [(k,) for k in QUANT_KINDS]))
def test_int8_exhaustive(name, kind):
    test_int8(name, kind)
