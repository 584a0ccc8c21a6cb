"""Property-based suite (hypothesis) over every public op and layer: random shapes (0 and 1 included), views
with any strides (negative, transposed, misaligned), values at the extremes, NaN and Inf, wrong dtypes and
wrong-typed arguments. Each result is checked against a numpy reference, or the call must raise TypeError /
ValueError: nothing else, and never a crash.

Not collected by pytest directly: tests/test_properties.py runs this module in a child process, so a crash
(a signal) fails one test with its output instead of killing the run. Examples per property:
NNKERN_HYPOTHESIS_EXAMPLES (default 150, derandomized: the same examples every run); a longer, random run:
``NNKERN_HYPOTHESIS_EXAMPLES=2000 python -m pytest tests/test_properties.py``.
"""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import nnkern
from nnkern.activations import SIGMOID_MAX_ABS_ERROR, TANH_MAX_ABS_ERROR

# The default (CI) run is derandomized: the same examples every time, so a red CI reproduces. Setting the
# variable gives a random run of that length (hypothesis prints the seed of a failure).
# The quick run (tests/helpers.py: the default, the sanitizer build) runs fewer.
QUICK = (os.environ.get("NNKERN_TEST_EXHAUSTIVE", "") in ("", "0")
         or os.environ.get("NNKERN_TEST_QUICK", "") not in ("", "0"))
EXAMPLES = int(os.environ.get("NNKERN_HYPOTHESIS_EXAMPLES", "40" if QUICK else "150"))
settings.register_profile("nnkern", max_examples=EXAMPLES, deadline=None,
                          derandomize="NNKERN_HYPOTHESIS_EXAMPLES" not in os.environ,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                 HealthCheck.filter_too_much], print_blob=True)
settings.load_profile("nnkern")

F32 = np.float32
EPS = 2.0 ** -24
CLEAR = (TypeError, ValueError)  # what bad input may raise; anything else fails the property

FLOATS = st.one_of(st.floats(-3, 3, width=32), st.floats(width=32))  # moderate values, and every float32
MODERATE = st.floats(-4, 4, width=32)


# --- strategies -----------------------------------------------------------------------------------------

@st.composite
def views(draw, dtype, elements, shape=None, min_dims=0, max_dims=3, max_side=5):
    """An array of ``shape`` (drawn if None) that is a view with arbitrary strides: every axis sliced with a
    step of -3..3, axes permuted, and sometimes a misaligned copy (a byte offset that is not a multiple of
    the item size)."""
    dtype = np.dtype(dtype)
    if shape is None:
        shape = draw(hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=0, max_side=max_side))
    shape = tuple(shape)
    perm = draw(st.permutations(range(len(shape)))) if len(shape) > 1 else list(range(len(shape)))
    pre = tuple(shape[perm.index(i)] for i in range(len(shape)))  # transposed back to `shape` below
    steps = [draw(st.sampled_from([1, 1, 2, -1, -2, 3])) for _ in pre]
    base_shape = tuple(max(1, n * abs(s) + draw(st.integers(0, 2))) for n, s in zip(pre, steps))
    base = draw(hnp.arrays(dtype, base_shape, elements=elements))
    idx = []
    for n, s, length in zip(pre, steps, base_shape):
        span = (n - 1) * abs(s) + 1 if n else 1
        first = draw(st.integers(0, length - span))
        idx.append(slice(first, None, s) if s > 0 else slice(first + span - 1, None, s))
    v = base[tuple(idx)][tuple(slice(0, n) for n in pre)]
    v = v.transpose(perm) if len(shape) > 1 else v  # axis j of v is axis perm[j] of pre
    assert v.shape == shape
    if dtype.itemsize > 1 and draw(st.integers(0, 5)) == 0:
        off = draw(st.integers(1, dtype.itemsize - 1))
        buf = bytearray(v.nbytes + dtype.itemsize)
        m = np.frombuffer(buf, dtype, count=v.size, offset=off).reshape(v.shape)
        m[...] = v
        assert not m.flags.aligned or v.size == 0
        v = m
    return v


def f32_views(**kw):
    return views(F32, FLOATS, **kw)


GARBAGE = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=True), st.text(max_size=3),
                    st.lists(st.floats(-1, 1), max_size=3), st.just({"a": 1}), st.just(object()),
                    hnp.arrays(st.sampled_from([np.float64, np.int32, np.uint8, np.int8, np.int16, np.bool_,
                                                np.complex64, np.float16]),
                               hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3)))


def must_fail_clearly(call):
    """call() may succeed or raise TypeError / ValueError; any other exception fails the property."""
    try:
        call()
    except CLEAR:
        pass


# --- references -----------------------------------------------------------------------------------------

def sigmoid64(x):
    x = x.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(-np.abs(x))
        return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def gemm_check(got, a, b, extra_abs=None, extra_terms=0, alpha=1.0):
    """got vs float64 alpha (a @ b) [+ extra]: NaN where the reference is NaN; within the documented bound
    wherever the float32 product a @ b cannot overflow (there it may become inf, and 0 * inf is NaN)."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(all="ignore"):
        ref = alpha * (a64 @ b64)
        mag = np.abs(a64) @ np.abs(b64)
        bound = (2 * a.shape[-1] + 2 + extra_terms) * EPS * abs(alpha) * mag + 1e-30
        if extra_abs is not None:
            ref = ref + extra_abs
            bound = bound + (2 + extra_terms) * EPS * np.abs(extra_abs)
    assert got.shape == ref.shape and got.dtype == F32
    assert np.isnan(got[np.isnan(ref)]).all()
    ok = np.isfinite(bound) & (mag < 1e37) & np.isfinite(ref) & (np.abs(ref) < 1e37)
    err = np.abs(got.astype(np.float64) - ref)
    assert (err[ok] <= bound[ok]).all(), float(np.max(err[ok] / bound[ok]))


# --- elementwise ----------------------------------------------------------------------------------------

@given(x=f32_views(), method=st.sampled_from(["accurate", "minimax", "scalef"]), fn=st.sampled_from(["sigmoid", "tanh"]),
       in_place=st.booleans())
def test_activations(x, method, fn, in_place):
    before = x.copy()
    ref = sigmoid64(x) if fn == "sigmoid" else np.tanh(x.astype(np.float64))
    bound = (SIGMOID_MAX_ABS_ERROR if fn == "sigmoid" else TANH_MAX_ABS_ERROR)[method]
    f = getattr(nnkern, fn)
    if in_place and x.flags.writeable:
        got = f(x, method=method, out=x)
        assert got is x
    else:
        got = f(x, method=method)
        assert np.array_equal(x, before, equal_nan=True)  # the input is not touched
    assert got.shape == ref.shape and got.dtype == F32
    nan = np.isnan(ref)
    assert np.isnan(got[nan]).all() and not np.isnan(got[~nan]).any()
    assert (np.abs(got[~nan] - ref[~nan]) <= bound).all()


@given(x=f32_views(min_dims=1), k=st.integers(0, 6), axis=st.integers(-3, 2), largest=st.booleans())
def test_topk(x, k, axis, largest):
    if not -x.ndim <= axis < x.ndim or k > x.shape[axis]:
        with pytest.raises(ValueError):
            nnkern.topk(x, k, axis=axis, largest=largest)
        return
    v, i = nnkern.topk(x, k, dim=axis, largest=largest)
    xm = np.moveaxis(x, axis, -1)
    nan = np.isnan(xm)
    val = np.where(nan, 0, xm).astype(np.float64) + 0.0  # -0 -> +0
    n = xm.shape[-1]
    ref = np.empty(xm.shape[:-1] + (k,), np.int64)
    for r in np.ndindex(xm.shape[:-1]):
        keys = (np.arange(n), -val[r], ~nan[r]) if largest else (np.arange(n), val[r], nan[r])
        ref[r] = np.lexsort(keys)[:k]
    assert np.array_equal(np.moveaxis(i, axis, -1), ref)
    assert np.array_equal(np.moveaxis(v, axis, -1).view(np.uint32), np.take_along_axis(xm, ref, -1).view(np.uint32))


# --- GEMM -----------------------------------------------------------------------------------------------

dims = st.integers(0, 7)


@given(data=st.data(), M=dims, N=dims, K=dims, ta=st.booleans(), tb=st.booleans(),
       alpha=st.sampled_from([1.0, -2.0, 0.5, 0.0]), beta=st.sampled_from([0.0, 1.0, -0.5]))
def test_sgemm(data, M, N, K, ta, tb, alpha, beta):
    a = data.draw(f32_views(shape=(K, M) if ta else (M, K)))
    b = data.draw(f32_views(shape=(N, K) if tb else (K, N)))
    c0 = data.draw(views(F32, MODERATE, shape=(M, N)))
    c = np.array(c0)
    got = nnkern.sgemm(a, b, trans_a=ta, trans_b=tb, alpha=alpha, beta=beta, c=c)
    assert got is c
    opa, opb = (a.T if ta else a), (b.T if tb else b)
    extra = beta * c0.astype(np.float64) if beta else None
    gemm_check(got, opa, opb, extra, extra_terms=2, alpha=alpha)


@given(data=st.data(), batch_a=hnp.array_shapes(min_dims=0, max_dims=2, min_side=1, max_side=3),
       batch_b=hnp.array_shapes(min_dims=0, max_dims=2, min_side=1, max_side=3), M=dims, N=dims, K=dims,
       a1=st.booleans(), b1=st.booleans())
def test_matmul(data, batch_a, batch_b, M, N, K, a1, b1):
    a = data.draw(f32_views(shape=(K,) if a1 else tuple(batch_a) + (M, K)))
    b = data.draw(f32_views(shape=(K,) if b1 else tuple(batch_b) + (K, N)))
    try:
        ref_shape = np.matmul(np.zeros(a.shape), np.zeros(b.shape)).shape
    except ValueError:
        with pytest.raises(ValueError):
            nnkern.matmul(a, b)
        return
    got = nnkern.matmul(a, b)
    assert got.shape == ref_shape
    gemm_check(got, a, b)


@given(data=st.data(), N=dims, K=dims, lead=hnp.array_shapes(min_dims=1, max_dims=2, min_side=0, max_side=4),
       bias=st.booleans(), relu=st.booleans())
def test_linear(data, N, K, lead, bias, relu):
    w = data.draw(views(F32, MODERATE, shape=(N, K)))
    b = data.draw(views(F32, MODERATE, shape=(N,))) if bias else None
    x = data.draw(f32_views(shape=tuple(lead) + (K,)))
    layer = nnkern.Linear(w, b, activation="relu" if relu else None)
    got = layer(x)
    rows = int(np.prod(lead))
    x2 = x.reshape(rows, K)
    g2 = got.reshape(rows, N)
    if relu:  # max(y, 0): the positive part within the bound, the rest exactly 0, NaN kept
        with np.errstate(all="ignore"):
            ref = x2.astype(np.float64) @ w.T.astype(np.float64) + (b.astype(np.float64) if bias else 0.0)
            mag = np.abs(x2.astype(np.float64)) @ np.abs(w.T.astype(np.float64)) + (np.abs(b) if bias else 0.0)
            bound = (2 * K + 4) * EPS * mag + 1e-30
        assert np.isnan(g2[np.isnan(ref)]).all()
        ok = np.isfinite(bound) & (mag < 1e37) & np.isfinite(ref)
        assert (g2[ok & (ref < -bound)] == 0).all()
        assert (np.abs(g2[ok] - np.maximum(ref[ok], 0.0)) <= bound[ok]).all()
    else:
        gemm_check(g2, x2, w.T, b.astype(np.float64) if bias else None, extra_terms=2)


# --- integers: bit-exact --------------------------------------------------------------------------------

@given(data=st.data(), M=dims, N=dims, K=dims, a_signed=st.booleans(), per_column=st.booleans())
def test_qgemm(data, M, N, K, a_signed, per_column):
    adt = np.int8 if a_signed else np.uint8
    a = data.draw(views(adt, st.integers(-128 if a_signed else 0, 127 if a_signed else 255), shape=(M, K)))
    b = data.draw(views(np.int8, st.integers(-128, 127), shape=(K, N)))
    za = data.draw(st.integers(-128, 127) if a_signed else st.integers(0, 255))
    zb = data.draw(st.lists(st.integers(-128, 127), min_size=N, max_size=N) if per_column else st.integers(-128, 127))
    got = nnkern.qgemm(a, b, a_zero_point=za, b_zero_point=zb)
    ref = (a.astype(np.int64) - za) @ (b.astype(np.int64) - np.asarray(zb, np.int64))
    assert got.dtype == np.int32 and np.array_equal(got, ref)


@given(data=st.data(), M=dims, N=dims, K=dims)
def test_qgemm16(data, M, N, K):
    a = data.draw(views(np.int16, st.integers(-32768, 32767), shape=(M, K)))
    b = data.draw(views(np.int16, st.integers(-32768, 32767), shape=(K, N)))
    ref = a.astype(np.int64) @ b.astype(np.int64)
    da = int(np.abs(a.astype(np.int64)).max()) if a.size else 0
    db = int(np.abs(b.astype(np.int64)).max()) if b.size else 0
    if M and N and K and K * da * db > 2 ** 31 - 1:
        with pytest.raises(ValueError, match="exceeds"):
            nnkern.qgemm16(a, b)
        return
    assert np.array_equal(nnkern.qgemm16(a, b), ref)


@given(data=st.data(), shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
       signed=st.booleans(), per_channel=st.booleans())
def test_quantize_dequantize(data, shape, signed, per_channel):
    x = data.draw(f32_views(shape=shape))
    lo, hi = (-128, 127) if signed else (0, 255)
    axis = data.draw(st.integers(0, len(shape) - 1)) if per_channel and shape else None
    C = 1 if axis is None else shape[axis]
    scale = np.array(data.draw(st.lists(st.floats(1e-3, 1e3), min_size=C, max_size=C)), F32)
    zp = np.array(data.draw(st.lists(st.integers(lo, hi), min_size=C, max_size=C)), np.int32)
    if axis is None:
        scale, zp = scale[0], int(zp[0])
    bshape = [1] * len(shape)
    if axis is not None:
        bshape[axis] = C
    s, z = np.reshape(scale, bshape).astype(F32), np.reshape(zp, bshape)
    q = nnkern.quantize(x, scale, zp, dtype=np.int8 if signed else np.uint8, axis=axis)
    with np.errstate(all="ignore"):
        ref = np.clip(np.rint(x / s) + z.astype(F32), lo, hi)
    ref = np.where(np.isnan(x), z, ref).astype(q.dtype)
    assert np.array_equal(q, ref)
    back = nnkern.dequantize(q, scale, zp, axis=axis)
    assert np.array_equal(back, (q.astype(F32) - z.astype(F32)) * s)


@given(x=f32_views())
def test_quantize_dynamic(x):
    fin = x[~np.isnan(x)]
    lo = min(F32(fin.min()) if fin.size else F32(0), F32(0))
    hi = max(F32(fin.max()) if fin.size else F32(0), F32(0))
    with np.errstate(all="ignore"):
        width = F32(hi - lo)
    if not (np.isfinite(lo) and np.isfinite(hi) and np.isfinite(width)):
        with pytest.raises(ValueError, match="finite range"):
            nnkern.quantize_dynamic(x)
        return
    q, s, z = nnkern.quantize_dynamic(x)
    assert q.shape == x.shape and q.dtype == np.uint8 and s > 0 and 0 <= z <= 255
    assert np.array_equal(q, nnkern.quantize(x, s, z))


@given(data=st.data(), N=dims, K=dims, lead=hnp.array_shapes(min_dims=1, max_dims=2, min_side=0, max_side=4),
       relu=st.booleans(), out_kind=st.sampled_from(["int32", "float32", "uint8", "dynamic"]))
def test_qlinear(data, N, K, lead, relu, out_kind):
    w = data.draw(views(F32, MODERATE, shape=(N, K)))
    if out_kind == "dynamic":
        layer = nnkern.QLinear(w, None, relu=relu)
        x = data.draw(f32_views(shape=tuple(lead) + (K,)))
        try:
            got = layer(x)
        except ValueError as e:  # only for a range that is not finite: quantize_dynamic says the same
            assert "finite range" in str(e)
            with pytest.raises(ValueError, match="finite range"):
                nnkern.quantize_dynamic(x)
            return
        xq, s, z = nnkern.quantize_dynamic(x)
        rows = int(np.prod(lead))
        acc = (xq.reshape(rows, K).astype(np.int64) - z) @ layer.weight.astype(np.int64).T
        ref = acc.astype(F32).astype(np.float64) * (layer.weight_scale * s).astype(F32)
        ref = np.maximum(ref, 0) if relu else ref
        assert np.array_equal(got.reshape(rows, N), ref.astype(F32))
        return
    zx = data.draw(st.integers(0, 255))
    kw = {"int32": dict(output_dtype=np.int32), "float32": dict(output_dtype=np.float32),
          "uint8": dict(output_dtype=np.uint8, output_scale=0.05, output_zero_point=7)}[out_kind]
    if out_kind == "int32" and relu:
        relu = False
    layer = nnkern.QLinear(w, None, input_scale=0.02, input_zero_point=zx, relu=relu, **kw)
    x = data.draw(views(np.uint8, st.integers(0, 255), shape=tuple(lead) + (K,)))
    rows = int(np.prod(lead))
    got = layer(x).reshape(rows, N)
    acc = (x.reshape(rows, K).astype(np.int64) - zx) @ layer.weight.astype(np.int64).T
    if out_kind == "int32":
        assert np.array_equal(got, acc)
        return
    y = acc.astype(F32).astype(np.float64) * layer.factor + layer.offset
    if out_kind == "float32":
        y = np.maximum(y, 0) if relu else y
        np.testing.assert_array_max_ulp(got, y.astype(F32), maxulp=1)
        return
    lo = 7 if relu else 0
    ref = np.clip(np.rint(y), lo, 255)
    tie = np.abs(np.abs(y - np.floor(y)) - 0.5) < 1e-3  # fma vs float64 rounding may differ at .5 ties
    assert (np.abs(got.astype(np.int64) - ref) <= tie).all()


# --- LSTM -----------------------------------------------------------------------------------------------

def lstm64(x, w_ih, w_hh, b, H):
    seq, batch, _ = x.shape
    h, c = np.zeros((batch, H)), np.zeros((batch, H))
    out = np.zeros((seq, batch, H))
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    for t in range(seq):
        g = x[t] @ w_ih.T + h @ w_hh.T + b
        i, f, gg, o = sig(g[:, :H]), sig(g[:, H:2 * H]), np.tanh(g[:, 2 * H:3 * H]), sig(g[:, 3 * H:])
        c = f * c + i * gg
        h = o * np.tanh(c)
        out[t] = h
    return out, h, c


@given(data=st.data(), seq=st.integers(0, 4), batch=st.integers(0, 3), I=st.integers(0, 5), H=st.integers(0, 4),
       batch_first=st.booleans(), use_lengths=st.booleans())
def test_lstm(data, seq, batch, I, H, batch_first, use_lengths):
    w_ih = data.draw(views(F32, MODERATE, shape=(4 * H, I)))
    w_hh = data.draw(views(F32, MODERATE, shape=(4 * H, H)))
    b = data.draw(views(F32, MODERATE, shape=(4 * H,)))
    layer = nnkern.LSTM(w_ih, w_hh, b, None, batch_first=batch_first)
    x = data.draw(views(F32, MODERATE, shape=(batch, seq, I) if batch_first else (seq, batch, I)))
    lengths = data.draw(st.lists(st.integers(0, seq), min_size=batch, max_size=batch)) if use_lengths else None
    out, (h_n, c_n) = layer(x, lengths=lengths)
    xs = np.swapaxes(x, 0, 1) if batch_first else x
    os_ = np.swapaxes(out, 0, 1) if batch_first else out
    for j in range(batch):
        n = seq if lengths is None else lengths[j]
        ref, h, c = lstm64(xs[:n, j:j + 1].astype(np.float64), w_ih.astype(np.float64), w_hh.astype(np.float64),
                           b.astype(np.float64), H)
        np.testing.assert_allclose(os_[:n, j], ref[:, 0], atol=2e-5)
        assert (os_[n:, j] == 0).all()
        np.testing.assert_allclose(h_n[0, j], h[0], atol=2e-5)
        assert (np.abs(c_n[0, j] - c[0]) <= 1e-4 * (1 + np.abs(c[0]))).all()


# --- wrong-typed arguments ------------------------------------------------------------------------------

OK_F = np.ones((2, 2), F32)
CALLS = {
    "sigmoid": lambda v: nnkern.sigmoid(v), "tanh_method": lambda v: nnkern.tanh(OK_F, method=v),
    "sigmoid_out": lambda v: nnkern.sigmoid(OK_F, out=v), "sgemm_a": lambda v: nnkern.sgemm(v, OK_F),
    "sgemm_alpha": lambda v: nnkern.sgemm(OK_F, OK_F, alpha=v), "sgemm_trans": lambda v: nnkern.sgemm(OK_F, OK_F, trans_a=v),
    "sgemm_c": lambda v: nnkern.sgemm(OK_F, OK_F, c=v), "matmul_b": lambda v: nnkern.matmul(OK_F, v),
    "topk_x": lambda v: nnkern.topk(v, 1), "topk_k": lambda v: nnkern.topk(OK_F, v),
    "topk_dim": lambda v: nnkern.topk(OK_F, 1, dim=v), "topk_largest": lambda v: nnkern.topk(OK_F, 1, largest=v),
    "qgemm_a": lambda v: nnkern.qgemm(v, np.ones((2, 2), np.int8)),
    "qgemm_zp": lambda v: nnkern.qgemm(np.ones((2, 2), np.uint8), np.ones((2, 2), np.int8), a_zero_point=v),
    "qgemm_bzp": lambda v: nnkern.qgemm(np.ones((2, 2), np.uint8), np.ones((2, 2), np.int8), b_zero_point=v),
    "qgemm16_b": lambda v: nnkern.qgemm16(np.ones((2, 2), np.int16), v),
    "qgemm_max_k": lambda v: nnkern.qgemm_max_k(v), "quantize_x": lambda v: nnkern.quantize(v, 0.1),
    "quantize_scale": lambda v: nnkern.quantize(OK_F, v), "quantize_zp": lambda v: nnkern.quantize(OK_F, 0.1, v),
    "quantize_dtype": lambda v: nnkern.quantize(OK_F, 0.1, 0, dtype=v),
    "quantize_axis": lambda v: nnkern.quantize(OK_F, 0.1, 0, axis=v),
    "dequantize_q": lambda v: nnkern.dequantize(v, 0.1), "quantize_dynamic": lambda v: nnkern.quantize_dynamic(v),
    "quantize_weights": lambda v: nnkern.quantize_weights(v),
    "Linear_w": lambda v: nnkern.Linear(v), "Linear_bias": lambda v: nnkern.Linear(OK_F, v),
    "Linear_act": lambda v: nnkern.Linear(OK_F, activation=v), "Linear_x": lambda v: nnkern.Linear(OK_F)(v),
    "QLinear_w": lambda v: nnkern.QLinear(v), "QLinear_scale": lambda v: nnkern.QLinear(OK_F, input_scale=v, input_zero_point=0),
    "QLinear_odt": lambda v: nnkern.QLinear(OK_F, output_dtype=v), "QLinear_x": lambda v: nnkern.QLinear(OK_F)(v),
    "QLinear_relu": lambda v: nnkern.QLinear(OK_F, relu=v),
    "LSTM_w": lambda v: nnkern.LSTM(v, np.ones((4, 1), F32)),
    "LSTM_act": lambda v: nnkern.LSTM(np.ones((4, 2), F32), np.ones((4, 1), F32), activation=v),
    "LSTM_x": lambda v: nnkern.LSTM(np.ones((4, 2), F32), np.ones((4, 1), F32))(v),
    "LSTM_lengths": lambda v: nnkern.LSTM(np.ones((4, 2), F32), np.ones((4, 1), F32))(np.ones((3, 2, 2), F32), lengths=v),
    "set_num_threads": lambda v: nnkern.set_num_threads(v), "set_max_isa": lambda v: nnkern.set_max_isa(v),
}


@given(name=st.sampled_from(sorted(CALLS)), value=GARBAGE)
def test_wrong_arguments_fail_clearly(name, value):
    threads, cap = nnkern.get_num_threads(), nnkern.get_max_isa()
    try:
        must_fail_clearly(lambda: CALLS[name](value))
    finally:
        nnkern.set_num_threads(threads)
        nnkern.set_max_isa(cap)


@given(x=hnp.arrays(st.sampled_from([np.float64, np.float16, np.int32, np.uint8, np.complex64]),
                    hnp.array_shapes(min_dims=1, max_dims=2, min_side=1, max_side=3)))
def test_wrong_dtypes_are_type_errors(x):
    """The float ops never cast: any other dtype is a TypeError naming float32."""
    for call in (lambda: nnkern.sigmoid(x), lambda: nnkern.topk(x, 1), lambda: nnkern.quantize(x, 0.1),
                 lambda: nnkern.matmul(x, x.T), lambda: nnkern.Linear(x)):
        with pytest.raises(TypeError, match="float32"):
            call()
