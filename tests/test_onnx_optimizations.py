"""The session's graph optimizations (nnkern.onnx.OPTIMIZATIONS), each switchable: every one turned off alone
gives the same results as all on (integer outputs bit for bit, float ones within the float bound of
tests/test_onnx_models.py), and the fusions happen where they should."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

import nnkern.onnx  # noqa: E402
from onnx_models import MODELS, _Graph, _image_input, quantize  # noqa: E402
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
    return [False] + [{name: False} for name in nnkern.onnx.OPTIMIZATIONS] + [
        {name: True for name in nnkern.onnx.OPTIMIZATIONS}]


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


@pytest.mark.parametrize("name", ["hard_activations", "depthwise_separable"])
def test_elementwise_steps_split_at_any_size_give_the_same_results(name):
    """The graph ops' loops split across the pool from elementwise_parallel_min() elements (a measurement hook):
    split at every size, the float and INT8 plans give the bits of the default limit on 1 and 2 threads."""
    from nnkern import _C
    default = _C.elementwise_parallel_min()
    float_model, feeds = MODELS[name][0]().SerializeToString(), MODELS[name][1](batch=2, seed=6)
    models = [float_model, quantize(name, "qdq").SerializeToString()]
    try:
        for threads in (1, 2):
            sessions = [nnkern.onnx.InferenceSession(m, num_threads=threads) for m in models]
            _C.set_elementwise_parallel_min(0)
            want = [s.run(None, feeds) for s in sessions]
            _C.set_elementwise_parallel_min(1)
            assert _C.elementwise_parallel_min() == 1
            for s, w in zip(sessions, want):
                for got, expected in zip(s.run(None, feeds), w):
                    np.testing.assert_array_equal(got, expected, err_msg=f"{name} threads={threads}")
    finally:
        _C.set_elementwise_parallel_min(0)
    assert _C.elementwise_parallel_min() == default


@pytest.fixture
def evaluated(monkeypatch):
    """The ops constant folding evaluates (through _C.graph_evaluate), in order, while the test runs."""
    ops = []
    real = nnkern.onnx._compile._C.graph_evaluate

    def record(op, *args):
        ops.append(op)
        return real(op, *args)

    monkeypatch.setattr(nnkern.onnx._compile._C, "graph_evaluate", record)
    return ops


def test_weights_fused_into_quantized_layers_are_never_dequantized(evaluated):
    """fuse_qdq gives the convolutions the int8 weights: the weights' DequantizeLinear it leaves unread is dropped
    before constant folding, not evaluated into a float32 copy (four times the weights' bytes at load)."""
    model = quantize("small_cnn", "qdq")
    assert sum(n.op_type == "DequantizeLinear" for n in model.graph.node) >= 2  # the weights' among them
    feeds = MODELS["small_cnn"][1](batch=1, seed=0)
    nnkern.onnx.InferenceSession(model.SerializeToString()).run(None, feeds)
    assert "DequantizeLinear" not in evaluated
    nnkern.onnx.InferenceSession(model.SerializeToString(), optimize={"fuse_qdq": False}).run(None, feeds)
    assert "DequantizeLinear" in evaluated  # without the fusion the float weights are what the plan runs


def test_a_constant_under_another_name_is_not_copied(evaluated):
    """Identity over a weight (torch's export routes shared weights through it) names the same constant: it is not
    evaluated into a copy, and the results are those of the graph as written (also where the Identity's output is
    a graph output)."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(3)
    w = rng.standard_normal((8, 4)).astype(np.float32)
    nodes = [helper.make_node("Identity", ["w"], ["w1"]), helper.make_node("Identity", ["w"], ["w2"]),
             helper.make_node("MatMul", ["x", "w1"], ["a"]), helper.make_node("MatMul", ["x", "w2"], ["b"]),
             helper.make_node("Add", ["a", "b"], ["y"])]
    graph = helper.make_graph(nodes, "shared", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4]),
                               helper.make_tensor_value_info("w1", TensorProto.FLOAT, [8, 4])],
                              [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    x = rng.standard_normal((2, 8)).astype(np.float32)
    y, w1 = nnkern.onnx.InferenceSession(model.SerializeToString(), num_threads=1).run(None, {"x": x})
    assert "Identity" not in evaluated
    np.testing.assert_array_equal(w1, w)
    np.testing.assert_allclose(y, 2 * (x @ w), rtol=1e-5, atol=1e-6)


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


@pytest.mark.parametrize("threads", [1, 2])
def test_tanh_runs_in_the_convolutions(threads):
    """ESPCN's form: Conv -> Tanh (a 5x5, a depthwise 3x3, a 1x1) with the tanh kernel's "accurate" method on each
    block of output just stored: no Tanh step left, the same bits as the separate op."""
    g = _Graph(114)
    x = g.node("Tanh", [g.conv("image", 3, 16, 5)])
    x = g.node("Tanh", [g.conv(x, 16, 16, 3, group=16)])
    g.node("Tanh", [g.conv(x, 16, 9, 1)], output="out")
    model = g.model("tanh", [_image_input("image", 3)],
                    [helper.make_tensor_value_info("out", TP.FLOAT, ["N", 9, "H", "W"])]).SerializeToString()
    feeds = {"image": np.random.default_rng(9).uniform(-3, 3, (2, 3, 17, 12)).astype(np.float32)}
    fused = nnkern.onnx.InferenceSession(model, num_threads=threads)
    plain = nnkern.onnx.InferenceSession(model, num_threads=threads, optimize={"fuse_activations": False})
    assert "Tanh" not in [line.split()[1] for line in fused.describe(feeds).splitlines()[:-1]], fused.describe(feeds)
    assert [line.split()[1] for line in plain.describe(feeds).splitlines()[:-1]].count("Tanh") == 3
    np.testing.assert_array_equal(fused.run(None, feeds)[0], plain.run(None, feeds)[0])


def test_bad_optimize_arguments():
    model = MODELS["small_cnn"][0]().SerializeToString()
    with pytest.raises(ValueError, match="unknown optimization 'fuse_everything'"):
        nnkern.onnx.InferenceSession(model, optimize={"fuse_everything": True})
    with pytest.raises(TypeError, match="bool or a dict"):
        nnkern.onnx.InferenceSession(model, optimize="all")
    with pytest.raises(TypeError, match="bools"):
        nnkern.onnx.InferenceSession(model, optimize={"fuse_qdq": 0})


# ---------------------------------------------------------------------------------------------------- lookup tables
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

from nnkern.onnx._tables import LOOKUP_OPS  # noqa: E402

# Each op with attributes and constant inputs that make it interesting over a quantized range around zero.
LOOKUP_CASES = {"LeakyRelu": ({"alpha": 0.1}, []), "Clip": ({}, [np.float32(-0.5), np.float32(2.0)]),
                "HardSigmoid": ({"alpha": 0.3, "beta": 0.4}, []), "Elu": ({"alpha": 0.7}, []),
                "Celu": ({"alpha": 1.3}, []), "ThresholdedRelu": ({"alpha": 0.25}, []), "Gelu": ({}, []),
                "Log": ({}, []), "Sqrt": ({}, []), "Reciprocal": ({}, [])}


def _dq_op_q_model(op, attrs, consts, dtype, out_dtype):
    info, out = np.iinfo(dtype), np.iinfo(out_dtype)
    inits = {"sx": np.float32(0.037), "zx": dtype(info.min + 100), "sy": np.float32(0.021),
             "zy": out_dtype(out.min + 90)}
    inits.update({f"c{k}": c for k, c in enumerate(consts)})
    nodes = [helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["x"]),
             helper.make_node(op, ["x"] + [f"c{k}" for k in range(len(consts))], ["f"], **attrs),
             helper.make_node("QuantizeLinear", ["f", "sy", "zy"], ["yq"])]
    g = helper.make_graph(nodes, op, [helper.make_tensor_value_info("xq", helper.np_dtype_to_tensor_dtype(
        np.dtype(dtype)), ["N"])], [helper.make_tensor_value_info("yq", helper.np_dtype_to_tensor_dtype(
            np.dtype(out_dtype)), ["N"])], [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)


@pytest.mark.parametrize("op", sorted(LOOKUP_OPS & set(nnkern.onnx.supported_ops())))
@pytest.mark.parametrize("types", [(np.uint8, np.uint8), (np.int8, np.int8), (np.uint8, np.int8)])
def test_quantized_elementwise_op_is_a_table_with_the_same_bits(op, types):
    """Every 8-bit input (and a length with a tail for every vector width) through the table and through the
    three ops it replaces."""
    attrs, consts = LOOKUP_CASES.get(op, ({}, []))
    model = _dq_op_q_model(op, attrs, consts, *types).SerializeToString()
    info = np.iinfo(types[0])
    x = np.concatenate([np.arange(info.min, info.max + 1), np.random.default_rng(5).integers(
        info.min, info.max + 1, 1000)]).astype(types[0])
    table = nnkern.onnx.InferenceSession(model)
    plain = nnkern.onnx.InferenceSession(model, optimize={"quantized_lookup": False})
    assert "nnkern.Lookup" in table.describe({"xq": x}) and "nnkern.Lookup" not in plain.describe({"xq": x})
    for n in (len(x), 255, 17, 1):
        got, want = table.run(None, {"xq": x[:n]})[0], plain.run(None, {"xq": x[:n]})[0]
        assert got.dtype == want.dtype == types[1]
        np.testing.assert_array_equal(got, want, err_msg=f"{op} {types} n={n}")


@pytest.mark.parametrize("types", [(np.uint8, np.uint8), (np.int8, np.int8)])
def test_lookup_kernels_on_every_isa(types):
    """The table step's kernel of every ISA level this CPU runs (the vector one's 32 bytes at a time and the tail)
    against the unoptimized ops: every byte value, every length up to 70, a long run."""
    from nnkern import _C
    model = _dq_op_q_model("Sigmoid", {}, [], *types).SerializeToString()
    info = np.iinfo(types[0])
    rng = np.random.default_rng(9)
    x = np.concatenate([rng.permutation(np.arange(info.min, info.max + 1)),
                        rng.integers(info.min, info.max + 1, 2000)]).astype(types[0])
    plain = nnkern.onnx.InferenceSession(model, optimize={"quantized_lookup": False})
    for isa in nnkern.ISA_LEVELS:
        if isa not in _C.isa_levels():
            continue
        with nnkern.max_isa(isa):
            table = nnkern.onnx.InferenceSession(model)
            for n in list(range(71)) + [256, 1000, len(x)]:
                np.testing.assert_array_equal(table.run(None, {"xq": x[:n]})[0], plain.run(None, {"xq": x[:n]})[0],
                                              err_msg=f"{isa} {types} n={n}")


def test_lookup_is_not_used_where_it_would_be_wrong():
    """Per-channel parameters, a non-constant second input, or a float reader of the op's output keep the ops."""
    x = np.arange(12, dtype=np.uint8).reshape(3, 4)
    per_channel = helper.make_graph(
        [helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["x"], axis=1),
         helper.make_node("Relu", ["x"], ["f"]), helper.make_node("QuantizeLinear", ["f", "sy", "zy"], ["yq"])],
        "pc", [helper.make_tensor_value_info("xq", TP.UINT8, [3, 4])], [helper.make_tensor_value_info("yq", TP.UINT8,
                                                                                                       [3, 4])],
        [numpy_helper.from_array(np.full(4, 0.1, np.float32), "sx"), numpy_helper.from_array(np.zeros(4, np.uint8), "zx"),
         numpy_helper.from_array(np.float32(0.1), "sy"), numpy_helper.from_array(np.uint8(0), "zy")])
    model = helper.make_model(per_channel, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)
    assert "nnkern.Lookup" not in nnkern.onnx.InferenceSession(model.SerializeToString()).describe({"xq": x})
    both = _dq_op_q_model("Sigmoid", {}, [], np.uint8, np.uint8)
    both.graph.output.append(helper.make_tensor_value_info("f", TP.FLOAT, ["N"]))
    assert "nnkern.Lookup" not in nnkern.onnx.InferenceSession(both.SerializeToString()).describe({"xq": x[0]})


def test_lookup_op_refuses_a_wrong_table():
    from nnkern import _C
    from nnkern.onnx._graph import constant
    with pytest.raises(ValueError, match="256 entries"):
        _C.graph_infer("nnkern.Lookup", "t", {}, [(2, [5]), constant(np.zeros(255, np.uint8))], 1)
    with pytest.raises(NotImplementedError, match="input 0 is float32; supported: uint8, int8"):
        _C.graph_infer("nnkern.Lookup", "t", {}, [(1, [5]), constant(np.zeros(256, np.uint8))], 1)


@pytest.mark.parametrize("name", INT8_MODELS)
def test_int8_plans_convert_the_layout_no_more_often_than_float_ones(name):
    """The quantized ops (tables included) let the layout transposes cancel as the float ops do."""
    feeds = MODELS[name][1](batch=1, seed=0)

    def transposes(model):
        text = nnkern.onnx.InferenceSession(model.SerializeToString()).describe(feeds)
        return sum(line.split()[1] == "Transpose" for line in text.splitlines()[:-1])

    assert transposes(quantize(name, "qdq")) <= transposes(MODELS[name][0]())


def _x_times_f_of_x(binary, unary, dtype):
    """xq -> DequantizeLinear -> unary -> QuantizeLinear -> DequantizeLinear, times / plus the dequantized xq
    itself, -> QuantizeLinear: HardSwish as a quantizer writes it (unary None: x + x)."""
    info = np.iinfo(dtype)
    inits = {"sx": np.float32(0.05), "zx": dtype(info.min + 120), "sh": np.float32(1 / 255), "zh": dtype(info.min),
             "sy": np.float32(0.03), "zy": dtype(info.min + 40)}
    nodes = [helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["x"])]
    other = "x"
    if unary:
        nodes += [helper.make_node(unary, ["x"], ["h"]), helper.make_node("QuantizeLinear", ["h", "sh", "zh"], ["hq"]),
                  helper.make_node("DequantizeLinear", ["hq", "sh", "zh"], ["hf"])]
        other = "hf"
    nodes += [helper.make_node(binary, ["x", other], ["f"]), helper.make_node("QuantizeLinear", ["f", "sy", "zy"], ["yq"])]
    t = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    g = helper.make_graph(nodes, "xfx", [helper.make_tensor_value_info("xq", t, ["N"])],
                          [helper.make_tensor_value_info("yq", t, ["N"])],
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)], ir_version=9).SerializeToString()


@pytest.mark.parametrize("binary, unary", [("Mul", "HardSigmoid"), ("Mul", "Sigmoid"), ("Add", "Tanh"), ("Mul", None),
                                           ("Add", None)])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_binary_op_of_one_tensor_is_one_table(binary, unary, dtype):
    model = _x_times_f_of_x(binary, unary, dtype)
    info = np.iinfo(dtype)
    x = np.concatenate([np.arange(info.min, info.max + 1), np.arange(37) * 7 % 256 + info.min]).astype(dtype)
    table = nnkern.onnx.InferenceSession(model)
    plain = nnkern.onnx.InferenceSession(model, optimize={"quantized_lookup": False})
    steps = [line.split()[1] for line in table.describe({"xq": x}).splitlines()[:-1]]
    assert steps == ["nnkern.Lookup"], steps
    assert any(line.split()[1] == f"QLinear{binary}" for line in plain.describe({"xq": x}).splitlines()[:-1])
    np.testing.assert_array_equal(table.run(None, {"xq": x})[0], plain.run(None, {"xq": x})[0])


def _gelu_qdq(dtype):
    """GELU as exported and quantized: xq -> DequantizeLinear -> Div(sqrt 2) -> Erf -> QuantizeLinear ->
    QLinear-style Add(1) -> Mul(x) -> Mul(0.5), each binary op between DequantizeLinear / QuantizeLinear pairs."""
    info = np.iinfo(dtype)
    z = lambda v: dtype(info.min + v)  # noqa: E731
    inits = {"sx": np.float32(0.04), "zx": z(130), "se": np.float32(1 / 127), "ze": z(128), "s1": np.float32(0.01),
             "z1": z(0), "one": np.array([100], dtype), "sa": np.float32(2 / 255), "za": z(0),
             "sm": np.float32(0.05), "zm": z(120), "half": np.array(z(50)), "sh": np.float32(0.01), "zh": z(0),
             "sy": np.float32(0.03), "zy": z(110), "root2": np.float32(np.sqrt(2))}
    N = helper.make_node
    nodes = [N("DequantizeLinear", ["xq", "sx", "zx"], ["x"]), N("Div", ["x", "root2"], ["xd"]),
             N("Erf", ["xd"], ["e"]), N("QuantizeLinear", ["e", "se", "ze"], ["eq"]),
             N("DequantizeLinear", ["eq", "se", "ze"], ["ef"]), N("DequantizeLinear", ["one", "s1", "z1"], ["onef"]),
             N("Add", ["ef", "onef"], ["a"]), N("QuantizeLinear", ["a", "sa", "za"], ["aq"]),
             N("DequantizeLinear", ["aq", "sa", "za"], ["af"]), N("DequantizeLinear", ["xq", "sx", "zx"], ["x2"]),
             N("Mul", ["x2", "af"], ["m"]), N("QuantizeLinear", ["m", "sm", "zm"], ["mq"]),
             N("DequantizeLinear", ["mq", "sm", "zm"], ["mf"]), N("DequantizeLinear", ["half", "sh", "zh"], ["hf"]),
             N("Mul", ["mf", "hf"], ["y"]), N("QuantizeLinear", ["y", "sy", "zy"], ["yq"])]
    t = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    g = helper.make_graph(nodes, "gelu", [helper.make_tensor_value_info("xq", t, ["N", 3])],
                          [helper.make_tensor_value_info("yq", t, ["N", 3])],
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)], ir_version=9).SerializeToString()


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_a_quantized_gelu_is_one_table(dtype):
    """Chains of elementwise ops with constant scalars, QLinear ops with constant operands and tables of tables
    collapse into one lookup with the bits of the ops it replaces."""
    model = _gelu_qdq(dtype)
    info = np.iinfo(dtype)
    x = np.arange(info.min, info.max + 1).astype(dtype)
    x = np.concatenate([x, x[::-1], x[:7]]).reshape(-1, 3)
    table = nnkern.onnx.InferenceSession(model)
    plain = nnkern.onnx.InferenceSession(model, optimize={"quantized_lookup": False})
    assert [line.split()[1] for line in table.describe({"xq": x}).splitlines()[:-1]] == ["nnkern.Lookup"]
    assert "Erf" in plain.describe({"xq": x})
    np.testing.assert_array_equal(table.run(None, {"xq": x})[0], plain.run(None, {"xq": x})[0])


def test_requantization_and_shared_values():
    """DequantizeLinear -> QuantizeLinear with other parameters is a table; a value read twice inside the chain
    stops it (the chain is taken only where each value has one reader)."""
    for shared in (False, True):
        N = helper.make_node
        nodes = [N("DequantizeLinear", ["xq", "sx", "zx"], ["x"]), N("Sigmoid", ["x"], ["s"])]
        nodes += [N("Add", ["s", "s"], ["f"])] if shared else [N("Identity", ["s"], ["f"])]
        nodes += [N("QuantizeLinear", ["f" if shared else "s", "sy", "zy"], ["yq"])]
        if not shared:
            nodes = [nodes[0], N("QuantizeLinear", ["x", "sy", "zy"], ["yq"])]
        inits = {"sx": np.float32(0.1), "zx": np.uint8(100), "sy": np.float32(0.07), "zy": np.uint8(3)}
        g = helper.make_graph(nodes, "rq", [helper.make_tensor_value_info("xq", TP.UINT8, ["N"])],
                              [helper.make_tensor_value_info("yq", TP.UINT8, ["N"])],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)], ir_version=9).SerializeToString()
        x = np.arange(256).astype(np.uint8)
        steps = [line.split()[1] for line in nnkern.onnx.InferenceSession(model).describe({"xq": x}).splitlines()[:-1]]
        assert (steps == ["nnkern.Lookup"]) != shared, steps
        plain = nnkern.onnx.InferenceSession(model, optimize={"quantized_lookup": False})
        np.testing.assert_array_equal(nnkern.onnx.InferenceSession(model).run(None, {"xq": x})[0],
                                      plain.run(None, {"xq": x})[0])


@pytest.mark.parametrize("op, const_first", [("Sub", True), ("Pow", False), ("Div", True), ("Max", False)])
def test_chain_with_the_constant_on_either_side(op, const_first):
    """DequantizeLinear -> op(constant, x) or op(x, constant) -> Tanh -> QuantizeLinear: the table evaluates each op
    with its operands where the model puts them; over a tensor long enough to run on the pool in several ranges."""
    N = helper.make_node
    args = ["c", "x"] if const_first else ["x", "c"]
    nodes = [N("DequantizeLinear", ["xq", "sx", "zx"], ["x"]), N(op, args, ["f"]), N("Tanh", ["f"], ["t"]),
             N("QuantizeLinear", ["t", "sy", "zy"], ["yq"])]
    inits = {"sx": np.float32(0.02), "zx": np.uint8(128), "c": np.float32(1.7 if op != "Pow" else 2.0),
             "sy": np.float32(1 / 127), "zy": np.uint8(128)}
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("xq", TP.UINT8, ["N"])],
                          [helper.make_tensor_value_info("yq", TP.UINT8, ["N"])],
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)], ir_version=9).SerializeToString()
    x = np.random.default_rng(6).integers(0, 256, 300_003).astype(np.uint8)  # past the pool's threshold, odd length
    table = nnkern.onnx.InferenceSession(model, num_threads=2)
    plain = nnkern.onnx.InferenceSession(model, num_threads=2, optimize={"quantized_lookup": False})
    assert [line.split()[1] for line in table.describe({"xq": x}).splitlines()[:-1]] == ["nnkern.Lookup"]
    np.testing.assert_array_equal(table.run(None, {"xq": x})[0], plain.run(None, {"xq": x})[0])


def _gelu_graph(root2=2 ** 0.5, swap=False, extra_reader=False, half_shape=()):
    """x -> Div(x, root2) -> Erf -> Add(., 1) -> Mul(x, .) -> Mul(., 0.5) as torch exports nn.GELU (operands of the
    Add and Muls swapped where `swap`), then Relu; extra_reader: Erf's output is also a graph output."""
    def c(name, v, shape=()):
        return numpy_helper.from_array(np.full(shape, v, np.float32), name)
    nodes = [helper.make_node("Div", ["x", "r2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["one", "e"] if swap else ["e", "one"], ["a"]),
             helper.make_node("Mul", ["a", "x"] if swap else ["x", "a"], ["m"]),
             helper.make_node("Mul", ["half", "m"] if swap else ["m", "half"], ["g"]),
             helper.make_node("Relu", ["g"], ["y"])]
    outputs = [helper.make_tensor_value_info("y", TP.FLOAT, None)]
    if extra_reader:
        outputs.append(helper.make_tensor_value_info("e", TP.FLOAT, None))
    graph = helper.make_graph(nodes, "gelu", [helper.make_tensor_value_info("x", TP.FLOAT, [2, 3, 37])], outputs,
                              [c("r2", root2), c("one", 1.0), c("half", 0.5, half_shape)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()


def test_gelu_chain_runs_as_one_op():
    """fuse_gelu: torch's GELU export (either operand order) is one Gelu step, within an ulp-scale difference of the
    five separate ops; not fused where a constant differs, an intermediate has another reader or a constant
    broadcasts the shape."""
    x = {"x": np.random.default_rng(5).uniform(-6, 6, (2, 3, 37)).astype(np.float32)}
    for swap in (False, True):
        model = _gelu_graph(swap=swap)
        fused = nnkern.onnx.InferenceSession(model)
        steps = [line.split()[1] for line in fused.describe().splitlines()[:-1]]
        assert steps.count("Gelu") == 1 and "Erf" not in steps, fused.describe()
        plain = nnkern.onnx.InferenceSession(model, optimize={"fuse_gelu": False})
        assert "Erf" in [line.split()[1] for line in plain.describe().splitlines()[:-1]]
        np.testing.assert_allclose(fused.run(None, x)[0], plain.run(None, x)[0], rtol=1e-6, atol=1e-7)
    for model in (_gelu_graph(root2=2.0), _gelu_graph(extra_reader=True), _gelu_graph(half_shape=(1, 1, 1, 1))):
        steps = [line.split()[1] for line in nnkern.onnx.InferenceSession(model).describe().splitlines()[:-1]]
        assert "Gelu" not in steps and "Erf" in steps


def _matmul_bias_graph(bias_shape, swap=False, relu=False, b_input=False, extra_reader=False, k=24):
    """x (2, 5, k) @ W (k, 7) + c (bias_shape), the Add's operands swapped where `swap`, then Relu where `relu`;
    b_input: W is a graph input (the product per call, not packed); extra_reader: the product is also an output."""
    rng = np.random.default_rng(12)
    consts = [numpy_helper.from_array(rng.normal(0, 1, bias_shape).astype(np.float32), "c")]
    inputs = [helper.make_tensor_value_info("x", TP.FLOAT, [2, 5, k])]
    if b_input:
        inputs.append(helper.make_tensor_value_info("w", TP.FLOAT, [k, 7]))
    else:
        consts.append(numpy_helper.from_array(rng.normal(0, 1, (k, 7)).astype(np.float32), "w"))
    nodes = [helper.make_node("MatMul", ["x", "w"], ["p"]),
             helper.make_node("Add", ["c", "p"] if swap else ["p", "c"], ["s"])]
    nodes.append(helper.make_node("Relu" if relu else "Identity", ["s"], ["y"]))
    outputs = [helper.make_tensor_value_info("y", TP.FLOAT, None)]
    if extra_reader:
        outputs.append(helper.make_tensor_value_info("p", TP.FLOAT, None))
    graph = helper.make_graph(nodes, "matmul_bias", inputs, outputs, consts)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()


@pytest.mark.parametrize("threads", [1, 2])
def test_matmul_bias_runs_in_the_epilogue(threads):
    """fuse_matmul_bias: MatMul -> Add of a [1, ..., 1, N] constant is one MatMul step whose epilogue adds the bias
    (with Relu after it, one step too), the same bits as the two ops (acc + c is the Add's own rounding), with W
    packed or fed, K = 0 included; not fused where the bias broadcasts another way or the product is read twice."""
    rng = np.random.default_rng(13)
    cases = [dict(bias_shape=(7,)), dict(bias_shape=(1, 1, 7), swap=True), dict(bias_shape=(1, 7), relu=True),
             dict(bias_shape=(7,), b_input=True), dict(bias_shape=(7,), b_input=True, relu=True),
             dict(bias_shape=(7,), k=0)]
    for case in cases:
        model = _matmul_bias_graph(**case)
        k = case.get("k", 24)
        feeds = {"x": rng.normal(0, 1, (2, 5, k)).astype(np.float32)}
        if case.get("b_input"):
            feeds["w"] = rng.normal(0, 1, (k, 7)).astype(np.float32)
        fused = nnkern.onnx.InferenceSession(model, num_threads=threads)
        steps = [line.split()[1] for line in fused.describe().splitlines()[:-1]]
        assert steps.count("MatMul") == 1 and "Add" not in steps and "Relu" not in steps, (case, fused.describe())
        plain = nnkern.onnx.InferenceSession(model, num_threads=threads, optimize={"fuse_matmul_bias": False})
        assert "Add" in [line.split()[1] for line in plain.describe().splitlines()[:-1]]
        got, want = fused.run(None, feeds)[0], plain.run(None, feeds)[0]
        np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32), err_msg=str(case))
        c = np.asarray(numpy_helper.to_array(onnx.load_from_string(model).graph.initializer[0]), np.float64)
        exact = feeds["x"].astype(np.float64) @ (feeds["w"] if "w" in feeds else numpy_helper.to_array(
            onnx.load_from_string(model).graph.initializer[1])).astype(np.float64) + c.reshape(-1)
        if case.get("relu"):
            exact = np.maximum(exact, 0)
        np.testing.assert_allclose(got, exact, rtol=1e-5, atol=1e-5 * max(k, 1))
    for case in (dict(bias_shape=(5, 1)), dict(bias_shape=(5, 7)), dict(bias_shape=(7,), extra_reader=True)):
        steps = [line.split()[1] for line in
                 nnkern.onnx.InferenceSession(_matmul_bias_graph(**case)).describe().splitlines()[:-1]]
        assert "Add" in steps, case


def test_matmul_bias_input_is_checked():
    """The plan's three-input MatMul refuses a bias of the wrong size or type (a hand-built graph)."""
    from nnkern import _C
    f32 = (1, [2, 3])
    w = (1, [3, 4])
    for bias, msg in (((1, [5]), "not N = 4"), ((11, [4]), "float32"), ((1, [2, 3]), "not N = 4")):
        with pytest.raises(ValueError, match=msg):
            _C.graph_infer("MatMul", "m", {}, [f32, w, bias], 1)


def _inverted_residual_graph(extra_reader=False, other_addend=False):
    """MobileNet-v2's three block forms: 1x1 expansion -> depthwise 3x3 -> 1x1 projection + the input (stride 1),
    the same with stride 2 and no residual, depthwise -> projection without an expansion; ReLU6 after the first
    two layers of each. extra_reader: the first block's expanded tensor is also a graph output (not fused);
    other_addend: the first block's projection is added to another tensor than its input (fused without the Add)."""
    g = _Graph(110)
    relu6 = {"min": g.const("min", np.float32(0)), "max": g.const("max", np.float32(6))}

    def clip(x):
        return g.node("Clip", [x, relu6["min"], relu6["max"]])

    x = clip(g.conv("image", 3, 8, 3))
    e = clip(g.conv(x, 8, 48, 1))
    y = g.conv(clip(g.conv(e, 48, 48, 3, group=48)), 48, 8, 1)
    x = g.node("Add", [y, g.conv(x, 8, 8, 1) if other_addend else x])
    e = clip(g.conv(x, 8, 40, 1))
    x = g.conv(clip(g.conv(e, 40, 40, 3, stride=2, group=40)), 40, 16, 1)
    g.conv(clip(g.conv(x, 16, 16, 3, group=16)), 16, 24, 1, output="features")
    outputs = [helper.make_tensor_value_info("features", TP.FLOAT, ["N", 24, "H2", "W2"])]
    inputs = [_image_input("image", 3)]
    if extra_reader:
        g.node("Identity", [g.nodes[3].output[0]], output="expanded")
        outputs.append(helper.make_tensor_value_info("expanded", TP.FLOAT, ["N", 48, "H", "W"]))
    return g.model("inverted_residual", inputs, outputs)


@pytest.mark.parametrize("threads", [1, 2])
def test_inverted_residual_blocks_run_as_one_step(threads):
    """fuse_inverted_residual: each block (with or without expansion and residual) is one step whose results are
    the layers' one by one bit for bit (the same kernels, band by band); an expansion whose output has another
    reader stays a layer of its own (the block starts at the depthwise layer); an Add of another tensor stays out
    of the block (the convolution producing that tensor takes it)."""
    rng = np.random.default_rng(6)
    feeds = {"image": rng.uniform(-1, 1, (2, 3, 29, 34)).astype(np.float32)}
    for kwargs, expansions, residuals in [({}, 2, 1), ({"extra_reader": True}, 1, 0), ({"other_addend": True}, 2, 0)]:
        model = _inverted_residual_graph(**kwargs)
        fused = nnkern.onnx.InferenceSession(model, num_threads=threads)
        described = fused.describe(feeds)
        assert described.count("nnkern.InvertedResidual") == 3, described
        assert described.count("[expand,") == expansions, described
        assert described.count("+ input") == residuals, described
        plain = nnkern.onnx.InferenceSession(model, num_threads=threads, optimize={"fuse_inverted_residual": False})
        assert "nnkern.InvertedResidual" not in plain.describe(feeds)
        for got, want in zip(fused.run(None, feeds), plain.run(None, feeds)):
            np.testing.assert_array_equal(got, want, err_msg=str(kwargs))


@pytest.mark.parametrize("op, axes, keepdims", [("ReduceMean", [2, 3], 0), ("ReduceMean", [-1, -2], 1),
                                                ("ReduceMax", [1], 0), ("ReduceSum", [3], 0), ("ReduceSum", [], 0),
                                                ("ReduceMin", [0, 2], 1)])
def test_reductions_of_a_feature_map_run_in_its_layout(op, axes, keepdims):
    """push_transposes moves the NHWC -> NCHW transpose below a reduction (axes permuted; without keepdims a smaller
    transpose only where the kept axes change order): a global average over H and W reads the NHWC map directly.
    Results within the float bound of the unpushed plan. ReduceSum takes its axes as an input, the others as an
    attribute."""
    g = _Graph(111)
    x = g.node("Relu", [g.conv("image", 3, 8, 3)])
    if op == "ReduceSum":
        g.node(op, [x, g.const("axes", np.array(axes, np.int64))] if axes else [x], output="out", keepdims=keepdims)
    else:
        g.node(op, [x], output="out", axes=axes, keepdims=keepdims)
    rank = 4 if keepdims else 4 - len(axes or range(4))
    out = helper.make_tensor_value_info("out", TP.FLOAT, [None] * rank)
    model = g.model("reduce", [_image_input("image", 3)], [out])
    feeds = {"image": np.random.default_rng(7).uniform(-1, 1, (2, 3, 9, 11)).astype(np.float32)}
    pushed = nnkern.onnx.InferenceSession(model)
    plain = nnkern.onnx.InferenceSession(model, optimize={"push_transposes": False})
    _within_float_bound(pushed.run(None, feeds), plain.run(None, feeds), f"{op} {axes} {keepdims}")
    transposes = pushed.describe(feeds).count("Transpose")
    if (op, axes) == ("ReduceMean", [2, 3]):
        assert transposes == 1, pushed.describe(feeds)  # the input's; none before the reduction
    assert transposes <= plain.describe(feeds).count("Transpose")


def _shuffle_unit_graph(slice_axes, units=1, expose_5d=False):
    """ShuffleNet-v2's unit on a conv's output: split the channels in two by Slice (slice_axes: the axes input, or
    None for none, the starts / ends then covering every axis), a branch of convolutions on one half, Concat, the
    channel shuffle as Reshape (N, 2, C/2, H, W) / Transpose (0, 2, 1, 3, 4) / Reshape (N, C, H, W); `units` such
    units in a row, then a conv. expose_5d: the first unit's 5-D reshape is a graph output too."""
    g = _Graph(113)
    x = g.node("Relu", [g.conv("image", 3, 8, 3)])
    big = np.iinfo(np.int64).max

    def half(x, lo, hi):
        if slice_axes is None:
            return g.node("Slice", [x, g.const("starts", np.array([0, lo, 0, 0], np.int64)),
                                    g.const("ends", np.array([big, hi, big, big], np.int64))])
        return g.node("Slice", [x, g.const("starts", np.array([lo], np.int64)),
                                g.const("ends", np.array([hi], np.int64)),
                                g.const("axes", np.array(slice_axes, np.int64))])

    outputs = []
    for _ in range(units):
        b = g.node("Relu", [g.conv(g.conv(half(x, 4, 8), 4, 4, 3, group=4), 4, 4, 1)])
        c = g.node("Concat", [half(x, 0, 4), b], axis=1)
        exposed = expose_5d and not outputs
        r = g.node("Reshape", [c, g.const("shape5", np.array([0, 2, 4, 9, 11], np.int64))],
                   output="grouped" if exposed else None)
        if exposed:
            outputs.append(helper.make_tensor_value_info("grouped", TP.FLOAT, ["N", 2, 4, 9, 11]))
        t = g.node("Transpose", [r], perm=[0, 2, 1, 3, 4])
        x = g.node("Reshape", [t, g.const("shape4", np.array([-1, 8, 9, 11], np.int64))])
    g.conv(x, 8, 6, 1, output="out")
    out = helper.make_tensor_value_info("out", TP.FLOAT, ["N", 6, 9, 11])
    return g.model("shuffle_unit", [_image_input("image", 3)], [out] + outputs)


@pytest.mark.parametrize("slice_axes", [[1], [-3], None])
def test_channel_split_and_shuffle_run_in_nhwc(slice_axes):
    """push_transposes moves the layout transposes through Slice (its axes permuted) and through ShuffleNet's
    channel shuffle (rewritten on the NHWC tensor), so the unit runs in NHWC between one transpose in and one out
    (and the shuffle's own): the same values as the unpushed plan, bit for bit (only data moves differently)."""
    model = _shuffle_unit_graph(slice_axes)
    feeds = {"image": np.random.default_rng(8).uniform(-1, 1, (2, 3, 9, 11)).astype(np.float32)}
    pushed = nnkern.onnx.InferenceSession(model, optimize={"fuse_channel_shuffle": False})
    plain = nnkern.onnx.InferenceSession(model, optimize={"push_transposes": False})
    described = pushed.describe(feeds)
    assert described.count(" Transpose [") == 3, described  # in, the shuffle, out
    assert plain.describe(feeds).count(" Transpose [") > 3
    for got, want in zip(pushed.run(None, feeds), plain.run(None, feeds)):
        np.testing.assert_array_equal(got, want)


def test_channel_shuffle_whose_grouping_is_a_graph_output_keeps_its_layout():
    """The shuffle's 5-D reshape is also a graph output: its (N, 2, C/2, H, W) value must come out as written, so
    the layout pass leaves that shuffle in NCHW; every output equals the unoptimized plan's."""
    model = _shuffle_unit_graph([1], units=2, expose_5d=True)
    feeds = {"image": np.random.default_rng(10).uniform(-1, 1, (2, 3, 9, 11)).astype(np.float32)}
    got = nnkern.onnx.InferenceSession(model).run(None, feeds)
    want = nnkern.onnx.InferenceSession(model, optimize=False).run(None, feeds)
    assert got[1].shape == (2, 2, 4, 9, 11)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("slice_axes", [[1], None])
def test_shufflenet_units_join_shuffle_and_split_in_one_pass(slice_axes):
    """fuse_channel_shuffle: each unit's Concat, channel shuffle and (where the next unit reads them) halving Slices
    run as one nnkern.ChannelShuffle step, two outputs between units and one after the last: the same bits as
    without it."""
    model = _shuffle_unit_graph(slice_axes, units=3)
    feeds = {"image": np.random.default_rng(9).uniform(-1, 1, (2, 3, 9, 11)).astype(np.float32)}
    fused = nnkern.onnx.InferenceSession(model)
    plain = nnkern.onnx.InferenceSession(model, optimize={"fuse_channel_shuffle": False})
    described = fused.describe(feeds)
    assert described.count("nnkern.ChannelShuffle") == 3, described
    assert described.count(" Slice ->") == 2 and " Concat ->" not in described, described  # the first split's
    assert described.count(" Transpose [") == 2, described  # the layout's, in and out
    for got, want in zip(fused.run(None, feeds), plain.run(None, feeds)):
        np.testing.assert_array_equal(got, want)


def _residual_graph(tail="Relu", swap=False, shortcut_conv=False, extra_reader=False):
    """conv -> BN -> Relu -> conv -> BN -> Add(shortcut) -> tail: ResNet's basic block. shortcut_conv: the shortcut
    is a 1x1 convolution too (either may take the Add); extra_reader: the second conv's output is also a graph
    output (not fused)."""
    g = _Graph(112)
    x = g.node("Relu", [g.conv("image", 3, 8, 3)])
    y = g.batchnorm(g.conv(g.node("Relu", [g.batchnorm(g.conv(x, 8, 8, 3), 8)]), 8, 8, 3), 8)
    s = g.conv(x, 8, 8, 1) if shortcut_conv else x
    z = g.node("Add", [s, y] if swap else [y, s])
    outputs = [helper.make_tensor_value_info("out", TP.FLOAT, ["N", 8, "H", "W"])]
    if tail == "Clip":
        g.node("Clip", [z, g.const("min", np.float32(0)), g.const("max", np.float32(6))], output="out")
    elif tail:
        g.node(tail, [z], output="out")
    else:
        g.node("Identity", [z], output="out")
    if extra_reader:
        g.node("Identity", [y], output="second")
        outputs.append(helper.make_tensor_value_info("second", TP.FLOAT, ["N", 8, "H", "W"]))
    return g.model("residual", [_image_input("image", 3)], outputs)


@pytest.mark.parametrize("kwargs, fused_act", [(dict(), "relu"), (dict(swap=True), "relu"),
                                               (dict(tail="Clip"), "relu6"), (dict(tail="Sigmoid"), "sigmoid"),
                                               (dict(tail="Tanh"), "tanh"),
                                               (dict(tail=None), None), (dict(shortcut_conv=True), "relu"),
                                               (dict(extra_reader=True), None)])
@pytest.mark.parametrize("threads", [1, 2])
def test_residual_add_runs_in_the_convolution(kwargs, fused_act, threads):
    """fuse_residual_add (on by default): the shortcut's Add and the activation after it run in the epilogue or
    post-ops of the convolution that produces one operand: the same bits as the separate Add and activation; where
    that output has another reader the Add stays."""
    feeds = {"image": np.random.default_rng(8).uniform(-2, 2, (2, 3, 13, 10)).astype(np.float32)}
    model = _residual_graph(**kwargs)
    fused = nnkern.onnx.InferenceSession(model, num_threads=threads)
    plain = nnkern.onnx.InferenceSession(model, num_threads=threads, optimize={"fuse_residual_add": False})
    steps = [line.split()[1] for line in fused.describe(feeds).splitlines()[:-1]]
    if fused_act is None and kwargs.get("extra_reader"):
        assert "Add" in steps
    else:
        assert "Add" not in steps and "+ residual" in fused.describe(feeds), fused.describe(feeds)
        assert not {"Relu", "Clip", "Sigmoid", "Tanh"} & set(steps), steps
    assert "Add" in [line.split()[1] for line in plain.describe(feeds).splitlines()[:-1]]
    for got, want in zip(fused.run(None, feeds), plain.run(None, feeds)):
        np.testing.assert_array_equal(got, want, err_msg=str(kwargs))


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_concat_of_differently_quantized_inputs_stays_quantized(dtype):
    """DequantizeLinear (each input its own scale / zero point) -> Concat -> QuantizeLinear: the inputs quantized
    otherwise are requantized (a table) and the Concat moves 8-bit values: the float plan's bits, no float tensor
    in the plan; with the same parameters everywhere no table either."""
    N, tt = helper.make_node, helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    lo = np.iinfo(dtype).min
    for same in (False, True):
        inits = {"sa": np.float32(0.1), "za": dtype(lo + 100), "sb": np.float32(0.1 if same else 0.0432),
                 "zb": dtype(lo + (100 if same else 7)), "sy": np.float32(0.1 if same else 0.0432),
                 "zy": dtype(lo + (100 if same else 7))}
        nodes = [N("DequantizeLinear", ["a", "sa", "za"], ["fa"]), N("DequantizeLinear", ["b", "sb", "zb"], ["fb"]),
                 N("Concat", ["fa", "fb"], ["c"], axis=1), N("QuantizeLinear", ["c", "sy", "zy"], ["y"])]
        g = helper.make_graph(nodes, "qc", [helper.make_tensor_value_info("a", tt, [2, 256]),
                                            helper.make_tensor_value_info("b", tt, [2, 5])],
                              [helper.make_tensor_value_info("y", tt, None)],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)], ir_version=9).SerializeToString()
        feeds = {"a": np.tile(np.arange(256) + lo, (2, 1)).astype(dtype),
                 "b": np.random.default_rng(9).integers(lo, lo + 256, (2, 5)).astype(dtype)}
        s = nnkern.onnx.InferenceSession(model)
        steps = [line.split()[1] for line in s.describe(feeds).splitlines()[:-1]]
        assert steps == (["Concat"] if same else ["nnkern.Lookup", "Concat"]), steps
        want = nnkern.onnx.InferenceSession(model, optimize=False).run(None, feeds)[0]  # DQ, float Concat, Q
        np.testing.assert_array_equal(s.run(None, feeds)[0], want)
        np.testing.assert_array_equal(
            nnkern.onnx.InferenceSession(model, optimize={"quantized_lookup": False}).run(None, feeds)[0], want)


def _block_node_model(inputs=None, attrs=None, consts=None, residual_input=None):
    """A model whose one node is the plan's own nnkern.InvertedResidual (or, with residual_input, an nnkern.Conv
    with a residual): what a hostile file could hold. The valid form: 4 -> 8 -> depthwise 3x3 -> 4, + input."""
    c = {"we": np.ones((8, 1, 1, 4), np.float32), "wd": np.ones((8, 3, 3, 1), np.float32),
         "wp": np.ones((4, 1, 1, 8), np.float32)}
    c.update(consts or {})
    if residual_input is not None:
        node = helper.make_node("nnkern.Conv", ["x", "wp", "", "r"], ["y"])
        c = {"wp": c["wp"]}
        graph_inputs = [helper.make_tensor_value_info("x", TP.FLOAT, [1, 5, 5, 8]),
                        helper.make_tensor_value_info("r", TP.FLOAT, list(residual_input))]
    else:
        a = {"residual": 1, "dw.group": 8, "dw.pads": [1, 1, 1, 1]}
        a.update(attrs or {})
        node = helper.make_node("nnkern.InvertedResidual", inputs or ["x", "we", "", "wd", "", "wp", ""], ["y"], **a)
        graph_inputs = [helper.make_tensor_value_info("x", TP.FLOAT, [1, 5, 5, 4])]
    g = helper.make_graph([node], "g", graph_inputs, [helper.make_tensor_value_info("y", TP.FLOAT, None)],
                          [numpy_helper.from_array(v, k) for k, v in c.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def test_fused_nodes_refuse_what_they_cannot_run():
    """The plan's fused nodes checked as any node is: a malformed nnkern.InvertedResidual or an nnkern.Conv residual
    of the wrong shape raises (ValueError / NotImplementedError), never runs on wrong memory."""
    x = {"x": np.ones((1, 5, 5, 4), np.float32)}
    x["x"] = np.random.default_rng(10).uniform(-1, 1, (1, 5, 5, 4)).astype(np.float32)
    y = nnkern.onnx.InferenceSession(_block_node_model()).run(None, x)[0]
    e = nnkern.Conv2d(np.ones((8, 1, 1, 4), np.float32))(x["x"])
    d = nnkern.Conv2d(np.ones((8, 3, 3, 1), np.float32), padding=1, groups=8)(e)
    np.testing.assert_array_equal(y, nnkern.Conv2d(np.ones((4, 1, 1, 8), np.float32))(d) + x["x"])  # valid: runs
    bad = [dict(inputs=["x", "we", "", "wd", "", "wp"]),                        # 6 inputs
           dict(inputs=["x", "we", "", "", "", "wp", ""]),                      # no depthwise weight
           dict(attrs={"dw.strides": [2, 2]}),                                  # a residual that changes the size
           dict(consts={"we": np.ones((8, 3, 3, 4), np.float32)}),              # a 3x3 "expansion"
           dict(attrs={"dw.group": 1}),                                         # not depthwise
           dict(consts={"wp": np.ones((4, 1, 1, 6), np.float32)})]              # channels that do not chain
    for kw in bad:
        with pytest.raises((ValueError, NotImplementedError)):
            nnkern.onnx.InferenceSession(_block_node_model(**kw)).run(None, x)
    with pytest.raises(ValueError, match="residual"):
        nnkern.onnx.InferenceSession(_block_node_model(residual_input=(1, 5, 5, 3))).run(
            None, {"x": np.ones((1, 5, 5, 8), np.float32), "r": np.ones((1, 5, 5, 3), np.float32)})


def _one_node_model(op, attrs, x_shape, consts=()):
    """A model of one of the plan's own nodes on input x (float32) and constants {name: array}, as a hostile file
    could hold it."""
    consts = dict(consts)
    node = helper.make_node(op, ["x", *consts], ["y"], **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TP.FLOAT, list(x_shape))],
                          [helper.make_tensor_value_info("y", TP.FLOAT, None)],
                          [numpy_helper.from_array(v, k) for k, v in consts.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def test_new_node_attributes_refuse_bad_values():
    """nnkern.Conv's upsample (two factors >= 1; not inside an nnkern.InvertedResidual) and nnkern.DepthToSpace's
    input_perm (a permutation of 0..3) are checked as the plan builds the step: ValueError / NotImplementedError,
    never a step on wrong memory; valid values run."""
    w = {"w": np.ones((2, 3, 3, 4), np.float32)}
    x = np.ones((1, 3, 5, 4), np.float32)
    y = nnkern.onnx.InferenceSession(_one_node_model("nnkern.Conv", {"upsample": [2, 1], "pads": [1, 1, 1, 1]},
                                                     x.shape, w)).run(None, {"x": x})[0]
    assert y.shape == (1, 6, 5, 2)
    for up in ([0, 1], [2], [1, -3]):
        with pytest.raises((ValueError, NotImplementedError), match="upsample"):
            nnkern.onnx.InferenceSession(_one_node_model("nnkern.Conv", {"upsample": up}, x.shape, w)).run(
                None, {"x": x})
    with pytest.raises((ValueError, NotImplementedError), match="upsample"):
        nnkern.onnx.InferenceSession(_block_node_model(attrs={"dw.upsample": [2, 2]})).run(
            None, {"x": np.ones((1, 5, 5, 4), np.float32)})
    z = np.arange(2 * 3 * 4 * 8, dtype=np.float32).reshape(2, 3, 4, 8)  # NHWC of an NCHW (2, 8, 3, 4)
    good = _one_node_model("nnkern.DepthToSpace", {"blocksize": 2, "input_perm": [0, 3, 1, 2]}, z.shape)
    want = z.transpose(0, 3, 1, 2).reshape(2, 2, 2, 2, 3, 4).transpose(0, 3, 4, 1, 5, 2).reshape(2, 2, 6, 8)
    np.testing.assert_array_equal(nnkern.onnx.InferenceSession(good).run(None, {"x": z})[0], want)
    for attrs in ({"blocksize": 2}, {"blocksize": 2, "input_perm": [0, 0, 1, 2]},
                  {"blocksize": 2, "input_perm": [0, 3, 1]}):
        with pytest.raises((ValueError, NotImplementedError), match="input_perm"):
            nnkern.onnx.InferenceSession(_one_node_model("nnkern.DepthToSpace", attrs, z.shape)).run(None, {"x": z})


def _fire_graph(extra_reader=False, input_output=False, twice=False, concat_output=False):
    """SqueezeNet's fire module and a U-Net-like upsampling joined on channels: Concat(expand 1x1, expand 3x3,
    nearest x2 of a stride-2 branch). extra_reader: the 1x1 expansion is also read by another convolution;
    input_output: the 3x3 expansion is also a graph output; twice: the 1x1 expansion joined twice;
    concat_output: the Concat is the graph output."""
    g = _Graph(131)
    x = g.node("Relu", [g.conv("image", 3, 8, 3)])
    sq = g.node("Relu", [g.conv(x, 8, 4, 1)])
    e1 = g.node("Relu", [g.conv(sq, 4, 8, 1)])
    e3 = g.node("Relu", [g.conv(sq, 4, 8, 3)], output="e3" if input_output else None)
    scales = g.const("scales", np.array([1, 1, 2, 2], np.float32))
    up = g.node("Resize", [g.node("Relu", [g.conv(x, 8, 4, 3, stride=2)]), "", scales], mode="nearest",
                coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    parts = [e1, e1, e3, up] if twice else [e1, e3, up]
    channels = 8 * len(parts) - 4
    c = g.node("Concat", parts, axis=1, output="output" if concat_output else None)
    outputs = [helper.make_tensor_value_info("output", TP.FLOAT, ["N", channels if concat_output else 3, "H", "W"])]
    if not concat_output:
        g.conv(c, channels, 3, 1, output="output")
    if extra_reader:
        g.conv(e1, 8, 2, 1, output="side")
        outputs.append(helper.make_tensor_value_info("side", TP.FLOAT, ["N", 2, "H", "W"]))
    if input_output:
        outputs.append(helper.make_tensor_value_info("e3", TP.FLOAT, ["N", 8, "H", "W"]))
    return g.model("fire", [_image_input("image", 3)], outputs)


@pytest.mark.parametrize("kwargs, in_place", [(dict(), "0,1,2"), (dict(concat_output=True), "0,1,2"),
                                              (dict(extra_reader=True), "1,2"), (dict(input_output=True), "0,2"),
                                              (dict(twice=True), "2,3")])
@pytest.mark.parametrize("kind", ["float", "qdq"])
def test_concat_inputs_are_written_in_place(kwargs, in_place, kind):
    """concat_in_place: the convolutions, table lookups and nearest upsampling that produce a Concat's inputs
    write straight into their channels of its output (each a channel slice, pixels the Concat's width apart), and
    the Concat copies nothing for them: the same bits as the plan that copies, on 1 and 2 threads. An input that
    something else reads, that is a graph output or that is joined twice stays a copy. (The INT8 plan with a
    joined tensor as a graph output keeps that Concat in NCHW, rows of whole images that transposes produce:
    nothing in place there.)"""
    if kind == "qdq" and kwargs.get("input_output"):
        in_place = None
    feeds = {"image": np.random.default_rng(10).uniform(-2, 2, (2, 3, 12, 10)).astype(np.float32)}
    model = _fire_graph(**kwargs)
    if kind == "qdq":
        model = quantize(model, "qdq", MODELS["upsample_concat"][1])
    for threads in (1, 2):
        joined = nnkern.onnx.InferenceSession(model.SerializeToString(), num_threads=threads)
        copied = nnkern.onnx.InferenceSession(model.SerializeToString(), num_threads=threads,
                                              optimize={"concat_in_place": False})
        concat = [line for line in joined.describe(feeds).splitlines() if " Concat" in line]
        assert len(concat) == 1 and (f"[inputs {in_place} in place]" if in_place else "Concat ->") in concat[0], concat
        assert "in place" not in copied.describe(feeds)
        for got, want in zip(joined.run(None, feeds), copied.run(None, feeds)):
            np.testing.assert_array_equal(got, want, err_msg=f"{kwargs} {kind} threads={threads}")


@pytest.mark.parametrize("threads", [1, 2])
def test_timed_algorithms_keep_the_bits(threads):
    """tune=True: each INT8 convolution runs the fastest of its applicable algorithms, timed as the plan is
    compiled (describe() marks those that had a choice "timed"); every algorithm gives the same bits, so the
    outputs are those of auto's rule. Float convolutions keep the rule (their algorithms round differently)."""
    model = quantize("small_cnn", "qdq").SerializeToString()
    feeds = MODELS["small_cnn"][1](batch=2, seed=5)
    timed = nnkern.onnx.InferenceSession(model, num_threads=threads, tune=True)
    rule = nnkern.onnx.InferenceSession(model, num_threads=threads)
    text = timed.describe(feeds)
    qconv = [line for line in text.splitlines() if "nnkern.QConv" in line]
    assert sum("(timed)" in line for line in qconv) >= 2, text
    assert "(timed)" not in rule.describe(feeds)
    for got, want in zip(timed.run(None, feeds), rule.run(None, feeds)):
        np.testing.assert_array_equal(got, want)
    float_model = MODELS["small_cnn"][0]().SerializeToString()
    assert "(timed)" not in nnkern.onnx.InferenceSession(float_model, tune=True).describe(feeds)
    with pytest.raises(TypeError, match="tune"):
        nnkern.onnx.InferenceSession(model, tune="yes")


@pytest.mark.parametrize("per_axis, second_reader", [(False, False), (True, False), (False, True)])
def test_dequantize_runs_after_the_moves(per_axis, second_reader):
    """fuse_qdq: a per-tensor DequantizeLinear whose one reader moves elements (DepthToSpace, Reshape, ...) runs
    after the moves, which then carry 8-bit values: the bits of the graph as written. A per-axis one, or one with
    another reader, stays where it is."""
    N = helper.make_node
    scale = np.array([0.05, 0.1, 0.2, 0.4] * 3, np.float32) if per_axis else np.float32(0.05)
    zero = np.full(12, 3, np.uint8) if per_axis else np.uint8(3)
    nodes = [N("DequantizeLinear", ["x", "s", "z"], ["f"], axis=1),
             N("DepthToSpace", ["f"], ["d"], blocksize=2, mode="CRD"), N("Reshape", ["d", "shape"], ["y"])]
    outputs = [helper.make_tensor_value_info("y", TP.FLOAT, None)]
    if second_reader:
        nodes.append(N("Relu", ["f"], ["r"]))
        outputs.append(helper.make_tensor_value_info("r", TP.FLOAT, None))
    inits = [numpy_helper.from_array(np.asarray(scale), "s"), numpy_helper.from_array(np.asarray(zero), "z"),
             numpy_helper.from_array(np.array([2, 3, -1], np.int64), "shape")]
    g = helper.make_graph(nodes, "dq_moves", [helper.make_tensor_value_info("x", TP.UINT8, [2, 12, 5, 7])], outputs,
                          inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8).SerializeToString()
    feeds = {"x": np.random.default_rng(11).integers(0, 256, (2, 12, 5, 7)).astype(np.uint8)}
    s = nnkern.onnx.InferenceSession(model)
    steps = [line.split()[1] for line in s.describe(feeds).splitlines()[:-1]]
    sunk = not per_axis and not second_reader
    assert (steps.index("DequantizeLinear") > steps.index("DepthToSpace")) == sunk, steps
    for got, want in zip(s.run(None, feeds), nnkern.onnx.InferenceSession(model, optimize=False).run(None, feeds)):
        np.testing.assert_array_equal(got, want)


def _qdq_global_pool_model(shape, x_type, y_type, x_zero, y_zero, sx, sy, per_axis=False, pooled_reader=False):
    """x (8-bit) -> DequantizeLinear -> GlobalAveragePool -> QuantizeLinear -> y: an INT8 classifier's pooling."""
    N = helper.make_node
    C = shape[1]
    tp = {np.uint8: TP.UINT8, np.int8: TP.INT8}
    inits = [numpy_helper.from_array(np.full(C, sx, np.float32) if per_axis else np.float32(sx), "sx"),
             numpy_helper.from_array(np.float32(sy), "sy")]
    dq_in, q_in = ["x", "sx"], ["p", "sy"]
    if x_zero is not None:
        inits.append(numpy_helper.from_array(np.full(C, x_zero, x_type) if per_axis else x_type(x_zero), "zx"))
        dq_in.append("zx")
    if y_zero is not None:
        inits.append(numpy_helper.from_array(y_type(y_zero), "zy"))
        q_in.append("zy")
    nodes = [N("DequantizeLinear", dq_in, ["f"], axis=1), N("GlobalAveragePool", ["f"], ["p"]),
             N("QuantizeLinear", q_in, ["y"])]
    outputs = [helper.make_tensor_value_info("y", tp[y_type], None)]
    if pooled_reader:  # the float pooled value is also an output: the pooling stays a float step
        outputs.append(helper.make_tensor_value_info("p", TP.FLOAT, None))
    g = helper.make_graph(nodes, "qdq_gap", [helper.make_tensor_value_info("x", tp[x_type], list(shape))], outputs,
                          inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8).SerializeToString()


def _qdq_global_pool_expected(x, x_zero, y_type, y_zero, sx, sy):
    """The three steps in float32, each pixel added in order (nnkern's float pooling), then ONNX's quantization."""
    f = (x.astype(np.float32) - np.float32(x_zero or 0)) * np.float32(sx)
    f = f.reshape(f.shape[0], f.shape[1], -1)
    acc = np.zeros(f.shape[:2], np.float32)
    for p in range(f.shape[2]):
        acc = acc + f[:, :, p]
    mean = acc / np.float32(f.shape[2])
    info = np.iinfo(y_type)
    v = np.rint(mean / np.float32(sy)) + np.float32(y_zero or 0)
    return np.clip(v, info.min, info.max).astype(y_type).reshape(f.shape[:2] + (1,) * (x.ndim - 2))


@pytest.mark.parametrize("shape, x_type, y_type, x_zero, y_zero, sx, sy", [
    ((1, 16, 7, 7), np.uint8, np.uint8, 3, 5, 0.05, 0.04),
    ((3, 130, 5, 3), np.int8, np.int8, -7, 2, 0.1, 0.03),
    ((2, 40, 2, 2), np.uint8, np.uint8, 128, 128, 0.25, 0.25),  # sums of quarters: ties, rounded to even
    ((2, 64, 1, 1), np.uint8, np.uint8, None, None, 0.5, 0.5),  # no zero points (uint8 out)
    ((2, 65, 3, 3), np.uint8, np.int8, 100, -3, 0.3, 0.3),     # uint8 in, int8 out, saturating
    ((2, 70, 9), np.int8, np.uint8, 0, 0, 0.02, 0.01),         # 1-D: (N, C, L)
    ((1, 300, 4, 3), np.uint8, np.uint8, 9, 7, 0.02, 0.015),    # past a 256-channel block (one thread's)
    ((1, 3, 13, 13), np.uint8, np.uint8, 200, 0, 1e-3, 1e-5)])  # saturates at both ends
@pytest.mark.parametrize("threads", [1, 2])
def test_quantized_global_average_pool_reads_the_8_bit_tensor(shape, x_type, y_type, x_zero, y_zero, sx, sy, threads):
    """fuse_qdq: DequantizeLinear -> GlobalAveragePool -> QuantizeLinear (per tensor) is one pooling of the 8-bit
    tensor, no float copy of it written: the bits of the three steps as written (every ISA cap this CPU runs, the
    threads' split of the channels included), channel tails past the 64- and 256-channel blocks, ties to even."""
    info = np.iinfo(x_type)
    x = np.random.default_rng(13).integers(info.min, info.max + 1, shape).astype(x_type)
    model = _qdq_global_pool_model(shape, x_type, y_type, x_zero, y_zero, sx, sy)
    want = _qdq_global_pool_expected(x, x_zero, y_type, y_zero, sx, sy)
    plain = nnkern.onnx.InferenceSession(model, optimize=False, num_threads=threads).run(None, {"x": x})[0]
    np.testing.assert_array_equal(plain, want)  # the expectation is the unfused plan's
    for isa in nnkern.ISA_LEVELS:
        if isa not in nnkern._C.isa_levels():
            continue
        with nnkern.max_isa(isa):
            s = nnkern.onnx.InferenceSession(model, num_threads=threads)
            steps = [line.split()[1] for line in s.describe({"x": x}).splitlines()[:-1]]
            assert "nnkern.QGlobalAveragePool" in steps and "DequantizeLinear" not in steps, steps
            y = s.run(None, {"x": x})[0]
        assert y.dtype == y_type and y.shape == want.shape
        np.testing.assert_array_equal(y, want, err_msg=isa)


def test_quantized_global_average_pool_of_3_d_maps_is_refused_by_the_op_written():
    """A 3-D pooling (rank 5) is not supported: the error names GlobalAveragePool, fused or not."""
    shape = (1, 4, 3, 3, 3)
    model = _qdq_global_pool_model(shape, np.uint8, np.uint8, 3, 5, 0.05, 0.04)
    for optimize in (True, False):
        with pytest.raises(NotImplementedError, match="^GlobalAveragePool node .*rank 3 or 4"):
            nnkern.onnx.InferenceSession(model, optimize=optimize).run(None, {"x": np.zeros(shape, np.uint8)})


def test_the_fused_pooling_is_no_operator_of_models():
    """QGlobalAveragePool is written by fuse_qdq alone: a model that names it is refused as an unknown operator,
    and supported_ops() does not list it."""
    from onnx import TensorProto as TP, helper
    node = helper.make_node("QGlobalAveragePool", ["x", "s", "z", "s", "z"], ["y"])
    inits = [helper.make_tensor("s", TP.FLOAT, [], [0.1]), helper.make_tensor("z", TP.UINT8, [], [3])]
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TP.UINT8, [1, 4, 3, 3])],
                              [helper.make_tensor_value_info("y", TP.UINT8, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(NotImplementedError, match="QGlobalAveragePool is not supported"):
        nnkern.onnx.InferenceSession(model.SerializeToString())
    assert "QGlobalAveragePool" not in nnkern.onnx.supported_ops()


@pytest.mark.parametrize("per_axis, pooled_reader", [(True, False), (False, True)])
def test_quantized_global_average_pool_only_per_tensor_and_alone(per_axis, pooled_reader):
    """A per-channel DequantizeLinear, or a pooled float value that something else reads, keeps the float steps."""
    shape = (2, 12, 4, 4)
    x = np.random.default_rng(14).integers(0, 256, shape).astype(np.uint8)
    model = _qdq_global_pool_model(shape, np.uint8, np.uint8, 9, 4, 0.05, 0.04, per_axis, pooled_reader)
    s = nnkern.onnx.InferenceSession(model)
    steps = [line.split()[1] for line in s.describe({"x": x}).splitlines()[:-1]]
    assert "nnkern.QGlobalAveragePool" not in steps and "nnkern.GlobalAveragePool" in steps, steps
    plain = nnkern.onnx.InferenceSession(model, optimize=False)
    for got, want in zip(s.run(None, {"x": x}), plain.run(None, {"x": x})):
        np.testing.assert_array_equal(got, want)


def _residual_adds_model(c):
    """Two residual adds after INT8 convolutions of c channels: a 1x1 convolution as the Add's first operand with a
    Relu after it, a depthwise one as the second without."""
    g = _Graph(150)
    x = g.node("Relu", [g.conv("image", 3, c, 3)])
    x = g.node("Relu", [g.node("Add", [g.conv(x, c, c, 1), x])])
    g.node("Add", [x, g.conv(x, c, c, 3, group=c)], output="features")
    return g.model("residual_adds", [_image_input("image", 3)],
                   [helper.make_tensor_value_info("features", TP.FLOAT, ["N", c, "H", "W"])])


# Channels 16: tiles of whole pixels (one call per tile); 40: 16-channel slices of a pixel (gathered, one call);
# 20: the last panel's 4 channels in a 16-wide tile buffer (a call per pixel).
@pytest.mark.parametrize("channels", [16, 40, 20])
@pytest.mark.parametrize("kind", ["qdq", "qoperator"])
@pytest.mark.parametrize("threads", [1, 2])
def test_quantized_residual_add_in_the_convolution(channels, kind, threads):
    """fuse_quantized_residual_add (off by default): the QLinearAdd after an INT8 convolution added to each tile as it
    is stored: no QLinearAdd step left, the bits of the plan without it, on every ISA cap this CPU runs."""
    from onnx_models import Feeds
    feeds_of = Feeds("image", "image", 3, 32, 20)
    model = quantize(_residual_adds_model(channels), kind, feeds_of).SerializeToString()
    feeds = feeds_of(batch=2, seed=5)
    want = nnkern.onnx.InferenceSession(model, num_threads=threads).run(None, feeds)
    default = nnkern.onnx.InferenceSession(model, num_threads=threads).describe(feeds)
    assert default.count(" QLinearAdd ") == 2, default  # off by default
    assert "fuse_quantized_residual_add" in nnkern.onnx.DEFAULT_OFF <= set(nnkern.onnx.OPTIMIZATIONS)
    for isa in nnkern.ISA_LEVELS:
        if isa not in nnkern._C.isa_levels():
            continue
        with nnkern.max_isa(isa):
            s = nnkern.onnx.InferenceSession(model, num_threads=threads,
                                             optimize={"fuse_quantized_residual_add": True})
            text = s.describe(feeds)
            assert " QLinearAdd " not in text and text.count("+ residual") == 2, text
            for got, w in zip(s.run(None, feeds), want):
                np.testing.assert_array_equal(got, w, err_msg=isa)


def test_quantized_residual_add_after_a_convolution_with_weight_zero_points():
    """The convolution whose uint8 weights minus their zero point do not fit int8 (im2col and a GEMM with the zero
    points) adds the fused QLinearAdd over its whole output: the bits of the two steps."""
    N = helper.make_node
    rng = np.random.default_rng(16)
    w = rng.integers(0, 256, (8, 4, 3, 3)).astype(np.uint8)  # zero point 0: values up to 255
    c = lambda name, v: numpy_helper.from_array(np.asarray(v), name)  # noqa: E731
    inits = [c("w", w), c("sw", np.float32(0.002)), c("zw", np.uint8(0)), c("sx", np.float32(0.05)),
             c("zx", np.uint8(10)), c("sy", np.float32(0.1)), c("zy", np.uint8(20)), c("sr", np.float32(0.07)),
             c("zr", np.uint8(5)), c("so", np.float32(0.12)), c("zo", np.uint8(30))]
    nodes = [N("DequantizeLinear", ["x", "sx", "zx"], ["xf"]), N("DequantizeLinear", ["w", "sw", "zw"], ["wf"]),
             N("Conv", ["xf", "wf"], ["yf"], pads=[1, 1, 1, 1]), N("QuantizeLinear", ["yf", "sy", "zy"], ["yq"]),
             N("DequantizeLinear", ["yq", "sy", "zy"], ["yd"]), N("Transpose", ["r"], ["rt"], perm=[0, 3, 1, 2]),
             N("DequantizeLinear", ["rt", "sr", "zr"], ["rd"]),
             N("Add", ["yd", "rd"], ["s"]), N("Relu", ["s"], ["sr_"]), N("QuantizeLinear", ["sr_", "so", "zo"], ["y"])]
    g = helper.make_graph(nodes, "general_add", [helper.make_tensor_value_info("x", TP.UINT8, [2, 4, 6, 5]),
                                                  helper.make_tensor_value_info("r", TP.UINT8, [2, 6, 5, 8])],
                          [helper.make_tensor_value_info("y", TP.UINT8, None)], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8).SerializeToString()
    feeds = {"x": rng.integers(0, 256, (2, 4, 6, 5)).astype(np.uint8),
             "r": rng.integers(0, 256, (2, 6, 5, 8)).astype(np.uint8)}  # NHWC, as a feature map in the plan
    s = nnkern.onnx.InferenceSession(model, optimize={"fuse_quantized_residual_add": True})
    text = s.describe(feeds)
    assert "weights with zero points) + residual" in text and " QLinearAdd " not in text, text
    want = nnkern.onnx.InferenceSession(model).run(None, feeds)[0]
    np.testing.assert_array_equal(s.run(None, feeds)[0], want)
    assert len(np.unique(want)) > 20  # not saturated


def _upsample_conv_graph(scales=(2, 2), modes=("asymmetric", "floor"), mode="nearest", extra_reader=False):
    """image (NHWC) -> Transpose to NCHW -> Resize (scales along H, W) -> Conv 3x3 (8 -> 5): a decoder's step,
    its Resize in NHWC once the layout transposes cancel."""
    g = _Graph(141)
    sc = g.const("scales", np.array([1, 1, *scales], np.float32))
    nchw = g.node("Transpose", ["image"], perm=[0, 3, 1, 2])
    up = g.node("Resize", [nchw, "", sc], mode=mode, coordinate_transformation_mode=modes[0],
                **({"nearest_mode": modes[1]} if mode == "nearest" else {}))
    g.conv(up, 8, 5, 3, output="output")
    outputs = [helper.make_tensor_value_info("output", TP.FLOAT, ["N", 5, "H", "W"])]
    if extra_reader:
        g.node("Identity", [up], output="up")
        outputs.append(helper.make_tensor_value_info("up", TP.FLOAT, ["N", 8, "H", "W"]))
    return g, g.model("upsample_conv", [helper.make_tensor_value_info("image", TP.FLOAT, ["N", "H", "W", 8])],
                      outputs)


@pytest.mark.parametrize("kwargs, fused", [
    (dict(), True), (dict(scales=(3, 2)), True), (dict(modes=("half_pixel", "round_prefer_floor")), True),
    (dict(modes=("pytorch_half_pixel", "round_prefer_ceil")), True), (dict(scales=(1, 2)), True),
    (dict(modes=("asymmetric", "round_prefer_floor")), False), (dict(scales=(1.5, 2)), False),
    (dict(mode="linear", modes=("asymmetric", None)), False), (dict(extra_reader=True), False)])
@pytest.mark.parametrize("threads", [1, 2])
def test_upsampling_is_read_through_the_indirection_buffer(kwargs, fused, threads):
    """fuse_upsampling: a nearest Resize by integer factors whose one reader is a convolution is never written:
    the convolution's indirection buffer points at each upsampled pixel's source. The bits of the indirect
    algorithm on the upsampled tensor (numpy's repeat); not fused where the nearest pixel is not o // f, the
    factor is not an integer, the mode is not nearest or the upsampled tensor has another reader."""
    g, model = _upsample_conv_graph(**kwargs)
    x = np.random.default_rng(12).uniform(-2, 2, (2, 5, 7, 8)).astype(np.float32)
    s = nnkern.onnx.InferenceSession(model.SerializeToString(), num_threads=threads)
    text = s.describe({"image": x})
    steps = [line.split()[1] for line in text.splitlines()[:-1]]
    assert ("Resize" not in steps and "input upsampled" in text) == fused, text
    y = s.run(None, {"image": x})[0]
    plain = nnkern.onnx.InferenceSession(model.SerializeToString(), num_threads=threads,
                                         optimize={"fuse_upsampling": False}).run(None, {"image": x})[0]
    _within_float_bound([y], [plain.astype(np.float64)], str(kwargs))
    if fused:
        fh, fw = kwargs.get("scales", (2, 2))
        up = np.repeat(np.repeat(x, fh, axis=1), fw, axis=2)
        w = numpy_helper.to_array(next(i for i in g.inits if i.name.startswith("w_")))
        b = numpy_helper.to_array(next(i for i in g.inits if i.name.startswith("b_")))
        want = nnkern.Conv2d(np.ascontiguousarray(w.transpose(0, 2, 3, 1)), b, padding=1, algorithm="indirect")(up)
        np.testing.assert_array_equal(y, want.transpose(0, 3, 1, 2))


@pytest.mark.parametrize("channels", [1, 3, 4, 5])
def test_the_input_is_quantized_into_nhwc_in_one_step(channels):
    """quantize_to_nhwc: an INT8 network's input QuantizeLinear and its layout Transpose as one
    nnkern.QuantizeToNhwc step for 1-4 channels (5 keep both steps), with the bytes of the two steps."""
    from onnx import TensorProto as TP, helper
    from onnx_models import Feeds
    g = _Graph(41)
    g.node("Relu", [g.conv(g.conv("image", channels, 8, 3), 8, 4, 1)], output="y")
    model = g.model("input_quantization", [_image_input("image", channels)],
                    [helper.make_tensor_value_info("y", TP.FLOAT, ["N", 4, "H", "W"])])
    feeds = Feeds("image", "image", channels, 13)
    q = quantize(model, "qdq", feeds).SerializeToString()
    x = feeds(batch=2, seed=3)
    x["image"].reshape(-1)[:4] = [np.nan, np.inf, -np.inf, 0.5]  # NaN -> the zero point, saturation, a tie
    fused = nnkern.onnx.InferenceSession(q, num_threads=1)
    plain = nnkern.onnx.InferenceSession(q, num_threads=1, optimize={"quantize_to_nhwc": False})
    steps = [line.split()[1] for line in fused.describe(x).splitlines()[:-1]]
    assert ("nnkern.QuantizeToNhwc" in steps) == (channels <= 4), steps
    assert "nnkern.QuantizeToNhwc" not in [line.split()[1] for line in plain.describe(x).splitlines()[:-1]]
    np.testing.assert_array_equal(fused.run(None, x)[0], plain.run(None, x)[0])


def _embedding_lstm_model(*, transpose=True, layout=0, direction="forward", lengths=False, qdq=False, clip=None,
                          activations=None):
    """tokens (int64) -> Gather(table) [-> QuantizeLinear -> DequantizeLinear] [-> Transpose(1, 0, 2)] -> LSTM."""
    from onnx import TensorProto as TP, helper, numpy_helper
    rng = np.random.default_rng(17)
    V, E, H, D = 11, 6, 5, 2 if direction == "bidirectional" else 1
    inits = [numpy_helper.from_array(rng.standard_normal((V, E)).astype(np.float32), "table"),
             numpy_helper.from_array((rng.standard_normal((D, 4 * H, E)) * 0.5).astype(np.float32), "W"),
             numpy_helper.from_array((rng.standard_normal((D, 4 * H, H)) * 0.5).astype(np.float32), "R"),
             numpy_helper.from_array((rng.standard_normal((D, 8 * H)) * 0.1).astype(np.float32), "B"),
             numpy_helper.from_array(np.array(0.02, np.float32), "s"),
             numpy_helper.from_array(np.array(128, np.uint8), "z")]
    nodes = [helper.make_node("Gather", ["table", "tokens"], ["e"])]
    x = "e"
    if qdq:
        nodes += [helper.make_node("QuantizeLinear", ["e", "s", "z"], ["eq"]),
                  helper.make_node("DequantizeLinear", ["eq", "s", "z"], ["ed"])]
        x = "ed"
    if transpose:
        nodes.append(helper.make_node("Transpose", [x], ["x"], perm=[1, 0, 2]))
        x = "x"
    attrs = dict(hidden_size=H, direction=direction, layout=layout)
    if clip is not None:
        attrs["clip"] = clip
    if activations is not None:
        attrs["activations"] = activations
    nodes.append(helper.make_node("LSTM", [x, "W", "R", "B", "lens" if lengths else ""], ["Y", "Y_h"], **attrs))
    inputs = [helper.make_tensor_value_info("tokens", TP.INT64, ["A", "C"])]
    if lengths:
        inputs.append(helper.make_tensor_value_info("lens", TP.INT32, ["N"]))
    graph = helper.make_graph(nodes, "embedding_lstm", inputs, [helper.make_tensor_value_info("Y", TP.FLOAT, None),
                                                                helper.make_tensor_value_info("Y_h", TP.FLOAT, None)],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


@pytest.mark.parametrize("transpose, layout, direction, lengths, qdq", [
    (True, 0, "forward", False, False), (False, 0, "reverse", True, False), (False, 1, "bidirectional", False, False),
    (True, 1, "forward", True, False), (True, 0, "bidirectional", True, True), (False, 0, "forward", False, True)])
def test_an_embedding_read_by_an_lstm_is_projected_once(transpose, layout, direction, lengths, qdq):
    """fuse_embedding_lstm: Gather (-> Q / DQ) (-> Transpose) -> LSTM as one nnkern.EmbeddingLSTM, with the bits of
    the steps as written: both layouts, directions, sequence lengths, negative ids (from the end, as Gather)."""
    model = _embedding_lstm_model(transpose=transpose, layout=layout, direction=direction, lengths=lengths, qdq=qdq)
    batch_major = (layout == 1) != transpose  # the ids' (batch, seq) order, seq 7, batch 3
    ids = np.random.default_rng(5).integers(-11, 11, (3, 7) if batch_major else (7, 3))
    feeds = {"tokens": ids}
    if lengths:
        feeds["lens"] = np.array([7, 0, 4], np.int32)
    fused = nnkern.onnx.InferenceSession(model, num_threads=1)
    plain = nnkern.onnx.InferenceSession(model, num_threads=1, optimize={"fuse_embedding_lstm": False})
    steps = [line.split()[1] for line in fused.describe(feeds).splitlines()[:-1]]
    assert steps[0] == "nnkern.EmbeddingLSTM" and "Gather" not in steps, steps
    for a, b in zip(fused.run(None, feeds), plain.run(None, feeds)):
        np.testing.assert_array_equal(a, b)
    bad = dict(feeds, tokens=np.where(ids == ids.flat[0], 11, ids))  # one id past the table
    with pytest.raises(ValueError, match="token id 11 is outside"):
        fused.run(None, bad)


@pytest.mark.parametrize("why", ["clip", "activations", "table too large"])
def test_an_lstm_with_its_own_cell_or_a_large_vocabulary_keeps_the_gather(monkeypatch, why):
    if why == "table too large":  # 11 rows x 20 gate values x 4 bytes = 880 bytes projected
        monkeypatch.setattr(nnkern.onnx._fuse, "MAX_PROJECTED_TABLE_BYTES", 879)
    model = _embedding_lstm_model(clip=3.0 if why == "clip" else None,
                                  activations=["Sigmoid", "Tanh", "Relu"] if why == "activations" else None)
    steps = [line.split()[1] for line in nnkern.onnx.InferenceSession(model).describe(
        {"tokens": np.zeros((3, 2), np.int64)}).splitlines()[:-1]]
    assert "nnkern.EmbeddingLSTM" not in steps and "Gather" in steps, steps
    monkeypatch.setattr(nnkern.onnx._fuse, "MAX_PROJECTED_TABLE_BYTES", 880)
    model = _embedding_lstm_model(activations=["sigmoid", "TANH", "Tanh"])  # the defaults, named: fused
    steps = [line.split()[1] for line in nnkern.onnx.InferenceSession(model).describe(
        {"tokens": np.zeros((3, 2), np.int64)}).splitlines()[:-1]]
    assert "nnkern.EmbeddingLSTM" in steps, steps
