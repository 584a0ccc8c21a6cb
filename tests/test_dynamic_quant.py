"""Dynamic quantization: the min/max kernels, DynamicQuantizeLinear's parameters, and QLinear(input_scale=None)
against a numpy emulation and against onnxruntime's DynamicQuantizeLinear + MatMulInteger graph."""
from __future__ import annotations

import numpy as np
import pytest

import nnkern
from nnkern import _C
from nnkern.quantize import dynamic_quantization_params

from conftest import kernel_params, require_level

F32 = np.float32


# --- the min/max reduction, per kernel ------------------------------------------------------------------

@pytest.mark.parametrize("level", kernel_params("quantize"))
def test_minmax_kernel_every_length_and_position(level):
    require_level(level)
    rng = np.random.default_rng(0)
    with nnkern.max_isa(level):
        for n in list(range(0, 70)) + [255, 1000, 70001, 200003]:  # tails, and the threaded chunks
            x = rng.standard_normal(n).astype(F32)
            want = (x.min(), x.max()) if n else (np.inf, -np.inf)
            assert _C.minmax(x) == want, (level, n)
            if n:  # the extreme at every kind of position (vector body, tail, chunk boundary)
                for pos in {0, n - 1, n // 2, min(n - 1, 65536)}:
                    y = x.copy()
                    y[pos] = -50.0
                    assert _C.minmax(y)[0] == -50.0, (level, n, pos)
                    y[pos] = 50.0
                    assert _C.minmax(y)[1] == 50.0, (level, n, pos)


@pytest.mark.parametrize("level", kernel_params("quantize"))
def test_minmax_skips_nan_and_keeps_inf(level):
    require_level(level)
    with nnkern.max_isa(level):
        for n in (1, 7, 8, 17, 33, 100):
            x = np.full(n, np.nan, F32)
            assert _C.minmax(x) == (np.inf, -np.inf)
            x[n // 2] = 3.0
            assert _C.minmax(x) == (3.0, 3.0)
            x[0] = -np.inf
            assert _C.minmax(x)[0] == -np.inf
        x = np.array([-0.0, 0.0], F32)
        assert _C.minmax(x) == (0.0, 0.0)


# --- the parameters -------------------------------------------------------------------------------------

def ort_params(x):
    """onnxruntime's GetQuantizationParameter for uint8, in float32 (the formula the docstring states)."""
    lo, hi = min(F32(np.nanmin(x)) if x.size else F32(0), F32(0)), max(F32(np.nanmax(x)) if x.size else F32(0), F32(0))
    scale = F32(1.0) if hi == lo else F32(F32(hi - lo) / F32(255))
    zp = int(np.rint(np.clip(F32(0) - F32(lo / scale), F32(0), F32(255))))
    return scale, zp


def test_parameters_match_the_formula():
    rng = np.random.default_rng(1)
    for _ in range(500):
        x = (rng.standard_normal(rng.integers(1, 50)) * 10.0 ** rng.uniform(-6, 6) + rng.uniform(-3, 3)).astype(F32)
        q, s, z = nnkern.quantize_dynamic(x)
        assert (s, z) == ort_params(x)
        assert np.array_equal(q, np.clip(np.rint(x / s) + z, 0, 255).astype(np.uint8))


def test_parameter_edge_cases():
    assert dynamic_quantization_params(np.inf, -np.inf) == (1.0, 0)  # no data / all NaN
    assert dynamic_quantization_params(5.0, 5.0) == (F32(5.0 / 255), 0)  # the range includes 0
    assert dynamic_quantization_params(-2.0, -1.0) == (F32(2.0 / 255), 255)
    s, z = dynamic_quantization_params(-1e-44, 1e-44)  # the scale would underflow to 0
    assert s > 0 and 0 <= z <= 255
    for lo, hi in ((-np.inf, 1.0), (0.0, np.inf), (-3e38, 3e38)):
        with pytest.raises(ValueError, match="finite range"):
            dynamic_quantization_params(lo, hi)
    q, s, z = nnkern.quantize_dynamic(np.array([np.nan, 1.0, -1.0], F32))
    assert q[0] == z  # NaN -> the zero point, as quantize does


# --- QLinear(input_scale=None) against a numpy emulation --------------------------------------------------

def emulate(x, layer, bias):
    """float32(acc) * float32(sx * ws) (+ bias, one rounding of the exact fma) with acc the exact int64 sum."""
    scale, zp = ort_params(x)
    xq = np.clip(np.rint(x / scale) + zp, 0, 255).astype(np.int64)
    acc = (xq.reshape(-1, x.shape[-1]) - zp) @ layer.weight.astype(np.int64).T
    factor = (layer.weight_scale * scale).astype(F32)  # one float32 product per column
    y = acc.astype(F32).astype(np.float64) * factor  # exact in float64 (24 x 24 bits)
    if bias is not None:
        y = y + bias.astype(F32)
    return y.astype(F32).reshape(x.shape[:-1] + (layer.out_features,))


@pytest.mark.parametrize("level", kernel_params("quantize"))
@pytest.mark.parametrize("shape, N", [((1, 16), 8), ((5, 37), 13), ((3, 4, 64), 40), ((33, 300), 70), ((0, 8), 3)])
def test_dynamic_qlinear_matches_emulation(level, shape, N):
    require_level(level)
    rng = np.random.default_rng(sum(shape) + N)
    K = shape[-1]
    w = rng.standard_normal((N, K)).astype(F32)
    b = rng.standard_normal(N).astype(F32)
    with nnkern.max_isa(level):
        for bias in (None, b):
            layer = nnkern.QLinear(w, bias)
            for shift in (0.0, 2.5, -7.0):  # asymmetric ranges: zero points far from 128
                x = (rng.standard_normal(shape) + shift).astype(F32)
                got, want = layer(x), emulate(x, layer, bias)
                assert got.dtype == F32 and got.shape == want.shape
                if bias is None:  # one rounding on both sides: bit-identical
                    assert np.array_equal(got, want), (level, shape, shift)
                else:  # the kernel's fma rounds once; the float64 emulation may round twice
                    np.testing.assert_array_max_ulp(got, want, maxulp=1)


def test_dynamic_qlinear_arguments():
    w = np.ones((3, 4), F32)
    layer = nnkern.QLinear(w, None, relu=True)
    assert layer.dynamic and layer.input_scale is None and layer.input_zero_point is None
    assert (layer(np.full((2, 4), -1.0, F32)) == 0).all()  # relu fused
    with pytest.raises(TypeError, match="float32"):
        layer(np.ones((2, 4), np.uint8))
    with pytest.raises(ValueError, match="finite range"):
        layer(np.array([[1, np.inf, 0, 0]], F32))
    with pytest.raises(ValueError, match="input_zero_point without input_scale"):
        nnkern.QLinear(w, input_zero_point=3)
    with pytest.raises(ValueError, match="returns float32"):
        nnkern.QLinear(w, output_dtype=np.uint8)
    with pytest.raises(ValueError, match="needs input_zero_point"):
        nnkern.QLinear(w, input_scale=0.1)
    with pytest.raises(ValueError, match="in_features"):
        nnkern.QLinear(np.ones((1, 65794), np.int8), weight_scale=1.0)


# --- against onnxruntime --------------------------------------------------------------------------------

def ort_graph(wq, w_scale, bias):
    """DynamicQuantizeLinear(x) -> MatMulInteger(xq, W^T, x_zp) -> Cast -> Mul(x_scale * w_scale) [-> Add bias]."""
    onnx = pytest.importorskip("onnx", reason="onnx is not installed (pip install onnx)")
    from onnx import TensorProto, helper, numpy_helper
    nodes = [
        helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
        helper.make_node("MatMulInteger", ["xq", "wt", "xz"], ["acc"]),
        helper.make_node("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["xs", "ws"], ["s"]),
        helper.make_node("Mul", ["accf", "s"], ["y0" if bias is not None else "y"]),
    ]
    inits = [numpy_helper.from_array(np.ascontiguousarray(wq.T), "wt"), numpy_helper.from_array(w_scale, "ws")]
    if bias is not None:
        nodes.append(helper.make_node("Add", ["y0", "b"], ["y"]))
        inits.append(numpy_helper.from_array(bias, "b"))
    K, N = wq.shape[1], wq.shape[0]
    graph = helper.make_graph(nodes, "dynamic_qlinear",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, K])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, N])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    onnx.checker.check_model(model)
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install onnxruntime)")
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # run the graph as written
    opts.intra_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("M, K, N", [(1, 16, 8), (7, 64, 33), (32, 256, 64), (3, 1000, 5)])
def test_dynamic_qlinear_matches_onnxruntime(M, K, N):
    """Weights in [-64, 63] (onnxruntime's reduce_range): its AVX2 u8s8 kernel sums pairs of u8 x s8 products
    with vpmaddubsw, which saturates at int16 for full-range weights (nnkern's kernels never do; the
    emulation test above covers full-range weights)."""
    rng = np.random.default_rng(M * K + N)
    wq = rng.integers(-64, 64, (N, K)).astype(np.int8)
    ws = rng.uniform(0.001, 0.01, N).astype(F32)
    b = rng.standard_normal(N).astype(F32)
    plain = nnkern.QLinear(wq, None, weight_scale=ws)
    biased = nnkern.QLinear(wq, b, weight_scale=ws)
    sess_plain, sess_biased = ort_graph(wq, ws, None), ort_graph(wq, ws, b)
    for shift in (0.0, 1.5, -4.0):
        x = (rng.standard_normal((M, K)) * 2 + shift).astype(F32)
        assert np.array_equal(nnkern.quantize_dynamic(x)[0], sess_quantized(x))
        y0 = sess_plain.run(["y"], {"x": x})[0]
        assert np.array_equal(plain(x), y0), (M, K, N, shift)  # the same float32 operations: bit for bit
        # nnkern fuses acc * s + b into one fma (one rounding); onnxruntime's Mul then Add round twice.
        err = np.abs(biased(x).astype(np.float64) - sess_biased.run(["y"], {"x": x})[0])
        assert (err <= 2.0 ** -23 * (np.abs(y0) + np.abs(b))).all(), (M, K, N, shift, err.max())


def sess_quantized(x):
    """onnxruntime's DynamicQuantizeLinear output alone."""
    import onnx
    from onnx import TensorProto, helper
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"])
    g = helper.make_graph([node], "dql", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                          [helper.make_tensor_value_info("q", TensorProto.UINT8, list(x.shape)),
                           helper.make_tensor_value_info("s", TensorProto.FLOAT, []),
                           helper.make_tensor_value_info("z", TensorProto.UINT8, [])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    onnx.checker.check_model(model)
    import onnxruntime as ort
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(["q"], {"x": x})[0]
