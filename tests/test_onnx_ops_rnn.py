"""LSTM, GRU and RNN of nnkern.onnx against onnxruntime on one-node models (float32 within atol 1e-5 + rtol 1e-5 of
onnxruntime's outputs): every direction, with and without B, initial states, sequence_lens (zero lengths
included), batch 1 and more, layout 0 and 1 (onnxruntime runs layout 0 only: its results are compared transposed),
GRU's linear_before_reset 0 and 1, LSTM's peepholes, clip, input_forget and other activations; then malformed and
unsupported nodes."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from hypothesis import given, settings, strategies as st  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

import nnkern.onnx  # noqa: E402

OPSET = 22
ATOL = RTOL = 1e-5
NAMES = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
OUTPUTS = {"LSTM": ["Y", "Y_h", "Y_c"], "GRU": ["Y", "Y_h"], "RNN": ["Y", "Y_h"]}


def model(op, arrays, attrs, outputs=None, constants=("W", "R", "B")):
    """One node; arrays {name: array or None} in NAMES, the `constants` among them as initializers."""
    names = NAMES[:8 if op == "LSTM" else 6]
    node_inputs = [n if arrays.get(n) is not None else "" for n in names]
    while node_inputs and not node_inputs[-1]:
        node_inputs.pop()
    outputs = OUTPUTS[op] if outputs is None else outputs
    node = helper.make_node(op, node_inputs, outputs, **attrs)
    inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
              for n, a in arrays.items() if a is not None and n not in constants]
    inits = [numpy_helper.from_array(a, n) for n, a in arrays.items() if a is not None and n in constants]
    outs = [helper.make_tensor_value_info(o, onnx.TensorProto.FLOAT, None) for o in outputs if o]
    graph = helper.make_graph([node], op, inputs, outs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=10)


def feeds(arrays, constants=("W", "R", "B")):
    return {n: a for n, a in arrays.items() if a is not None and n not in constants}


def run_ort(m, f):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, f)


def run_nnkern(m, f, **kw):
    return nnkern.onnx.InferenceSession(m.SerializeToString(), **kw).run(None, f)


def make_arrays(op, rng, seq, batch, inp, hidden, dirs, bias, h0, c0, peep, lens, scale=0.5):
    g = GATES[op]

    def u(*shape):
        return rng.uniform(-scale, scale, shape).astype(np.float32)

    a = {"X": rng.standard_normal((seq, batch, inp)).astype(np.float32),
         "W": u(dirs, g * hidden, inp), "R": u(dirs, g * hidden, hidden),
         "B": u(dirs, 2 * g * hidden) if bias else None,
         "sequence_lens": None if lens is None else np.asarray(lens, np.int32),
         "initial_h": u(dirs, batch, hidden) if h0 else None}
    if op == "LSTM":
        a["initial_c"] = u(dirs, batch, hidden) if c0 else None
        a["P"] = u(dirs, 3 * hidden) if peep else None
    return a


def batch_first(arrays):
    """Layout 1's inputs from layout 0's."""
    b = dict(arrays)
    b["X"] = np.ascontiguousarray(arrays["X"].transpose(1, 0, 2))
    for n in ("initial_h", "initial_c"):
        if b.get(n) is not None:
            b[n] = np.ascontiguousarray(b[n].transpose(1, 0, 2))
    return b


def to_layout0(outputs):
    """Layout 1's outputs (Y: batch, seq, dirs, hidden; states: batch, dirs, hidden) in layout 0's order."""
    return [o.transpose(1, 2, 0, 3) if o.ndim == 4 else o.transpose(1, 0, 2) for o in outputs]


def expected(op, arrays, attrs):
    """onnxruntime's outputs. RNN: onnxruntime reads out of bounds for a zero-length sequence (its Y_h comes from
    step -1), so empty sequences are left out of its batch and their rows are zero."""
    lens = arrays.get("sequence_lens")
    if op != "RNN" or lens is None or lens.min() > 0:
        return run_ort(model(op, arrays, attrs), feeds(arrays))
    keep = np.flatnonzero(lens > 0)
    seq, batch = arrays["X"].shape[:2]
    dirs, hidden = arrays["R"].shape[0], arrays["R"].shape[2]
    y, y_h = np.zeros((seq, dirs, batch, hidden), np.float32), np.zeros((dirs, batch, hidden), np.float32)
    if len(keep):
        sub = dict(arrays)
        sub["X"] = arrays["X"][:, keep]
        sub["sequence_lens"] = lens[keep]
        if sub.get("initial_h") is not None:
            sub["initial_h"] = np.ascontiguousarray(arrays["initial_h"][:, keep])
        y[:, :, keep], y_h[:, keep] = run_ort(model(op, sub, attrs), feeds(sub))
    return [y, y_h]


def check(op, arrays, attrs, layout=0):
    want = expected(op, arrays, attrs)
    if layout:
        a1 = batch_first(arrays)
        got = to_layout0(run_nnkern(model(op, a1, dict(attrs, layout=1)), feeds(a1)))
    else:
        got = run_nnkern(model(op, arrays, attrs), feeds(arrays))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == np.float32 and g.shape == w.shape, (g.dtype, g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL)
    return got


def lengths(draw, seq, batch):
    """Sequence lengths with a zero and a full length where the batch allows."""
    lens = draw(st.lists(st.integers(0, seq), min_size=batch, max_size=batch))
    if batch > 1:
        lens[0], lens[-1] = 0, seq
    return lens


@st.composite
def cases(draw, op):
    seq, batch = draw(st.integers(1, 5)), draw(st.sampled_from([1, 3]))
    p = dict(seq=seq, batch=batch, inp=draw(st.integers(1, 6)), hidden=draw(st.integers(1, 8)),
             direction=draw(st.sampled_from(["forward", "reverse", "bidirectional"])),
             bias=draw(st.booleans()), h0=draw(st.booleans()), c0=draw(st.booleans()),
             lens=lengths(draw, seq, batch) if draw(st.booleans()) else None,
             layout=draw(st.sampled_from([0, 1])), seed=draw(st.integers(0, 2 ** 16)))
    return p


def arrays_of(op, p, peep=False):
    dirs = 2 if p["direction"] == "bidirectional" else 1
    return make_arrays(op, np.random.default_rng(p["seed"]), p["seq"], p["batch"], p["inp"], p["hidden"], dirs,
                       p["bias"], p["h0"], p["c0"], peep, p["lens"])


@settings(max_examples=120, deadline=None, derandomize=True)
@given(cases("LSTM"), st.sampled_from(["default", "peepholes", "clip", "input_forget", "activations"]))
def test_lstm(p, variant):
    attrs = dict(hidden_size=p["hidden"], direction=p["direction"])
    dirs = 2 if p["direction"] == "bidirectional" else 1
    if variant == "clip":
        attrs["clip"] = 0.7
    elif variant == "input_forget":
        attrs["input_forget"] = 1
    elif variant == "activations":
        attrs["activations"] = ["HardSigmoid", "Relu", "Tanh", "Sigmoid", "LeakyRelu", "Softsign"][:3 * dirs]
        attrs["activation_alpha"], attrs["activation_beta"] = [0.3, 0.1], [0.4]
    check("LSTM", arrays_of("LSTM", p, peep=variant == "peepholes"), attrs, p["layout"])


@settings(max_examples=120, deadline=None, derandomize=True)
@given(cases("GRU"), st.sampled_from([0, 1]), st.sampled_from(["default", "clip", "activations"]))
def test_gru(p, linear_before_reset, variant):
    attrs = dict(hidden_size=p["hidden"], direction=p["direction"], linear_before_reset=linear_before_reset)
    dirs = 2 if p["direction"] == "bidirectional" else 1
    if variant == "clip":
        attrs["clip"] = 0.5
    elif variant == "activations":
        attrs["activations"] = ["Sigmoid", "Relu", "HardSigmoid", "Tanh"][:2 * dirs]
    check("GRU", arrays_of("GRU", p), attrs, p["layout"])


@settings(max_examples=80, deadline=None, derandomize=True)
@given(cases("RNN"), st.sampled_from(["default", "clip", "relu", "sigmoid", "leaky"]))
def test_rnn(p, variant):
    attrs = dict(hidden_size=p["hidden"], direction=p["direction"])
    dirs = 2 if p["direction"] == "bidirectional" else 1
    if variant == "clip":
        attrs["clip"] = 0.4
    elif variant in ("relu", "sigmoid"):
        attrs["activations"] = [variant.capitalize()] * dirs
    elif variant == "leaky":
        attrs["activations"], attrs["activation_alpha"] = ["LeakyRelu"] * dirs, [0.2, 0.05][:dirs]
    check("RNN", arrays_of("RNN", p), attrs, p["layout"])


@pytest.mark.parametrize("fn, alpha, beta", [
    ("Affine", [0.7], [0.2]), ("LeakyRelu", [], []), ("LeakyRelu", [0.3], []), ("ThresholdedRelu", [0.1], []),
    ("ScaledTanh", [1.5], [0.7]), ("HardSigmoid", [], []), ("HardSigmoid", [0.3], [0.6]), ("Elu", [], []),
    ("Elu", [0.5], []), ("Softsign", [], []), ("Softplus", [], []), ("relu", [], []), ("TANH", [], [])])
@pytest.mark.parametrize("op", ["LSTM", "GRU"])
def test_activation_functions(op, fn, alpha, beta):
    """Each function as the cell's g (alpha, beta given, or the function's default: onnxruntime's defaults agree
    for LeakyRelu, HardSigmoid and Elu)."""
    a = make_arrays(op, np.random.default_rng(9), 4, 3, 3, 5, 1, True, True, True, False, [4, 0, 2])
    acts = ["Sigmoid", fn, "Tanh"][:GATES[op] - 1] if op == "GRU" else ["Sigmoid", fn, "Tanh"]
    attrs = dict(hidden_size=5, activations=acts)
    if alpha:
        attrs["activation_alpha"] = alpha
    if beta:
        attrs["activation_beta"] = beta
    check(op, a, attrs)


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_larger(op, direction):
    """Sizes where the GEMMs are blocked and the gates run on several threads; lengths from 0 to seq."""
    seq, batch, inp, hidden = 9, 12, 40, 48
    dirs = 2 if direction == "bidirectional" else 1
    rng = np.random.default_rng(7)
    lens = [seq, 0] + rng.integers(0, seq + 1, batch - 2).tolist()
    a = make_arrays(op, rng, seq, batch, inp, hidden, dirs, True, True, True, False, lens, scale=0.2)
    attrs = dict(hidden_size=hidden, direction=direction)
    check(op, a, attrs)
    a["sequence_lens"] = None
    check(op, a, attrs, layout=1)


def test_lstm_paths():
    """The default LSTM runs on F32Lstm; a clip it cannot do takes the general path; both agree with onnxruntime."""
    a = make_arrays("LSTM", np.random.default_rng(3), 4, 2, 5, 6, 2, True, True, True, False, [4, 2])
    attrs = dict(hidden_size=6, direction="bidirectional")
    sess = nnkern.onnx.InferenceSession(model("LSTM", a, attrs).SerializeToString())
    assert "f32_lstm" in sess.describe()
    general = nnkern.onnx.InferenceSession(model("LSTM", a, dict(attrs, clip=1e30)).SerializeToString())
    assert "f32_lstm" not in general.describe() and "gate loops" in general.describe()
    want = run_ort(model("LSTM", a, attrs), feeds(a))
    for got in (sess.run(None, feeds(a)), general.run(None, feeds(a))):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("outputs", [["Y"], ["", "Y_h"], ["", "", "Y_c"], ["Y", "", "Y_c"]])
def test_optional_outputs(outputs):
    a = make_arrays("LSTM", np.random.default_rng(4), 3, 2, 4, 5, 1, True, False, False, False, [3, 1])
    m = model("LSTM", a, dict(hidden_size=5), outputs=outputs)
    got, want = run_nnkern(m, feeds(a)), run_ort(m, feeds(a))
    assert len(got) == len(want) == len([o for o in outputs if o])
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL)


def test_all_lengths_zero():
    for op in ("LSTM", "GRU", "RNN"):
        a = make_arrays(op, np.random.default_rng(5), 3, 2, 4, 5, 2, True, True, True, False, [0, 0])
        for out in run_nnkern(model(op, a, dict(hidden_size=5, direction="bidirectional")), feeds(a)):
            assert not out.any()


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_empty_sizes(op):
    """input_size 0 (onnxruntime fails on it: compared with input_size 1 of zeros), seq 0 and batch 0."""
    attrs = dict(direction="bidirectional")
    for lens in (None, [2, 0]):
        a = make_arrays(op, np.random.default_rng(1), 3, 2, 0, 4, 2, True, True, True, False, lens)
        got = run_nnkern(model(op, a, attrs), feeds(a))
        b = dict(a, X=np.zeros((3, 2, 1), np.float32), W=np.zeros(a["W"].shape[:2] + (1,), np.float32))
        for g, w in zip(got, expected(op, b, dict(attrs, hidden_size=4))):
            np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL)
    for seq, batch in ((0, 2), (3, 0), (0, 0)):
        a = make_arrays(op, np.random.default_rng(1), seq, batch, 3, 4, 2, True, True, True, False, None)
        got = run_nnkern(model(op, a, attrs), feeds(a))
        assert [g.shape for g in got] == [(seq, 2, batch, 4)] + [(2, batch, 4)] * (len(got) - 1)
        assert not any(g.any() for g in got)


def test_hidden_size_from_r():
    """hidden_size left out: R's last dimension."""
    a = make_arrays("GRU", np.random.default_rng(2), 3, 2, 4, 5, 1, True, True, False, False, [3, 1])
    got = run_nnkern(model("GRU", a, {}), feeds(a))
    for g, w in zip(got, run_ort(model("GRU", a, dict(hidden_size=5)), feeds(a))):
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL)


def test_weights_fed_as_inputs():
    """W, R, B fed as (small) graph inputs: a plan per value; the packed weights of one value are never used for
    another's."""
    op, attrs = "GRU", dict(hidden_size=4, linear_before_reset=1)
    inputs = ("X", "W", "R", "B")
    a = make_arrays(op, np.random.default_rng(6), 3, 2, 3, 4, 1, True, False, False, False, None)
    sess = nnkern.onnx.InferenceSession(model(op, a, attrs, constants=()).SerializeToString())
    for seed in (1, 2, 1):
        b = make_arrays(op, np.random.default_rng(seed), 3, 2, 3, 4, 1, True, False, False, False, None)
        got = sess.run(None, {n: b[n] for n in inputs})
        want = run_ort(model(op, b, attrs, constants=()), {n: b[n] for n in inputs})
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("op", ["GRU", "LSTM"])
@pytest.mark.parametrize("layout", [0, 1])
def test_results_do_not_depend_on_threads(op, layout):
    """Bidirectional, with sequence lengths and initial states: the same bits on 1, 2 (an LSTM runs its two
    directions concurrently, one per thread) and 3 threads (each direction on the whole pool)."""
    lens = [6, 2, 0, 5, 6, 1, 3, 6, 4, 6, 2, 5, 6, 0, 6, 3]
    a = make_arrays(op, np.random.default_rng(8), 6, 16, 32, 64, 2, True, True, True, False, lens, scale=0.2)
    attrs = dict(hidden_size=64, direction="bidirectional")
    if layout:
        a, attrs = batch_first(a), dict(attrs, layout=1)
    m = model(op, a, attrs)
    one = run_nnkern(m, feeds(a), num_threads=1)
    for threads in (2, 3):
        for x, y in zip(one, run_nnkern(m, feeds(a), num_threads=threads)):
            np.testing.assert_array_equal(x, y, err_msg=f"{op} layout {layout}, {threads} threads")


# -- malformed and unsupported nodes

def base(op="LSTM", **kw):
    a = make_arrays(op, np.random.default_rng(0), 2, 2, 3, 4, 1, True, False, False, False, None)
    a.update(kw)
    return a


@pytest.mark.parametrize("attrs, error, match", [
    (dict(hidden_size=5), ValueError, "shape"),
    (dict(hidden_size=4, direction="sideways"), ValueError, "direction"),
    (dict(hidden_size=4, layout=2), ValueError, "layout"),
    (dict(hidden_size=4, clip=0.0), ValueError, "clip"),
    (dict(hidden_size=4, activations=["Sigmoid", "Tanh"]), ValueError, "activations"),
    (dict(hidden_size=4, activations=["Sigmoid", "Gelu", "Tanh"]), NotImplementedError, "Gelu"),
    (dict(hidden_size=4, direction="bidirectional"), ValueError, "shape"),
])
def test_bad_attributes(attrs, error, match):
    a = base()
    with pytest.raises(error, match=match):
        run_nnkern(model("LSTM", a, attrs), feeds(a))


def test_bad_inputs():
    a = base(X=np.zeros((2, 2, 3), np.float64))
    with pytest.raises(NotImplementedError, match="float64"):
        run_nnkern(model("LSTM", a, dict(hidden_size=4)), feeds(a))
    a = base(X=np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match="rank 3"):
        run_nnkern(model("LSTM", a, dict(hidden_size=4)), feeds(a))
    a = base(sequence_lens=np.array([1, 2], np.int64))
    with pytest.raises(ValueError, match="int32"):
        run_nnkern(model("LSTM", a, dict(hidden_size=4)), feeds(a))
    a = base(initial_h=np.zeros((1, 3, 4), np.float32))
    with pytest.raises(ValueError, match="initial_h"):
        run_nnkern(model("LSTM", a, dict(hidden_size=4)), feeds(a))
    a = base(P=np.zeros((1, 8), np.float32))
    with pytest.raises(ValueError, match="P"):
        run_nnkern(model("LSTM", a, dict(hidden_size=4)), feeds(a))


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_sequence_lens_out_of_range(op):
    a = base(op, sequence_lens=np.array([1, 3], np.int32))
    sess = nnkern.onnx.InferenceSession(model(op, a, dict(hidden_size=4)).SerializeToString())
    with pytest.raises(ValueError, match="sequence_lens"):
        sess.run(None, feeds(a))
    a["sequence_lens"] = np.array([-1, 2], np.int32)
    with pytest.raises(ValueError, match="sequence_lens"):
        sess.run(None, feeds(a))
    a["sequence_lens"] = np.array([1, 2], np.int32)
    sess.run(None, feeds(a))


def test_weights_must_be_constant():
    """W too large to plan per value, fed as a graph input: refused with the reason."""
    a = make_arrays("RNN", np.random.default_rng(0), 2, 1, 80, 64, 1, False, False, False, False, None)
    with pytest.raises(NotImplementedError, match="W"):
        run_nnkern(model("RNN", a, dict(hidden_size=64), constants=("R",)), feeds(a, constants=("R",)))
