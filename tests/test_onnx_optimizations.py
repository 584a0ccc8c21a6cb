"""The session's graph optimizations (nnkern.onnx.OPTIMIZATIONS), each switchable: every one turned off alone
gives the same results as all on (integer outputs bit for bit, float ones within the float bound of
tests/test_onnx_models.py), and the fusions happen where they should."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

import nnkern.onnx  # noqa: E402
from onnx_models import MODELS, quantize  # noqa: E402
from test_onnx_models import FLOAT_ATOL, FLOAT_RTOL  # noqa: E402

FLOAT_MODELS = ["small_cnn", "depthwise_separable", "upsample_concat", "hard_activations", "conv1d", "tiny_mlp"]
INT8_MODELS = ["small_cnn", "depthwise_separable", "hard_activations"]


def _run(model, feeds, optimize):
    return nnkern.onnx.InferenceSession(model.SerializeToString(), num_threads=1, optimize=optimize).run(None, feeds)


def _within_float_bound(got, want, what):
    for g, w in zip(got, want):
        bound = FLOAT_RTOL * float(np.max(np.abs(w))) + FLOAT_ATOL
        assert np.max(np.abs(g.astype(np.float64) - w)) <= bound, what


def _switches():
    return [False] + [{name: False} for name in nnkern.onnx.OPTIMIZATIONS]


@pytest.mark.parametrize("name", FLOAT_MODELS)
def test_each_optimization_off_keeps_float_results(name):
    model, feeds = MODELS[name][0](), MODELS[name][1](batch=2, seed=3)
    want = _run(model, feeds, True)
    for optimize in _switches():
        _within_float_bound(_run(model, feeds, optimize), want, f"{name} optimize={optimize}")


@pytest.mark.parametrize("name", INT8_MODELS)
@pytest.mark.parametrize("kind", ["qdq", "qoperator"])
def test_each_optimization_off_keeps_int8_bits(name, kind):
    """fuse_qdq off runs the float emulation of the quantized graph (another rounding of the requantization): it
    is compared by tests/test_onnx_models.py's step bound instead."""
    model = quantize(name, kind)
    feeds = MODELS[name][1](batch=2, seed=4)
    want = _run(model, feeds, True)
    for optimize in _switches()[1:]:
        if "fuse_qdq" in optimize:
            continue
        for g, w in zip(_run(model, feeds, optimize), want):
            np.testing.assert_array_equal(g, w, err_msg=f"{name} {kind} optimize={optimize}")


def test_hard_activations_run_in_the_convolutions():
    model = MODELS["hard_activations"][0]()
    feeds = MODELS["hard_activations"][1](batch=1, seed=0)
    fused = nnkern.onnx.InferenceSession(model.SerializeToString()).describe(feeds)
    steps = [line for line in fused.splitlines() if "nnkern.Conv" in line]
    for op in ("HardSwish", "LeakyRelu", "HardSigmoid", "Sigmoid"):
        assert any(op in line for line in steps), f"{op} is not fused:\n{fused}"
        assert not any(line.split()[1:2] == [op] for line in fused.splitlines()), fused
    plain = nnkern.onnx.InferenceSession(model.SerializeToString(),
                                         optimize={"fuse_activations": False}).describe(feeds)
    assert all(op not in line for line in plain.splitlines() if "nnkern.Conv" in line
               for op in ("HardSwish", "LeakyRelu", "HardSigmoid"))
    # the same bits: the fused post-ops use the separate ops' formulas
    a = nnkern.onnx.InferenceSession(model.SerializeToString(), num_threads=1).run(None, feeds)
    b = nnkern.onnx.InferenceSession(model.SerializeToString(), num_threads=1,
                                     optimize={"fuse_activations": False}).run(None, feeds)
    np.testing.assert_array_equal(a[0], b[0])


def test_bad_optimize_arguments():
    model = MODELS["small_cnn"][0]().SerializeToString()
    with pytest.raises(ValueError, match="unknown optimization 'fuse_everything'"):
        nnkern.onnx.InferenceSession(model, optimize={"fuse_everything": True})
    with pytest.raises(TypeError, match="bool or a dict"):
        nnkern.onnx.InferenceSession(model, optimize="all")
    with pytest.raises(TypeError, match="bools"):
        nnkern.onnx.InferenceSession(model, optimize={"fuse_qdq": 0})
