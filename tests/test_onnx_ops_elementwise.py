"""The elementwise operators of nnkern.onnx against onnxruntime on one-node models: random shapes (0-sized dims and
numpy broadcasting included), every element type both run, values with NaN, infinities and signed zeros.

Bounds: integers, bool, data movement, comparisons, Cast, and float results that are correctly rounded by both
(+, -, *, /, sqrt, min/max, floor/ceil/round, abs, neg, sign, reciprocal, Relu, Clip, LeakyRelu, PRelu, Where, Sum,
Mean) are bit-exact (NaN where onnxruntime has NaN); transcendental float32 functions within 2e-6 * (1 + |y|)
(each side's libm or polynomial is within a few ulp), float64 within 1e-12 * (1 + |y|). Where onnxruntime has no
kernel for a type (float64 Softplus, Elu, ...), the reference is numpy in float64.
"""
import functools
import math

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import nnkern.onnx  # noqa: E402
from helpers import QUICK  # noqa: E402
from onnx_helpers import node_model, run_nnkern, run_ort, same_outputs  # noqa: E402

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True)
FEW = settings(max_examples=12, deadline=None, derandomize=True)

FLOATS = [np.float32, np.float64]
INTS = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]
NUMERIC = FLOATS + INTS
SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 1.5, -2.5, 1e-30, 3e38]

_ort_support: dict = {}


def ort_runs(op, dtypes, attrs=None, opset=18):
    """Whether onnxruntime has a kernel for op on inputs of these dtypes (asked once per combination)."""
    key = (op, tuple(np.dtype(d).name for d in dtypes), tuple(sorted((attrs or {}).items())), opset)
    if key not in _ort_support:
        feeds = {f"x{i}": np.ones([1] if i == 0 or op != "Clip" else [], d) for i, d in enumerate(dtypes)}
        try:
            run_ort(node_model(op, feeds, ["y"], attrs, opset=opset), feeds)
            _ort_support[key] = True
        except Exception:  # noqa: BLE001 - onnxruntime's own error classes
            _ort_support[key] = False
    return _ort_support[key]


def values(rng, dtype, shape, special=True, lo=None, hi=None):
    """Random values of a dtype: floats normal-ish with specials mixed in, integers over the type's range."""
    dt = np.dtype(dtype)
    if dt.kind == "f":
        x = np.asarray(rng.standard_normal(shape) * 3).astype(dtype)
        if special and x.size:
            mask = rng.random(shape) < 0.15
            x[mask] = rng.choice(np.array(SPECIAL, dtype), int(mask.sum()))
        return x
    if dt.kind == "b":
        return np.asarray(rng.random(shape) < 0.5)
    info = np.iinfo(dt)
    lo = info.min if lo is None else max(lo, info.min)
    hi = info.max if hi is None else min(hi, info.max)
    return np.asarray(rng.integers(lo, hi, size=shape, dtype=dtype, endpoint=True))


shapes = st.lists(st.integers(0, 5), min_size=0, max_size=4).map(tuple)


@st.composite
def broadcast_shapes(draw, n=2):
    """n shapes that broadcast together: a base shape with dims set to 1 or leading dims dropped per input."""
    base = draw(st.lists(st.integers(0, 5), min_size=0, max_size=4))
    out = []
    for _ in range(n):
        s = [1 if draw(st.integers(0, 3)) == 0 else d for d in base]
        out.append(tuple(s[draw(st.integers(0, len(s))):]))
    return out


# ---- one input

EXACT_UNARY = ["Relu", "Neg", "Abs", "Sign", "Sqrt", "Reciprocal", "Floor", "Ceil", "Round", "IsNaN", "IsInf", "Not",
               "LeakyRelu", "ThresholdedRelu", "HardSigmoid", "HardSwish", "Softsign"]
APPROX_UNARY = ["Sigmoid", "Tanh", "Erf", "Exp", "Log", "Sin", "Cos", "Softplus", "Elu", "Selu", "Celu", "Mish",
                "Gelu"]
UNARY_ATTRS = {"LeakyRelu": {"alpha": 0.3}, "ThresholdedRelu": {"alpha": 0.7}, "HardSigmoid": {"alpha": 0.3, "beta": 0.4},
               "Elu": {"alpha": 0.8}, "Selu": {"alpha": 1.5, "gamma": 1.2}, "Celu": {"alpha": 1.3},
               "IsInf": {"detect_negative": 0}}
_SQRT1_2 = 1 / math.sqrt(2)
_erf = np.vectorize(math.erf, otypes=[np.float64])


def _softplus(x):
    return np.where(x > 0, x + np.log1p(np.exp(-np.abs(x))), np.log1p(np.exp(np.minimum(x, 0))))


# float64 references where onnxruntime has no float64 kernel.
NUMPY_UNARY = {
    "LeakyRelu": lambda x, a: np.where(x < 0, x * a.get("alpha", 0.01), x),
    "ThresholdedRelu": lambda x, a: np.where(x > a.get("alpha", 1.0), x, 0.0),
    "HardSigmoid": lambda x, a: np.clip(a.get("alpha", 0.2) * x + a.get("beta", 0.5), 0, 1),
    "HardSwish": lambda x, a: x * np.clip(x / 6 + 0.5, 0, 1),
    "Softsign": lambda x, a: x * (1 / (1 + np.abs(x))),
    "Softplus": lambda x, a: _softplus(x),
    "Elu": lambda x, a: np.where(x >= 0, x, a.get("alpha", 1.0) * np.expm1(np.minimum(x, 0))),
    "Selu": lambda x, a: np.where(x > 0, a["gamma"] * x, a["gamma"] * a["alpha"] * np.expm1(np.minimum(x, 0))),
    "Celu": lambda x, a: np.where(x > 0, x, a["alpha"] * np.expm1(np.minimum(x, 0) / a["alpha"])),
    "Mish": lambda x, a: x * np.tanh(_softplus(x)),
    "Erf": lambda x, a: _erf(x),
    "Gelu": lambda x, a: 0.5 * x * (1 + _erf(x * _SQRT1_2)),
}


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.sampled_from(EXACT_UNARY + APPROX_UNARY), st.sampled_from(FLOATS), shapes, st.integers(0, 2**31))
def test_unary_float(op, dtype, shape, seed):
    rng = np.random.default_rng(seed)
    if op == "Not":
        dtype = np.bool_
    x = values(rng, dtype, shape)
    attrs = UNARY_ATTRS.get(op, {})
    opset = 20  # at 18 onnxruntime runs float64 Softplus as the naive function log(exp(x) + 1): numpy instead
    model = node_model(op, {"x": x}, ["y"], attrs, opset=opset)
    ours = run_nnkern(model, {"x": x})
    exact = op in EXACT_UNARY
    f32 = dtype == np.float32
    tol = dict(rtol=0.0, atol=0.0) if exact else dict(rtol=2e-6 if f32 else 1e-12, atol=2e-6 if f32 else 1e-12)
    if ort_runs(op, [dtype], attrs, opset):
        same_outputs(ours, run_ort(model, {"x": x}), **tol)
    else:  # float64 without an onnxruntime kernel
        assert dtype == np.float64, (op, dtype)
        with np.errstate(all="ignore"):
            ref = NUMPY_UNARY[op](x, {k: float(np.float32(v)) for k, v in attrs.items()})  # float attributes
        same_outputs(ours, [np.asarray(ref, np.float64)], rtol=1e-12, atol=1e-15)


@FEW
@given(st.sampled_from(["none", "tanh"]), shapes, st.integers(0, 2**31))
def test_gelu(approximate, shape, seed):
    x = values(np.random.default_rng(seed), np.float32, shape)
    model = node_model("Gelu", {"x": x}, ["y"], {"approximate": approximate}, opset=20)
    same_outputs(run_nnkern(model, {"x": x}), run_ort(model, {"x": x}), rtol=2e-6, atol=2e-6)


def test_float32_erf_every_isa():
    """Erf on float32 runs the erf kernel (kernels/f32_erf.h, vectorized by the compiler per ISA): at most 2.7 ulp
    from the exact erf over every 97th float32 of [0, 4.5] (every 1553rd in the quick run; both signs: odd by
    construction), the same bits on
    every ISA this CPU has, and the special values (+-0 keep their sign, +-Inf -> +-1, NaN -> NaN, subnormals,
    huge); Gelu's exact form (the gelu kernel, the same erf in its loop) equals 0.5 x (1 + erf(x / sqrt 2)) through
    that kernel bit for bit, on every ISA."""
    bits = np.arange(0, np.float32(4.5).view(np.int32), 1553 if QUICK else 97, dtype=np.int32)
    pos = bits.view(np.float32)
    x = np.concatenate([pos, -pos, np.array([np.inf, -np.inf, np.nan, 1e-45, -3e-39, 1e30, -3e38], np.float32)])
    model = node_model("Erf", {"x": x}, ["y"])
    outs = {isa: run_nnkern(model, {"x": x}, max_isa=isa)[0] for isa in nnkern.supported_isas()}
    y = outs["scalar"]
    for isa, o in outs.items():
        np.testing.assert_array_equal(o.view(np.int32), y.view(np.int32), err_msg=isa)
    n = len(pos)
    want = _erf(pos.astype(np.float64))
    ulps = np.abs(y[:n] - want) / np.spacing(np.maximum(want, 1e-38).astype(np.float32)).astype(np.float64)
    assert ulps.max() <= 2.7, (ulps.max(), pos[ulps.argmax()])
    np.testing.assert_array_equal(y[n:2 * n], -y[:n])
    tail = y[2 * n:]
    assert tail[0] == 1 and tail[1] == -1 and np.isnan(tail[2]) and tail[5] == 1 and tail[6] == -1
    assert 0 < tail[3] and tail[4] < 0 and np.signbit(y[n])  # erf(-0) = -0
    g = np.concatenate([x[np.isfinite(x)], np.linspace(-12, 12, 1001, dtype=np.float32)])
    u = run_nnkern(node_model("Erf", {"x": g * np.float32(_SQRT1_2)}, ["y"]), {"x": g * np.float32(_SQRT1_2)})[0]
    for isa in nnkern.supported_isas():
        gelu = run_nnkern(node_model("Gelu", {"x": g}, ["y"], opset=20), {"x": g}, max_isa=isa)[0]
        np.testing.assert_array_equal(gelu, np.float32(0.5) * g * (np.float32(1) + u), err_msg=isa)


NUMPY_INT = {"Relu": lambda x: np.maximum(x, 0), "Abs": np.abs, "Neg": np.negative, "Sign": np.sign}


@SETTINGS
@given(st.sampled_from(["Relu", "Abs", "Neg", "Sign"]), st.sampled_from(INTS), shapes, st.integers(0, 2**31))
def test_unary_int(op, dtype, shape, seed):
    x = values(np.random.default_rng(seed), dtype, shape)
    model = node_model(op, {"x": x}, ["y"], opset=18)
    if op in ("Relu", "Neg") and np.dtype(dtype).kind == "u":  # not in the operator's types
        with pytest.raises(NotImplementedError):
            run_nnkern(model, {"x": x})
    elif ort_runs(op, [dtype]):
        same_outputs(run_nnkern(model, {"x": x}), run_ort(model, {"x": x}))
    else:  # int16 / int64 Relu: numpy (wrapping, as numpy)
        same_outputs(run_nnkern(model, {"x": x}), [NUMPY_INT[op](x).astype(dtype)])


def test_unary_special_values():
    """NaN, infinities, signed zeros and halves through every float op, as onnxruntime computes them."""
    x = np.array(SPECIAL + [2.5, 3.5, -3.5, 4.5, 0.49999997, 8388609.0, -8388609.0, 1e20, -1e20, 7.0, -7.0],
                 np.float32)
    for op in EXACT_UNARY + APPROX_UNARY:
        if op == "Not":
            continue
        attrs = UNARY_ATTRS.get(op, {})
        opset = 20 if op == "Gelu" else 18
        model = node_model(op, {"x": x}, ["y"], attrs, opset=opset)
        tol = {} if op in EXACT_UNARY else dict(rtol=2e-6, atol=2e-6)
        same_outputs(run_nnkern(model, {"x": x}), run_ort(model, {"x": x}), **tol)


def test_isinf_detection():
    x = np.array([np.inf, -np.inf, 0.0, np.nan, 1.0], np.float32)
    for neg in (0, 1):
        for pos in (0, 1):
            model = node_model("IsInf", {"x": x}, ["y"], {"detect_negative": neg, "detect_positive": pos})
            same_outputs(run_nnkern(model, {"x": x}), run_ort(model, {"x": x}))


# ---- Clip and PRelu

@SETTINGS
@given(st.sampled_from(NUMERIC), shapes, st.sampled_from(["both", "min", "max", "none"]), st.booleans(),
       st.integers(0, 2**31))
def test_clip(dtype, shape, which, as_inputs, seed):
    rng = np.random.default_rng(seed)
    x = values(rng, dtype, shape)
    lo, hi = np.sort(values(rng, dtype, [2], special=False))
    names = {"both": ["min", "max"], "min": ["min"], "max": [None, "max"], "none": []}[which]
    bounds = {k: None if k is None else np.asarray(lo if k == "min" else hi, dtype) for k in names}
    if as_inputs:  # read at each run
        inputs = {"x": x}
        inputs.update(bounds)
        model = node_model("Clip", inputs, ["y"], opset=13)
        feeds = {k: v for k, v in inputs.items() if k}
    else:
        model = node_model("Clip", {"x": x}, ["y"], constants=bounds, opset=13)
        feeds = {"x": x}
    if ort_runs("Clip", [dtype] * 3, opset=13):
        same_outputs(run_nnkern(model, feeds), run_ort(model, feeds))
    else:  # the defaults are the type's finite extremes (ONNX's numeric_limits::lowest / max)
        info = np.finfo(dtype) if np.dtype(dtype).kind == "f" else np.iinfo(dtype)
        lo_, hi_ = bounds.get("min", info.min), bounds.get("max", info.max)
        same_outputs(run_nnkern(model, feeds), [np.minimum(np.maximum(x, lo_), hi_).astype(dtype)])


def test_clip_bounds_change_between_runs():
    x = np.linspace(-5, 5, 11, dtype=np.float32)
    feeds = {"x": x, "lo": np.array(-1, np.float32), "hi": np.array(2, np.float32)}
    model = node_model("Clip", feeds, ["y"], opset=13)
    s = nnkern.onnx.InferenceSession(model.SerializeToString())
    np.testing.assert_array_equal(s.run(None, feeds)[0], np.clip(x, -1, 2))
    feeds.update(lo=np.array(0, np.float32), hi=np.array(6, np.float32))
    np.testing.assert_array_equal(s.run(None, feeds)[0], np.clip(x, 0, 6))


def test_clip_opset6_float64():
    """Clip-6's attributes become float32 constant inputs; a float64 input still works."""
    x = np.linspace(-5, 5, 11)
    model = node_model("Clip", {"x": x}, ["y"], {"min": -1.5, "max": 2.0}, opset=6)
    same_outputs(run_nnkern(model, {"x": x}), [np.clip(x, -1.5, 2.0)])  # onnxruntime has no float64 Clip-6


@SETTINGS
@given(broadcast_shapes(), st.sampled_from([np.float32, np.float64, np.int32, np.int64]), st.integers(0, 2**31))
def test_prelu(shapes_, dtype, seed):
    rng = np.random.default_rng(seed)
    xs = np.broadcast_shapes(*shapes_)
    x = values(rng, dtype, xs, lo=-1000, hi=1000)
    slope = values(rng, dtype, shapes_[1], lo=-5, hi=5)
    model = node_model("PRelu", {"x": x}, ["y"], constants={"slope": slope}, opset=16)
    if not ort_runs("PRelu", [dtype, dtype], opset=16):
        return
    same_outputs(run_nnkern(model, {"x": x}), run_ort(model, {"x": x}))


# ---- two inputs

ARITH = ["Add", "Sub", "Mul", "Div", "Mod", "Mod_fmod", "Pow", "Max", "Min", "Sum", "Mean", "Equal", "Less",
         "Greater", "LessOrEqual", "GreaterOrEqual"]


@settings(max_examples=250, deadline=None, derandomize=True)
@given(st.sampled_from(ARITH), st.sampled_from(NUMERIC), broadcast_shapes(), st.booleans(), st.integers(0, 2**31))
def test_binary(op, dtype, shapes_, b_const, seed):
    rng = np.random.default_rng(seed)
    attrs = {}
    if op.startswith("Mod"):
        attrs = {"fmod": 1 if op == "Mod_fmod" or np.dtype(dtype).kind == "f" else 0}
        op = "Mod"
    kind = np.dtype(dtype).kind
    small = op == "Pow"
    a = values(rng, dtype, shapes_[0], lo=-6 if small else None, hi=6 if small else None)
    b = values(rng, dtype, shapes_[1], lo=0 if small else None, hi=5 if small else None)
    if kind in "iu" and op in ("Div", "Mod"):
        b[b == 0] = 1  # onnxruntime fails the run on a zero divisor (so does nnkern: tested below)
    if not ort_runs(op, [dtype, dtype], attrs):
        return
    feeds = {"a": a} if b_const else {"a": a, "b": b}
    model = node_model(op, feeds, ["y"], attrs, constants={"b": b} if b_const else None, opset=18)
    exact = op != "Pow" or kind != "f"
    same_outputs(run_nnkern(model, feeds), run_ort(model, feeds), **({} if exact else dict(rtol=2e-6, atol=1e-30)))


@SETTINGS
@given(st.sampled_from([(np.float32, np.float32), (np.float32, np.int64), (np.float32, np.int32),
                        (np.float64, np.float64), (np.int32, np.int32), (np.int64, np.int64), (np.int64, np.float32),
                        (np.int32, np.float32), (np.float32, np.float64), (np.float64, np.float32)]),
       broadcast_shapes(), st.integers(0, 2**31))
def test_pow_types(types, shapes_, seed):
    rng = np.random.default_rng(seed)
    base_t, exp_t = types
    a = values(rng, base_t, shapes_[0], lo=-9, hi=9)
    b = values(rng, exp_t, shapes_[1], lo=0, hi=7)
    if np.dtype(exp_t).kind == "f":
        b = np.asarray(np.round(b * 4) / 4).astype(exp_t)  # quarter powers: some NaN from negative bases
    feeds = {"a": a, "b": b}
    model = node_model("Pow", feeds, ["y"], opset=15)
    exact = np.dtype(base_t).kind != "f"
    same_outputs(run_nnkern(model, feeds), run_ort(model, feeds), **({} if exact else dict(rtol=2e-6, atol=1e-30)))


@pytest.mark.parametrize("exponent", [2.0, 3.0, 0.5, -1.0])
def test_pow_scalar_exponent(exponent):
    x = values(np.random.default_rng(3), np.float32, [3, 70])
    for b in (np.array(exponent, np.float32), np.array([exponent], np.float32)):
        model = node_model("Pow", {"x": x}, ["y"], constants={"e": b}, opset=15)
        same_outputs(run_nnkern(model, {"x": x}), run_ort(model, {"x": x}), rtol=2e-6, atol=1e-30)


def test_mod_float_floor_opset28():
    a = np.array([5.5, -5.5, 0, -0.0, np.inf, 5, 5, -5, np.nan, 3, 4, -4], np.float32)
    b = np.array([2, 2, -2, 3, 1, np.inf, -np.inf, np.inf, 1, 0, -2, 2], np.float32)
    for dtype in FLOATS:
        feeds = {"a": a.astype(dtype), "b": b.astype(dtype)}
        for fmod in (0, 1):
            model = node_model("Mod", feeds, ["y"], {"fmod": fmod}, opset=28)
            ours = run_nnkern(model, feeds)
            same_outputs(ours, run_ort(model, feeds))
            assert np.array_equal(np.signbit(ours[0]), np.signbit(run_ort(model, feeds)[0]))


def test_int_edge_cases():
    """Wrapping arithmetic and INT_MIN / -1 (onnxruntime dies of SIGFPE there: nnkern wraps)."""
    for dtype in (np.int8, np.int32, np.int64):
        info = np.iinfo(dtype)
        a = np.array([info.min, info.min, info.max, -7, 7, -7], dtype)
        b = np.array([-1, 1, 1, 2, -2, -2], dtype)
        feeds = {"a": a, "b": b}
        np.testing.assert_array_equal(run_nnkern(node_model("Div", feeds, ["y"]), feeds)[0],
                                      np.array([info.min, info.min, info.max, -3, -3, 3], dtype))
        np.testing.assert_array_equal(run_nnkern(node_model("Mod", feeds, ["y"]), feeds)[0],
                                      np.array([0, 0, 0, 1, -1, -1], dtype))
        np.testing.assert_array_equal(run_nnkern(node_model("Add", feeds, ["y"]), feeds)[0], a + b)
        np.testing.assert_array_equal(run_nnkern(node_model("Abs", {"a": a}, ["y"]), {"a": a})[0], np.abs(a))


@pytest.mark.parametrize("op", ["Div", "Mod"])
@pytest.mark.parametrize("const", [False, True])
def test_integer_division_by_zero(op, const):
    a = np.array([1, 2, 3], np.int32)
    b = np.array([1, 0, 1], np.int32)
    if const:
        model = node_model(op, {"a": a}, ["y"], constants={"b": b})
        with pytest.raises(ValueError, match="by zero"):
            run_nnkern(model, {"a": a})
    else:
        model = node_model(op, {"a": a, "b": b}, ["y"])
        s = nnkern.onnx.InferenceSession(model.SerializeToString())
        with pytest.raises(ValueError, match="by zero"):
            s.run(None, {"a": a, "b": b})
        np.testing.assert_array_equal(s.run(None, {"a": a, "b": b + 1})[0], a // (b + 1) if op == "Div" else a % (b + 1))


@SETTINGS
@given(st.integers(1, 4), st.sampled_from(["Sum", "Mean", "Max", "Min"]), st.sampled_from(NUMERIC),
       st.data())
def test_variadic(k, op, dtype, data):
    shapes_ = data.draw(broadcast_shapes(k))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    feeds = {f"x{i}": values(rng, dtype, s) for i, s in enumerate(shapes_)}
    model = node_model(op, feeds, ["y"], opset=13)
    if ort_runs(op, [dtype] * k):
        same_outputs(run_nnkern(model, feeds), run_ort(model, feeds))
    elif op in ("Max", "Min") or (op == "Mean" and np.dtype(dtype).kind == "f"):
        # int16 / uint16 Max and Min, float64 Mean: numpy, folding left to right
        fold = {"Max": np.maximum, "Min": np.minimum, "Mean": np.add}[op]
        ref = functools.reduce(fold, feeds.values())
        if op == "Mean":
            ref = ref * dtype(1 / k)
        same_outputs(run_nnkern(model, feeds), [np.asarray(ref, dtype)])
    else:  # not an element type of the operator
        with pytest.raises(NotImplementedError):
            run_nnkern(model, feeds)


# ---- logic, bit shifts, Where

@SETTINGS
@given(st.sampled_from(["And", "Or", "Xor"]), broadcast_shapes(), st.integers(0, 2**31))
def test_logic(op, shapes_, seed):
    rng = np.random.default_rng(seed)
    feeds = {"a": values(rng, np.bool_, shapes_[0]), "b": values(rng, np.bool_, shapes_[1])}
    model = node_model(op, feeds, ["y"])
    same_outputs(run_nnkern(model, feeds), run_ort(model, feeds))


@SETTINGS
@given(st.sampled_from(INTS), st.sampled_from(["LEFT", "RIGHT"]), broadcast_shapes(), st.integers(0, 2**31))
def test_bitshift(dtype, direction, shapes_, seed):
    rng = np.random.default_rng(seed)
    bits = np.dtype(dtype).itemsize * 8
    ort = ort_runs("BitShift", [dtype, dtype], {"direction": direction}, opset=11)
    # onnxruntime shifts by the width or more as C++ does (undefined): only opset 28's reference goes there
    feeds = {"a": values(rng, dtype, shapes_[0]), "b": values(rng, dtype, shapes_[1], lo=0, hi=bits - 1 if ort else bits + 2)}
    model = node_model("BitShift", feeds, ["y"], {"direction": direction}, opset=11)
    if not ort:  # signed types (opset 28): a shift past the width leaves the sign fill
        a, b = np.broadcast_arrays(feeds["a"], feeds["b"])
        out = []
        for x, k in zip(a.ravel().tolist(), b.ravel().tolist()):
            if k >= bits:
                v = -1 if direction == "RIGHT" and x < 0 else 0
            else:
                v = x << k if direction == "LEFT" else x >> k
            out.append(v & ((1 << bits) - 1))
        ref = np.array(out, np.uint64).astype(dtype).reshape(a.shape)
        model = node_model("BitShift", feeds, ["y"], {"direction": direction}, opset=28)
        same_outputs(run_nnkern(model, feeds), [ref])
        return
    same_outputs(run_nnkern(model, feeds), run_ort(model, feeds))


@SETTINGS
@given(st.sampled_from(NUMERIC + [np.bool_]), broadcast_shapes(3), st.integers(0, 2**31))
def test_where(dtype, shapes_, seed):
    rng = np.random.default_rng(seed)
    feeds = {"c": values(rng, np.bool_, shapes_[0]), "x": values(rng, dtype, shapes_[1]),
             "y": values(rng, dtype, shapes_[2])}
    if not ort_runs("Where", [np.bool_, dtype, dtype]):
        ref = np.where(feeds["c"], feeds["x"], feeds["y"])
        same_outputs(run_nnkern(node_model("Where", feeds, ["z"]), feeds), [ref])
        return
    model = node_model("Where", feeds, ["z"])
    same_outputs(run_nnkern(model, feeds), run_ort(model, feeds))


# ---- Cast

CAST_TYPES = NUMERIC + [np.bool_, np.float16]
CODES = {np.dtype(t): c for c, t in {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32,
                                       7: np.int64, 9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32,
                                       13: np.uint64}.items()}


@settings(max_examples=250, deadline=None, derandomize=True)
@given(st.sampled_from(CAST_TYPES), st.sampled_from(CAST_TYPES), shapes, st.booleans(), st.integers(0, 2**31))
def test_cast(src, dst, shape, like, seed):
    rng = np.random.default_rng(seed)
    x = values(rng, src, shape)
    if np.dtype(src).kind == "f":  # out-of-range values too: onnxruntime's x86 conversions
        x = np.asarray(x * rng.choice(np.array([1, 1e3, 1e9, 1e19], np.float32), shape)).astype(src)
    if like:
        target = np.zeros([2], dst)
        model = node_model("CastLike", {"x": x}, ["y"], constants={"t": target}, opset=19)
    else:
        model = node_model("Cast", {"x": x}, ["y"], {"to": CODES[np.dtype(dst)]}, opset=19)
    if not ort_runs("Cast", [src], {"to": CODES[np.dtype(dst)]}, opset=19):
        return
    same_outputs(run_nnkern(model, {"x": x}), run_ort(model, {"x": x}))


def test_cast_float16_rounding():
    """float32 and float64 to float16: nearest even, straight from float64 (no double rounding via float32)."""
    h = np.arange(0, 1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    h = h[np.isfinite(h)]
    mids = (h[:-1].astype(np.float64) + np.diff(h.astype(np.float64)) / 2)
    mids = mids[np.isfinite(mids)]
    for x in (h.astype(np.float32), mids.astype(np.float32), mids, mids * (1 + 1e-12), np.array([65519.0, 65520.0, 1e-8, 3e-8])):
        model = node_model("Cast", {"x": x}, ["y"], {"to": 10})
        np.testing.assert_array_equal(run_nnkern(model, {"x": x})[0], x.astype(np.float16))
    y = run_nnkern(node_model("Cast", {"x": h}, ["y"], {"to": 1}), {"x": h})[0]
    np.testing.assert_array_equal(y, h.astype(np.float32))


def test_cast_legacy_string_to():
    x = np.array([1.7, -2.2], np.float32)
    model = node_model("Cast", {"x": x}, ["y"], {"to": "INT32"}, opset=5)
    np.testing.assert_array_equal(run_nnkern(model, {"x": x})[0], np.array([1, -2], np.int32))


# ---- large tensors: the threaded and broadcast fast paths, in place, thread count

@pytest.mark.parametrize("pattern", ["same", "scalar", "channel_nchw", "channel_last", "row", "outer"])
@pytest.mark.parametrize("op", ["Add", "Mul", "Sub", "Div", "Max"])
def test_large_broadcasts(pattern, op):
    rng = np.random.default_rng(7)
    shape = (2, 48, 40, 36)
    bshape = {"same": shape, "scalar": (), "channel_nchw": (1, 48, 1, 1), "channel_last": (36,), "row": (40, 36),
              "outer": (2, 1, 1, 1)}[pattern]
    a = rng.standard_normal(shape).astype(np.float32)
    b = np.asarray(rng.standard_normal(bshape) + 2).astype(np.float32)
    for feeds, consts in (({"a": a}, {"b": b}), ({"a": a, "b": b}, None)):
        model = node_model(op, feeds, ["y"], constants=consts)
        ref = run_ort(model, feeds)
        for threads in (1, 3):
            same_outputs(run_nnkern(model, feeds, num_threads=threads), ref)
        swapped = node_model(op, {"b": b, "a": a}, ["y"])
        same_outputs(run_nnkern(swapped, {"a": a, "b": b}), run_ort(swapped, {"a": a, "b": b}))


def test_in_place_chain():
    """Steps that take over their input's memory: a chain of elementwise ops where an input is read twice."""
    from onnx import helper
    x = np.random.default_rng(1).standard_normal((3, 70000)).astype(np.float32)
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "x"], ["s"]),
             helper.make_node("Mul", ["s", "s"], ["m"]), helper.make_node("Sum", ["m", "s", "m"], ["t"]),
             helper.make_node("Neg", ["t"], ["n"]), helper.make_node("Where", ["c", "n", "t"], ["y"]),
             helper.make_node("Greater", ["x", "r"], ["c"])]
    nodes = nodes[:5] + [nodes[6], nodes[5]]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", 1, x.shape)],
                          [helper.make_tensor_value_info("y", 1, x.shape)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    same_outputs(run_nnkern(model, {"x": x}), run_ort(model, {"x": x}))


# ---- bad inputs: clear errors, never a crash

@pytest.mark.parametrize("op,feeds,attrs,error", [
    ("Add", {"a": np.ones(3, np.float32), "b": np.ones(3, np.int64)}, {}, ValueError),
    ("Where", {"c": np.ones(3, bool), "x": np.ones(3, np.float32), "y": np.ones(3, np.float64)}, {}, ValueError),
    ("Max", {"a": np.ones(3, np.float32), "b": np.ones(3, np.int32), "c": np.ones(3, np.float32)}, {}, ValueError),
    ("Mul", {"a": np.ones((2, 3), np.float32), "b": np.ones((4,), np.float32)}, {}, ValueError),
    ("Equal", {"a": np.ones(3, np.int32), "b": np.ones(3, np.int64)}, {}, ValueError),
    ("PRelu", {"x": np.ones((2, 3), np.float32), "s": np.ones((2, 2, 3), np.float32)}, {}, ValueError),
    ("Mod", {"a": np.ones(3, np.int32), "b": np.ones(3, np.int32)}, {"fmod": 2}, ValueError),
    ("BitShift", {"a": np.ones(3, np.uint8), "b": np.ones(3, np.uint8)}, {"direction": "UP"}, ValueError),
    ("Gelu", {"x": np.ones(3, np.float32)}, {"approximate": "fast"}, ValueError),
    ("Sqrt", {"x": np.ones(3, np.int32)}, {}, NotImplementedError),
    ("Relu", {"x": np.ones(3, np.uint8)}, {}, NotImplementedError),
    ("And", {"a": np.ones(3, np.int32), "b": np.ones(3, np.int32)}, {}, NotImplementedError),
    ("Add", {"a": np.ones(3, np.float16), "b": np.ones(3, np.float16)}, {}, NotImplementedError),
    ("Sum", {"a": np.ones(3, np.int32), "b": np.ones(3, np.int32)}, {}, NotImplementedError),
    ("Cast", {"x": np.ones(3, np.float32)}, {"to": 16}, NotImplementedError),
    ("Cast", {"x": np.ones(3, np.float32)}, {"to": 8}, NotImplementedError),
    ("Add", {"a": np.ones(3, np.float32), "b": np.ones(1, np.float32)}, {"axis": 0, "broadcast": 1},
     NotImplementedError),
])
def test_bad_inputs(op, feeds, attrs, error):
    opset = 20 if op == "Gelu" else 6 if "axis" in attrs else 17
    model = node_model(op, feeds, ["y"], attrs, opset=opset)
    with pytest.raises(error):
        run_nnkern(model, feeds)


def test_clip_bad_bounds():
    x = np.ones(3, np.float32)
    with pytest.raises(ValueError, match="scalar"):
        run_nnkern(node_model("Clip", {"x": x}, ["y"], constants={"lo": np.zeros(2, np.float32)}, opset=13), {"x": x})
    with pytest.raises(ValueError, match="int32"):
        run_nnkern(node_model("Clip", {"x": x}, ["y"], constants={"lo": np.zeros((), np.int32)}, opset=13), {"x": x})
