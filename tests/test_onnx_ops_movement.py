"""The data-movement graph ops (Concat, Split, Slice, Gather, GatherElements, Expand, Tile, Pad, Shape, Size,
ConstantOfShape, Range, DepthToSpace, SpaceToDepth, Resize, Transpose) against onnxruntime on one-node models.
Data movement is compared bit-exact for every element type; Resize's linear and cubic modes within
rtol = atol = 1e-5; float Range within rtol = atol = 1e-6 (onnxruntime adds delta step by step, ONNX's formula and
nnkern compute start + i * delta). Bad inputs give NotImplementedError / ValueError when the model is loaded, an
index out of range at run time an IndexError, never a crash."""
import resource

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import nnkern.onnx  # noqa: E402
from nnkern import _C  # noqa: E402

from onnx_helpers import run_nnkern, run_ort  # noqa: E402

SETTINGS = dict(deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
INT64_MAX, INT64_MIN = np.iinfo(np.int64).max, np.iinfo(np.int64).min
DTYPES = [np.float32, np.float64, np.float16, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.int64,
          np.uint32, np.uint64, np.bool_]


def model(op, inputs, n_outputs=1, attrs=None, opset=18, out_dtype=None):
    """A one-node model. inputs: per node input, None (left out), ("in", array) (a graph input) or ("c", array)
    (an initializer); the outputs have out_dtype (default: the first input's). Returns (model, feeds)."""
    if out_dtype is None:
        out_dtype = np.asarray(inputs[0][1]).dtype
    names, graph_inputs, inits, feeds = [], [], [], {}
    for k, spec in enumerate(inputs):
        if spec is None:
            names.append("")
            continue
        kind, a = spec
        a = np.asarray(a)
        name = f"i{k}"
        names.append(name)
        if kind == "in":
            graph_inputs.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape))
            feeds[name] = a
        else:
            inits.append(numpy_helper.from_array(a, name))
    outputs = [f"y{j}" for j in range(n_outputs)]
    node = helper.make_node(op, names, outputs, **(attrs or {}))
    out_type = helper.np_dtype_to_tensor_dtype(np.dtype(out_dtype))
    graph_outputs = [helper.make_tensor_value_info(o, out_type, None) for o in outputs]
    graph = helper.make_graph([node], op, graph_inputs, graph_outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=9), feeds


def check(op, inputs, n_outputs=1, attrs=None, opset=18, rtol=0.0, atol=0.0, out_dtype=None):
    m, feeds = model(op, inputs, n_outputs, attrs, opset, out_dtype)
    ours, theirs = run_nnkern(m, feeds), run_ort(m, feeds)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
        if rtol or atol:
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(a, b)
    return ours


def values(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(np.bool_)
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -1000), min(info.max, 1000), shape, endpoint=True).astype(dtype)


shapes = st.lists(st.integers(0, 4), min_size=1, max_size=4)
dtypes = st.sampled_from(DTYPES)


# -- Concat, Split

@settings(max_examples=30, **SETTINGS)
@given(shape=shapes, data=st.data(), dtype=dtypes)
def test_concat(shape, data, dtype):
    r = len(shape)
    axis = data.draw(st.integers(-r, r - 1))
    count = data.draw(st.integers(1, 4))
    rng = np.random.default_rng(len(shape) * 7 + count)
    parts = []
    for _ in range(count):
        s = list(shape)
        s[axis] = data.draw(st.integers(0, 3))
        parts.append(("in", values(rng, s, dtype)))
    check("Concat", parts, attrs={"axis": axis})


def test_concat_large_threaded():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 64, 40, 40)).astype(np.float32)
    b = rng.standard_normal((2, 32, 40, 40)).astype(np.float32)
    check("Concat", [("in", a), ("c", b)], attrs={"axis": 1})


@settings(max_examples=30, **SETTINGS)
@given(shape=st.lists(st.integers(0, 5), min_size=1, max_size=3), data=st.data(), dtype=dtypes)
def test_split_sizes(shape, data, dtype):
    r = len(shape)
    axis = data.draw(st.integers(-r, r - 1))
    dim = shape[axis]
    cuts = sorted(data.draw(st.lists(st.integers(0, dim), max_size=3)))
    sizes = np.diff([0] + cuts + [dim]).astype(np.int64)
    x = values(np.random.default_rng(dim), shape, dtype)
    check("Split", [("in", x), ("c", sizes)], n_outputs=len(sizes), attrs={"axis": axis})


@pytest.mark.parametrize("dim,parts", [(7, 3), (8, 4), (6, 4), (1, 1), (10, 4)])
def test_split_num_outputs(dim, parts):
    x = np.arange(dim * 3, dtype=np.int32).reshape(3, dim)
    check("Split", [("in", x)], n_outputs=parts, attrs={"axis": 1, "num_outputs": parts})


def test_split_even_opset13():
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    check("Split", [("in", x)], n_outputs=3, attrs={"axis": -1}, opset=13)


def test_bad_inputs_are_refused_at_load():
    x = np.zeros((4, 6), np.float32)
    i64 = lambda *v: ("c", np.array(v, np.int64))  # noqa: E731
    with pytest.raises(ValueError, match="steps must not be 0"):
        run_nnkern(*model("Slice", [("in", x), i64(0), i64(2), i64(0), i64(0)]))
    with pytest.raises(ValueError, match="repeats"):
        run_nnkern(*model("Tile", [("in", x), i64(2)]))
    with pytest.raises(ValueError, match="broadcast"):
        run_nnkern(*model("Expand", [("in", x), i64(3, 6)]))
    with pytest.raises(ValueError, match="out of range"):
        run_nnkern(*model("Gather", [("in", x), i64(0)], attrs={"axis": 2}))
    with pytest.raises(NotImplementedError, match="float"):
        run_nnkern(*model("Gather", [("in", x), ("c", np.array([0.0], np.float32))]))
    with pytest.raises(ValueError, match="num_outputs"):
        run_nnkern(*model("Split", [("in", x)], n_outputs=3, attrs={"axis": 1, "num_outputs": 2}))
    with pytest.raises(ValueError, match="cannot split"):
        run_nnkern(*model("Split", [("in", x)], n_outputs=5, attrs={"axis": 1, "num_outputs": 5}))
    with pytest.raises(ValueError, match="add up"):
        run_nnkern(*model("Split", [("in", x), ("c", np.array([1, 2], np.int64))], n_outputs=2, attrs={"axis": 1}))
    with pytest.raises(ValueError, match="axis"):
        run_nnkern(*model("Concat", [("in", x), ("in", np.zeros((4, 5), np.float32))], attrs={"axis": 0}))


# -- Slice

ends_or_starts = st.one_of(st.integers(-7, 7), st.sampled_from([INT64_MAX, INT64_MIN, -(2 ** 40), 2 ** 40]))


def spec_slice(x, starts, ends, axes, steps):
    """Slice as the ONNX spec words it (start clamped to [0, dim - 1] for a negative step, unlike numpy)."""
    for s, e, a, step in zip(starts, ends, axes, steps):
        dim = x.shape[a]
        s, e = (s + dim if s < 0 else s), (e + dim if e < 0 else e)
        s, e = (min(max(s, 0), dim), min(max(e, 0), dim)) if step > 0 else \
            (min(max(s, 0), dim - 1), min(max(e, -1), dim - 1))
        x = np.take(x, np.arange(s, e, step, dtype=np.int64) if dim else np.arange(0), axis=a)
    return x


@settings(max_examples=60, **SETTINGS)
@given(shape=st.lists(st.integers(0, 6), min_size=1, max_size=4), data=st.data(), dtype=st.sampled_from(
    [np.float32, np.int64, np.uint8, np.float16]))
def test_slice(shape, data, dtype):
    r = len(shape)
    axes = data.draw(st.lists(st.integers(-r, r - 1), min_size=1, max_size=r,
                              unique_by=lambda a: a % r))
    k = len(axes)
    starts = data.draw(st.lists(ends_or_starts, min_size=k, max_size=k))
    ends = data.draw(st.lists(ends_or_starts, min_size=k, max_size=k))
    steps = data.draw(st.lists(st.sampled_from([1, 2, 3, -1, -2, INT64_MAX, INT64_MIN + 1]), min_size=k, max_size=k))
    x = values(np.random.default_rng(r), shape, dtype)
    inputs = [("in", x), ("c", np.array(starts, np.int64)), ("c", np.array(ends, np.int64))]
    form = data.draw(st.sampled_from(["all", "no_steps", "no_axes"]))
    if form == "all":
        inputs += [("c", np.array(axes, np.int64)), ("c", np.array(steps, np.int64))]
    elif form == "no_steps":
        inputs += [("c", np.array(axes, np.int64))]
        steps = [1] * k
    else:
        inputs = inputs[:1] + [("c", np.array(starts[:1], np.int64)), ("c", np.array(ends[:1], np.int64))]
        starts, ends, axes, steps = starts[:1], ends[:1], [0], [1]
    m, feeds = model("Slice", inputs)
    ours = run_nnkern(m, feeds)[0]
    np.testing.assert_array_equal(ours, spec_slice(x, starts, ends, [a % r for a in axes], steps))
    assert ours.shape == spec_slice(x, starts, ends, [a % r for a in axes], steps).shape
    # onnxruntime reads end = INT64_MAX with a negative step as "to the beginning"; ONNX clamps it to dim - 1.
    if not any(s < 0 and e == INT64_MAX for s, e in zip(steps, ends)):
        check("Slice", inputs)


def test_slice_needs_constant_starts_fed_as_input():
    # starts as a graph input: the session plans for its value (one plan per value).
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    check("Slice", [("in", x), ("in", np.array([1], np.int64)), ("c", np.array([3], np.int64))])


# -- Gather, GatherElements

@settings(max_examples=40, **SETTINGS)
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=4), data=st.data(), dtype=dtypes)
def test_gather(shape, data, dtype):
    r = len(shape)
    axis = data.draw(st.integers(-r, r - 1))
    dim = shape[axis]
    ishape = data.draw(st.lists(st.integers(0, 3), max_size=2))
    itype = data.draw(st.sampled_from([np.int32, np.int64]))
    rng = np.random.default_rng(dim)
    idx = rng.integers(-dim, dim, ishape).astype(itype)
    kind = data.draw(st.sampled_from(["in", "c"]))
    check("Gather", [("in", values(rng, shape, dtype)), (kind, idx)], attrs={"axis": axis})


def test_gather_large_threaded():
    rng = np.random.default_rng(1)
    emb = rng.standard_normal((1000, 64)).astype(np.float32)
    idx = rng.integers(-1000, 1000, (8, 300)).astype(np.int64)
    check("Gather", [("c", emb), ("in", idx)])
    check("Gather", [("in", emb), ("in", idx[:, :5].astype(np.int32))], attrs={"axis": 0})


def _rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_gather_index_out_of_range_at_run_time():
    """A run-time index out of range fails the run with IndexError naming the node; the session stays usable and
    the run's arena goes back to the pool (an 8 MiB intermediate lives in it)."""
    x = np.random.default_rng(2).standard_normal((2048, 1024)).astype(np.float32)
    idx_info = helper.make_tensor_value_info("idx", TensorProto.INT64, [3])
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Gather", ["r", "idx"], ["y"], name="g")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape), idx_info],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)
    sess = nnkern.onnx.InferenceSession(m.SerializeToString())
    good = np.array([0, -1, 5], np.int64)
    np.testing.assert_array_equal(sess.run(None, {"x": x, "idx": good})[0], np.maximum(x, 0)[good])
    before = _rss_mib()
    for bad in ([0, 2048, 1], [-2049, 0, 0], [INT64_MAX, 0, 0], [INT64_MIN, 0, 0]):
        with pytest.raises(IndexError, match=r"Gather node 'g'.*index .* out of range for axis 0 of size 2048"):
            sess.run(None, {"x": x, "idx": np.array(bad, np.int64)})
    for _ in range(30):
        with pytest.raises(IndexError):
            sess.run(None, {"x": x, "idx": np.array([4096, 0, 0], np.int64)})
    assert _rss_mib() - before < 64, "failed runs should give their arenas back"
    np.testing.assert_array_equal(sess.run(None, {"x": x, "idx": good})[0], np.maximum(x, 0)[good])


def test_gather_constant_index_out_of_range_at_load():
    m, feeds = model("Gather", [("in", np.zeros((3, 2), np.float32)), ("c", np.array([3], np.int64))])
    with pytest.raises(ValueError, match="index 3 is out of range"):
        run_nnkern(m, feeds)


@settings(max_examples=30, **SETTINGS)
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=4), data=st.data(), dtype=dtypes)
def test_gather_elements(shape, data, dtype):
    r = len(shape)
    axis = data.draw(st.integers(-r, r - 1))
    ishape = [data.draw(st.integers(0, 4)) if d == axis % r else data.draw(st.integers(0, s))
              for d, s in enumerate(shape)]
    rng = np.random.default_rng(r)
    dim = shape[axis]
    idx = rng.integers(-dim, dim, ishape).astype(data.draw(st.sampled_from([np.int32, np.int64])))
    check("GatherElements", [("in", values(rng, shape, dtype)), ("in", idx)], attrs={"axis": axis})


def test_gather_elements_out_of_range():
    m, feeds = model("GatherElements", [("in", np.zeros((3, 2), np.float32)), ("in", np.array([[0, 3]], np.int64))])
    with pytest.raises(IndexError, match="GatherElements.*index 3"):
        run_nnkern(m, feeds)


# -- Expand, Tile

@settings(max_examples=30, **SETTINGS)
@given(shape=st.lists(st.integers(0, 3), max_size=4), data=st.data(), dtype=dtypes)
def test_expand(shape, data, dtype):
    target = [data.draw(st.sampled_from([1, d] if d != 1 else [1, 0, 2, 3])) for d in shape]
    lead = data.draw(st.lists(st.integers(0, 3), max_size=2))
    x = values(np.random.default_rng(len(shape)), shape, dtype)
    check("Expand", [("in", x), ("c", np.array(lead + target, np.int64))])


@settings(max_examples=30, **SETTINGS)
@given(shape=st.lists(st.integers(0, 4), min_size=1, max_size=4), data=st.data(), dtype=dtypes)
def test_tile(shape, data, dtype):
    repeats = data.draw(st.lists(st.integers(0, 3), min_size=len(shape), max_size=len(shape)))
    x = values(np.random.default_rng(len(shape)), shape, dtype)
    check("Tile", [("in", x), ("c", np.array(repeats, np.int64))])


def test_expand_and_tile_large():
    x = np.random.default_rng(3).standard_normal((1, 64, 1, 80)).astype(np.float32)
    check("Expand", [("in", x), ("c", np.array([4, 64, 30, 80], np.int64))])
    check("Tile", [("in", x), ("c", np.array([3, 1, 40, 2], np.int64))])


# -- Pad

@settings(max_examples=60, **SETTINGS)
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=4), data=st.data(),
       mode=st.sampled_from(["constant", "reflect", "edge", "wrap"]),
       dtype=st.sampled_from([np.float32, np.int32, np.uint8, np.int64, np.float64]))
def test_pad(shape, data, mode, dtype):
    r = len(shape)
    use_axes = data.draw(st.booleans())
    axes = data.draw(st.lists(st.integers(-r, r - 1), min_size=1, max_size=r, unique_by=lambda a: a % r)) \
        if use_axes else list(range(r))
    pads = []
    for side in range(2):
        for a in axes:
            dim = shape[a]
            lo = -(dim // 2) if mode in ("constant", "edge") else 0  # onnxruntime crops in these modes
            hi = dim - 1 if mode == "reflect" else 4
            pads.append(data.draw(st.integers(lo, hi)))
    rng = np.random.default_rng(r)
    inputs = [("in", values(rng, shape, dtype)), ("c", np.array(pads, np.int64))]
    if mode == "constant" and data.draw(st.booleans()):
        inputs.append(("in", values(rng, (), dtype)))  # the value, read at run time
    elif use_axes:
        inputs.append(None)
    if use_axes:
        inputs.append(("c", np.array(axes, np.int64)))
    check("Pad", inputs, attrs={"mode": mode}, opset=19)


def test_pad_large_and_cropping():
    x = np.random.default_rng(4).standard_normal((2, 16, 60, 70)).astype(np.float32)
    check("Pad", [("in", x), ("c", np.array([0, 0, 1, 2, 0, 0, 3, 1], np.int64)), ("c", np.float32(-1.5))])
    check("Pad", [("in", x), ("c", np.array([0, -3, 2, -1, 0, -4, 1, 0], np.int64))])
    check("Pad", [("in", x), ("c", np.array([0, 0, 3, 3, 0, 0, 3, 3], np.int64))], attrs={"mode": "reflect"})


def test_pad_bad():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(ValueError, match="pads"):
        run_nnkern(*model("Pad", [("in", x), ("c", np.array([1, 1, 1], np.int64))]))
    with pytest.raises(ValueError, match="mode"):
        run_nnkern(*model("Pad", [("in", x), ("c", np.array([1, 1, 1, 1], np.int64))], attrs={"mode": "mirror"}))


# -- Shape, Size, ConstantOfShape, Range

@pytest.mark.parametrize("start,end", [(None, None), (1, None), (-1, None), (None, -1), (1, 3), (3, 1), (-10, 10),
                                       (10, None)])
def test_shape(start, end):
    attrs = {k: v for k, v in (("start", start), ("end", end)) if v is not None}
    x = np.zeros((2, 3, 4, 5), np.float32)
    check("Shape", [("in", x)], attrs=attrs, opset=19, out_dtype=np.int64)
    # The C++ op itself (the compiler folds Shape into a constant): the same values.
    op_attrs = {k: ("i", v) for k, v in attrs.items()}
    got = _C.graph_evaluate("Shape", "s", op_attrs, [_C.GraphConstant(x)], 1)[0].numpy()
    np.testing.assert_array_equal(got, np.array(x.shape[start:end], np.int64))


def test_size():
    check("Size", [("in", np.zeros((2, 0, 3), np.uint8))], out_dtype=np.int64)
    check("Size", [("in", np.zeros((2, 7, 3), np.float32))], out_dtype=np.int64)
    got = _C.graph_evaluate("Size", "s", {}, [_C.GraphConstant(np.zeros((3, 5), np.int8))], 1)[0].numpy()
    assert got.dtype == np.int64 and got.shape == () and got == 15


def test_shape_feeds_reshape():
    """Shape -> Gather -> Concat -> Reshape of a graph input: folded into a constant shape when planned."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Concat", ["n", "minus1"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["y"])]
    inits = [numpy_helper.from_array(np.array([0], np.int64), "zero"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus1")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)
    sess = nnkern.onnx.InferenceSession(m.SerializeToString())
    for n in (1, 5):
        x = np.arange(n * 12, dtype=np.float32).reshape(n, 3, 4)
        np.testing.assert_array_equal(sess.run(None, {"x": x})[0], x.reshape(n, -1))


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.int32, np.uint8, np.bool_, np.float64, np.float16])
@pytest.mark.parametrize("shape", [[2, 3], [], [0, 4], [70000]])
def test_constant_of_shape(dtype, shape):
    value = numpy_helper.from_array(np.array([1 if dtype == np.bool_ else 3], dtype=dtype), "value")
    check("ConstantOfShape", [("c", np.array(shape, np.int64))], attrs={"value": value}, out_dtype=dtype)


def test_constant_of_shape_default_and_fed_shape():
    check("ConstantOfShape", [("c", np.array([2, 2], np.int64))], out_dtype=np.float32)
    # The shape as a graph input: planned per value.
    check("ConstantOfShape", [("in", np.array([3, 1], np.int64))], out_dtype=np.float32)


@pytest.mark.parametrize("start,limit,delta,dtype", [
    (0, 10, 3, np.int64), (10, 4, -2, np.int32), (3, 3, 1, np.int16), (5, 1, 1, np.int64), (-7, 9, 4, np.int32),
    (0.5, 3.25, 0.25, np.float32), (1.0, -2.0, -0.3, np.float64), (0.0, 1.0, 0.1, np.float32)])
def test_range(start, limit, delta, dtype):
    args = [("c", np.array(v, dtype)) for v in (start, limit, delta)]
    tol = dict(rtol=1e-6, atol=1e-6) if np.dtype(dtype).kind == "f" else {}
    check("Range", args, **tol)
    check("Range", [("in", np.array(start, dtype)), args[1], args[2]], **tol)  # planned per value of start


def test_range_bad():
    with pytest.raises(ValueError, match="delta"):
        run_nnkern(*model("Range", [("c", np.array(v, np.int64)) for v in (0, 5, 0)]))
    with pytest.raises(NotImplementedError):
        run_nnkern(*model("Range", [("c", np.array(v, np.float16)) for v in (0, 5, 1)]))


# -- DepthToSpace, SpaceToDepth (onnxruntime runs float32, float64 and uint8: the others against numpy)

ORT_BLOCK_TYPES = {np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.uint8)}

@settings(max_examples=30, **SETTINGS)
@given(n=st.integers(1, 2), c=st.integers(1, 3), h=st.integers(1, 4), w=st.integers(1, 4), b=st.integers(1, 3),
       mode=st.sampled_from(["DCR", "CRD"]), dtype=dtypes)
def test_depth_to_space(n, c, h, w, b, mode, dtype):
    x = values(np.random.default_rng(b), (n, c * b * b, h, w), dtype)
    m, feeds = model("DepthToSpace", [("in", x)], attrs={"blocksize": b, "mode": mode}, opset=13)
    six = x.reshape(n, b, b, c, h, w).transpose(0, 3, 4, 1, 5, 2) if mode == "DCR" else \
        x.reshape(n, c, b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    np.testing.assert_array_equal(run_nnkern(m, feeds)[0], six.reshape(n, c, h * b, w * b))
    if np.dtype(dtype) in ORT_BLOCK_TYPES:
        check("DepthToSpace", [("in", x)], attrs={"blocksize": b, "mode": mode}, opset=13)


@settings(max_examples=20, **SETTINGS)
@given(n=st.integers(1, 2), c=st.integers(1, 3), h=st.integers(1, 3), w=st.integers(1, 3), b=st.integers(1, 3),
       dtype=dtypes)
def test_space_to_depth(n, c, h, w, b, dtype):
    x = values(np.random.default_rng(b), (n, c, h * b, w * b), dtype)
    m, feeds = model("SpaceToDepth", [("in", x)], attrs={"blocksize": b}, opset=13)
    six = x.reshape(n, c, h, b, w, b).transpose(0, 3, 5, 1, 2, 4)
    np.testing.assert_array_equal(run_nnkern(m, feeds)[0], six.reshape(n, c * b * b, h, w))
    if np.dtype(dtype) in ORT_BLOCK_TYPES:
        check("SpaceToDepth", [("in", x)], attrs={"blocksize": b}, opset=13)


def test_space_to_depth_crd_inverts_depth_to_space():
    """SpaceToDepth's CRD mode (opset 28, newer than onnxruntime here): the inverse of DepthToSpace CRD."""
    x = np.arange(2 * 12 * 3 * 5, dtype=np.float32).reshape(2, 12, 3, 5)
    up = run_nnkern(*model("DepthToSpace", [("in", x)], attrs={"blocksize": 2, "mode": "CRD"}))[0]
    back = run_nnkern(*model("SpaceToDepth", [("in", up)], attrs={"blocksize": 2, "mode": "CRD"}, opset=28))[0]
    np.testing.assert_array_equal(back, x)


@settings(max_examples=30, **SETTINGS)
@given(perm=st.permutations([0, 1, 2, 3]), c=st.integers(1, 3), h=st.integers(1, 5), w=st.integers(1, 70),
       b=st.integers(1, 4), mode=st.sampled_from(["DCR", "CRD"]), to_space=st.booleans(),
       dtype=st.sampled_from([np.float32, np.uint8, np.int64]))
def test_block_moves_read_through_a_transpose(perm, c, h, w, b, mode, to_space, dtype):
    """Transpose -> DepthToSpace / SpaceToDepth (ESPCN's pixel shuffle after NHWC convolutions) runs as one
    strided copy, nnkern.DepthToSpace / nnkern.SpaceToDepth reading X through the transpose: numpy's result and
    the bits of the plan without the layout pass. Blocks of 2-4 elements take the strided copy's runs."""
    op = "DepthToSpace" if to_space else "SpaceToDepth"
    nchw = (2, c * b * b, h, w) if to_space else (2, c, h * b, w * b)
    x = values(np.random.default_rng(b), tuple(nchw[i] for i in np.argsort(perm)), dtype)
    tt = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    attrs = {"blocksize": b} | ({"mode": mode} if to_space else {})
    g = helper.make_graph([helper.make_node("Transpose", ["x"], ["t"], perm=list(perm)),
                           helper.make_node(op, ["t"], ["y"], **attrs)], "moves",
                          [helper.make_tensor_value_info("x", tt, list(x.shape))],
                          [helper.make_tensor_value_info("y", tt, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8).SerializeToString()
    s = nnkern.onnx.InferenceSession(m)
    assert [line.split()[1] for line in s.describe({"x": x}).splitlines()[:-1]] == [f"nnkern.{op}"]
    t = x.transpose(perm)
    n, C, H, W = t.shape
    if to_space:
        six = t.reshape(n, b, b, c, h, w).transpose(0, 3, 4, 1, 5, 2) if mode == "DCR" else \
            t.reshape(n, c, b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
        want = six.reshape(n, c, h * b, w * b)
    else:
        want = t.reshape(n, c, h, b, w, b).transpose(0, 3, 5, 1, 2, 4).reshape(n, c * b * b, h, w)
    np.testing.assert_array_equal(s.run(None, {"x": x})[0], want)
    plain = nnkern.onnx.InferenceSession(m, optimize={"push_transposes": False})
    np.testing.assert_array_equal(plain.run(None, {"x": x})[0], want)


def test_depth_to_space_bad():
    with pytest.raises(ValueError, match="multiple"):
        run_nnkern(*model("DepthToSpace", [("in", np.zeros((1, 6, 2, 2), np.float32))], attrs={"blocksize": 2}))


# -- Resize

COORDS = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "half_pixel_symmetric"]
NEAREST = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]


ORT_RESIZE_TYPES = {np.dtype(np.float32), np.dtype(np.uint8), np.dtype(np.int8), np.dtype(np.int32)}


def resize(x, mode, scales=None, sizes=None, roi=None, opset=19, rtol=0.0, atol=0.0, **attrs):
    """Resize against onnxruntime; element types it does not resize run there as float32 (nearest copies values,
    which these tests keep exact in float32) or, for float64 filters, against ONNX's float64 reference."""
    def inputs_for(a):
        no_roi = ("c", np.array([], np.float32)) if opset < 13 else None  # opset 11 has no optional roi
        inputs = [("in", a), ("c", np.array(roi, np.float32)) if roi is not None else no_roi,
                  ("c", np.array(scales, np.float32)) if scales is not None else None]
        if sizes is not None:
            inputs.append(("c", np.array(sizes, np.int64)))
        return inputs
    attrs = dict(mode=mode, **attrs)
    if x.dtype in ORT_RESIZE_TYPES:
        return check("Resize", inputs_for(x), attrs=attrs, opset=opset, rtol=rtol, atol=atol)
    m, feeds = model("Resize", inputs_for(x), attrs=attrs, opset=opset)
    ours = run_nnkern(m, feeds)
    if mode == "nearest":
        m32, feeds32 = model("Resize", inputs_for(x.astype(np.float32)), attrs=attrs, opset=opset)
        np.testing.assert_array_equal(ours[0].astype(np.float32), run_ort(m32, feeds32)[0])
    else:
        from onnx.reference import ReferenceEvaluator
        np.testing.assert_allclose(ours[0], ReferenceEvaluator(m).run(None, feeds)[0], rtol=rtol, atol=atol)
    return ours


@settings(max_examples=60, **SETTINGS)
@given(h=st.integers(1, 6), w=st.integers(1, 7), data=st.data(),
       coord=st.sampled_from(COORDS + ["tf_half_pixel_for_nn"]), nearest=st.sampled_from(NEAREST),
       dtype=st.sampled_from([np.float32, np.uint8, np.int64, np.float16]))
def test_resize_nearest(h, w, data, coord, nearest, dtype):
    x = values(np.random.default_rng(h * 10 + w), (1, 2, h, w), dtype)
    opset = 11 if coord == "tf_half_pixel_for_nn" else 19
    if data.draw(st.booleans()):
        scales = [1, 1] + data.draw(st.lists(st.sampled_from([0.5, 0.6, 1.0, 1.5, 2.0, 3.0, 0.75, 1.7]), min_size=2,
                                             max_size=2))
        resize(x, "nearest", scales=scales, coordinate_transformation_mode=coord, nearest_mode=nearest, opset=opset)
    else:
        sizes = [1, 2, data.draw(st.integers(1, 9)), data.draw(st.integers(1, 9))]
        resize(x, "nearest", scales=[] if opset == 11 else None, sizes=sizes, coordinate_transformation_mode=coord,
               nearest_mode=nearest, opset=opset)


@settings(max_examples=60, **SETTINGS)
@given(h=st.integers(1, 6), w=st.integers(1, 7), data=st.data(), coord=st.sampled_from(COORDS),
       mode=st.sampled_from(["linear", "cubic"]), exclude=st.sampled_from([0, 1]),
       antialias=st.sampled_from([0, 0, 1]))
def test_resize_filters(h, w, data, coord, mode, exclude, antialias):
    if mode == "linear" and not antialias:
        exclude = 0  # no taps outside to exclude (onnxruntime refuses the attribute there)
    x = np.random.default_rng(h * 10 + w).standard_normal((2, 1, h, w)).astype(np.float32)
    attrs = dict(coordinate_transformation_mode=coord, exclude_outside=exclude, antialias=antialias)
    if mode == "cubic":
        attrs["cubic_coeff_a"] = data.draw(st.sampled_from([-0.75, -0.5]))
    tol = dict(rtol=1e-5, atol=1e-5)
    if data.draw(st.booleans()):
        scales = [1, 1] + data.draw(st.lists(st.sampled_from([0.5, 0.6, 1.0, 1.5, 2.0, 3.0, 0.75, 1.7]), min_size=2,
                                             max_size=2))
        resize(x, mode, scales=scales, **attrs, **tol)
    else:
        sizes = [data.draw(st.integers(1, 9)), data.draw(st.integers(1, 9))]
        resize(x, mode, sizes=sizes, axes=[3, -2], **attrs, **tol)


def test_resize_3d_linear_and_policy():
    x = np.random.default_rng(5).standard_normal((1, 2, 3, 4, 5)).astype(np.float32)
    resize(x, "linear", scales=[1, 1, 2, 0.5, 1.5], rtol=1e-5, atol=1e-5)
    resize(x, "nearest", sizes=[6, 5], axes=[2, 3], keep_aspect_ratio_policy="not_larger")
    resize(x, "nearest", sizes=[6, 5], axes=[2, 3], keep_aspect_ratio_policy="not_smaller")
    resize(x.astype(np.float64), "cubic", sizes=[1, 2, 5, 3, 7], rtol=1e-5, atol=1e-5)


def test_resize_tf_crop_and_resize():
    x = np.random.default_rng(6).standard_normal((1, 1, 6, 7)).astype(np.float32)
    for mode in ("linear", "nearest"):
        resize(x, mode, sizes=[1, 1, 4, 5], roi=[0, 0, 0.2, -0.1, 1, 1, 0.9, 1.3],
               coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=7.0, rtol=1e-5, atol=1e-5)


def test_resize_yolo_upsample():
    """2x nearest upsampling of an NCHW feature map: the replication fast path, as Resize and as Upsample."""
    x = np.random.default_rng(7).standard_normal((1, 128, 20, 20)).astype(np.float32)
    ours = resize(x, "nearest", scales=[1, 1, 2, 2], coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    np.testing.assert_array_equal(ours[0], x.repeat(2, axis=2).repeat(2, axis=3))
    resize(x, "nearest", scales=[1, 1, 2, 2])
    resize(x, "nearest", scales=[1, 1, 3, 3])
    m, feeds = model("Upsample", [("in", x), ("c", np.array([1, 1, 2, 2], np.float32))], opset=9)
    np.testing.assert_array_equal(run_nnkern(m, feeds)[0], x.repeat(2, axis=2).repeat(2, axis=3))
    sess = nnkern.onnx.InferenceSession(model("Resize", [("in", x), None, ("c", np.array([1, 1, 2, 2], np.float32))],
                                              attrs={"mode": "nearest"}, opset=19)[0].SerializeToString())
    assert "repeat" in sess.describe()


def test_resize_bad():
    x = np.zeros((1, 1, 2, 2), np.float32)
    with pytest.raises(ValueError, match="exactly one"):
        run_nnkern(*model("Resize", [("in", x)], attrs={"mode": "nearest"}, opset=19))
    with pytest.raises(ValueError, match="mode"):
        resize(x, "bicubic", scales=[1, 1, 2, 2])
    with pytest.raises(NotImplementedError, match="int32"):
        run_nnkern(*model("Resize", [("in", x.astype(np.int32)), None, ("c", np.array([1, 1, 2, 2], np.float32))],
                          attrs={"mode": "linear"}, opset=19))


# -- Transpose

@settings(max_examples=40, **SETTINGS)
@given(shape=st.lists(st.integers(0, 5), max_size=5), data=st.data(), dtype=st.sampled_from(
    [np.float32, np.uint8, np.int16, np.float64, np.bool_]))
def test_transpose(shape, data, dtype):
    perm = data.draw(st.permutations(range(len(shape))))
    x = values(np.random.default_rng(len(shape)), shape, dtype)
    check("Transpose", [("in", x)], attrs={"perm": list(perm)} if perm else {})


@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.float16, np.int64])
@pytest.mark.parametrize("shape", [(1, 3, 224, 224), (2, 80, 17, 23), (1, 1, 5, 5), (3, 33, 1, 65), (2, 2, 7, 19),
                                   (3, 4, 33, 31), (1, 3, 300, 301)])
def test_transpose_nchw_nhwc(shape, dtype):
    x = values(np.random.default_rng(8), shape, dtype)
    nhwc = check("Transpose", [("in", x)], attrs={"perm": [0, 2, 3, 1]})[0]
    np.testing.assert_array_equal(nhwc, x.transpose(0, 2, 3, 1))
    back = check("Transpose", [("in", nhwc)], attrs={"perm": [0, 3, 1, 2]})[0]
    np.testing.assert_array_equal(back, x)


@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.float16, np.int64])
def test_transpose_of_matrices_with_few_rows_or_columns(dtype):
    """Batches of 2-4 x C matrices and back, C around the narrow loop's and the tiles' limits (ShuffleNet's channel
    shuffle in NHWC is a batch of 2 x C/2 transposes; 3 rows interleave 4 words at a time, each word size)."""
    for short in (2, 3, 4):
        for long_side in (1, 2, 3, 5, 15, 16, 17, 24, 48, 63, 64, 65, 96):
            x = values(np.random.default_rng(short * 100 + long_side), (7, short, long_side), dtype)
            y = check("Transpose", [("in", x)], attrs={"perm": [0, 2, 1]})[0]
            np.testing.assert_array_equal(y, x.transpose(0, 2, 1), err_msg=f"{short} x {long_side}")
            back = check("Transpose", [("in", y)], attrs={"perm": [0, 2, 1]})[0]
            np.testing.assert_array_equal(back, x, err_msg=f"{long_side} x {short}")


def _channel_shuffle(a, b, splits):
    plan = _C.GraphPlan(_C.GraphLayers())
    ins = [plan.add_input(t, list(x.shape), i, n) for i, (t, x, n) in
           enumerate([(_ONNX_TYPE[a.dtype], a, "a"), (_ONNX_TYPE[b.dtype], b, "b")])]
    outs = plan.add_step("nnkern.ChannelShuffle", "s", {"splits": ("i", splits)}, ins, splits, "",
                         [f"y{k}" for k in range(splits)])
    for k, o in enumerate(outs):
        plan.mark_output(o, k)
    plan.finalize()
    return plan.run([a, b])


_ONNX_TYPE = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.uint8): TensorProto.UINT8,
              np.dtype(np.int64): TensorProto.INT64, np.dtype(np.float16): TensorProto.FLOAT16}


@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.int64, np.float16])
def test_channel_shuffle_step(dtype):
    """nnkern.ChannelShuffle (the optimizer's ShuffleNet join): a and b interleaved along the last axis, cut into
    `splits` equal parts: whole pairs per part or not (odd part widths), runs of pairs past the byte loop's 8 and 4
    at a time, every element size, rows enough for the pool; its checks refuse mismatched inputs and splits that
    do not divide."""
    rng = np.random.default_rng(12)
    for shape, splits in [((2, 3, 5, 24), 2), ((1, 4, 4, 3), 2), ((6, 3), 3), ((7,), 1), ((3, 2, 5), 5),
                          ((2, 40, 40, 48), 2), ((1, 2, 2, 0), 1), ((3, 4, 29), 1), ((2, 5, 30), 2), ((4, 22), 2)]:
        a, b = (values(rng, shape, dtype) for _ in range(2))
        z = np.stack([a, b], axis=-1).reshape(shape[:-1] + (2 * shape[-1],))
        for got, want in zip(_channel_shuffle(a, b, splits), np.split(z, splits, axis=-1)):
            np.testing.assert_array_equal(got, want, err_msg=f"{shape} splits={splits}")
    a = values(rng, (2, 3), dtype)
    for b, splits in [(values(rng, (2, 4), dtype), 1), (a, 4), (a, 0)]:
        with pytest.raises(ValueError):
            _channel_shuffle(a, b, splits)


def test_transpose_of_size_one_dimensions_is_a_view():
    plan = _C.GraphPlan(_C.GraphLayers())
    x = plan.add_input(TensorProto.FLOAT, [1, 3, 1, 5], 0, "x")
    r, = plan.add_step("Relu", "r", {}, [x], 1, "", ["r"])
    t, = plan.add_step("Transpose", "t", {"perm": ("ints", [2, 0, 1, 3])}, [r], 1, "", ["t"])
    u, = plan.add_step("Transpose", "u", {"perm": ("ints", [0, 1, 3, 2])}, [t], 1, "", ["u"])
    o, = plan.add_step("Relu", "o", {}, [u], 1, "", ["o"])
    plan.mark_output(o, 0)
    plan.finalize()
    assert plan.shares_memory(r, t)          # only size-1 dimensions moved
    assert not plan.shares_memory(t, u)      # 3 x 5 -> 5 x 3 moves data
    a = np.random.default_rng(9).standard_normal((1, 3, 1, 5)).astype(np.float32)
    np.testing.assert_array_equal(plan.run([a])[0], np.maximum(a, 0).transpose(2, 0, 1, 3).transpose(0, 1, 3, 2))


def test_resize_between_convolutions_runs_in_nhwc():
    """Between two NHWC convolutions the layout pass moves the NCHW transposes through the Resize, where they cancel:
    the plan converts the layout only at its input and output."""
    rng = np.random.default_rng(10)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"]),
             helper.make_node("Resize", ["c1", "", "scales"], ["up"], mode="nearest"),
             helper.make_node("Conv", ["up", "w2"], ["y"], pads=[1, 1, 1, 1])]
    inits = [numpy_helper.from_array((rng.standard_normal((16, 8, 1, 1)) * 0.1).astype(np.float32), "w1"),
             numpy_helper.from_array((rng.standard_normal((8, 16, 3, 3)) * 0.1).astype(np.float32), "w2"),
             numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 10, 12])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=9)
    feeds = {"x": rng.standard_normal((1, 8, 10, 12)).astype(np.float32)}
    sess = nnkern.onnx.InferenceSession(m.SerializeToString())
    np.testing.assert_allclose(sess.run(None, feeds)[0], run_ort(m, feeds)[0], rtol=1e-4, atol=1e-4)
    assert sess.describe().count(" Transpose") == 2


def test_results_do_not_depend_on_the_thread_count():
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 16, 45, 50)).astype(np.float32)
    cases = [model("Resize", [("in", x), None, ("c", np.array([1, 1, 1.7, 0.6], np.float32))],
                   attrs={"mode": "linear"}, opset=19),
             model("Resize", [("in", x), None, ("c", np.array([1, 1, 0.4, 0.45], np.float32))],
                   attrs={"mode": "cubic", "antialias": 1}, opset=19),
             model("Transpose", [("in", x)], attrs={"perm": [0, 2, 3, 1]}),
             model("Pad", [("in", x), ("c", np.array([0, 0, 2, 3, 0, 0, 1, 4], np.int64))], attrs={"mode": "reflect"})]
    for m, feeds in cases:
        one_thread = run_nnkern(m, feeds, num_threads=1)[0]
        np.testing.assert_array_equal(run_nnkern(m, feeds, num_threads=4)[0], one_thread)
