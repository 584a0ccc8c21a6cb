"""Reductions and normalizations of nnkern.onnx against onnxruntime, one-node models: ReduceSum and family, ArgMax,
ArgMin, Softmax, LogSoftmax, Hardmax, LayerNormalization, BatchNormalization, InstanceNormalization,
LpNormalization, MeanVarianceNormalization, TopK, CumSum.

Bounds: integers, Max / Min, ArgMax / ArgMin, Hardmax, TopK and CumSum bit-exact. float32 reductions rtol 1e-5 on
positive inputs (no cancellation: the relative error of a sum of n positive float32 values is about
(n / 256 + 256) * 2^-24 in nnkern's order, onnxruntime's is similar), float64 rtol 1e-12; ReduceProd on values in
[0.9, 1.1] rtol 1e-5; ReduceLogSumExp on [-5, 5] rtol 1e-5. Softmax rtol 1e-5, atol 1e-7 (exp within 2 ulp);
LogSoftmax atol 1e-5 (its values near 0 have no relative bound); the normalizations (outputs of unit scale) atol
1e-5, rtol 1e-4 (float32) and 1e-12 (float64). Results are checked bit-identical across thread counts.
"""
import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

import nnkern  # noqa: E402
import nnkern.onnx  # noqa: E402
from helpers import QUICK  # noqa: E402
from nnkern import _C  # noqa: E402
from onnx_helpers import assert_same, node_model, run_nnkern, run_ort  # noqa: E402

REDUCE_OPS = ["ReduceSum", "ReduceMean", "ReduceProd", "ReduceMax", "ReduceMin", "ReduceL1", "ReduceL2",
              "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]
SETTINGS = dict(deadline=None, derandomize=True)


def shapes(draw, min_rank=0, max_rank=4, max_dim=5, zero=False):
    rank = draw(st.integers(min_rank, max_rank))
    return tuple(draw(st.integers(0 if zero else 1, max_dim)) for _ in range(rank))


def values(rng, op, dtype, shape):
    """Inputs in the ranges the module docstring's bounds assume."""
    if np.issubdtype(dtype, np.integer):
        if op == "ReduceProd":
            return rng.integers(-2, 3, shape).astype(dtype)
        lo = 0 if op in ("ReduceLogSum", "ReduceL2") else -6
        return rng.integers(lo, 7, shape).astype(dtype)
    if op == "ReduceProd":
        return rng.uniform(0.9, 1.1, shape).astype(dtype)
    if op in ("ReduceLogSumExp", "ReduceMax", "ReduceMin"):
        return rng.uniform(-5, 5, shape).astype(dtype)
    return rng.uniform(0.5, 2.0, shape).astype(dtype)


def reduce_model(op, x, axes, keepdims=1, noop=0, opset=18):
    attrs = {"keepdims": keepdims}
    if noop:
        attrs["noop_with_empty_axes"] = noop
    constants = {} if axes is None else {"axes": np.array(axes, np.int64)}
    return node_model(op, {"x": x}, ["y"], attrs, constants=constants, opset=opset)


def float_tol(dtype):
    return dict(rtol=1e-5, atol=0) if dtype == np.float32 else dict(rtol=1e-12, atol=0)


@settings(max_examples=300, **SETTINGS)
@given(st.data())
def test_reduce_matches_onnxruntime(data):
    op = data.draw(st.sampled_from(REDUCE_OPS))
    floats = [np.float32, np.float64]
    dtype = data.draw(st.sampled_from(floats if op == "ReduceLogSumExp" else floats + [np.int32, np.int64]))
    shape = shapes(data.draw, max_dim=7, zero=data.draw(st.booleans()))
    rank = len(shape)
    axes = []
    if rank:
        axes = data.draw(st.lists(st.integers(-rank, rank - 1), unique_by=lambda a: a % rank, max_size=rank))
    keepdims = data.draw(st.sampled_from([0, 1]))
    noop = data.draw(st.sampled_from([0, 0, 1]))
    x = values(np.random.default_rng(data.draw(st.integers(0, 2**16))), op, dtype, shape)
    tol = float_tol(dtype) if np.issubdtype(dtype, np.floating) and op not in ("ReduceMax", "ReduceMin") else {}
    assert_same(reduce_model(op, x, axes, keepdims, noop), {"x": x}, **tol)


@pytest.mark.parametrize("op", REDUCE_OPS)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
def test_reduce_empty_set(op, dtype):
    if op == "ReduceLogSumExp" and dtype != np.float32:
        pytest.skip("ReduceLogSumExp: float types only")
    x = np.zeros((2, 0, 3), dtype)
    for axes in ([1], [0, 1], []):
        assert_same(reduce_model(op, x, axes), {"x": x})


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_reduce_max_min_small_types(op, dtype):
    rng = np.random.default_rng(1)
    x = rng.integers(0, 100, (3, 4, 5)).astype(dtype)
    for axes in ([1], [0, 2], []):
        assert_same(reduce_model(op, x, axes), {"x": x})
    e = np.zeros((3, 0), dtype)
    assert_same(reduce_model(op, e, [1]), {"x": e})


@pytest.mark.parametrize("op", [op for op in REDUCE_OPS if op != "ReduceLogSumExp"])
@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
def test_reduce_unsigned_wide(op, dtype):
    """onnxruntime has no uint32 / uint64 reductions: against the numpy definition."""
    x = np.random.default_rng(1).integers(1, 6, (3, 4, 5)).astype(dtype)
    f = {"ReduceSum": np.sum, "ReduceMean": lambda a, **k: np.sum(a, **k) // a.shape[1], "ReduceProd": np.prod,
         "ReduceMax": np.max, "ReduceMin": np.min, "ReduceL1": np.sum,
         "ReduceL2": lambda a, **k: np.sqrt(np.sum(a.astype(np.float64) ** 2, **k)),
         "ReduceLogSum": lambda a, **k: np.log(np.sum(a, **k, dtype=np.float64)),
         "ReduceSumSquare": lambda a, **k: np.sum(a * a, **k)}[op]
    got, = run_nnkern(reduce_model(op, x, [1]), {"x": x})
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, f(x, axis=1, keepdims=True).astype(dtype))


def test_reduce_bool():
    """onnxruntime has no bool ReduceMax / ReduceMin: against numpy (any / all)."""
    x = np.array([[True, False, False], [False, False, False]])
    for op, f in (("ReduceMax", np.any), ("ReduceMin", np.all)):
        for axes in ([0], [1], []):
            got, = run_nnkern(reduce_model(op, x, axes, keepdims=0), {"x": x})
            np.testing.assert_array_equal(got, f(x, axis=tuple(axes) or None))
    got, = run_nnkern(reduce_model("ReduceMax", np.zeros((2, 0), bool), [1]), {"x": np.zeros((2, 0), bool)})
    np.testing.assert_array_equal(got, np.zeros((2, 1), bool))


@pytest.mark.parametrize("op", REDUCE_OPS)
def test_reduce_old_opset_axes_attribute(op):
    x = values(np.random.default_rng(2), op, np.float32, (2, 3, 4))
    opset = 11
    attrs = {"keepdims": 0, "axes": [0, 2]}
    assert_same(node_model(op, {"x": x}, ["y"], attrs, opset=opset), {"x": x}, rtol=1e-5)
    assert_same(node_model(op, {"x": x}, ["y"], {}, opset=opset), {"x": x}, rtol=1e-5)


def test_reduce_axes_fed_as_input():
    """Axes as a graph input: a plan per axes value."""
    x = np.random.default_rng(3).uniform(0.5, 2, (3, 4, 5)).astype(np.float32)
    model = node_model("ReduceSum", {"x": x, "axes": np.array([1], np.int64)}, ["y"], {"keepdims": 0})
    model.graph.input[1].type.tensor_type.shape.dim[0].dim_param = "n"
    sess = nnkern.onnx.InferenceSession(model.SerializeToString())
    for axes in ([1], [0, 2], [-1]):
        feeds = {"x": x, "axes": np.array(axes, np.int64)}
        np.testing.assert_allclose(sess.run(None, feeds)[0], run_ort(model, feeds)[0], rtol=1e-5)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceLogSumExp", "ReduceL2", "ReduceMax"])
@pytest.mark.parametrize("shape,axes", [((3, 1 << 19), [1]), ((1 << 20,), [0]), ((64, 700, 8), [1]),
                                        ((16, 100, 40), [0, 2]), ((1 << 16, 24), [1])])
def test_reduce_large_threads_invariant(op, shape, axes):
    """The pieces split across threads, the rows split across threads and the column tiles: bit-identical
    whatever the thread count; within 1e-6 of the float64 result and 2e-4 of onnxruntime (whose float32 sums
    of 2^19 elements are off by up to 1e-4)."""
    x = values(np.random.default_rng(4), op, np.float32, shape)
    model = reduce_model(op, x, axes)
    previous = nnkern.get_num_threads()
    try:
        nnkern.set_num_threads(4)
        outs = [run_nnkern(model, {"x": x}, num_threads=t)[0] for t in (1, 2, 3, 4)]
    finally:
        nnkern.set_num_threads(previous)
    for o in outs[1:]:
        np.testing.assert_array_equal(o, outs[0])
    x64, ax = x.astype(np.float64), tuple(axes)
    exact = {"ReduceSum": lambda: x64.sum(ax, keepdims=True), "ReduceMean": lambda: x64.mean(ax, keepdims=True),
             "ReduceLogSumExp": lambda: np.log(np.exp(x64).sum(ax, keepdims=True)),
             "ReduceL2": lambda: np.sqrt((x64 * x64).sum(ax, keepdims=True)),
             "ReduceMax": lambda: x64.max(ax, keepdims=True)}[op]()
    np.testing.assert_allclose(outs[0], exact, rtol=1e-6 if op != "ReduceMax" else 0)
    np.testing.assert_allclose(outs[0], run_ort(model, {"x": x})[0], rtol=2e-4 if op != "ReduceMax" else 0)


def test_reduce_float32_accuracy_long_sum():
    """2^22 positive float32 values summed: within 1e-6 relative of the float64 sum (a sequential float32 sum
    is off by about 1e-3 here)."""
    x = np.random.default_rng(5).uniform(0.5, 1.5, (1 << 22,)).astype(np.float32)
    got, = run_nnkern(reduce_model("ReduceSum", x, [0]), {"x": x})
    exact = x.astype(np.float64).sum()
    assert abs(float(got[0]) - exact) <= 1e-6 * exact


def test_reduce_special_values():
    x = np.array([[np.inf, 1, 2], [-np.inf, -np.inf, -np.inf], [np.nan, 1, 2], [1, 2, np.nan]], np.float32)
    got, = run_nnkern(reduce_model("ReduceLogSumExp", x, [1], keepdims=0), {"x": x})
    np.testing.assert_array_equal(got, [np.inf, -np.inf, np.nan, np.nan])
    for op in ("ReduceMax", "ReduceMin"):
        got, = run_nnkern(reduce_model(op, x[2:], [1], keepdims=0), {"x": x[2:]})
        assert np.isnan(got).all()  # NaN propagates wherever it sits


@settings(max_examples=120, **SETTINGS)
@given(st.data())
def test_argmax_argmin_match_onnxruntime(data):
    op = data.draw(st.sampled_from(["ArgMax", "ArgMin"]))
    dtype = data.draw(st.sampled_from([np.float32, np.float64, np.int32, np.int64, np.uint8, np.int8]))
    shape = shapes(data.draw, min_rank=1)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    attrs = {"axis": axis, "keepdims": data.draw(st.sampled_from([0, 1])),
             "select_last_index": data.draw(st.sampled_from([0, 1]))}
    x = np.random.default_rng(data.draw(st.integers(0, 2**16))).integers(0, 4, shape).astype(dtype)  # ties
    assert_same(node_model(op, {"x": x}, ["y"], attrs, opset=13), {"x": x})


def test_argmax_wide_inner():
    x = np.random.default_rng(6).integers(0, 50, (3, 17, 600)).astype(np.float32)
    for op in ("ArgMax", "ArgMin"):
        for last in (0, 1):
            assert_same(node_model(op, {"x": x}, ["y"], {"axis": 1, "select_last_index": last}, opset=13), {"x": x})


@settings(max_examples=150, **SETTINGS)
@given(st.data())
def test_softmax_family_matches_onnxruntime(data):
    op = data.draw(st.sampled_from(["Softmax", "LogSoftmax", "Hardmax"]))
    dtype = data.draw(st.sampled_from([np.float32, np.float64]))
    opset = data.draw(st.sampled_from([11, 13]))
    shape = shapes(data.draw, min_rank=1, max_dim=7)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x = (rng.integers(-3, 4, shape) if op == "Hardmax" else rng.uniform(-20, 20, shape)).astype(dtype)
    model = node_model(op, {"x": x}, ["y"], {"axis": axis}, opset=opset)
    if op == "Hardmax" and (opset < 13 or dtype == np.float64):  # which onnxruntime does not run: numpy's
        np.testing.assert_array_equal(run_nnkern(model, {"x": x})[0], hardmax(x, axis, opset < 13))
        return
    tol = {"Softmax": dict(rtol=1e-5, atol=1e-7), "LogSoftmax": dict(rtol=1e-5, atol=1e-5), "Hardmax": {}}[op]
    if dtype == np.float64 and op != "Hardmax":
        tol = dict(rtol=1e-12, atol=1e-14)
    assert_same(model, {"x": x}, **tol)


def hardmax(x, axis, coerce_2d):
    """1 at the first maximum along axis (over the flattened tail from axis with coerce_2d)."""
    a = axis % x.ndim
    if coerce_2d:
        flat = x.reshape(int(np.prod(x.shape[:a], dtype=np.int64)), -1)
        want = np.zeros_like(flat)
        want[np.arange(flat.shape[0]), flat.argmax(axis=1)] = 1
        return want.reshape(x.shape)
    idx = np.expand_dims(x.argmax(axis=a), a)
    want = np.zeros_like(x)
    np.put_along_axis(want, idx, 1, axis=a)
    return want


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("shape,axis", [((64, 5000), -1), ((2, 300, 700), 1), ((1, 70000), 1)])
def test_softmax_large_threads_invariant(op, shape, axis):
    x = np.random.default_rng(7).normal(0, 10, shape).astype(np.float32)
    model = node_model(op, {"x": x}, ["y"], {"axis": axis}, opset=13)
    previous = nnkern.get_num_threads()
    try:
        nnkern.set_num_threads(4)
        outs = [run_nnkern(model, {"x": x}, num_threads=t)[0] for t in (1, 4)]
    finally:
        nnkern.set_num_threads(previous)
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_allclose(outs[0], run_ort(model, {"x": x})[0], rtol=1e-5, atol=1e-7 if op == "Softmax" else 1e-5)


def test_softmax_exp_accuracy():
    """Softmax of two elements [0, -d]: e^-d / (1 + e^-d) over the whole range exp covers, within 4 ulp."""
    d = np.linspace(0, 100, 20001, dtype=np.float32)
    x = np.stack([np.zeros_like(d), -d], axis=1)
    got, = run_nnkern(node_model("Softmax", {"x": x}, ["y"], {"axis": 1}), {"x": x})
    e = np.exp(-d.astype(np.float64))
    exact = np.stack([1 / (1 + e), e / (1 + e)], axis=1)
    np.testing.assert_allclose(got, exact, rtol=4 * 2.0**-23, atol=1.2e-38)


def test_softmax_same_bits_on_every_isa():
    """Softmax along the last axis runs its exps through the f32_activation kernels' exp_nonpos (kernels/f32_exp.h,
    vectorized per ISA): the same bits on every ISA this CPU has, rows of every length around the vector widths,
    with NaN / Inf / huge values, and the exps within the 4-ulp test above on each. A row past 128 pieces of 4096
    (the fixed order's group fold, kernels/fixed_order_sum.h) is within that order's rounding of float64's."""
    rng = np.random.default_rng(11)
    long_n = 2 * 64 * 4096 + 4101  # two group folds
    rows = [rng.normal(0, 8, n).astype(np.float32)
            for n in list(range(1, 40)) + [63, 64, 65, 127, 128, 129, 4097, long_n]]
    rows[5][2] = np.nan
    rows[20][3] = np.inf
    rows[21][:] = -np.inf
    rows[22][1] = -1e30
    d = np.linspace(0, 100, 4001, dtype=np.float32)
    pairs = np.stack([np.zeros_like(d), -d], axis=1)
    outs = {}
    for isa in nnkern.supported_isas():
        got = [run_nnkern(node_model("Softmax", {"x": r[None]}, ["y"], {"axis": -1}), {"x": r[None]}, max_isa=isa)[0]
               for r in rows]
        got.append(run_nnkern(node_model("Softmax", {"x": pairs}, ["y"], {"axis": 1}), {"x": pairs}, max_isa=isa)[0])
        outs[isa] = got
    for isa, got in outs.items():
        for k, (g, w) in enumerate(zip(got, outs["scalar"])):
            np.testing.assert_array_equal(g.view(np.int32), w.view(np.int32), err_msg=f"{isa} row {k}")
    e = np.exp(-d.astype(np.float64))
    np.testing.assert_allclose(outs["scalar"][-1], np.stack([1 / (1 + e), e / (1 + e)], axis=1), rtol=4 * 2.0**-23,
                               atol=1.2e-38)
    x = rows[-1].astype(np.float64)
    exact = np.exp(x - x.max()) / np.exp(x - x.max()).sum()
    # each exp 1 ulp, the sum (4096 / 16 adds a lane, 4 pairwise, 64 a group, the groups) and the scaling
    bound = (4096 // 16 + 4 + 64 + 3 + 4) * 2.0**-24
    assert len(rows[-1]) == long_n
    np.testing.assert_allclose(outs["scalar"][-2][0], exact, rtol=bound, atol=0)


def test_exp_nonpos_kernel_every_isa():
    """kernels/f32_exp.h's claim, on every ISA this CPU has: within 1 ulp of e^x wherever e^x is a normal float32,
    over every 97th float32 of [-88, 0] (every 1553rd in the quick run), the same bits on every ISA; within 2^-126
    where e^x is subnormal, 0 below about -87.68; NaN for NaN; e^-0 = 1."""
    # negative floats' bits grow with their magnitude: -0 (INT32_MIN) up to -88
    bits = np.arange(int(np.float32(-0.0).view(np.int32)), int(np.float32(-88.0).view(np.int32)),
                     1553 if QUICK else 97, dtype=np.int64).astype(np.int32)
    x = np.concatenate([bits.view(np.float32), np.linspace(-88, -87, 2001, dtype=np.float32),
                        np.array([0.0, np.nan], np.float32)])
    levels = [k["level"] for k in _C.kernel_list("f32_activation") if k["supported"]]  # levels with the kernels
    assert "scalar" in levels
    outs = {isa: _C.exp_nonpos_ukernel(isa, x) for isa in levels}
    y = outs["scalar"]
    for isa, o in outs.items():
        np.testing.assert_array_equal(o.view(np.int32), y.view(np.int32), err_msg=isa)
    exact = np.exp(x.astype(np.float64))
    normal = exact >= np.finfo(np.float32).tiny
    ulps = np.abs(y[normal] - exact[normal]) / np.spacing(exact[normal].astype(np.float32)).astype(np.float64)
    assert ulps.max() <= 1.0, (ulps.max(), x[normal][ulps.argmax()])
    low = ~normal & ~np.isnan(x)
    assert (np.abs(y[low] - exact[low]) < np.finfo(np.float32).tiny).all()
    assert (y[x < -87.69] == 0).all() and (y[x > -87.67] > 0).all()
    assert np.isnan(y[-1]) and y[-2] == 1.0 and y[0] == 1.0


def layer_norm_model(x, scale, bias, axis, outputs, epsilon=1e-5, feed_params=False):
    names = ["y", "mean", "inv_std"][:outputs]
    params = {"scale": scale}
    if bias is not None:
        params["bias"] = bias
    attrs = {"axis": axis, "epsilon": epsilon}
    if feed_params:
        return node_model("LayerNormalization", {"x": x, **params}, names, attrs)
    return node_model("LayerNormalization", {"x": x}, names, attrs, constants=params)


@settings(max_examples=100, **SETTINGS)
@given(st.data())
def test_layer_norm_matches_onnxruntime(data):
    shape = shapes(data.draw, min_rank=1, max_dim=6)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    a = axis % len(shape)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x = rng.normal(1, 3, shape).astype(np.float32)
    # Scale of the normalized shape, or broadcast from fewer dims (1s in it), or over the whole of X.
    kind = data.draw(st.sampled_from(["row", "row", "ones", "full"]))
    pshape = {"row": shape[a:], "ones": tuple(1 if (i % 2) else d for i, d in enumerate(shape[a:])),
              "full": shape}[kind]
    scale = rng.normal(1, 0.5, pshape).astype(np.float32)
    bias = rng.normal(0, 1, pshape).astype(np.float32) if data.draw(st.booleans()) else None
    outputs = data.draw(st.sampled_from([1, 3]))
    feed = data.draw(st.booleans())
    model = layer_norm_model(x, scale, bias, axis, outputs, feed_params=feed)
    feeds = {"x": x, **({"scale": scale, **({"bias": bias} if bias is not None else {})} if feed else {})}
    assert_same(model, feeds, rtol=1e-4, atol=1e-5)


def test_layer_norm_float64_and_stash():
    rng = np.random.default_rng(8)
    x = rng.normal(0, 2, (4, 6, 10))
    scale, bias = rng.normal(1, 0.2, (10,)), rng.normal(0, 1, (10,))
    model = layer_norm_model(x, scale, bias, -1, 3)
    assert_same(model, {"x": x}, rtol=1e-12, atol=1e-12)  # float64 X, stash float32: Mean, InvStdDev float32
    model.graph.node[0].attribute.append(helper.make_attribute("stash_type", 11))
    y, m, inv = run_nnkern(model, {"x": x})
    assert m.dtype == inv.dtype == np.float64
    np.testing.assert_allclose(m[..., 0], x.mean(-1), rtol=1e-12)
    np.testing.assert_allclose(inv[..., 0], 1 / np.sqrt(x.var(-1) + 1e-5), rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 5), (3, 4, 5, 6), (1, 8, 2, 3, 4), (2, 3, 0, 4)])
def test_batch_norm_matches_onnxruntime(dtype, shape):
    rng = np.random.default_rng(9)
    C = shape[1]
    x = rng.normal(0, 2, shape).astype(dtype)
    params = {"scale": rng.normal(1, 0.3, C), "bias": rng.normal(0, 1, C), "mean": rng.normal(0, 1, C),
              "var": rng.uniform(0.5, 2, C)}
    params = {k: v.astype(dtype) for k, v in params.items()}
    model = node_model("BatchNormalization", {"x": x}, ["y"], {"epsilon": 1e-3}, constants=params, opset=15)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    assert_same(model, {"x": x}, **tol)
    model = node_model("BatchNormalization", {"x": x, **params}, ["y"], {}, opset=15)  # parameters fed
    assert_same(model, {"x": x, **params}, **tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(2, 3, 5), (3, 4, 5, 6), (1, 2, 2, 3, 4), (2, 3, 1)])
def test_instance_norm_matches_onnxruntime(dtype, shape):
    rng = np.random.default_rng(10)
    x = rng.normal(1, 2, shape).astype(dtype)
    params = {"scale": rng.normal(1, 0.3, shape[1]).astype(dtype), "bias": rng.normal(0, 1, shape[1]).astype(dtype)}
    model = node_model("InstanceNormalization", {"x": x}, ["y"], {"epsilon": 1e-4}, constants=params)
    if dtype == np.float32:
        assert_same(model, {"x": x}, rtol=1e-4, atol=1e-5)
        return
    # onnxruntime has no float64 InstanceNormalization: the definition in float64.
    ax = tuple(range(2, x.ndim))
    c = (-1,) + (1,) * (x.ndim - 2)
    mean, var = x.mean(ax, keepdims=True), x.var(ax, keepdims=True)
    want = (x - mean) / np.sqrt(var + np.float32(1e-4)) * params["scale"].reshape(c) + params["bias"].reshape(c)
    np.testing.assert_allclose(run_nnkern(model, {"x": x})[0], want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("shape,axis", [((3, 4), -1), ((3, 4, 5), 1), ((2, 300, 3), 0), ((5,), 0), ((2, 0, 3), 1)])
def test_lp_norm_matches_onnxruntime(p, shape, axis):
    rng = np.random.default_rng(11)
    x = rng.normal(0, 2, shape).astype(np.float32)
    if x.size:
        x.reshape(-1)[:3] = 0
        np.moveaxis(x, axis, -1)[(0,) * (x.ndim - 1)] = 0  # one slice all zeros: 0 out
    model = node_model("LpNormalization", {"x": x}, ["y"], {"axis": axis, "p": p})
    assert_same(model, {"x": x}, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,axes", [((2, 3, 4, 5), None), ((2, 3, 4, 5), [1]), ((4, 6, 7), [0, 2]),
                                        ((3, 5), [0, 1]), ((2, 3, 4, 5), [2, 3])])
def test_mvn_matches_onnxruntime(dtype, shape, axes):
    x = np.random.default_rng(12).normal(1, 3, shape).astype(dtype)
    attrs = {} if axes is None else {"axes": axes}
    model = node_model("MeanVarianceNormalization", {"x": x}, ["y"], attrs, opset=13)
    if dtype == np.float32:
        assert_same(model, {"x": x}, rtol=1e-4, atol=1e-5)
        return
    # onnxruntime cannot run the float64 form (its function adds a float32 epsilon): the definition in float64.
    ax = tuple(axes or (0, 2, 3))
    mean = x.mean(ax, keepdims=True)
    want = (x - mean) / (np.sqrt(((x - mean) ** 2).mean(ax, keepdims=True)) + 1e-9)
    np.testing.assert_allclose(run_nnkern(model, {"x": x})[0], want, rtol=1e-12, atol=1e-12)


@settings(max_examples=150, **SETTINGS)
@given(st.data())
def test_topk_matches_onnxruntime(data):
    dtype = data.draw(st.sampled_from([np.float32, np.float32, np.float64, np.int32, np.int64, np.uint8]))
    shape = shapes(data.draw, min_rank=1, max_dim=9)
    axis = data.draw(st.sampled_from([-1, -1, data.draw(st.integers(-len(shape), len(shape) - 1))]))
    k = data.draw(st.integers(0, shape[axis]))
    largest = data.draw(st.sampled_from([0, 1]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x = rng.integers(0, 6, shape).astype(dtype)  # many ties
    if dtype == np.float32 and data.draw(st.booleans()):
        x = rng.normal(0, 1, shape).astype(dtype)
    model = node_model("TopK", {"x": x}, ["values", "indices"], {"axis": axis, "largest": largest, "sorted": 1},
                       constants={"k": np.array([k], np.int64)}, opset=11)
    assert_same(model, {"x": x})


def test_topk_uses_f32_topk_on_last_axis():
    x = np.random.default_rng(13).normal(0, 1, (50, 1000)).astype(np.float32)
    model = node_model("TopK", {"x": x}, ["v", "i"], {}, constants={"k": np.array([7], np.int64)}, opset=11)
    sess = nnkern.onnx.InferenceSession(model.SerializeToString())
    assert "f32_topk" in sess.describe()
    assert_same(model, {"x": x})
    x[:, 500:] = 0.25  # many equal values: ties to the lower index
    assert_same(model, {"x": x})


@settings(max_examples=80, **SETTINGS)
@given(st.data())
def test_cumsum_matches_onnxruntime(data):
    dtype = data.draw(st.sampled_from([np.float32, np.float64, np.int32, np.int64]))
    shape = shapes(data.draw, min_rank=1, max_dim=7, zero=data.draw(st.booleans()))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    attrs = {"exclusive": data.draw(st.sampled_from([0, 1])), "reverse": data.draw(st.sampled_from([0, 1]))}
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x = (rng.integers(-9, 10, shape) if np.issubdtype(dtype, np.integer) else rng.normal(0, 1, shape)).astype(dtype)
    axis_t = np.array(axis, data.draw(st.sampled_from([np.int32, np.int64])))
    assert_same(node_model("CumSum", {"x": x}, ["y"], attrs, constants={"axis": axis_t}, opset=14), {"x": x})


def test_cumsum_wide_inner():
    x = np.random.default_rng(14).normal(0, 1, (3, 40, 700)).astype(np.float32)
    for attrs in ({}, {"exclusive": 1, "reverse": 1}):
        model = node_model("CumSum", {"x": x}, ["y"], attrs, constants={"axis": np.array(1, np.int64)}, opset=14)
        assert_same(model, {"x": x})


# ---- what the ops refuse: a clear error when the model is loaded, never a crash

def load(model):
    return nnkern.onnx.InferenceSession(model.SerializeToString())


def test_refusals():
    x = np.zeros((2, 3, 4), np.float32)
    with pytest.raises(ValueError, match="repeat"):
        load(reduce_model("ReduceSum", x, [1, -2]))
    with pytest.raises(ValueError, match="axes entry"):
        load(reduce_model("ReduceMean", x, [3]))
    with pytest.raises(NotImplementedError, match="float16"):
        load(reduce_model("ReduceSum", x.astype(np.float16), [1]))
    with pytest.raises(NotImplementedError):
        load(reduce_model("ReduceSum", x.astype(np.uint8), [1]))
    with pytest.raises(NotImplementedError, match="opset 28"):
        load(reduce_model("ReduceLogSumExp", x.astype(np.int32), [1]))
    with pytest.raises(ValueError, match="empty axis"):
        load(node_model("ArgMax", {"x": np.zeros((2, 0), np.float32)}, ["y"], {"axis": 1}, opset=13))
    with pytest.raises(ValueError, match="axis"):
        load(node_model("Softmax", {"x": x}, ["y"], {"axis": 3}, opset=13))
    with pytest.raises(NotImplementedError):
        load(node_model("Softmax", {"x": x.astype(np.int32)}, ["y"], {}, opset=13))
    with pytest.raises(ValueError, match="k = 5"):
        load(node_model("TopK", {"x": x}, ["v", "i"], {}, constants={"k": np.array([5], np.int64)}, opset=11))
    with pytest.raises(ValueError, match="p must be 1 or 2"):
        load(node_model("LpNormalization", {"x": x}, ["y"], {"p": 3}))
    with pytest.raises(ValueError, match="broadcast"):
        load(layer_norm_model(x, np.ones(3, np.float32), None, -1, 1))
    with pytest.raises(NotImplementedError, match="stash_type"):
        m = layer_norm_model(x, np.ones(4, np.float32), None, -1, 1)
        m.graph.node[0].attribute.append(helper.make_attribute("stash_type", 16))
        load(m)
    params = {k: np.ones(3, np.float32) for k in ("s", "b", "m", "v")}
    with pytest.raises(NotImplementedError, match="training_mode"):
        load(node_model("BatchNormalization", {"x": x}, ["y"], {"training_mode": 1}, constants=params, opset=15))
    with pytest.raises(ValueError, match="channels"):
        load(node_model("BatchNormalization", {"x": x.reshape(2, 4, 3)}, ["y"], {}, constants=params, opset=15))
    with pytest.raises(ValueError, match="rank >= 3"):
        load(node_model("InstanceNormalization", {"x": x[0]}, ["y"], {}, constants={
            "s": np.ones(4, np.float32), "b": np.ones(4, np.float32)}))
    with pytest.raises(ValueError, match="axis must be a scalar"):
        load(node_model("CumSum", {"x": x}, ["y"], {}, constants={"axis": np.array([0, 1], np.int64)}, opset=14))


def test_topk_k_fed_as_input():
    x = np.random.default_rng(15).normal(0, 1, (4, 9)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("TopK", ["x", "k"], ["v", "i"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape),
         helper.make_tensor_value_info("k", TensorProto.INT64, [1])],
        [helper.make_empty_tensor_value_info("v"), helper.make_empty_tensor_value_info("i")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)], ir_version=8)
    sess = nnkern.onnx.InferenceSession(model.SerializeToString())
    for k in (1, 4, 9):
        feeds = {"x": x, "k": np.array([k], np.int64)}
        for a, b in zip(sess.run(None, feeds), run_ort(model, feeds)):
            np.testing.assert_array_equal(a, b)
