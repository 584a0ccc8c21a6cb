"""The convolution, pooling and matrix-product operators of nnkern.onnx against onnxruntime on one-node models with
random shapes and attributes. Float bound: |nnkern - onnxruntime| <= 1e-5 * (1 + K) * max|y| + 1e-6 with K the
products summed per output (float32 sums in a different order; nnkern's own bound is (2K + 2) eps |x||w|)."""
import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from onnx_helpers import node_model, run_nnkern, run_ort  # noqa: E402

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True)


def close(model, feeds, k):
    ours, theirs = run_nnkern(model, feeds), run_ort(model, feeds)
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape and a.dtype == b.dtype
        scale = float(np.abs(b).max()) if b.size else 0.0
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-5 * (1 + k) * scale + 1e-6)


@st.composite
def conv_case(draw, transpose=False):
    spatial = draw(st.sampled_from([1, 2]))
    groups = draw(st.sampled_from([1, 1, 2, 3]))
    cg = draw(st.integers(1, 5))
    og = draw(st.integers(1, 5))
    k = [draw(st.integers(1, 4)) for _ in range(spatial)]
    s = [draw(st.integers(1, 3)) for _ in range(spatial)]
    d = [draw(st.integers(1, 2)) for _ in range(spatial)]
    size = [draw(st.integers(max(1, (kk - 1) * dd + 1), 9)) for kk, dd in zip(k, d)]
    auto = draw(st.sampled_from(["NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]))
    if auto.startswith("SAME"):
        d = [1] * spatial  # onnxruntime has no dilation with SAME padding
    pads = [draw(st.integers(0, kk - 1)) for kk in k] + [draw(st.integers(0, kk - 1)) for kk in k]
    bias = draw(st.booleans())
    batch = draw(st.integers(1, 2))
    return dict(spatial=spatial, groups=groups, cg=cg, og=og, k=k, s=s, d=d, size=size, auto=auto, pads=pads,
                bias=bias, batch=batch)


@SETTINGS
@given(conv_case())
def test_conv(c):
    rng = np.random.default_rng(1)
    C, OC = c["cg"] * c["groups"], c["og"] * c["groups"]
    x = rng.standard_normal([c["batch"], C] + c["size"]).astype(np.float32)
    w = rng.standard_normal([OC, c["cg"]] + c["k"]).astype(np.float32)
    consts = {"w": w}
    if c["bias"]:
        consts["b"] = rng.standard_normal(OC).astype(np.float32)
    attrs = dict(group=c["groups"], strides=c["s"], dilations=c["d"], kernel_shape=c["k"])
    if c["auto"] == "NOTSET":
        attrs["pads"] = c["pads"]
    else:
        attrs["auto_pad"] = c["auto"]
    model = node_model("Conv", {"x": x}, ["y"], attrs, consts)
    close(model, {"x": x}, c["cg"] * int(np.prod(c["k"])))


@SETTINGS
@given(conv_case(transpose=True), st.integers(0, 1))
def test_conv_transpose(c, out_pad):
    rng = np.random.default_rng(2)
    C, OC = c["cg"] * c["groups"], c["og"] * c["groups"]
    x = rng.standard_normal([c["batch"], C] + c["size"]).astype(np.float32)
    w = rng.standard_normal([C, c["og"]] + c["k"]).astype(np.float32)
    consts = {"w": w}
    if c["bias"]:
        consts["b"] = rng.standard_normal(OC).astype(np.float32)
    op = [min(out_pad, ss - 1) for ss in c["s"]]  # onnxruntime: output_padding below the stride
    attrs = dict(group=c["groups"], strides=c["s"], dilations=c["d"], output_padding=op)
    if c["auto"] in ("NOTSET", "VALID"):
        attrs["pads"] = c["pads"]
    else:
        attrs["auto_pad"] = c["auto"]
    model = node_model("ConvTranspose", {"x": x}, ["y"], attrs, consts)
    close(model, {"x": x}, c["cg"] * int(np.prod(c["k"])))


def test_conv_transpose_output_shape():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 2, 3, 3)).astype(np.float32)
    w = rng.standard_normal((2, 3, 3, 3)).astype(np.float32)
    model = node_model("ConvTranspose", {"x": x}, ["y"], dict(strides=[3, 2], output_shape=[10, 8]), {"w": w})
    close(model, {"x": x}, 18)


@st.composite
def pool_case(draw):
    k = [draw(st.integers(1, 4)) for _ in range(2)]
    s = [draw(st.integers(1, 3)) for _ in range(2)]
    d = [draw(st.integers(1, 2)) for _ in range(2)]
    size = [draw(st.integers((kk - 1) * dd + 1, 10)) for kk, dd in zip(k, d)]
    pads = [draw(st.integers(0, kk - 1)) for kk in k] * 2
    return dict(k=k, s=s, d=d, size=size, pads=pads, ceil=draw(st.integers(0, 1)), cip=draw(st.integers(0, 1)),
                c=draw(st.integers(1, 20)), auto=draw(st.sampled_from(["NOTSET", "NOTSET", "SAME_UPPER", "VALID"])))


@SETTINGS
@given(pool_case(), st.sampled_from(["MaxPool", "AveragePool"]))
def test_pool(c, op):
    x = np.random.default_rng(4).standard_normal([2, c["c"]] + c["size"]).astype(np.float32)
    attrs = dict(kernel_shape=c["k"], strides=c["s"], ceil_mode=c["ceil"])
    if c["auto"] == "NOTSET":
        attrs["pads"] = c["pads"]
    else:
        attrs["auto_pad"] = c["auto"]
    if op == "MaxPool":
        attrs["dilations"] = c["d"]
    else:
        attrs["count_include_pad"] = c["cip"]
    model = node_model(op, {"x": x}, ["y"], attrs, opset=19)
    close(model, {"x": x}, int(np.prod(c["k"])))


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_max_pool_of_8_bit_data_is_exact(dtype):
    info = np.iinfo(dtype)
    x = np.random.default_rng(5).integers(info.min, info.max + 1, (1, 5, 9, 9)).astype(dtype)
    model = node_model("MaxPool", {"x": x}, ["y"], dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))
    np.testing.assert_array_equal(run_nnkern(model, {"x": x})[0], run_ort(model, {"x": x})[0])


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("shape", [(1, 3, 7, 7), (2, 70, 5, 3), (1, 4, 9)])
def test_global_pool(op, shape):
    x = np.random.default_rng(6).standard_normal(shape).astype(np.float32)
    close(node_model(op, {"x": x}, ["y"]), {"x": x}, int(np.prod(shape[2:])))


@SETTINGS
@given(st.lists(st.integers(1, 3), min_size=0, max_size=2), st.lists(st.integers(1, 3), min_size=0, max_size=2),
       st.integers(1, 9), st.integers(0, 9), st.integers(1, 9), st.booleans(), st.booleans(), st.booleans())
def test_matmul(batch_a, batch_b, M, K, N, const_b, vec_a, vec_b):
    rng = np.random.default_rng(7)
    k = max(K, 1)
    a_shape = [k] if vec_a else batch_a + [M, k]
    b_shape = [k] if vec_b else batch_b + [k, N]
    if not vec_a and not vec_b:  # batch dims that broadcast: equal or 1
        width = max(len(batch_a), len(batch_b))
        a_b, b_b = [1] * (width - len(batch_a)) + batch_a, [1] * (width - len(batch_b)) + batch_b
        b_b = [x if rng.random() < 0.5 else 1 for x in a_b] if width else b_b
        a_shape, b_shape = a_b + [M, k], b_b + [k, N]
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    if const_b:
        model = node_model("MatMul", {"a": a}, ["y"], {}, {"b": b})
        close(model, {"a": a}, k)
    else:
        model = node_model("MatMul", {"a": a, "b": b}, ["y"])
        close(model, {"a": a, "b": b}, k)


@SETTINGS
@given(st.integers(1, 9), st.integers(1, 9), st.integers(1, 9), st.booleans(), st.booleans(),
       st.sampled_from([None, "scalar", "row", "col", "full"]), st.sampled_from([1.0, 0.5]),
       st.sampled_from([1.0, 2.0, 0.0]), st.booleans())
def test_gemm(M, K, N, ta, tb, c_kind, alpha, beta, const_b):
    rng = np.random.default_rng(8)
    a = rng.standard_normal((K, M) if ta else (M, K)).astype(np.float32)
    b = rng.standard_normal((N, K) if tb else (K, N)).astype(np.float32)
    consts = {}
    inputs = {"a": a}
    if const_b:
        consts["b"] = b
    else:
        inputs["b"] = b
    if c_kind is not None:
        shape = {"scalar": (1,), "row": (N,), "col": (M, 1), "full": (M, N)}[c_kind]
        consts["c"] = rng.standard_normal(shape).astype(np.float32)
    attrs = dict(transA=int(ta), transB=int(tb), alpha=alpha, beta=beta)
    model = node_model("Gemm", inputs, ["y"], attrs, consts)
    close(model, inputs, K)


def test_gemm_relu_is_fused_into_the_product():
    import nnkern.onnx
    from onnx import TensorProto as TP, helper, numpy_helper
    rng = np.random.default_rng(9)
    w = rng.standard_normal((16, 8)).astype(np.float32)
    g = helper.make_graph([helper.make_node("Gemm", ["x", "w"], ["g"], transB=1), helper.make_node("Relu", ["g"], ["y"])],
                          "g", [helper.make_tensor_value_info("x", TP.FLOAT, [4, 8])],
                          [helper.make_tensor_value_info("y", TP.FLOAT, None)], [numpy_helper.from_array(w, "w")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    s = nnkern.onnx.InferenceSession(model.SerializeToString())
    assert [line.split()[1] for line in s.describe().splitlines()[:-1]] == ["Gemm"]  # one step, the Relu in it
    np.testing.assert_allclose(s.run(None, {"x": x})[0], np.maximum(x @ w.T, 0), rtol=1e-5, atol=1e-5)
