"""nnkern.LSTM against a float64 numpy reference (and torch.nn.LSTM when installed), on every ISA level.

The documented bound is per step: from the float32 state a step starts from, its h' and c' are within
the bound of the exact (float64) step. test_each_step_within_the_documented_bound checks every step of a
sequence that way (each step run as its own call from the previous call's state), and
test_sequence_equals_its_chained_steps shows a whole-sequence call gives exactly those bits, so the
whole sequence is checked against float64 step by step. Over a sequence, errors are carried by the
network's dynamics; the end-to-end comparisons (float64, torch) use the sum of the per-step bounds,
which holds for these contracting random networks (weights like torch's default initialization).
"""
from __future__ import annotations


import numpy as np
import pytest

import nnkern
from nnkern import _C
from nnkern.activations import ACTIVATION_METHODS, SIGMOID_MAX_ABS_ERROR, TANH_MAX_ABS_ERROR

from helpers import EPS, QUICK, run_concurrently

GEMM_FACTOR = 2.0  # the documented (2K + 6) eps: 2 per product term of the gate sums


# ---------------------------------------------------------------------------------------------------
# float64 reference

def make_weights(rng, I, H, scale=None, bias=True):
    """float32 weights like torch.nn.LSTM's default initialization, U(-1/sqrt(H), 1/sqrt(H))."""
    s = 1.0 / np.sqrt(max(H, 1)) if scale is None else scale
    u = lambda *shape: rng.uniform(-s, s, shape).astype(np.float32)  # noqa: E731
    return u(4 * H, I), u(4 * H, H), (u(4 * H) if bias else None), (u(4 * H) if bias else None)


def sigmoid64(z):
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def ref_step(x, h, c, w, activation):
    """One exact step from the float32 (x, h, c), rows = batch; returns h', c' and their documented bounds."""
    w_ih, w_hh, b_ih, b_hh = (None if a is None else np.asarray(a, np.float64) for a in w)
    x, h, c = (np.asarray(a, np.float64) for a in (x, h, c))
    H = w_hh.shape[1]
    z = x @ w_ih.T + h @ w_hh.T
    S = np.abs(x) @ np.abs(w_ih).T + np.abs(h) @ np.abs(w_hh).T
    for b in (b_ih, b_hh):
        if b is not None:
            z, S = z + b, S + np.abs(b)
    ez = (GEMM_FACTOR * (w_ih.shape[1] + H) + 6) * EPS * S
    es, et = SIGMOID_MAX_ABS_ERROR[activation], TANH_MAX_ABS_ERROR[activation]
    i, f, g, o = (z[:, k * H:(k + 1) * H] for k in range(4))
    e_i, e_f, e_g, e_o = (ez[:, k * H:(k + 1) * H] for k in range(4))
    i, f, o, g = sigmoid64(i), sigmoid64(f), sigmoid64(o), np.tanh(g)
    e_i, e_f, e_o, e_g = e_i / 4 + es, e_f / 4 + es, e_o / 4 + es, e_g + et
    c1 = f * c + i * g
    e_c = np.abs(c) * e_f + np.abs(g) * e_i + (np.abs(i) + e_i) * e_g + 2 * EPS * (np.abs(f * c) + np.abs(i * g))
    t = np.tanh(c1)
    h1 = o * t
    e_h = np.abs(t) * e_o + (np.abs(o) + e_o) * (e_c + et) + EPS * np.abs(h1)
    return h1, c1, e_h, e_c


def ref_sequence(x, h0, c0, w, activation="accurate", lengths=None):
    """Exact float64 run over x (seq, batch, I) from (h0, c0) (batch, H); the sum of the per-step bounds
    (evaluated along the exact trajectory) is returned as the end-to-end tolerance."""
    seq, batch = x.shape[:2]
    H = w[1].shape[1]
    h = np.zeros((batch, H)) if h0 is None else np.asarray(h0, np.float64)
    c = np.zeros((batch, H)) if c0 is None else np.asarray(c0, np.float64)
    L = np.full(batch, seq) if lengths is None else np.asarray(lengths)
    out = np.zeros((seq, batch, H))
    tol_h, tol_c = np.zeros((batch, H)), np.zeros((batch, H))
    tol_out = np.zeros((seq, batch, H))
    for t in range(seq):
        run = L > t
        h1, c1, e_h, e_c = ref_step(x[t], h, c, w, activation)
        h, c = np.where(run[:, None], h1, h), np.where(run[:, None], c1, c)
        tol_h, tol_c = np.where(run[:, None], tol_h + e_h, tol_h), np.where(run[:, None], tol_c + e_c, tol_c)
        out[t] = np.where(run[:, None], h1, 0.0)
        tol_out[t] = np.where(run[:, None], tol_h, 0.0)
    return out, h, c, tol_out, tol_h, tol_c


def assert_within(got, want, tol, what):
    got64 = np.asarray(got, np.float64)
    assert got64.shape == want.shape, f"{what}: shape {got64.shape} != {want.shape}"
    err = np.abs(got64 - want)
    bad = ~(err <= tol + 1e-30)
    if bad.any():
        idx = tuple(int(v) for v in np.argwhere(bad)[0])
        raise AssertionError(f"{what}: {int(bad.sum())} of {bad.size} outside the bound; first at {idx}: got "
                             f"{got64[idx]!r}, want {want[idx]!r} +- {tol[idx]!r}")


def bits_equal(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def mr_nr(isa):
    _, mr, nr = _C.f32_gemm_tile(isa)
    return mr, nr


def rand(rng, *shape, scale=1.0):
    return (scale * rng.standard_normal(shape)).astype(np.float32)


# ---------------------------------------------------------------------------------------------------
# accuracy

def tail_shapes(isa):
    """(input_size, hidden, batch): hidden around the unit block (MR) and batch around the tile's NR."""
    mr, nr = mr_nr(isa)
    if QUICK:
        return [(3, mr + 1, nr + 1), (mr, 2 * mr - 1, 1)]
    return [(1, 1, 1), (5, mr - 1, nr - 1), (7, mr, nr), (mr + 3, mr + 1, nr + 1), (2 * mr + 1, 2 * mr + 3, 2 * nr + 1),
            (0, 3, 2)]


@pytest.mark.parametrize("activation", ACTIVATION_METHODS)
def test_each_step_within_the_documented_bound(isa, rng, activation):
    seq = 3 if QUICK else 5
    for I, H, B in tail_shapes(isa):
        w = make_weights(rng, I, H, scale=0.5)  # larger than torch's init: gates reach the saturated ranges
        lstm = nnkern.LSTM(*w, activation=activation)
        assert lstm.kernel == nnkern.cpu_info()["kernels"]["f32_gemm"]
        x = rand(rng, seq, B, I)
        h, c = rand(rng, 1, B, H), rand(rng, 1, B, H, scale=2.0)
        for t in range(seq):
            out, (h1, c1) = lstm(x[t:t + 1], (h, c))
            want_h, want_c, e_h, e_c = ref_step(x[t], h[0], c[0], w, activation)
            what = f"{activation} I={I} H={H} B={B} step {t}"
            assert_within(h1[0], want_h, e_h, what + " h")
            assert_within(c1[0], want_c, e_c, what + " c")
            assert bits_equal(out[0], h1[0])
            h, c = h1, c1


def test_sequence_equals_its_chained_steps(isa, rng):
    """A whole-sequence call is bit-identical to one call per step from the previous state: each output
    of the sequence is then one step checked by test_each_step_within_the_documented_bound."""
    mr, nr = mr_nr(isa)
    for I, H, B in [(9, mr + 5, nr + 2), (4, 3, 1)]:
        lstm = nnkern.LSTM(*make_weights(rng, I, H), activation="minimax")
        x = rand(rng, 6, B, I)
        state = (rand(rng, 1, B, H), rand(rng, 1, B, H))
        out, (h_n, c_n) = lstm(x, state)
        h, c = state
        for t in range(x.shape[0]):
            o, (h, c) = lstm(x[t:t + 1], (h, c))
            assert bits_equal(o[0], out[t]), f"step {t}"
        assert bits_equal(h, h_n) and bits_equal(c, c_n)


@pytest.mark.parametrize("activation", ACTIVATION_METHODS)
def test_sequence_against_float64(isa, rng, activation):
    I, H, B, seq = (6, 37, 3, 8) if QUICK else (20, 70, 11, 25)
    w = make_weights(rng, I, H)
    lstm = nnkern.LSTM(*w, activation=activation)
    x = rand(rng, seq, B, I)
    h0, c0 = rand(rng, 1, B, H), rand(rng, 1, B, H)
    out, (h_n, c_n) = lstm(x, (h0, c0))
    want, want_h, want_c, tol, tol_h, tol_c = ref_sequence(x, h0[0], c0[0], w, activation)
    assert_within(out, want, tol, f"{activation} output")
    assert_within(h_n[0], want_h, tol_h, "h_n")
    assert_within(c_n[0], want_c, tol_c, "c_n")
    assert bits_equal(h_n[0], out[-1])
    # The bound is not vacuous: the activation error alone is visible above float32 rounding for the
    # approximate methods, and the result is far closer than any plausible mix-up of gates.
    err = np.abs(out - want).max()
    assert err < 0.05 * np.abs(want).max()
    if activation != "accurate":
        assert err > 1e-6


def test_against_torch(rng):
    torch = pytest.importorskip("torch", reason="torch is not installed: the comparison with torch.nn.LSTM is skipped")
    torch.manual_seed(int(rng.integers(1 << 30)))
    for I, H, B, seq, batch_first in [(10, 33, 4, 7, False), (16, 50, 1, 12, True), (5, 8, 9, 3, False)]:
        m = torch.nn.LSTM(I, H, batch_first=batch_first).eval()
        w = tuple(getattr(m, n).detach().numpy() for n in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"))
        x = rand(rng, B, seq, I) if batch_first else rand(rng, seq, B, I)
        h0, c0 = rand(rng, 1, B, H), rand(rng, 1, B, H)
        with torch.no_grad():
            t_out, (t_h, t_c) = m(torch.from_numpy(x), (torch.from_numpy(h0), torch.from_numpy(c0)))
        xs = x.transpose(1, 0, 2) if batch_first else x
        for activation in ACTIVATION_METHODS:
            lstm = nnkern.LSTM.from_torch(m, activation=activation)
            assert lstm.batch_first == batch_first
            out, (h_n, c_n) = lstm(x, (h0, c0))
            _, _, _, tol, tol_h, tol_c = ref_sequence(xs, h0[0], c0[0], w, activation)
            # torch's own error is within the same accumulated bound (its activations are more accurate)
            tol_out = 2 * (tol.transpose(1, 0, 2) if batch_first else tol)
            assert_within(out, t_out.numpy().astype(np.float64), tol_out, f"vs torch {activation}")
            assert_within(h_n[0], t_h.numpy()[0].astype(np.float64), 2 * tol_h, "h_n vs torch")
            assert_within(c_n[0], t_c.numpy()[0].astype(np.float64), 2 * tol_c, "c_n vs torch")
        # unbatched input, as torch accepts it
        with torch.no_grad():
            t_out1, (t_h1, _) = m(torch.from_numpy(xs[:, 0]))
        out1, (h1, c1) = nnkern.LSTM.from_torch(m)(xs[:, 0])
        assert out1.shape == tuple(t_out1.shape) and h1.shape == tuple(t_h1.shape) == c1.shape
        np.testing.assert_allclose(out1, t_out1.numpy(), atol=1e-5)


def test_nan_propagates_per_sequence_and_inf_saturates(isa, rng):
    I, H, B, seq = 4, 21, 5, 6
    lstm = nnkern.LSTM(*make_weights(rng, I, H))
    x = rand(rng, seq, B, I)
    x[2, 1, 3] = np.nan
    x[4, 3, 0] = np.inf  # gate pre-activations +-inf: sigmoid 1 / 0, tanh +-1, as in torch
    out, (h_n, c_n) = lstm(x)
    assert np.isfinite(out[:2]).all()
    assert np.isnan(out[2:, 1]).all() and np.isnan(h_n[0, 1]).all() and np.isnan(c_n[0, 1]).all()
    for b in (0, 2, 3, 4):  # the other sequences never see the NaN
        assert np.isfinite(out[:, b]).all() and np.isfinite(h_n[0, b]).all() and np.isfinite(c_n[0, b]).all()
    assert np.abs(out[4:, 3]).max() <= 1.0
    # at the inf step every gate of sequence 3 saturates exactly: i, f, o in {0, 1} and g = +-1, so
    # c' = f c + i g is one of 0, +-1, c, c +- 1 (rounded), with c the state before it
    _, (_, c3) = lstm(x[:4, 3:4])
    _, (_, c4) = lstm(x[:5, 3:4])
    c3 = c3.ravel()
    options = np.stack([np.zeros_like(c3), np.ones_like(c3), -np.ones_like(c3), c3, c3 + np.float32(1), c3 - np.float32(1)])
    assert (c4.ravel() == options).any(axis=0).all()
    w = list(make_weights(rng, I, H))
    w[1][5, 2] = np.nan  # a NaN weight of W_hh reaches every sequence from step 1 on
    out, _ = nnkern.LSTM(*w)(x)
    assert np.isnan(out[1:, [0, 2, 4]]).any(axis=-1).all()


def test_saturated_gates_stay_in_range(isa, rng):
    """Huge pre-activations: sigmoid/tanh saturate, h stays in [-1, 1] and c stays finite."""
    I, H = 3, 19
    w_ih, w_hh, b_ih, b_hh = make_weights(rng, I, H, scale=50.0)
    for activation in ACTIVATION_METHODS:
        out, (h, c) = nnkern.LSTM(w_ih, w_hh, b_ih, b_hh, activation=activation)(rand(rng, 9, 4, I, scale=30.0))
        assert np.isfinite(out).all() and np.abs(out).max() <= 1.0 and np.isfinite(c).all()


# ---------------------------------------------------------------------------------------------------
# lengths (dynamic batch, seed I20)

def test_lengths_equal_running_each_sequence_alone(isa, rng):
    mr, nr = mr_nr(isa)
    I, H, seq = 7, mr + 3, 9
    B = 2 * nr + 3
    lstm = nnkern.LSTM(*make_weights(rng, I, H))
    x = rand(rng, seq, B, I)
    lengths = rng.integers(0, seq + 1, B)
    lengths[:3] = [seq, 0, seq]  # ties, an empty sequence, the full length
    h0, c0 = rand(rng, 1, B, H), rand(rng, 1, B, H)
    r = lstm(x, (h0, c0), lengths=lengths)
    out, (h_n, c_n) = r
    for b in range(B):
        L = int(lengths[b])
        alone, (h1, c1) = lstm(x[:L, b:b + 1], (h0[:, b:b + 1], c0[:, b:b + 1]))
        assert bits_equal(out[:L, b], alone[:, 0]), f"sequence {b} (length {L})"
        assert not out[L:, b].any(), f"sequence {b}: output beyond its length must be zero"
        assert bits_equal(h_n[0, b], h1[0, 0]) and bits_equal(c_n[0, b], c1[0, 0])
    assert bits_equal(h_n[0, 1], h0[0, 1]) and bits_equal(c_n[0, 1], c0[0, 1])  # length 0 keeps the state
    # the accounting of seed I20's table
    useful = int(lengths.sum())
    assert r.steps_useful == useful and r.steps_computed == useful and r.wasted_fraction == 0.0
    assert r.steps_padded == B * int(lengths.max())
    assert r.static_wasted_fraction == pytest.approx((B * lengths.max() - useful) / useful)


def test_lengths_against_float64_and_batch_first(rng):
    I, H, B, seq = 5, 30, 6, 8
    w = make_weights(rng, I, H)
    x = rand(rng, seq, B, I)
    lengths = np.array([3, 8, 1, 8, 5, 2], np.int32)
    want, want_h, want_c, tol, tol_h, tol_c = ref_sequence(x, None, None, w, "accurate", lengths)
    out, (h_n, c_n) = nnkern.LSTM(*w)(x, lengths=lengths)
    assert_within(out, want, tol, "output")
    assert_within(h_n[0], want_h, tol_h, "h_n")
    assert_within(c_n[0], want_c, tol_c, "c_n")
    out_bf, (h_bf, c_bf) = nnkern.LSTM(*w, batch_first=True)(np.ascontiguousarray(x.transpose(1, 0, 2)),
                                                             lengths=list(lengths))
    assert out_bf.shape == (B, seq, H)
    assert bits_equal(out_bf.transpose(1, 0, 2), out) and bits_equal(h_bf, h_n) and bits_equal(c_bf, c_n)


def test_lengths_all_full_equals_no_lengths(rng):
    lstm = nnkern.LSTM(*make_weights(rng, 6, 20))
    x = rand(rng, 5, 4, 6)
    a = lstm(x)
    b = lstm(x, lengths=np.full(4, 5, np.uint8))
    assert bits_equal(a[0], b[0]) and bits_equal(a[1][0], b[1][0]) and bits_equal(a[1][1], b[1][1])
    assert a.static_wasted_fraction == 0.0 and a.steps_computed == 20


def test_seed_table_accounting():
    """Two sentences of 10 and 5 words padded to 10: a third of the padded work is waste (I20's 'Static')."""
    lstm = nnkern.LSTM(np.zeros((8, 1), np.float32), np.zeros((8, 2), np.float32))
    r = lstm(np.zeros((10, 2, 1), np.float32), lengths=[10, 5])
    assert (r.steps_useful, r.steps_computed, r.steps_padded) == (15, 15, 20)
    assert r.wasted_fraction == 0.0 and r.static_wasted_fraction == pytest.approx(5 / 15)


# ---------------------------------------------------------------------------------------------------
# embedding fusion (seed I17)

def test_forward_tokens_equals_lookup_then_forward(isa, rng):
    vocab, I, H, seq, B = 50, 12, 29, 6, 5
    for batch_first in (False, True):
        lstm = nnkern.LSTM(*make_weights(rng, I, H), batch_first=batch_first, activation="scalef")
        table = rand(rng, vocab, I)
        lstm.precompute_embeddings(table)
        assert lstm.projected_embeddings.shape == (vocab, 4 * H)
        ids = rng.integers(0, vocab, (B, seq) if batch_first else (seq, B))
        lengths = np.array([6, 2, 0, 6, 3])
        hx = (rand(rng, 1, B, H), rand(rng, 1, B, H))
        for kw in ({}, {"lengths": lengths}):
            want = lstm(table[ids], hx, **kw)
            got = lstm.forward_tokens(ids, hx, **kw)
            assert bits_equal(got[0], want[0]) and bits_equal(got[1][0], want[1][0]) and bits_equal(got[1][1], want[1][1])
        got1 = lstm.forward_tokens(ids[0] if batch_first else ids[:, 0])  # unbatched
        want1 = lstm(table[ids[0] if batch_first else ids[:, 0]])
        assert bits_equal(got1[0], want1[0])


def test_forward_tokens_bad_ids(rng):
    lstm = nnkern.LSTM(*make_weights(rng, 4, 6))
    with pytest.raises(RuntimeError, match="precompute_embeddings"):
        lstm.forward_tokens(np.zeros((2, 1), np.int64))
    lstm.precompute_embeddings(rand(rng, 10, 4))
    for bad in (np.array([[10]]), np.array([[-1]]), np.array([[3, 2**40]])):
        with pytest.raises(ValueError, match=r"\[0, 10\)"):
            lstm.forward_tokens(bad)
    with pytest.raises(TypeError):
        lstm.forward_tokens(np.zeros((2, 1), np.float32))
    with pytest.raises(TypeError):
        lstm.forward_tokens([[1, 2]])
    with pytest.raises(ValueError):
        lstm.forward_tokens(np.zeros((2, 1, 1), np.int64))
    with pytest.raises(ValueError, match="table"):
        lstm.precompute_embeddings(rand(rng, 10, 5))
    with pytest.raises(TypeError):
        lstm.precompute_embeddings(np.zeros((10, 4)))
    out, (h, c) = lstm.forward_tokens(np.zeros((0, 3), np.uint16))
    assert out.shape == (0, 3, 6) and not h.any() and not c.any()


# ---------------------------------------------------------------------------------------------------
# threads, layouts, caps

def test_thread_count_gives_bit_identical_results(isa, rng):
    I, H, B, seq = 40, 150, 13, 4  # enough work per step to split over threads
    lstm = nnkern.LSTM(*make_weights(rng, I, H))
    x = rand(rng, seq, B, I)
    lengths = rng.integers(1, seq + 1, B)
    results = []
    for n in (1, 2, 3):
        nnkern.set_num_threads(n)
        results.append(lstm(x, lengths=lengths))
        results.append(lstm(x[:, :1]))  # batch 1: the GEMV-shaped steps
    for k in (0, 1):
        for r in results[k + 2::2]:
            assert bits_equal(r[0], results[k][0]) and bits_equal(r[1][1], results[k][1][1])


def test_concurrent_python_threads_identical(isa, rng):
    I, H = 16, 60
    lstm = nnkern.LSTM(*make_weights(rng, I, H))
    lstm.precompute_embeddings(rand(rng, 30, I))
    xs = [rand(rng, 5, b, I) for b in (1, 3, 9, 4)]
    ids = rng.integers(0, 30, (5, 7))
    want = [lstm(x) for x in xs] + [lstm.forward_tokens(ids)]
    got = {}

    def work(t):
        for rep in range(4):
            i = (t + rep) % len(want)
            got[(t, rep)] = (i, lstm.forward_tokens(ids) if i == len(xs) else lstm(xs[i]))

    run_concurrently(work)
    assert len(got) == 24
    for i, r in got.values():
        assert bits_equal(r[0], want[i][0]) and bits_equal(r[1][1], want[i][1][1])


def padded_rows(x):
    buf = np.full(x.shape[:-1] + (x.shape[-1] + 3,), np.nan, np.float32)
    buf[..., :x.shape[-1]] = x
    return buf[..., :x.shape[-1]]


def test_layouts_are_read_in_place_or_copied(rng):
    I, H, B, seq = 6, 11, 4, 5
    lstm = nnkern.LSTM(*make_weights(rng, I, H))
    x = rand(rng, seq, B, I)
    want = lstm(x)[0]
    big = rand(rng, seq * 2, B + 3, I * 2)
    big[::2, 1:B + 1, ::2] = x
    views = [
        np.asfortranarray(x),                              # copied (features strided)
        big[::2, 1:B + 1, ::2],                            # copied
        padded_rows(x),                                    # rows further apart than I: read in place
        np.ascontiguousarray(x[::-1])[::-1],               # negative time stride: copied
    ]
    raw = np.zeros(x.nbytes + 1, np.uint8)
    mis = raw[1:].view(np.float32).reshape(x.shape)  # misaligned float32 data: copied
    mis[...] = x
    views.append(mis)
    for v in views:
        assert bits_equal(lstm(v)[0], want)
    # h0 / c0 views
    h0, c0 = rand(rng, 1, B, H), rand(rng, 1, B, H)
    a = lstm(x, (h0, c0))
    b = lstm(x, (np.asfortranarray(h0), c0[:, :, ::-1][:, :, ::-1]))
    assert bits_equal(a[0], b[0])


def test_batch_first_and_unbatched_match(rng):
    I, H, B, seq = 5, 17, 3, 6
    w = make_weights(rng, I, H)
    x = rand(rng, seq, B, I)
    a = nnkern.LSTM(*w)(x)
    b = nnkern.LSTM(*w, batch_first=True)(x.transpose(1, 0, 2))  # a strided view, read in place
    assert b[0].shape == (B, seq, H) and b[1][0].shape == (1, B, H)
    assert bits_equal(b[0].transpose(1, 0, 2), a[0])
    one = nnkern.LSTM(*w)(x[:, 1])
    assert one[0].shape == (seq, H) and one[1][0].shape == (1, H)
    assert bits_equal(one[0], a[0][:, 1]) and bits_equal(one[1][1], a[1][1][:, 1])


def test_under_a_different_cap_than_at_construction(rng):
    I, H, B = 9, 40, 5
    w = make_weights(rng, I, H)
    x = rand(rng, 4, B, I)
    table = rand(rng, 12, I)
    ids = rng.integers(0, 12, (4, B))
    for used in nnkern.supported_isas():
        with nnkern.max_isa(used):
            want = nnkern.LSTM(*w)(x)
        for built in nnkern.supported_isas():
            with nnkern.max_isa(built):
                lstm = nnkern.LSTM(*w)
                lstm.precompute_embeddings(table)
            with nnkern.max_isa(used):
                assert bits_equal(lstm(x)[0], want[0]), f"built under {built}, called under {used}"
                got, ref = lstm.forward_tokens(ids)[0], lstm(table[ids])[0]
            # the table holds the projection of the kernel that computed it (the cap of precompute_embeddings)
            if built == used:
                assert bits_equal(got, ref)
            else:
                np.testing.assert_allclose(got, ref, atol=1e-5)


def test_copies_its_weights(rng):
    w = make_weights(rng, 4, 9)
    lstm = nnkern.LSTM(*w)
    x = rand(rng, 3, 2, 4)
    before = lstm(x)[0]
    for a in w:
        a[...] = 0
    assert bits_equal(lstm(x)[0], before)


# ---------------------------------------------------------------------------------------------------
# hostile input

def test_bad_constructor_arguments():
    f = np.float32
    w_ih, w_hh, b = np.ones((12, 2), f), np.ones((12, 3), f), np.ones(12, f)
    with pytest.raises(TypeError):
        nnkern.LSTM(w_ih.astype(np.float64), w_hh)
    with pytest.raises(TypeError):
        nnkern.LSTM(w_ih, w_hh.tolist())
    with pytest.raises(TypeError):
        nnkern.LSTM(w_ih, w_hh, b.astype(np.float16))
    with pytest.raises(ValueError, match="4 \\* hidden_size"):
        nnkern.LSTM(np.ones((10, 2), f), w_hh)
    with pytest.raises(ValueError, match="w_hh"):
        nnkern.LSTM(w_ih, np.ones((12, 4), f))
    with pytest.raises(ValueError, match="w_hh"):
        nnkern.LSTM(w_ih, np.ones((16, 4), f))
    with pytest.raises(ValueError):
        nnkern.LSTM(w_ih[None], w_hh)
    with pytest.raises(ValueError, match="b_hh"):
        nnkern.LSTM(w_ih, w_hh, b, np.ones(11, f))
    with pytest.raises(ValueError, match="activation"):
        nnkern.LSTM(w_ih, w_hh, activation="fast")


def test_bad_call_arguments(rng):
    lstm = nnkern.LSTM(*make_weights(rng, 4, 6))
    x = rand(rng, 5, 3, 4)
    with pytest.raises(TypeError):
        lstm(x.astype(np.float64))
    with pytest.raises(TypeError):
        lstm(x.tolist())
    with pytest.raises(ValueError, match="input_size"):
        lstm(rand(rng, 5, 3, 5))
    with pytest.raises(ValueError, match="3-D"):
        lstm(rand(rng, 5, 3, 1, 4))
    with pytest.raises(ValueError, match="3-D"):
        lstm(rand(rng, 4))
    h = rand(rng, 1, 3, 6)
    for bad in (rand(rng, 3, 6), rand(rng, 1, 3, 7), rand(rng, 2, 3, 6), rand(rng, 1, 2, 6)):
        with pytest.raises(ValueError, match="h0"):
            lstm(x, (bad, h))
        with pytest.raises(ValueError, match="c0"):
            lstm(x, c0=bad)
    with pytest.raises(TypeError):
        lstm(x, (h, h.astype(np.float64)))
    with pytest.raises(TypeError):
        lstm(x, h)
    with pytest.raises(ValueError, match="either"):
        lstm(x, (h, h), h0=h)
    for bad in ([5, 5], [5, 5, 6], [5, -1, 2], np.ones((3, 1), int)):
        with pytest.raises(ValueError, match="lengths"):
            lstm(x, lengths=bad)
    for bad in ([5.0, 5.0, 5.0], np.array([True, True, False])):
        with pytest.raises(TypeError, match="lengths"):
            lstm(x, lengths=bad)
    with pytest.raises(ValueError, match="lengths"):
        lstm(x[:, 0], lengths=[5])


def test_empty_shapes(rng):
    I, H = 4, 6
    lstm = nnkern.LSTM(*make_weights(rng, I, H))
    h0, c0 = rand(rng, 1, 3, H), rand(rng, 1, 3, H)
    r = lstm(rand(rng, 0, 3, I), (h0, c0))  # no steps: the state passes through
    assert r[0].shape == (0, 3, H) and bits_equal(r[1][0], h0) and bits_equal(r[1][1], c0)
    assert r.steps_computed == 0 and r.wasted_fraction == 0.0
    r = lstm(rand(rng, 5, 0, I))
    assert r[0].shape == (5, 0, H) and r[1][0].shape == (1, 0, H)
    r = lstm(rand(rng, 5, 3, I), lengths=[0, 0, 0])
    assert not r[0].any() and not r[1][0].any() and r.static_wasted_fraction == 0.0
    out, (h, c) = lstm(rand(rng, 0, I))
    assert out.shape == (0, H) and h.shape == (1, H)
    # no input features: the gates are bias + recurrence only
    w = make_weights(rng, 0, H)
    out, _ = nnkern.LSTM(*w)(np.zeros((3, 2, 0), np.float32))
    want = ref_sequence(np.zeros((3, 2, 0), np.float32), None, None, w)
    assert_within(out, want[0], want[3], "input_size 0")
    # no hidden units
    out, (h, c) = nnkern.LSTM(np.zeros((0, 3), np.float32), np.zeros((0, 0), np.float32))(rand(rng, 4, 2, 3))
    assert out.shape == (4, 2, 0) and h.shape == (1, 2, 0)
