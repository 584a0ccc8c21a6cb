"""InferenceSession(mode="throughput"): a batch split into one part per thread, each run whole through a
one-thread plan; the same results as one run of the whole batch (integer outputs bit for bit, float ones within
the float bound), on threads of the session's own."""
from __future__ import annotations

import pickle
import threading

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

import nnkern.onnx  # noqa: E402
from onnx_models import MODELS, quantize  # noqa: E402
from test_onnx_models import FLOAT_ATOL, FLOAT_RTOL  # noqa: E402


def _sessions(model, threads=2):
    data = model.SerializeToString()
    return (nnkern.onnx.InferenceSession(data, num_threads=threads),
            nnkern.onnx.InferenceSession(data, num_threads=threads, mode="throughput"))


@pytest.mark.parametrize("name", ["small_cnn", "hard_activations", "tiny_mlp", "conv1d"])
@pytest.mark.parametrize("batch", [1, 2, 5])
def test_float_results_equal_one_run_of_the_batch(name, batch):
    latency, throughput = _sessions(MODELS[name][0]())
    feeds = MODELS[name][1](batch=batch, seed=batch)
    for a, b in zip(throughput.run(None, feeds), latency.run(None, feeds)):
        assert a.shape == b.shape and a.dtype == b.dtype
        assert np.max(np.abs(a.astype(np.float64) - b)) <= FLOAT_RTOL * np.max(np.abs(b)) + FLOAT_ATOL


@pytest.mark.parametrize("name", ["small_cnn", "hard_activations"])
def test_int8_results_equal_bit_for_bit(name):
    latency, throughput = _sessions(quantize(name, "qdq"), threads=3)
    feeds = MODELS[name][1](batch=7, seed=2)
    for a, b in zip(throughput.run(None, feeds), latency.run(None, feeds)):
        np.testing.assert_array_equal(a, b)


def test_parts_run_on_the_sessions_threads_through_one_thread_plans(monkeypatch):
    _, session = _sessions(MODELS["small_cnn"][0](), threads=3)
    feeds = MODELS["small_cnn"][1](batch=8, seed=0)
    seen = []
    plan = session._plan

    def spy(shapes, arrays, threads=None):
        seen.append((threading.current_thread().name, shapes[0][0], threads))
        return plan(shapes, arrays, threads)

    monkeypatch.setattr(session, "_plan", spy)
    session.run(None, feeds)
    # the first part on the caller's thread, the two others queued to the session's two threads
    here = threading.current_thread().name
    assert [s for s in seen if s[0] == here] == [(here, 2, 1)], seen
    assert sorted(s[1:] for s in seen if s[0] != here) == [(3, 1), (3, 1)], seen
    assert all(s[0].startswith("nnkern-session") for s in seen if s[0] != here), seen


def test_output_names_pickling_and_batch_one():
    _, session = _sessions(MODELS["small_cnn"][0]())
    feeds = MODELS["small_cnn"][1](batch=4, seed=1)
    name = session.get_outputs()[0].name
    want = session.run(None, feeds)[0]
    np.testing.assert_array_equal(session.run([name], feeds)[0], want)
    clone = pickle.loads(pickle.dumps(session))
    np.testing.assert_array_equal(clone.run(None, feeds)[0], want)
    one = MODELS["small_cnn"][1](batch=1, seed=1)
    assert clone.run(None, one)[0].shape[0] == 1


def test_mode_is_checked():
    model = MODELS["small_cnn"][0]()
    with pytest.raises(ValueError, match="mode must be one of"):
        nnkern.onnx.InferenceSession(model.SerializeToString(), mode="fast")
    renamed = MODELS["small_cnn"][0]()  # an output's batch under another name (as exporters write it): accepted
    renamed.graph.output[0].type.tensor_type.shape.dim[0].dim_param = "batch_out"
    session = nnkern.onnx.InferenceSession(renamed.SerializeToString(), mode="throughput", num_threads=2)
    assert session.run(None, MODELS["small_cnn"][1](batch=3))[0].shape[0] == 3
    fixed_out = MODELS["small_cnn"][0]()
    fixed_out.graph.output[0].type.tensor_type.shape.dim[0].dim_value = 4
    with pytest.raises(ValueError, match="outputs .* fixed"):
        nnkern.onnx.InferenceSession(fixed_out.SerializeToString(), mode="throughput")
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 4  # a fixed batch: nothing to split by
    with pytest.raises(ValueError, match="same symbolic first dimension"):
        nnkern.onnx.InferenceSession(model.SerializeToString(), mode="throughput")


def test_an_output_that_is_not_per_image_is_refused_at_run():
    """A model whose output reduces over the batch (ReduceSum over axis 0, declared with a symbolic first
    dimension): the parts' outputs do not have the parts' batch, and run says so instead of concatenating."""
    from onnx import TensorProto, helper
    g = helper.make_graph([helper.make_node("ReduceSum", ["x"], ["y"], keepdims=1)], "r",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["M", 1])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    session = nnkern.onnx.InferenceSession(model.SerializeToString(), mode="throughput", num_threads=2)
    with pytest.raises(ValueError, match="not the batch"):
        session.run(None, {"x": np.ones((4, 3), np.float32)})
