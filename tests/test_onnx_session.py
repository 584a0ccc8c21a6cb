"""nnkern.onnx.InferenceSession as a user meets it: onnxruntime's interface, plans per shape, describe / profile /
NNKERN_VERBOSE, threads, pickling, and every way a model or an input can be wrong."""
import os
import pickle
import subprocess
import sys
import threading

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

import nnkern.onnx  # noqa: E402
from onnx_helpers import node_model  # noqa: E402


def conv_net(batch="N", size=16, channels=8):
    """Conv -> Relu -> Conv -> Add (residual) -> Relu -> GlobalAveragePool -> Flatten -> Gemm, NCHW, symbolic
    batch (and image size when size is a string)."""
    rng = np.random.default_rng(5)
    w1 = rng.standard_normal((channels, 3, 3, 3)).astype(np.float32) * 0.3
    b1 = rng.standard_normal(channels).astype(np.float32) * 0.1
    w2 = rng.standard_normal((channels, channels, 3, 3)).astype(np.float32) * 0.2
    wf = rng.standard_normal((10, channels)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
             helper.make_node("Add", ["c2", "r1"], ["s"], name="add"),
             helper.make_node("Relu", ["s"], ["r2"], name="relu2"),
             helper.make_node("GlobalAveragePool", ["r2"], ["g"], name="gap"),
             helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "wf"], ["y"], transB=1, name="fc")]
    graph = helper.make_graph(nodes, "net", [helper.make_tensor_value_info("x", TP.FLOAT, [batch, 3, size, size])],
                              [helper.make_tensor_value_info("y", TP.FLOAT, [batch, 10])],
                              [numpy_helper.from_array(a, n) for n, a in
                               [("w1", w1), ("b1", b1), ("w2", w2), ("wf", wf)]])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def image(n=2, size=16, seed=0):
    return np.random.default_rng(seed).standard_normal((n, 3, size, size)).astype(np.float32)


def ort_run(model, feed):
    ort = pytest.importorskip("onnxruntime")
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)


def test_a_drop_in_for_onnxruntime(tmp_path):
    path = tmp_path / "net.onnx"
    onnx.save(conv_net(), str(path))
    for model in (str(path), path, path.read_bytes(), onnx.load(str(path))):
        s = nnkern.onnx.InferenceSession(model)
        [i], [o] = s.get_inputs(), s.get_outputs()
        assert (i.name, i.shape, i.type) == ("x", ["N", 3, 16, 16], "tensor(float)")
        assert (o.name, o.shape, o.type) == ("y", ["N", 10], "tensor(float)")
        y = s.run(None, {"x": image()})[0]
        assert y.shape == (2, 10) and y.dtype == np.float32
        assert s.run(["y"], {"x": image()})[0].shape == (2, 10)
    ref = ort_run(conv_net(), {"x": image()})[0]
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


def test_onnxruntime_keywords_are_accepted():
    s = nnkern.onnx.InferenceSession(conv_net().SerializeToString(), providers=["CPUExecutionProvider"],
                                     sess_options=None)
    assert s.run(None, {"x": image()})[0].shape == (2, 10)


def test_one_plan_per_input_shape():
    s = nnkern.onnx.InferenceSession(conv_net(size="S").SerializeToString())
    a = s.run(None, {"x": image(1, 16)})[0]
    b = s.run(None, {"x": image(3, 20)})[0]
    c = s.run(None, {"x": image(1, 16)})[0]
    assert a.shape == (1, 10) and b.shape == (3, 10)
    np.testing.assert_array_equal(a, c)
    assert len(s._plans) == 2
    assert s._layers.count == 3  # the weights were packed once, for both plans


def test_describe_shows_the_plan_and_transposes_cancel():
    s = nnkern.onnx.InferenceSession(conv_net(batch=2).SerializeToString())
    text = s.describe()
    lines = text.splitlines()
    assert any("nnkern.Conv" in line and "conv1" in line for line in lines)
    assert sum("Transpose" in line for line in lines) <= 2  # once in, once out (or a view)
    assert "relu" not in text.lower().split("nnkern.conv")[0]  # relu1 is not fused: r1 has two readers
    assert "planned" in lines[-1]
    assert str(s) == text


def test_profile_sums_time_by_op():
    s = nnkern.onnx.InferenceSession(conv_net(batch=2).SerializeToString())
    p = s.profile({"x": image()}, repeats=2)
    assert set(p.by_op) >= {"nnkern.Conv", "Gemm"}
    assert len(p.steps) == len(s._plans[next(iter(s._plans))].plan.steps())
    assert all(st["seconds"] >= 0 for st in p.steps)
    assert sum(st["seconds"] for st in p.steps) <= p.total_seconds * 1.001
    assert "nnkern.Conv" in str(p)


def test_memory_is_shared_between_tensors():
    s = nnkern.onnx.InferenceSession(conv_net(batch=2, channels=32).SerializeToString())
    plan = s._plans[next(iter(s._plans))].plan
    assert 0 < plan.arena_bytes < plan.unplanned_bytes


def test_threads_run_concurrently_with_equal_results():
    s = nnkern.onnx.InferenceSession(conv_net().SerializeToString())
    x = image(4, 16, seed=3)
    expected = s.run(None, {"x": x})[0]
    results, errors = [], []

    def work():
        try:
            for _ in range(20):
                results.append(s.run(None, {"x": x})[0])
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 80
    for r in results:
        np.testing.assert_array_equal(r, expected)


def test_pickled_sessions_give_the_same_outputs():
    s = nnkern.onnx.InferenceSession(conv_net().SerializeToString(), num_threads=1)
    t = pickle.loads(pickle.dumps(s))
    np.testing.assert_array_equal(s.run(None, {"x": image()})[0], t.run(None, {"x": image()})[0])
    assert t._options["num_threads"] == 1


def test_pickling_rebuilds_the_model_from_the_constants():
    """A session keeps the weights once, as its plan's constants, not also as the model's bytes: pickling puts them
    back into the model's structure, initializer for initializer (names, order, dtypes, values, unused ones too)."""
    model = conv_net(channels=64)
    model.graph.initializer.extend([numpy_helper.from_array(np.arange(6, dtype=np.int64).reshape(2, 3), "unused"),
                                    numpy_helper.from_array(np.float16([0.5, -2, 65504]), "half")])
    s = nnkern.onnx.InferenceSession(model.SerializeToString(), num_threads=1)
    weights = sum(numpy_helper.to_array(t).nbytes for t in model.graph.initializer)
    assert len(s._skeleton) < weights / 10
    back = onnx.ModelProto()
    back.ParseFromString(s.__getstate__()["bytes"])
    want = [(t.name, numpy_helper.to_array(t)) for t in model.graph.initializer]
    got = [(t.name, numpy_helper.to_array(t)) for t in back.graph.initializer]
    assert [n for n, _ in got] == [n for n, _ in want]
    for (name, g), (_, w) in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, name
        np.testing.assert_array_equal(g, w, err_msg=name)
    assert back.graph.node == model.graph.node and back.graph.input == model.graph.input
    t = pickle.loads(pickle.dumps(s))
    x = np.random.default_rng(1).standard_normal((2, 3, 16, 16)).astype(np.float32)
    np.testing.assert_array_equal(s.run(None, {"x": x})[0], t.run(None, {"x": x})[0])


def _weight_layout_models() -> dict:
    """Models whose convolution weights the plan keeps in its layers' layouts (the model's constant a view of them):
    1-D, a weight two convolutions share, grouped INT8 (no single strided view), uint8 weights with a zero point
    (the layer's own copy) and a 1-D ConvInteger."""
    rng = np.random.default_rng(3)
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    i8 = lambda *s: rng.integers(-128, 128, s, dtype=np.int8)  # noqa: E731
    q = dict(x_scale=np.float32(0.05), x_zp=np.uint8(120), w_scale=np.float32(0.01), y_scale=np.float32(0.2),
             y_zp=np.uint8(128))
    qconv = ["x", "x_scale", "x_zp", "w", "w_scale", "w_zp", "y_scale", "y_zp"]
    cases = {
        "conv1d": ([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1])], TP.FLOAT, [4, 16], dict(w=f32(6, 4, 3))),
        "shared": ([helper.make_node("Conv", ["x", "w"], ["h"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["h"], ["r"]),
                    helper.make_node("Conv", ["r", "w"], ["y"], pads=[1, 1, 1, 1])], TP.FLOAT, [4, 8, 8],
                   dict(w=f32(4, 4, 3, 3))),
        "qlinearconv_groups": ([helper.make_node("QLinearConv", qconv, ["y"], group=2, pads=[1, 1, 1, 1])], TP.UINT8,
                               [4, 8, 8], dict(q, w=i8(6, 2, 3, 3), w_zp=np.int8(0))),
        "qlinearconv_u8": ([helper.make_node("QLinearConv", qconv, ["y"], pads=[0, 1, 0, 1])], TP.UINT8, [4, 8, 8],
                           dict(q, w=rng.integers(0, 256, (5, 4, 3, 3), dtype=np.uint8), w_zp=np.uint8(128))),
        "convinteger1d": ([helper.make_node("ConvInteger", ["x", "w", "x_zp"], ["y"], pads=[2, 0])], TP.UINT8, [4, 16],
                          dict(w=i8(5, 4, 3), x_zp=np.uint8(3))),
    }
    models = {}
    for name, (nodes, x_type, x_shape, inits) in cases.items():
        graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", x_type, ["N"] + x_shape)],
                                  [helper.make_empty_tensor_value_info("y")],
                                  [numpy_helper.from_array(np.asarray(a), k) for k, a in inits.items()])
        opset = [helper.make_opsetid("", 17)]
        models[name] = (helper.make_model(graph, opset_imports=opset, ir_version=8), x_type, x_shape)
    return models


@pytest.mark.parametrize("name", list(_weight_layout_models()))
def test_weights_held_in_the_layers_layout_are_still_the_models(name):
    """The model's weight becomes a view of the plan's copy in its layer's layout: pickling gives back the
    initializers as they were, a plan for another shape (lowered from the view) gives the bits of a fresh session's,
    and the unpickled session those of the original."""
    model, x_type, x_shape = _weight_layout_models()[name]
    rng = np.random.default_rng(4)

    def image(n):
        if x_type == TP.FLOAT:
            return rng.standard_normal([n] + x_shape).astype(np.float32)
        return rng.integers(0, 256, [n] + x_shape, dtype=np.uint8)

    s = nnkern.onnx.InferenceSession(model.SerializeToString(), num_threads=1)
    x2, x3 = image(2), image(3)
    y2 = s.run(None, {"x": x2})[0]
    back = onnx.ModelProto()
    back.ParseFromString(s.__getstate__()["bytes"])
    for t, want in zip(back.graph.initializer, model.graph.initializer):
        assert t.name == want.name
        g, w = numpy_helper.to_array(t), numpy_helper.to_array(want)
        assert g.dtype == w.dtype and g.shape == w.shape, t.name
        np.testing.assert_array_equal(g, w, err_msg=t.name)
    fresh = nnkern.onnx.InferenceSession(model.SerializeToString(), num_threads=1)
    np.testing.assert_array_equal(s.run(None, {"x": x3})[0], fresh.run(None, {"x": x3})[0])
    np.testing.assert_array_equal(fresh.run(None, {"x": x2})[0], y2)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(s)).run(None, {"x": x2})[0], y2)


@pytest.mark.parametrize("isa", nnkern.supported_isas())
def test_num_threads_and_max_isa_options(isa):
    base = nnkern.onnx.InferenceSession(conv_net().SerializeToString()).run(None, {"x": image()})[0]
    s = nnkern.onnx.InferenceSession(conv_net().SerializeToString(), num_threads=1, max_isa=isa)
    y = s.run(None, {"x": image()})[0]
    np.testing.assert_allclose(y, base, rtol=1e-4, atol=1e-4 * np.abs(base).max())
    with pytest.raises(ValueError):
        nnkern.onnx.InferenceSession(conv_net().SerializeToString(), num_threads=0)
    with pytest.raises(ValueError):
        nnkern.onnx.InferenceSession(conv_net().SerializeToString(), max_isa="avx9000")


def test_verbose_logs_each_step(tmp_path):
    path = tmp_path / "net.onnx"
    onnx.save(conv_net(batch=1), str(path))
    code = ("import numpy as np, nnkern.onnx; s = nnkern.onnx.InferenceSession(%r); "
            "s.run(None, {'x': np.zeros((1, 3, 16, 16), np.float32)})" % str(path))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, NNKERN_VERBOSE="1"), timeout=120)
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.startswith("nnkern_verbose,exec,graph.")]
    assert any(",graph.nnkern.Conv," in x and "conv1" in x for x in lines)
    assert any(",graph.Gemm," in x for x in lines)


def test_outputs_that_are_inputs_or_constants_or_repeated():
    x = helper.make_tensor_value_info("x", TP.FLOAT, [2, 3])
    c = numpy_helper.from_array(np.arange(4, dtype=np.float32), "c")
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["r"])], "g", [x],
                              [helper.make_tensor_value_info(n, TP.FLOAT, None) for n in ("r", "x", "c", "r")], [c])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    s = nnkern.onnx.InferenceSession(model.SerializeToString())
    v = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    r, xx, cc, r2 = s.run(None, {"x": v})
    np.testing.assert_array_equal(r, np.maximum(v, 0))
    np.testing.assert_array_equal(xx, v)
    assert xx is not v
    np.testing.assert_array_equal(cc, np.arange(4))
    np.testing.assert_array_equal(r2, r)
    r2[0, 0] = 99  # each output is an array of its own
    assert r[0, 0] == 0


# -- models that are wrong

def test_not_an_onnx_model(tmp_path):
    data = conv_net().SerializeToString()
    with pytest.raises(ValueError, match="ONNX"):
        nnkern.onnx.InferenceSession(data[: len(data) // 2])
    with pytest.raises(ValueError, match="ONNX"):
        nnkern.onnx.InferenceSession(b"\x89PNG\r\n\x1a\n not a model")
    with pytest.raises(FileNotFoundError):
        nnkern.onnx.InferenceSession(str(tmp_path / "missing.onnx"))
    with pytest.raises(TypeError):
        nnkern.onnx.InferenceSession(12)


def _graph_model(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_a_cycle_and_a_missing_initializer():
    x = helper.make_tensor_value_info("x", TP.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TP.FLOAT, [2])
    cyc = _graph_model([helper.make_node("Add", ["x", "b"], ["a"]), helper.make_node("Relu", ["a"], ["b"]),
                        helper.make_node("Identity", ["a"], ["y"])], [x], [y])
    with pytest.raises(ValueError, match="cycle"):
        nnkern.onnx.InferenceSession(cyc.SerializeToString())
    missing = _graph_model([helper.make_node("Add", ["x", "w"], ["y"])], [x], [y])
    with pytest.raises(ValueError, match="'w'"):
        nnkern.onnx.InferenceSession(missing.SerializeToString())


def test_unsupported_ops_and_attributes_name_the_node():
    x = helper.make_tensor_value_info("x", TP.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TP.FLOAT, None)
    bad_op = _graph_model([helper.make_node("Einsum", ["x"], ["y"], equation="ij->ji", name="e1")], [x], [y])
    with pytest.raises(NotImplementedError, match="e1"):
        nnkern.onnx.InferenceSession(bad_op.SerializeToString())
    x5 = helper.make_tensor_value_info("x", TP.FLOAT, [1, 2, 4, 4, 4])
    w5 = numpy_helper.from_array(np.ones((3, 2, 1, 1, 1), np.float32), "w")
    conv3d = _graph_model([helper.make_node("Conv", ["x", "w"], ["y"], name="c3")], [x5], [y], [w5])
    with pytest.raises(NotImplementedError, match="c3"):
        nnkern.onnx.InferenceSession(conv3d.SerializeToString())
    foreign = _graph_model([helper.make_node("Relu", ["x"], ["y"], domain="com.example")], [x], [y])
    with pytest.raises(NotImplementedError, match="domain"):
        nnkern.onnx.InferenceSession(foreign.SerializeToString())


def test_inputs_at_any_byte_offset_or_stride():
    """A misaligned array (a buffer from the network, a file, a Dask worker) and a strided view run as copies."""
    s = nnkern.onnx.InferenceSession(conv_net().SerializeToString())
    x = image()
    want = s.run(None, {"x": x})[0]
    misaligned = np.zeros(x.nbytes + 1, np.uint8)[1:].view(np.float32).reshape(x.shape)
    misaligned[...] = x
    assert not misaligned.flags.aligned
    np.testing.assert_array_equal(s.run(None, {"x": misaligned})[0], want)
    strided = np.repeat(x, 2, axis=3)[..., ::2]
    np.testing.assert_array_equal(s.run(None, {"x": strided})[0], want)


def test_bad_inputs_are_clear_errors():
    s = nnkern.onnx.InferenceSession(conv_net().SerializeToString())
    with pytest.raises(ValueError, match="unknown input 'X'"):
        s.run(None, {"X": image()})
    with pytest.raises(ValueError, match="missing"):
        s.run(None, {})
    with pytest.raises(TypeError, match="float32"):
        s.run(None, {"x": image().astype(np.float64)})
    with pytest.raises(ValueError, match="rank 4"):
        s.run(None, {"x": image()[0]})
    with pytest.raises(ValueError, match="dimension 1 must be 3"):
        s.run(None, {"x": np.zeros((2, 4, 16, 16), np.float32)})
    with pytest.raises(ValueError, match="unknown output"):
        s.run(["z"], {"x": image()})
    with pytest.raises(TypeError):
        s.run(None, [image()])
    with pytest.raises(TypeError, match="float32"):  # the same values in the other byte order
        s.run(None, {"x": image().astype(">f4")})
    # a size the convolutions cannot take: a clear error, no crash
    small = nnkern.onnx.InferenceSession(conv_net(size="S").SerializeToString())
    with pytest.raises(ValueError):
        small.run(None, {"x": np.zeros((1, 3, 0, 16), np.float32)})


def test_nodes_are_checked_against_their_schema():
    """A standard operator with an attribute or an input its ONNX schema lacks is refused, as onnxruntime refuses
    it: the plan's own extensions of those ops (a MatMul's bias input, a fused activation attribute) are not for
    models to reach. Attributes of the model's opset (Clip's min / max before opset 11) still load."""
    w = numpy_helper.from_array(-np.ones((3, 4), np.float32), "w")
    c = numpy_helper.from_array(np.ones(4, np.float32), "c")

    def model(node, opset=17, inits=(w, c)):
        g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TP.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TP.FLOAT, None)], list(inits))
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()
    with pytest.raises(ValueError, match="'activation' is not an attribute of MatMul"):
        nnkern.onnx.InferenceSession(model(helper.make_node("MatMul", ["x", "w"], ["y"], activation="relu")))
    with pytest.raises(ValueError, match="3 inputs .* MatMul .* at most 2"):
        nnkern.onnx.InferenceSession(model(helper.make_node("MatMul", ["x", "w", "c"], ["y"])))
    with pytest.raises(ValueError, match="'min' is not an attribute of Clip"):
        nnkern.onnx.InferenceSession(model(helper.make_node("Clip", ["x"], ["y"], min=0.0), inits=()))
    old_clip = nnkern.onnx.InferenceSession(model(helper.make_node("Clip", ["x"], ["y"], min=0.0), opset=6, inits=()))
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    np.testing.assert_array_equal(old_clip.run(None, {"x": x})[0], np.maximum(x, 0))


def test_symbolic_dimensions_tie_inputs_and_unnamed_ones_do_not():
    def concat(dim):
        v = [helper.make_tensor_value_info(n, TP.FLOAT, [dim, 4]) for n in ("x", "y")]
        g = helper.make_graph([helper.make_node("Concat", ["x", "y"], ["z"], axis=0)], "g", v,
                              [helper.make_tensor_value_info("z", TP.FLOAT, None)])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    x, y = np.ones((2, 4), np.float32), np.zeros((3, 4), np.float32)
    named = nnkern.onnx.InferenceSession(concat("N"))
    with pytest.raises(ValueError, match="dimension 0 \\('N'\\) is 3, but 'N' is 2"):
        named.run(None, {"x": x, "y": y})
    np.testing.assert_array_equal(named.run(None, {"x": x, "y": x})[0], np.ones((4, 4), np.float32))
    unnamed = nnkern.onnx.InferenceSession(concat(None))  # unknown, not one symbol
    np.testing.assert_array_equal(unnamed.run(None, {"x": x, "y": y})[0], np.concatenate([x, y]))


def test_sizes_that_overflow_are_refused():
    shape = numpy_helper.from_array(np.array([2 ** 40, 2 ** 40], np.int64), "shape")
    y = helper.make_tensor_value_info("y", TP.FLOAT, None)
    x = helper.make_tensor_value_info("x", TP.FLOAT, [1])
    big = _graph_model([helper.make_node("Reshape", ["x", "shape"], ["y"])], [x], [y], [shape])
    with pytest.raises(ValueError):
        nnkern.onnx.InferenceSession(big.SerializeToString())


def test_external_data_may_not_leave_the_model_folder(tmp_path):
    model = conv_net()
    w = model.graph.initializer[0]
    w.data_location = TP.EXTERNAL
    raw = w.raw_data or np.asarray(numpy_helper.to_array(w)).tobytes()
    w.ClearField("raw_data")
    w.ClearField("float_data")
    (tmp_path / "outside.bin").write_bytes(raw)
    folder = tmp_path / "model"
    folder.mkdir()
    for path in ("../outside.bin", "/etc/passwd", ""):
        del w.external_data[:]
        w.external_data.add(key="location", value=path)
        onnx.save(model, str(folder / "m.onnx"))
        with pytest.raises(ValueError, match="external"):
            nnkern.onnx.InferenceSession(str(folder / "m.onnx"))
    del w.external_data[:]
    (folder / "w.bin").write_bytes(raw)
    w.external_data.add(key="location", value="w.bin")
    onnx.save(model, str(folder / "m.onnx"))
    y = nnkern.onnx.InferenceSession(str(folder / "m.onnx")).run(None, {"x": image()})[0]
    np.testing.assert_array_equal(y, nnkern.onnx.InferenceSession(conv_net().SerializeToString()).run(
        None, {"x": image()})[0])
    with pytest.raises(ValueError, match="external"):
        nnkern.onnx.InferenceSession((folder / "m.onnx").read_bytes())


def test_shape_inputs_are_planned_per_value():
    """A Reshape whose target shape is a graph input: one plan per value of that small input."""
    model = node_model("Reshape", {"x": np.zeros((2, 6), np.float32), "shape": np.array([3, 4], np.int64)}, ["y"])
    s = nnkern.onnx.InferenceSession(model.SerializeToString())
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    assert s.run(None, {"x": x, "shape": np.array([3, 4], np.int64)})[0].shape == (3, 4)
    assert s.run(None, {"x": x, "shape": np.array([4, 3], np.int64)})[0].shape == (4, 3)
    np.testing.assert_array_equal(s.run(None, {"x": x, "shape": np.array([12, 1], np.int64)})[0], x.reshape(12, 1))


def test_supported_ops_are_listed():
    ops = nnkern.onnx.supported_ops()
    assert {"Conv", "Gemm", "MatMul", "Relu", "QLinearConv", "QuantizeLinear"} <= set(ops)
    assert not any(op.startswith("nnkern.") for op in ops)


def test_backend_runs_a_node():
    import nnkern.onnx.backend as backend
    node = helper.make_node("Relu", ["x"], ["y"])
    x = np.array([-1.0, 2.0], np.float32)
    np.testing.assert_array_equal(backend.run_node(node, [x])[0], [0.0, 2.0])
    assert backend.supports_device("CPU") and not backend.supports_device("CUDA")


def test_command_line_runs_and_benchmarks_a_model(tmp_path):
    path = tmp_path / "net.onnx"
    onnx.save(conv_net(), str(path))
    np.save(tmp_path / "x.npy", image(1))
    r = subprocess.run([sys.executable, "-m", "nnkern", "run", str(path), "--input", f"x={tmp_path / 'x.npy'}",
                        "--repeats", "2", "--profile"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "output y: float32[1, 10]" in r.stdout and "latency" in r.stdout and "nnkern.Conv" in r.stdout
    r = subprocess.run([sys.executable, "-m", "nnkern", "run", str(path), "--batch", "3", "--repeats", "1"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "float32[3, 10]" in r.stdout, r.stderr
    pytest.importorskip("onnxruntime")
    r = subprocess.run([sys.executable, "-m", "nnkern", "bench", "--model", str(path), "--batch", "2", "--threads", "1",
                        "--repeats", "1"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "nnkern vs onnxruntime" in r.stdout and "max |nnkern - onnxruntime|" in r.stdout
