"""QLinear: prepacked int8 weights with the fused requantization epilogue, on every ISA path."""
from __future__ import annotations

import numpy as np
import pytest

import nnkern
from helpers import describe_process, run_concurrently, run_python_isolated
from qhelpers import epilogue_ref, ref_qgemm
from test_qgemm import qisa  # noqa: F401  (the per-ISA fixture)


def make_layer(rng, N, K, odt, relu=False, bias=True, **kw):
    w = rng.standard_normal((N, K)).astype(np.float32)
    b = rng.uniform(-2, 2, N).astype(np.float32) if bias else None
    args = dict(input_scale=0.02, input_zero_point=kw.pop("input_zero_point", 128), output_dtype=odt, relu=relu)
    if odt in (np.uint8, np.int8):
        args.update(output_scale=0.05 * np.sqrt(K) / 4, output_zero_point=100 if odt == np.uint8 else -5)
    args.update(kw)
    return nnkern.QLinear(w, b, **args), w, b


def expected(layer, x):
    """The float32 epilogue (bit-exact) and the float64 formula (for the tie-distance check)."""
    acc = ref_qgemm(x, layer.weight_q.T, layer.input_zero_point, 0)  # M x N
    odt = layer.output_dtype
    if odt == np.int32:
        return epilogue_ref(acc.T, "i32", relu=layer.relu).T, None
    kind = {np.dtype(np.float32): "f32", np.dtype(np.uint8): "u8", np.dtype(np.int8): "s8"}[odt]
    exact32 = epilogue_ref(acc.T, kind, scale=layer.factor, bias=layer.offset, relu=layer.relu,
                           lo=layer._lo, hi=layer._hi).T
    y64 = acc * layer.factor.astype(np.float64) + layer.offset.astype(np.float64)
    return exact32, y64


def test_parameter_errors_name_the_parameter():
    w = np.ones((4, 3), np.float32)
    w[1, 2] = np.nan
    for make in (lambda: nnkern.QLinear(w, input_scale=0.1, input_zero_point=0),
                 lambda: nnkern.QConv2d(w.reshape(4, 1, 1, 3), input_scale=0.1, input_zero_point=0)):
        with pytest.raises(ValueError, match="^weight contains NaN or Inf"):
            make()


def test_requantization_factor_must_be_a_normal_float32():
    """A factor input_scale * weight_scale / output_scale that underflows float32 (the output would no longer
    depend on the input) is refused, as one that overflows is; a channel of zero weights (factor 0) is fine."""
    w = np.ones((4, 3), np.float32)
    for make in (lambda **kw: nnkern.QLinear(w, input_zero_point=0, output_zero_point=0, **kw),
                 lambda **kw: nnkern.QConv2d(w.reshape(4, 1, 1, 3), input_zero_point=0, output_zero_point=0, **kw)):
        with pytest.raises(ValueError, match="underflows float32"):
            make(input_scale=1e-30, output_scale=1e30)
        with pytest.raises(ValueError, match="underflows float32"):
            make(input_scale=1e-40, output_dtype=np.float32)
        with pytest.raises(ValueError, match="overflows float32"):
            make(input_scale=1e30, output_scale=1e-30)
        make(input_scale=1e-10, output_scale=1e10)  # 1e-20 * weight_scale: small, still normal
    zero_channel = w.copy()
    zero_channel[2] = 0
    layer = nnkern.QLinear(zero_channel, input_scale=0.1, input_zero_point=0, output_scale=0.1)
    assert layer.factor[2] > 0 and np.array_equal(layer(np.full((1, 3), 9, np.uint8))[:, 2], [0])


def test_relu_with_int32_output_is_the_accumulators_relu():
    """int32 output is the exact accumulator sum (x - zx) wq; relu=True keeps max(acc, 0), the ReLU of the real
    result in accumulator units (the scales are positive and int32 output has no bias), for QLinear and QConv2d."""
    rng = np.random.default_rng(5)
    w = rng.integers(-127, 128, (6, 9), dtype=np.int8)
    x = rng.integers(0, 256, (5, 9), dtype=np.uint8)
    acc = (x.astype(np.int64) - 100) @ w.T.astype(np.int64)
    args = dict(weight_scale=0.5, input_scale=0.1, input_zero_point=100, output_dtype=np.int32, relu=True)
    assert (acc < 0).any() and (acc > 0).any()
    assert np.array_equal(nnkern.QLinear(w, **args)(x), np.maximum(acc, 0))
    conv = nnkern.QConv2d(w.reshape(6, 1, 1, 9), **args)
    assert np.array_equal(conv(x.reshape(1, 1, 5, 9)).reshape(5, 6), np.maximum(acc, 0))


@pytest.mark.parametrize("odt", [np.uint8, np.int8, np.float32, np.int32])
@pytest.mark.parametrize("relu", [False, True])
def test_qlinear_matches_formula(qisa, rng, odt, relu):
    for (M, N, K) in [(1, 70, 33), (7, 64, 140), (40, 3, 5), (13, 129, 300)]:
        for xdt, zx in ((np.uint8, 128), (np.int8, -3)):
            layer, w, b = make_layer(rng, N, K, odt, relu, bias=odt != np.int32, input_zero_point=zx)
            info = np.iinfo(xdt)
            x = rng.integers(info.min, info.max + 1, (M, K), dtype=xdt)
            got = layer(x)
            want, y64 = expected(layer, x)
            assert got.dtype == odt
            assert np.array_equal(got, want), f"{qisa} {odt.__name__} relu={relu} {M}x{N}x{K} {xdt.__name__}"
            if y64 is not None and odt != np.float32:
                # vs the float64 formula: equal except within a float32 rounding of a .5 tie
                lo, hi = layer._lo, layer._hi
                r64 = np.clip(np.rint(y64), lo, hi)  # ReLU is the clamp at the output zero point (in lo)
                near_tie = np.abs(np.abs(y64 - np.floor(y64)) - 0.5) < 1e-3
                diff = np.abs(got.astype(np.int64) - r64)
                assert (diff[~near_tie] == 0).all() and (diff <= 1).all()
            if odt == np.float32:
                y = (np.maximum(y64, 0) if relu else y64)
                assert np.allclose(got, y, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("order", ["panels", "rows", "rows-block-32", "rows-block-64"])
def test_loop_orders(qisa, rng, order):
    """Both task loop orders of the prepacked GEMMs (panels outer, rows outer with its channel blocks, forced
    on every kernel), on 1 and 2 threads: QLinear with every output type and qgemm with all of B packed
    first, against the references. Tails on every axis: rows past a multiple of NR, channels past MR and past
    a block, K past the kernels' groups and steps."""
    from nnkern import _C
    mode, block = {"panels": (0, 0), "rows": (1, 0), "rows-block-32": (1, 32), "rows-block-64": (1, 64)}[order]
    shapes = [(1, 70, 33), (33, 129, 300), (65, 97, 64), (70, 200, 131)]
    try:
        _C.set_qgemm_rows_outer(mode, block)
        for threads in (1, 2):
            nnkern.set_num_threads(threads)
            for (M, N, K) in shapes:
                for odt in (np.uint8, np.int32):
                    layer, _, _ = make_layer(rng, N, K, odt, bias=odt != np.int32, input_zero_point=117)
                    x = rng.integers(0, 256, (M, K), dtype=np.uint8)
                    assert np.array_equal(layer(x), expected(layer, x)[0]), (order, threads, M, N, K, odt)
                a = rng.integers(-128, 128, (M, K), dtype=np.int8)
                b = rng.integers(-128, 128, (K, N), dtype=np.int8)
                zb = rng.integers(-128, 128, N)
                got = nnkern.qgemm(a, b, a_zero_point=-7, b_zero_point=zb, algorithm="pack_all")
                assert np.array_equal(got, ref_qgemm(a, b, -7, zb)), (order, threads, M, N, K)
    finally:
        _C.set_qgemm_rows_outer(-1, 0)  # (the conftest fixture restores the thread count)


def test_hooks_take_any_size():
    """The blocking test hooks with sizes near 2^64 (which would wrap to 0 when rounded up to a kernel step)
    mean "all of it": the GEMMs finish with the right answer. In a subprocess, so a regression (an endless
    block loop) fails on the timeout instead of hanging the suite."""
    code = """if True:
        import numpy as np, nnkern
        from nnkern import _C
        rng = np.random.default_rng(5)
        a = rng.integers(0, 256, (37, 300), dtype=np.uint8)
        b = rng.integers(-128, 128, (300, 70), dtype=np.int8)
        want = a.astype(np.int64) @ b.astype(np.int64)
        layer = nnkern.QLinear(b.T.copy(), weight_scale=1.0, input_scale=1.0, input_zero_point=0,
                               output_dtype=np.int32)
        for hook in (lambda: _C.set_qgemm_kc(2**64 - 1), lambda: _C.set_qgemm_rows_outer(1, 2**64 - 1)):
            hook()
            assert np.array_equal(nnkern.qgemm(a, b, algorithm="pack_all"), want)
            assert np.array_equal(layer(a), want)
        print("ok")
    """
    proc = run_python_isolated(code, timeout=600)  # (emulated runs start the child through qemu)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", describe_process(proc)


def test_ties_through_qlinear(qisa):
    """Accumulators times 0.5 land on x.5 exactly: round half to even, as np.rint."""
    K, N = 1, 8
    w = np.ones((N, K), np.int8)
    layer = nnkern.QLinear(w, None, weight_scale=0.5, input_scale=1.0, input_zero_point=0, output_scale=1.0,
                           output_zero_point=0, output_dtype=np.int8)
    x = np.arange(-128, 128, dtype=np.int8)[:, None]
    got = layer(x)
    want = np.clip(np.rint(x.astype(np.float64) * 0.5), -128, 127).astype(np.int8)
    assert np.array_equal(got, np.repeat(want, N, axis=1))
    assert got[np.where(x[:, 0] == 5)[0][0], 0] == 2 and got[np.where(x[:, 0] == 7)[0][0], 0] == 4
    assert got[np.where(x[:, 0] == -5)[0][0], 0] == -2


def test_int32_output_is_qgemm(qisa, rng):
    layer, w, _ = make_layer(rng, 77, 201, np.int32, bias=False)
    x = rng.integers(0, 256, (9, 201), dtype=np.uint8)
    assert np.array_equal(layer(x), nnkern.qgemm(x, np.ascontiguousarray(layer.weight_q.T), a_zero_point=128))


def test_int8_weights_given(rng):
    wq = rng.integers(-127, 128, (10, 20), dtype=np.int8)
    ws = rng.uniform(0.01, 0.1, 10).astype(np.float32)
    layer = nnkern.QLinear(wq, None, weight_scale=ws, input_scale=0.1, input_zero_point=0, output_dtype=np.float32)
    x = rng.integers(0, 256, (4, 20), dtype=np.uint8)
    acc = ref_qgemm(x, wq.T)
    assert np.array_equal(layer.weight_q, wq)
    np.testing.assert_allclose(layer(x), acc * (0.1 * ws.astype(np.float64)), rtol=1e-6)


def test_leading_dims_out_and_cap_change(rng):
    layer, w, b = make_layer(rng, 65, 40, np.uint8)
    x = rng.integers(0, 256, (2, 3, 40), dtype=np.uint8)
    out = np.empty((2, 3, 65), np.uint8)
    assert layer(x, out=out) is out
    want = layer(x.reshape(6, 40)).reshape(2, 3, 65)
    assert np.array_equal(out, want)
    for isa in nnkern.supported_isas():  # packed for one kernel, called under every cap
        with nnkern.max_isa(isa):
            assert np.array_equal(layer(x), want), isa


def test_threads_same_results(rng):
    layer, _, _ = make_layer(rng, 300, 256, np.uint8, relu=True)
    xs = [rng.integers(0, 256, (17, 256), dtype=np.uint8) for _ in range(6)]
    want = [layer(x) for x in xs]
    def work(i):  # an exception in a thread is raised by run_concurrently, not lost
        for _ in range(20):
            np.testing.assert_array_equal(layer(xs[i]), want[i])

    run_concurrently(work)


class Subclass(np.ndarray):
    pass


@pytest.mark.parametrize("odt", [np.uint8, np.int8, np.float32, np.int32])
def test_fast_path_matches_the_checked_path(qisa, rng, odt):
    """A plain ndarray, with out None or a plain C-contiguous output, skips the Python checks
    (PackedQLinear.run_fast); an ndarray subclass as out takes the checked path. Both agree bit for bit, leading
    dimensions and empty inputs included."""
    layer, _, _ = make_layer(rng, 37, 70, odt, bias=odt != np.int32, input_zero_point=5)
    for xdt in (np.uint8, np.int8):
        info = np.iinfo(xdt)
        for shape in [(1, 70), (9, 70), (2, 3, 70), (70,), (0, 70), (2, 0, 70)]:
            x = rng.integers(info.min, info.max + 1, shape, dtype=xdt)
            fast = layer._packed.run_fast(x)
            assert fast is not None and fast.dtype == odt and fast.shape == shape[:-1] + (37,)
            sub = np.zeros(shape[:-1] + (37,), odt).view(Subclass)  # declined: the checked path writes it
            assert layer._packed.run_fast(x, sub) is None
            assert layer(x, out=sub) is sub and np.array_equal(fast, sub)
            out = np.zeros_like(fast)
            assert layer._packed.run_fast(x, out) is out and np.array_equal(out, fast)
            assert np.array_equal(layer(x), fast)
    x = rng.integers(0, 256, (4, 70), dtype=np.uint8)
    for declined in (x[:, :69], x.repeat(2, axis=1)[:, ::2], x.astype(np.int16), x.astype(np.float32), x.tolist()):
        assert layer._packed.run_fast(declined) is None
    ro = np.zeros((4, 37), odt)
    ro.flags.writeable = False
    other = np.int16 if odt != np.int8 else np.uint8
    for out in (np.zeros((4, 36), odt), np.zeros((37, 4), odt).T, ro, np.zeros((4, 37), other), [[0] * 37] * 4,
                np.zeros((4, 37), np.dtype(odt).newbyteorder()) if odt in (np.float32, np.int32) else ro):
        assert layer._packed.run_fast(x, out) is None
    buf = np.zeros(4 * 70 + 4 * 37 * 4, np.uint8)  # out overlapping x: declined, then refused by the checks
    xs, outs = buf[:280].reshape(4, 70), buf[200:200 + 4 * 37 * np.dtype(odt).itemsize].view(odt).reshape(4, 37)
    assert layer._packed.run_fast(xs, outs) is None
    with pytest.raises(ValueError, match="overlap"):
        layer(xs, out=outs)


def test_fast_path_declines_a_k_past_the_exact_bound(rng):
    K = nnkern.qgemm_max_k(np.uint8, 0) + 1  # int8 input (bound 131071) is still exact
    layer = nnkern.QLinear(np.ones((1, K), np.int8), weight_scale=1.0, input_scale=1.0, input_zero_point=0,
                           output_dtype=np.int32)
    assert layer._packed.run_fast(np.zeros((1, K), np.uint8)) is None
    with pytest.raises(ValueError, match="exceeds"):
        layer(np.zeros((1, K), np.uint8))
    x = np.full((1, K), -128, np.int8)
    assert layer._packed.run_fast(x) is not None and layer(x)[0, 0] == -128 * K


def test_bad_inputs(rng):
    w = rng.standard_normal((4, 8)).astype(np.float32)
    kw = dict(input_scale=0.1, input_zero_point=0, output_scale=0.1)
    with pytest.raises(TypeError):
        nnkern.QLinear(w.astype(np.float64), **kw)
    with pytest.raises(ValueError, match="weight_scale"):
        nnkern.QLinear(w.astype(np.int8), **kw)
    with pytest.raises(ValueError, match="weight_scale"):
        nnkern.QLinear(w, weight_scale=1.0, **kw)
    for bad in (0.0, -1.0, np.nan):
        with pytest.raises(ValueError, match="input_scale"):
            nnkern.QLinear(w, input_scale=bad, input_zero_point=0, output_scale=0.1)
        with pytest.raises(ValueError, match="output_scale"):
            nnkern.QLinear(w, input_scale=0.1, input_zero_point=0, output_scale=bad)
    with pytest.raises(ValueError, match="output_scale"):
        nnkern.QLinear(w, input_scale=0.1, input_zero_point=0)
    with pytest.raises(ValueError, match="output_zero_point"):
        nnkern.QLinear(w, output_zero_point=300, **kw)
    with pytest.raises(ValueError, match="input_zero_point"):
        nnkern.QLinear(w, input_scale=0.1, input_zero_point=256, output_scale=0.1)
    with pytest.raises(ValueError, match="bias"):
        nnkern.QLinear(w, np.zeros(3, np.float32), **kw)
    with pytest.raises(TypeError, match="output_dtype"):
        nnkern.QLinear(w, output_dtype=np.int16, **kw)
    layer = nnkern.QLinear(w, input_scale=0.1, input_zero_point=200, output_scale=0.1)
    with pytest.raises(TypeError):
        layer(np.zeros((2, 8), np.float32))
    with pytest.raises(ValueError, match="shape"):
        layer(np.zeros((2, 7), np.uint8))
    with pytest.raises(ValueError, match="input_zero_point"):
        layer(np.zeros((2, 8), np.int8))  # 200 is not an int8 zero point
    with pytest.raises(TypeError, match="out"):
        layer(np.zeros((2, 8), np.uint8), out=np.zeros((2, 4), np.int8))
