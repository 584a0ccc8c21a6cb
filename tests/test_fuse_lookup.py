"""fuse_lookup: an nnkern.Lookup table applied by the step writing its input: the INT8 convolution (nnkern.QConv's
input 16) to each block it stores, ShuffleNet's nnkern.ChannelShuffle (input 2 + k) to the rows of its output k.
Every convolution algorithm, output type, thread count and ISA cap gives the bits of the two steps; the plan fuses
where it should; a convolution writing into a Concat's slice through a buffered algorithm (low_ofm) fills its
slice."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as TP, helper, numpy_helper  # noqa: E402

import nnkern  # noqa: E402
import nnkern.onnx  # noqa: E402
from nnkern import _C  # noqa: E402

ALGORITHMS = ("im2col", "indirect", "direct", "depthwise", "low_ofm")

# (N, H, W, IC, OC, K, stride, groups): each algorithm applies to one of them at least; channel counts with
# partial panels and blocks, batches whose pixels do not fill the last tile.
SHAPES = [(2, 9, 7, 16, 40, 1, 1, 1), (1, 11, 10, 8, 20, 3, 1, 1), (2, 13, 12, 3, 16, 5, 2, 1),
          (1, 12, 9, 24, 24, 3, 1, 24), (2, 8, 11, 16, 48, 3, 2, 16), (1, 14, 13, 8, 3, 3, 1, 1)]


def _qconv(x, w, signed_out, attrs, table=None):
    """nnkern.QConv through the graph's op evaluator: x NHWC uint8, w in the layer's layout."""
    g = lambda v: None if v is None else _C.GraphConstant(np.ascontiguousarray(v))  # noqa: E731
    oc = w.shape[0] * w.shape[4]
    y_zero = np.int8(-5) if signed_out else np.uint8(120)
    bias = np.arange(oc, dtype=np.int32) * 37 - 300
    inputs = [x, np.float32(0.03), np.uint8(128), w, np.float32(0.02), np.int8(0), np.float32(0.35), y_zero, bias]
    if table is not None:
        inputs += [None] * 7 + [table]
    return _C.graph_evaluate("nnkern.QConv", "conv", attrs, [g(v) for v in inputs], 1)[0].numpy()


def _case(shape, seed):
    n, h, w_, ic, oc, k, s, groups = shape
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 256, (n, h, w_, ic)).astype(np.uint8)
    w = rng.integers(-60, 61, (groups, k, k, ic // groups, oc // groups)).astype(np.int8)
    attrs = {"group": ("i", groups), "strides": ("ints", [s, s]), "pads": ("ints", [k // 2] * 4)}
    return x, w, attrs


def _table(signed_out, seed):
    dtype = np.int8 if signed_out else np.uint8
    return np.random.default_rng(seed).permutation(256).astype(np.uint8).view(dtype)


def _looked_up(y, table):
    """table[y] as nnkern.Lookup indexes it: by y's value from the type's minimum."""
    return table[y.astype(np.int64) - np.iinfo(y.dtype).min]


@pytest.mark.parametrize("signed_out", [False, True])
@pytest.mark.parametrize("threads", [1, 2])
def test_table_after_every_algorithm_gives_the_lookups_bits(signed_out, threads):
    nnkern.set_num_threads(threads)  # the test's fixture restores the count
    ran = set()
    for i, shape in enumerate(SHAPES):
        x, w, attrs = _case(shape, i)
        table = _table(signed_out, 100 + i)
        for algorithm in ALGORITHMS:
            a = dict(attrs, algorithm=("s", algorithm))
            try:
                plain = _qconv(x, w, signed_out, a)
            except ValueError as e:
                assert "does not apply" in str(e)
                continue
            assert len(np.unique(plain)) > 20, (shape, algorithm)  # not saturated
            want = _looked_up(plain, table)
            for isa in nnkern.ISA_LEVELS:
                if isa not in _C.isa_levels():
                    continue
                with nnkern.max_isa(isa):
                    got = _qconv(x, w, signed_out, a, table)
                np.testing.assert_array_equal(got, want, err_msg=f"{shape} {algorithm} {isa}")
            ran.add(algorithm)
    assert ran == set(ALGORITHMS)


@pytest.mark.parametrize("signed_out", [False, True])
def test_table_after_the_general_form(signed_out):
    """uint8 weights that minus their zero point do not fit int8 take the general form (im2col and a GEMM with the
    zero points), which applies the table over its whole output."""
    rng = np.random.default_rng(21)
    x = rng.integers(0, 256, (2, 7, 6, 5)).astype(np.uint8)
    w = rng.integers(0, 256, (1, 3, 3, 5, 12)).astype(np.uint8)
    g = lambda v: None if v is None else _C.GraphConstant(np.ascontiguousarray(v))  # noqa: E731
    y_zero = np.int8(-3) if signed_out else np.uint8(100)
    inputs = [x, np.float32(0.03), np.uint8(128), w, np.float32(0.002), np.uint8(0), np.float32(0.4), y_zero,
              np.arange(12, dtype=np.int32) * 50]
    attrs = {"pads": ("ints", [1] * 4)}
    run = lambda ins: _C.graph_evaluate("nnkern.QConv", "c", attrs, [g(v) for v in ins], 1)[0].numpy()  # noqa: E731
    plain = run(inputs)
    assert len(np.unique(plain)) > 20
    table = _table(signed_out, 9)
    np.testing.assert_array_equal(run(inputs + [None] * 7 + [table]), _looked_up(plain, table))


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("splits", [1, 2])
def test_channel_shuffle_op_with_a_table(dtype, splits):
    """The op itself: output k's table applied to the interleaved values, indexed as nnkern.Lookup indexes it (int8
    by value from -128); an output without a table left as it is."""
    rng = np.random.default_rng(4)
    info = np.iinfo(dtype)
    a, b = (rng.integers(info.min, info.max + 1, (3, 5, 6)).astype(dtype) for _ in range(2))
    table = _table(dtype == np.int8, 3)
    z = np.stack([a, b], axis=-1).reshape(3, 5, 12)
    want = np.split(z, splits, axis=-1)
    want[-1] = _looked_up(want[-1], table)
    ins = [a, b] + [None] * (splits - 1) + [table]
    got = _C.graph_evaluate("nnkern.ChannelShuffle", "s", {"splits": ("i", splits)},
                            [None if v is None else _C.GraphConstant(v) for v in ins], splits)
    for gk, wk in zip(got, want):
        np.testing.assert_array_equal(gk.numpy(), wk)


def test_table_is_checked():
    x, w, attrs = _case(SHAPES[0], 0)
    with pytest.raises(ValueError, match="256 entries of the 8-bit output's type"):
        _qconv(x, w, False, attrs, np.zeros(256, np.int8))  # int8 table, uint8 output
    with pytest.raises(ValueError, match="256 entries"):
        _qconv(x, w, False, attrs, np.zeros(255, np.uint8))
    with pytest.raises(ValueError, match="does not apply"):
        _qconv(x, w, False, dict(attrs, algorithm=("s", "depthwise")))
    with pytest.raises(ValueError, match="does not apply"):
        _qconv(x, w, False, dict(attrs, algorithm=("s", "winograd")))


def _hardswish_model(oc_a, oc_b, k=3, concat=True):
    """image -> QDQ conv A (3 -> oc_a) -> HardSwish, QDQ conv B (3 -> oc_b) -> Relu, concatenated along channels
    (or A alone): A's HardSwish becomes a table on its quantized output."""
    rng = np.random.default_rng(7)
    c = lambda name, v: numpy_helper.from_array(np.asarray(v), name)  # noqa: E731
    N = helper.make_node
    inits = [c("sx", np.float32(0.02)), c("zx", np.uint8(128)), c("sw", np.float32(0.01)), c("zw", np.int8(0)),
             c("sy", np.float32(0.05)), c("zy", np.uint8(100)), c("so", np.float32(0.04)), c("zo", np.uint8(90))]
    nodes = [N("DequantizeLinear", ["x", "sx", "zx"], ["xf"])]
    branches = []
    for name, oc, act in (("a", oc_a, "HardSwish"), ("b", oc_b, "Relu"))[:2 if concat else 1]:
        inits.append(c(f"w{name}", rng.integers(-60, 61, (oc, 3, k, k)).astype(np.int8)))
        nodes += [N("DequantizeLinear", [f"w{name}", "sw", "zw"], [f"w{name}f"]),
                  N("Conv", ["xf", f"w{name}f"], [f"c{name}"], pads=[k // 2] * 4),
                  N("QuantizeLinear", [f"c{name}", "sy", "zy"], [f"q{name}"]),
                  N("DequantizeLinear", [f"q{name}", "sy", "zy"], [f"d{name}"]),
                  N(act, [f"d{name}"], [f"h{name}"]), N("QuantizeLinear", [f"h{name}", "so", "zo"], [f"o{name}"])]
        branches.append(f"o{name}")
    if concat:
        nodes.append(N("Concat", branches, ["y"], axis=1))
    else:
        nodes.append(N("Identity", branches, ["y"]))
    g = helper.make_graph(nodes, "hardswish", [helper.make_tensor_value_info("x", TP.UINT8, ["N", 3, 16, 15])],
                          [helper.make_tensor_value_info("y", TP.UINT8, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)], ir_version=8).SerializeToString()


@pytest.mark.parametrize("oc_a", [4, 3, 20])
@pytest.mark.parametrize("threads", [1, 2])
def test_plan_fuses_the_table_into_the_convolution(oc_a, threads):
    """3 or 4 output channels: low_ofm, whose tiles go through a buffer when its output is a Concat's slice; 20:
    a GEMM algorithm in place."""
    model = _hardswish_model(oc_a, 8)
    feeds = {"x": np.random.default_rng(2).integers(0, 256, (2, 3, 16, 15)).astype(np.uint8)}
    fused = nnkern.onnx.InferenceSession(model, num_threads=threads)
    text = fused.describe(feeds)
    assert "nnkern.Lookup" not in text and text.count("+ table") == 2, text  # Relu's requantization: a table too
    plain = nnkern.onnx.InferenceSession(model, num_threads=threads, optimize={"fuse_lookup": False})
    assert plain.describe(feeds).count("nnkern.Lookup") == 2
    want = plain.run(None, feeds)[0]
    assert len(np.unique(want)) > 20
    np.testing.assert_array_equal(fused.run(None, feeds)[0], want)
    # And without the Concat writing in place, nor any fusion: the same bits.
    np.testing.assert_array_equal(want, nnkern.onnx.InferenceSession(model, num_threads=threads, optimize={
        "fuse_lookup": False, "concat_in_place": False}).run(None, feeds)[0])


def test_low_ofm_convolution_fills_its_concat_slice():
    """low_ofm stores whole pixels of OC channels; into a Concat's slice (pixels further apart) its tiles are
    committed through a buffer, which the plain NHWC stage once dropped (the slice left unwritten)."""
    rng = np.random.default_rng(3)
    c = lambda name, v: numpy_helper.from_array(np.asarray(v), name)  # noqa: E731
    inits = [c("xs", np.float32(0.02)), c("xz", np.uint8(128)), c("ws", np.float32(0.01)), c("wz", np.int8(0)),
             c("ys", np.float32(0.5)), c("yz", np.uint8(128))]
    nodes = []
    for i, oc in enumerate((4, 8)):
        inits.append(c(f"w{i}", rng.integers(-60, 61, (oc, 3, 3, 3)).astype(np.int8)))
        nodes.append(helper.make_node("QLinearConv", ["x", "xs", "xz", f"w{i}", "ws", "wz", "ys", "yz"], [f"y{i}"],
                                      pads=[1] * 4))
    nodes.append(helper.make_node("Concat", ["y0", "y1"], ["y"], axis=1))
    g = helper.make_graph(nodes, "concat", [helper.make_tensor_value_info("x", TP.UINT8, [1, 3, 16, 15])],
                          [helper.make_tensor_value_info("y", TP.UINT8, None)], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    feeds = {"x": rng.integers(0, 256, (1, 3, 16, 15)).astype(np.uint8)}
    s = nnkern.onnx.InferenceSession(model)
    text = s.describe(feeds)
    assert "low_ofm" in text and "inputs 0,1 in place" in text, text
    want = nnkern.onnx.InferenceSession(model, optimize={"concat_in_place": False}).run(None, feeds)[0]
    assert len(np.unique(want[:, :4])) > 20
    np.testing.assert_array_equal(s.run(None, feeds)[0], want)


def test_no_table_where_the_output_has_other_readers():
    model = _hardswish_model(20, 8, concat=False)
    m = onnx.load_from_string(model)
    m.graph.output.append(helper.make_tensor_value_info("qa", TP.UINT8, None))  # the convolution's own output
    feeds = {"x": np.random.default_rng(4).integers(0, 256, (1, 3, 16, 15)).astype(np.uint8)}
    s = nnkern.onnx.InferenceSession(m.SerializeToString())
    assert "+ table" not in s.describe(feeds) and "nnkern.Lookup" in s.describe(feeds)


@pytest.mark.parametrize("threads, split_from", [(1, 0), (2, 0), (2, 1)])
def test_channel_shuffle_applies_the_table_of_an_output(threads, split_from):
    """ShuffleNet's units quantized (QDQ): the passed-through half is requantized to the next concatenation's scale,
    a table on a ChannelShuffle output, which the shuffle applies to the rows it writes: the bits of the two steps
    on every ISA cap; split_from 1: the rows split across the threads (elementwise_parallel_min), each range's
    table applied where it starts."""
    from test_onnx_optimizations import _shuffle_unit_graph
    from onnx_models import quantize
    feeds_of = lambda batch, seed: {"image": np.random.default_rng(seed).uniform(  # noqa: E731
        -1, 1, (batch, 3, 9, 11)).astype(np.float32)}
    model = quantize(_shuffle_unit_graph([1], units=3), "qdq", feeds_of).SerializeToString()
    feeds = feeds_of(batch=2, seed=5)
    _C.set_elementwise_parallel_min(split_from)  # the test's fixture restores the default
    plain = nnkern.onnx.InferenceSession(model, num_threads=threads, optimize={"fuse_lookup": False})
    before = plain.describe(feeds).count("nnkern.Lookup")
    want = plain.run(None, feeds)
    for isa in nnkern.ISA_LEVELS:
        if isa not in _C.isa_levels():
            continue
        with nnkern.max_isa(isa):
            s = nnkern.onnx.InferenceSession(model, num_threads=threads)
            text = s.describe(feeds)
            shuffles = [line for line in text.splitlines() if "nnkern.ChannelShuffle [+ table]" in line]
            assert len(shuffles) == 2 and text.count("nnkern.Lookup") == before - 2, text
            for got, w in zip(s.run(None, feeds), want):
                np.testing.assert_array_equal(got, w, err_msg=isa)


def test_channel_shuffle_table_is_checked():
    from nnkern.onnx._graph import constant
    a = (2, [3, 4])  # uint8 (3, 4)
    with pytest.raises(ValueError, match="256 entries of their type"):
        _C.graph_infer("nnkern.ChannelShuffle", "s", {"splits": ("i", 2)},
                       [a, a, constant(np.zeros(256, np.int8))], 2)
    with pytest.raises(ValueError, match="more tables than outputs"):
        _C.graph_infer("nnkern.ChannelShuffle", "s", {}, [a, a, None, constant(np.zeros(256, np.uint8))], 1)
    f = (1, [3, 4])  # float32
    with pytest.raises(ValueError, match="8-bit inputs"):
        _C.graph_infer("nnkern.ChannelShuffle", "s", {}, [f, f, constant(np.zeros(256, np.uint8))], 1)
