"""The quantized operators of nnkern.onnx against onnxruntime. Exact where onnxruntime's arithmetic is exact
(QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, ConvInteger, MatMulInteger: those two also against an
exact numpy reference, since onnxruntime's AVX2 kernels sum 8-bit products in saturating int16 pairs (vpmaddubsw):
compared with onnxruntime on 7-bit activations only, where that is exact); within one quantization
step where the requantization rounds (QLinearConv, QLinearMatMul, QLinearAdd, fused QDQ patterns): nnkern adds the
bias and the output zero point in float32 before it rounds once, so a value within float32 rounding of a half may
round the other way than the exact real value would. Those are checked against an exact float64 reference (within
one step, almost all equal); onnxruntime 1.32 itself is off by up to several steps on some QLinearConv layouts (a
fixed-point requantization), so against it only the share of equal outputs is checked."""
import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

import nnkern.onnx  # noqa: E402
from nnkern import _C  # noqa: E402
from onnx_helpers import assert_same, node_model, run_nnkern, run_ort  # noqa: E402

SETTINGS = settings(max_examples=20, deadline=None, derandomize=True)


def _seven_bits(x):
    """The data with 7 bits of magnitude ([0, 127] or [-64, 63]): where onnxruntime's saturating AVX2 sums are exact."""
    x = np.asarray(x)
    return (x & 0x7F).astype(x.dtype) if x.dtype == np.uint8 else (x // 2).astype(x.dtype)


def _one_step(y, exact, max_fraction=0.01):
    """Within one step of the exact result everywhere, equal almost everywhere (the ties of float32 rounding)."""
    diff = np.abs(y.astype(np.float64) - exact)
    assert diff.max(initial=0) <= 1
    assert (diff != 0).mean() <= max_fraction if diff.size else True


def _mostly_equal(y, theirs, min_fraction=0.9):
    assert y.shape == theirs.shape and y.dtype == theirs.dtype
    assert (y == theirs).mean() >= min_fraction if y.size else True


def within_one_step(model, feeds, max_fraction=0.02):
    ours, theirs = run_nnkern(model, feeds), run_ort(model, feeds)
    for a, b in zip(ours, theirs):
        assert a.dtype == b.dtype and a.shape == b.shape
        diff = np.abs(a.astype(np.int64) - b.astype(np.int64))
        assert diff.max(initial=0) <= 1
        assert (diff != 0).mean() <= max_fraction if diff.size else True
    return ours, theirs


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint16, np.int16])
@pytest.mark.parametrize("axis", [None, 1])
def test_quantize_and_dequantize_are_exact(dtype, axis):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((2, 3, 5)) * 50).astype(np.float32)
    x[0, 0, :3] = [0.5, 1.5, -2.5]  # ties go to even
    n = 3 if axis else 1
    scale = rng.uniform(0.1, 1.0, n).astype(np.float32)
    info = np.iinfo(dtype)
    zero = rng.integers(info.min // 2, info.max // 2, n).astype(dtype)
    if axis is None:
        scale, zero = scale.reshape(()), zero.reshape(())
    attrs = {"axis": axis} if axis else {}
    q = node_model("QuantizeLinear", {"x": x}, ["y"], attrs, {"s": scale, "z": zero}, opset=21)
    y = assert_same(q, {"x": x})[0]
    d = node_model("DequantizeLinear", {"q": y}, ["x"], attrs, {"s": scale, "z": zero}, opset=21)
    assert_same(d, {"q": y})


@pytest.mark.parametrize("axis", [None, 1])
def test_quantize_and_dequantize_without_a_zero_point(axis):
    """Written with two inputs, the zero point left out (not an empty name): uint8 with zero point 0, as onnxruntime.
    The ops once read a third input past the node's two (a crash or a garbage zero point, as memory fell; the
    sanitizer run reports it every time)."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((2, 3, 50)) * 50).astype(np.float32)
    scale = rng.uniform(0.1, 1.0, 3 if axis else 1).astype(np.float32)
    attrs = {"axis": axis} if axis else {}
    if axis is None:
        scale = scale.reshape(())
    for _ in range(3):
        q = node_model("QuantizeLinear", {"x": x}, ["y"], attrs, {"s": scale}, opset=21)
        y = assert_same(q, {"x": x})[0]
        assert y.dtype == np.uint8
        d = node_model("DequantizeLinear", {"q": y}, ["x"], attrs, {"s": scale}, opset=21)
        assert_same(d, {"q": y})


def test_dynamic_quantize_linear_is_exact():
    rng = np.random.default_rng(2)
    for x in [rng.standard_normal((4, 33)).astype(np.float32), np.zeros((3,), np.float32),
              np.abs(rng.standard_normal(50)).astype(np.float32), -np.abs(rng.standard_normal(9)).astype(np.float32)]:
        m = node_model("DynamicQuantizeLinear", {"x": x}, ["y", "s", "z"])
        assert_same(m, {"x": x})


@SETTINGS
@given(st.sampled_from([np.uint8, np.int8]), st.sampled_from([np.uint8, np.int8]), st.integers(1, 7),
       st.integers(1, 40), st.integers(1, 9), st.booleans())
def test_matmul_integer_is_exact(at, bt, M, K, N, const_b):
    rng = np.random.default_rng(3)
    ai, bi = np.iinfo(at), np.iinfo(bt)
    a = rng.integers(ai.min, ai.max + 1, (2, M, K)).astype(at)
    b = rng.integers(bi.min, bi.max + 1, (K, N)).astype(bt)
    za = np.array(rng.integers(ai.min, ai.max + 1), at)
    zb = rng.integers(bi.min, bi.max + 1, N).astype(bt)
    if const_b:
        m, feeds = node_model("MatMulInteger", {"a": a}, ["y"], {}, {"b": b, "za": za, "zb": zb}), {"a": a}
    else:
        m, feeds = node_model("MatMulInteger", {"a": a, "b": b}, ["y"], {}, {"za": za, "zb": zb}), {"a": a, "b": b}
    exact = (a.astype(np.int64) - int(za)) @ (b.astype(np.int64) - zb.astype(np.int64))
    y = run_nnkern(m, feeds)[0]
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, exact)
    if not (at == np.int8 and bt == np.uint8):  # onnxruntime mis-sums int8 x uint8
        consts = {"za": _seven_bits(za), "zb": zb}
        m7 = node_model("MatMulInteger", feeds, ["y"], {}, {"b": b, **consts} if const_b else consts)
        assert_same(m7, dict(feeds, a=_seven_bits(a)))


@st.composite
def qconv_case(draw):
    groups = draw(st.sampled_from([1, 1, 2]))
    cg, og = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    k = draw(st.integers(1, 3))
    return dict(groups=groups, cg=cg, og=og, k=k, s=draw(st.integers(1, 2)), pad=draw(st.integers(0, k - 1)),
                size=draw(st.integers(k, 9)), xt=draw(st.sampled_from([np.uint8, np.int8])),
                wt=draw(st.sampled_from([np.int8, np.uint8])), per_channel=draw(st.booleans()))


@SETTINGS
@given(qconv_case())
def test_conv_integer_is_exact(c):
    rng = np.random.default_rng(4)
    C, OC = c["cg"] * c["groups"], c["og"] * c["groups"]
    xi, wi = np.iinfo(c["xt"]), np.iinfo(c["wt"])
    x = rng.integers(xi.min, xi.max + 1, (1, C, c["size"], c["size"])).astype(c["xt"])
    w = rng.integers(wi.min, wi.max + 1, (OC, c["cg"], c["k"], c["k"])).astype(c["wt"])
    zx = np.array(rng.integers(xi.min, xi.max + 1), c["xt"])
    zw = np.array(rng.integers(wi.min, wi.max + 1), c["wt"])  # onnxruntime: one weight zero point
    m = node_model("ConvInteger", {"x": x}, ["y"], dict(group=c["groups"], strides=[c["s"]] * 2, pads=[c["pad"]] * 4),
                   {"w": w, "zx": zx, "zw": zw})
    y = run_nnkern(m, {"x": x})[0]
    np.testing.assert_array_equal(y, _conv_reference(x.astype(np.int64) - int(zx), w.astype(np.int64) - int(zw),
                                                     c["groups"], c["s"], c["pad"]))
    if not (c["xt"] == np.int8 and c["wt"] == np.uint8):  # onnxruntime mis-sums int8 x uint8
        m7 = node_model("ConvInteger", {"x": x}, ["y"], dict(group=c["groups"], strides=[c["s"]] * 2,
                                                             pads=[c["pad"]] * 4), {"w": w, "zx": _seven_bits(zx), "zw": zw})
        assert_same(m7, {"x": _seven_bits(x)})


def _conv_reference(x, w, groups, stride, pad):
    """Exact int64 convolution (NCHW, OIHW) of zero-point-free operands."""
    N, C, H, W = x.shape
    OC, cg, KH, KW = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    OH, OW = (H + 2 * pad - KH) // stride + 1, (W + 2 * pad - KW) // stride + 1
    y = np.zeros((N, OC, OH, OW), np.int64)
    og = OC // groups
    for o in range(OC):
        g = o // og
        for i in range(OH):
            for j in range(OW):
                win = xp[:, g * cg:(g + 1) * cg, i * stride:i * stride + KH, j * stride:j * stride + KW]
                y[:, o, i, j] = (win * w[o]).sum(axis=(1, 2, 3))
    return y


@SETTINGS
@given(qconv_case())
def test_qlinear_conv(c):
    rng = np.random.default_rng(5)
    C, OC = c["cg"] * c["groups"], c["og"] * c["groups"]
    xi = np.iinfo(c["xt"])
    x = rng.integers(xi.min, xi.max + 1, (2, C, c["size"], c["size"])).astype(c["xt"])
    w = rng.integers(-127, 128, (OC, c["cg"], c["k"], c["k"])).astype(np.int8)
    n = OC if c["per_channel"] else 1
    sw = rng.uniform(0.002, 0.02, n).astype(np.float32)
    consts = {"sx": np.float32(0.05), "zx": np.array(rng.integers(xi.min, xi.max + 1), c["xt"]), "w": w,
              "sw": sw if c["per_channel"] else sw.reshape(()), "zw": np.zeros(n if c["per_channel"] else (), np.int8),
              "sy": np.float32(0.2), "zy": np.array(rng.integers(xi.min, xi.max + 1), c["xt"]),
              "b": rng.integers(-5000, 5000, OC).astype(np.int32)}
    m = node_model("QLinearConv", {"x": x}, ["y"], dict(group=c["groups"], strides=[c["s"]] * 2, pads=[c["pad"]] * 4),
                   consts)
    acc = _conv_reference(x.astype(np.int64) - int(consts["zx"]), w.astype(np.int64), c["groups"], c["s"], c["pad"])
    acc = acc + consts["b"].astype(np.int64)[None, :, None, None]
    factor = 0.05 * sw.astype(np.float64) / 0.2
    real = acc * (factor[None, :, None, None] if c["per_channel"] else factor[0]) + int(consts["zy"])
    exact = np.clip(np.rint(real), xi.min, xi.max)
    y = run_nnkern(m, {"x": x})[0]
    _one_step(y, exact)
    # onnxruntime on 7-bit data and zero point (its padding holds the zero point too)
    m7 = node_model("QLinearConv", {"x": x}, ["y"], dict(group=c["groups"], strides=[c["s"]] * 2, pads=[c["pad"]] * 4),
                    dict(consts, zx=_seven_bits(consts["zx"])))
    x7 = _seven_bits(x)
    _mostly_equal(run_nnkern(m7, {"x": x7})[0], run_ort(m7, {"x": x7})[0])


@pytest.mark.parametrize("op", ["QLinearConv", "ConvInteger"])
@pytest.mark.parametrize("group, cg, why", [(3, 2, "group 3 does not divide"), (0, 2, "group 0 does not divide"),
                                            (2, 3, "does not fit input")])
def test_a_weight_that_does_not_fit_the_group_or_input_raises(op, group, cg, why):
    """The weight is laid out per group when the plan is made: a group that does not divide its output channels,
    or input channels that do not match, is a clear error, not a crash or a wrong layout."""
    x = np.zeros((1, 4, 5, 5), np.uint8)
    w = np.ones((4, cg, 3, 3), np.int8)
    if op == "QLinearConv":
        consts = {"sx": np.float32(0.1), "zx": np.uint8(0), "w": w, "sw": np.float32(0.1), "zw": np.int8(0),
                  "sy": np.float32(1.0), "zy": np.uint8(0)}
    else:
        consts = {"w": w}
    m = node_model(op, {"x": x}, ["y"], dict(group=group), consts)
    with pytest.raises(ValueError, match=why):
        run_nnkern(m, {"x": x})


@SETTINGS
@given(st.sampled_from([np.uint8, np.int8]), st.integers(1, 6), st.integers(1, 50), st.integers(1, 12))
def test_qlinear_matmul(t, M, K, N):
    rng = np.random.default_rng(6)
    info = np.iinfo(t)
    a = rng.integers(info.min, info.max + 1, (3, M, K)).astype(t)
    b = rng.integers(-127, 128, (K, N)).astype(np.int8)
    consts = {"sa": np.float32(0.03), "za": np.array(3, t), "b": b, "sb": np.float32(0.01), "zb": np.array(0, np.int8),
              "sy": np.float32(0.05 * np.sqrt(K)), "zy": np.array(1, t)}
    m = node_model("QLinearMatMul", {"a": a}, ["y"], {}, consts)
    real = (a.astype(np.int64) - 3) @ b.astype(np.int64) * (0.03 * 0.01 / np.float64(np.float32(0.05 * np.sqrt(K)))) + 1
    y = run_nnkern(m, {"a": a})[0]
    _one_step(y, np.clip(np.rint(real), info.min, info.max))
    m7 = node_model("QLinearMatMul", {"a": a}, ["y"], {}, dict(consts, za=_seven_bits(consts["za"])))
    a7 = _seven_bits(a)
    _mostly_equal(run_nnkern(m7, {"a": a7})[0], run_ort(m7, {"a": a7})[0])


def test_qlinear_add_and_mul():
    rng = np.random.default_rng(7)
    a = rng.integers(0, 256, (2, 3, 4, 5)).astype(np.uint8)
    b = rng.integers(0, 256, (3, 1, 5)).astype(np.uint8)
    for op in ("QLinearAdd", "QLinearMul"):
        consts = {}
        names = {"a": a}
        node = helper.make_node(op, ["a", "sa", "za", "b", "sb", "zb", "sc", "zc"], ["y"], domain="com.microsoft")
        inits = [numpy_helper.from_array(v, k) for k, v in
                 [("sa", np.float32(0.02)), ("za", np.uint8(100)), ("sb", np.float32(0.03)), ("zb", np.uint8(120)),
                  ("sc", np.float32(0.05 if op == "QLinearAdd" else 0.01)), ("zc", np.uint8(110))]]
        g = helper.make_graph([node], "g", [helper.make_tensor_value_info("a", TP.UINT8, a.shape),
                                            helper.make_tensor_value_info("b", TP.UINT8, b.shape)],
                              [helper.make_tensor_value_info("y", TP.UINT8, None)], inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
                              ir_version=8)
        del consts, names
        within_one_step(m, {"a": a, "b": b})


def _qdq_conv_model(relu: bool, output_q: bool):
    rng = np.random.default_rng(8)
    w = rng.integers(-127, 128, (8, 4, 3, 3)).astype(np.int8)
    b = rng.integers(-300, 300, 8).astype(np.int32)
    sx, sw, sy = np.float32(0.04), rng.uniform(0.005, 0.01, 8).astype(np.float32), np.float32(0.1)
    inits = [numpy_helper.from_array(v, k) for k, v in
             [("sx", sx), ("zx", np.uint8(64)), ("w", w), ("sw", sw), ("zw", np.zeros(8, np.int8)), ("b", b),
              ("sb", (sx * sw).astype(np.float32)), ("zb", np.zeros(8, np.int32)), ("sy", sy), ("zy", np.uint8(60))]]
    nodes = [helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["x"]),
             helper.make_node("DequantizeLinear", ["w", "sw", "zw"], ["wf"], axis=0),
             helper.make_node("DequantizeLinear", ["b", "sb", "zb"], ["bf"], axis=0),
             helper.make_node("Conv", ["x", "wf", "bf"], ["c"], pads=[1, 1, 1, 1])]
    last = "c"
    if relu:
        nodes.append(helper.make_node("Relu", ["c"], ["r"]))
        last = "r"
    if output_q:
        nodes += [helper.make_node("QuantizeLinear", [last, "sy", "zy"], ["yq"]),
                  helper.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["y"])]
        last = "y"
    g = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("xq", TP.UINT8, [1, 4, 10, 10])],
                          [helper.make_tensor_value_info(last, TP.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("output_q", [True, False])
def test_qdq_conv_runs_as_one_quantized_convolution(relu, output_q):
    m = _qdq_conv_model(relu, output_q)
    s = nnkern.onnx.InferenceSession(m.SerializeToString())
    ops = [line.split()[1] for line in s.describe().splitlines()[:-1]]
    assert "nnkern.QConv" in ops and "nnkern.Conv" not in ops
    assert ops.count("DequantizeLinear") == (1 if output_q else 0)  # only the model's own output dequantization
    x = np.random.default_rng(9).integers(0, 128, (1, 4, 10, 10)).astype(np.uint8)  # 7 bits: onnxruntime exact
    ours, theirs = s.run(None, {"xq": x})[0], run_ort(m, {"xq": x})[0]
    step = 0.1 if output_q else 1e-4 * float(np.abs(theirs).max())
    assert np.abs(ours - theirs).max() <= step * 1.0001


def test_weights_with_zero_points_outside_int8_run_exactly():
    """uint8 weights with a zero point that leaves w - zw outside int8 take the general path, still exact."""
    rng = np.random.default_rng(10)
    x = rng.integers(0, 256, (1, 3, 6, 6)).astype(np.uint8)
    w = rng.integers(0, 256, (5, 3, 3, 3)).astype(np.uint8)
    m = node_model("ConvInteger", {"x": x}, ["y"], dict(pads=[1, 1, 1, 1]),
                   {"w": w, "zx": np.uint8(7), "zw": np.uint8(30)})
    s = nnkern.onnx.InferenceSession(m.SerializeToString())
    assert "general" in s.describe() or "zero points" in s.describe()
    assert_same(m, {"x": x})


def _contrib_model(node, inputs, consts, out_type=TP.UINT8):
    """A model of one com.microsoft node over graph inputs {name: array} and initializers {name: array}."""
    typed = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
             for k, v in inputs.items()]
    g = helper.make_graph([node], "g", typed,
                          [helper.make_tensor_value_info("y", out_type, None)],
                          [numpy_helper.from_array(v, k) for k, v in consts.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
                             ir_version=8)

_IN = {"xs": np.float32(0.05), "xz": np.uint8(100)}
_OUT = {"ys": np.float32(0.03), "yz": np.uint8(90)}


@pytest.mark.parametrize("op, attrs, out", [
    ("QLinearGlobalAveragePool", {"channels_last": 0}, _OUT),
    ("QLinearAveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2]}, _OUT),
    ("QLinearSigmoid", {}, {"ys": np.float32(1 / 256), "yz": np.uint8(0)}),
    ("QLinearLeakyRelu", {"alpha": 0.1}, _OUT),
    ("QLinearSoftmax", {"axis": -1, "opset": 13}, {"ys": np.float32(1 / 256), "yz": np.uint8(0)}),
])
def test_contrib_unary_ops_within_one_step_of_onnxruntime(op, attrs, out):
    """onnxruntime's quantized operators (com.microsoft) run as dequantize -> float op -> quantize: onnxruntime
    computes some through lookup tables or fixed point, so within one step of it, equal almost everywhere."""
    x = np.random.default_rng(11).integers(0, 256, (2, 5, 7, 6)).astype(np.uint8)
    consts = {**_IN, **out}
    node = helper.make_node(op, ["x", *consts], ["y"], domain="com.microsoft", **attrs)
    within_one_step(_contrib_model(node, {"x": x}, consts), {"x": x}, max_fraction=0.1)


def test_contrib_concat_within_one_step_of_onnxruntime():
    rng = np.random.default_rng(12)
    a, b = (rng.integers(0, 256, (2, c, 3, 4)).astype(np.uint8) for c in (3, 5))
    consts = {"ys": np.float32(0.04), "yz": np.uint8(120), "as": np.float32(0.05), "az": np.uint8(100),
              "bs": np.float32(0.02), "bz": np.uint8(140)}
    node = helper.make_node("QLinearConcat", ["ys", "yz", "a", "as", "az", "b", "bs", "bz"], ["y"], axis=1,
                            domain="com.microsoft")
    within_one_step(_contrib_model(node, {"a": a, "b": b}, consts), {"a": a, "b": b})


@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize("quantized_output", [True, False])
def test_contrib_qgemm(trans_b, quantized_output):
    """QGemm (A u8, B s8 constant, int32 bias C): exact float64 reference within one step (quantized output), or
    float32 rounding (float output); against onnxruntime on 7-bit A, equal almost everywhere."""
    rng = np.random.default_rng(13 + trans_b)
    M, K, N = 5, 37, 11
    a = rng.integers(0, 128, (M, K)).astype(np.uint8)
    w = rng.integers(-128, 128, (K, N)).astype(np.int8)
    c = rng.integers(-500, 500, N).astype(np.int32)
    consts = {"sa": np.float32(0.02), "za": np.uint8(60), "b": w.T.copy() if trans_b else w, "sb": np.float32(0.01),
              "zb": np.int8(0), "c": c}
    names = ["a", "sa", "za", "b", "sb", "zb", "c"]
    if quantized_output:
        consts.update({"sy": np.float32(0.3), "zy": np.uint8(128)})
        names += ["sy", "zy"]
    node = helper.make_node("QGemm", names, ["y"], transB=trans_b, domain="com.microsoft")
    m = _contrib_model(node, {"a": a}, consts, TP.UINT8 if quantized_output else TP.FLOAT)
    acc = (a.astype(np.int64) - 60) @ w.astype(np.int64) + c
    real = acc * (0.02 * 0.01)
    y = run_nnkern(m, {"a": a})[0]
    if quantized_output:
        _one_step(y, np.clip(np.rint(real / 0.3) + 128, 0, 255))
        _mostly_equal(y, run_ort(m, {"a": a})[0])
    else:
        np.testing.assert_allclose(y, real, rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(run_ort(m, {"a": a})[0], y, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("b_shape", [(257,), (3, 257)])
def test_qlinear_add_and_mul_round_half_to_even(op, b_shape):
    """Scales that put many results exactly half-way: the documented float32 formula, ties to even, bit for bit;
    broadcast, and operands of one shape (the quantize kernels' loop) under every ISA cap this CPU runs."""
    rng = np.random.default_rng(21)
    a = rng.integers(0, 256, (3, 257)).astype(np.uint8)
    b = rng.integers(0, 256, b_shape).astype(np.uint8)
    sa, sb, sc = np.float32(0.5), np.float32(0.5), np.float32(1.0 if op == "QLinearAdd" else 8.0)
    za, zb, zc = np.uint8(128), np.uint8(120), np.uint8(100)
    node = helper.make_node(op, ["a", "sa", "za", "b", "sb", "zb", "sc", "zc"], ["y"], domain="com.microsoft")
    consts = {"sa": sa, "za": za, "b": b, "sb": sb, "zb": zb, "sc": sc, "zc": zc}
    x = (a.astype(np.float32) - np.float32(za)) * sa
    y = (b.astype(np.float32) - np.float32(zb)) * sb
    v = (x + y if op == "QLinearAdd" else x * y) / sc + np.float32(zc)
    ties = (v - np.floor(v) == 0.5) & (v > 0) & (v < 255)
    assert ties.sum() >= 10, ties.sum()  # the case is the ties inside the type's range
    want = np.rint(np.clip(v, 0, 255)).astype(np.uint8)
    for isa in nnkern.ISA_LEVELS:
        if isa in _C.isa_levels():
            with nnkern.max_isa(isa):
                got = run_nnkern(_contrib_model(node, {"a": a}, consts), {"a": a})[0]
            np.testing.assert_array_equal(got, want, err_msg=isa)


def test_qlinear_mul_with_a_degenerate_output_scale_is_defined():
    """A zero or NaN output scale makes 0/0 and NaN results: they saturate to the type's low end, not an undefined
    float -> integer conversion."""
    a = np.arange(10, dtype=np.uint8)
    node = helper.make_node("QLinearMul", ["a", "sa", "za", "a", "sa", "za", "sc", "zc"], ["y"], domain="com.microsoft")
    for sc, want in [(0.0, [0] + [255] * 9), (np.nan, [0] * 10)]:
        consts = {"sa": np.float32(0.5), "za": np.uint8(0), "sc": np.float32(sc), "zc": np.uint8(3)}
        got = run_nnkern(_contrib_model(node, {"a": a}, consts), {"a": a})[0]
        np.testing.assert_array_equal(got, np.array(want, np.uint8))


def _qbinary(op, a, b):
    """The one-node model of `op` over graph input a and constant b (int8 or uint8, a's type), and the documented
    float32 formula."""
    t = a.dtype.type
    info, shift = np.iinfo(t), 0 if t == np.int8 else 128  # uint8: the int8 zero points moved up with the range
    sa, sb, sc = np.float32(0.03), np.float32(0.05), np.float32(0.02 if op == "QLinearAdd" else 0.05)
    za, zb, zc = t(-3 + shift), t(7 + shift), t(-11 + shift)
    node = helper.make_node(op, ["a", "sa", "za", "b", "sb", "zb", "sc", "zc"], ["y"], domain="com.microsoft")
    consts = {"sa": sa, "za": za, "b": b, "sb": sb, "zb": zb, "sc": sc, "zc": zc}
    x = (a.astype(np.float32) - np.float32(za)) * sa
    y = (b.astype(np.float32) - np.float32(zb)) * sb
    v = (x + y if op == "QLinearAdd" else x * y) / sc + np.float32(zc)
    want = np.rint(np.clip(v, info.min, info.max)).astype(t)
    return _contrib_model(node, {"a": a}, consts, TP.INT8 if t == np.int8 else TP.UINT8), want


def _every_isa(model, a, want):
    for isa in nnkern.ISA_LEVELS:
        if isa in _C.isa_levels():
            with nnkern.max_isa(isa):
                got = run_nnkern(model, {"a": a})[0]
            np.testing.assert_array_equal(got, want, err_msg=f"{isa} {a.shape}")


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("a_shape, b_shape", [((4, 301), (4, 301)), ((301,), (4, 301)), ((2, 3, 40), (3, 40)),
                                              ((4, 301), (4, 1)), ((5, 15), (15,)), ((2, 3, 40), (2, 1, 40)),
                                              ((3, 2500), (2500,)), ((2, 6, 7), (2, 1, 7)), ((4, 0), (0,)),
                                              ((0, 16), (16,)), ((2, 5, 0), (5, 0))])
def test_qlinear_add_and_mul_int8(op, a_shape, b_shape):
    """int8 operands of one shape, or broadcast: one row over every row (the quantize kernels' loop over a buffer of
    the row repeated, or per row past its size), rows that both walk (the loop per row; short ones and a value per
    row: the op's own loop): the documented float32 formula bit for bit, the saturation at both ends included,
    under every ISA cap this CPU runs."""
    rng = np.random.default_rng(22)
    a = rng.integers(-128, 128, a_shape).astype(np.int8)
    b = rng.integers(-128, 128, b_shape).astype(np.int8)
    model, want = _qbinary(op, a, b)
    assert want.size == 0 or ((want == -128).any() and (want == 127).any())
    _every_isa(model, a, want)


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_qlinear_add_and_mul_every_length(op, dtype):
    """Operands of one shape, every length 1..40 and past two 32-byte steps (each tail of the vector loops, 8 and 32
    bytes; the signed and unsigned byte packs), and one row of each length over three rows, under every ISA cap this
    CPU runs."""
    rng = np.random.default_rng(23)
    info = np.iinfo(dtype)
    for n in list(range(1, 41)) + [63, 64, 65, 71]:
        for a_shape, b_shape in [((n,), (n,)), ((3, n), (n,))]:
            a = rng.integers(info.min, info.max + 1, a_shape).astype(dtype)
            b = rng.integers(info.min, info.max + 1, b_shape).astype(dtype)
            model, want = _qbinary(op, a, b)
            _every_isa(model, a, want)
