"""Layers as objects: pickle and deepcopy (weights stored, repacked on load, outputs bit-identical), read-only
weights, from_torch, and the clear error for a module that is not the layer's kind."""
from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import nnkern

F32 = np.float32


def make_layers(rng):
    w = rng.standard_normal((7, 9)).astype(F32)
    b = rng.standard_normal(7).astype(F32)
    lstm = nnkern.LSTM(rng.standard_normal((12, 9)).astype(F32), rng.standard_normal((12, 3)).astype(F32),
                       rng.standard_normal(12).astype(F32), rng.standard_normal(12).astype(F32),
                       batch_first=True, activation="scalef")
    lstm.precompute_embeddings(rng.standard_normal((20, 9)).astype(F32))
    return {
        "Linear": nnkern.Linear(w, b, activation="relu"),
        "Linear-nobias": nnkern.Linear(w),
        "QLinear-u8": nnkern.QLinear(w, b, input_scale=0.03, input_zero_point=120, output_scale=0.07,
                                     output_zero_point=5, relu=True),
        "QLinear-int8w-f32": nnkern.QLinear(np.clip(np.rint(w * 40), -127, 127).astype(np.int8), b,
                                            weight_scale=np.linspace(0.01, 0.02, 7), input_scale=0.5,
                                            input_zero_point=-3, output_dtype=np.float32),
        "QLinear-i32": nnkern.QLinear(w, None, input_scale=0.03, input_zero_point=0, output_dtype=np.int32),
        "QLinear-dynamic": nnkern.QLinear(w, b),
        "LSTM": lstm,
        "QConv2d-u8-residual": nnkern.QConv2d(rng.standard_normal((6, 3, 3, 4)).astype(F32), b[:6], stride=(1, 2),
                                              padding=(1, 0, 2, 1), input_scale=0.03, input_zero_point=120,
                                              output_scale=0.07, output_zero_point=5, relu=True,
                                              residual_scale=0.05, residual_zero_point=9),
        "QConv2d-dw-f32": nnkern.QConv2d(rng.standard_normal((8, 3, 3, 1)).astype(F32), None, groups=4, dilation=2,
                                         padding=2, input_scale=0.5, input_zero_point=-3, output_dtype=np.float32,
                                         algorithm="im2col"),
    }


def outputs(name, layer, rng):
    if name.startswith("LSTM"):
        x = rng.standard_normal((2, 5, 9)).astype(F32)
        ids = rng.integers(0, 20, (2, 5))
        r, t = layer(x), layer.forward_tokens(ids)
        return [r.output, r.h_n, r.c_n, t.output, t.h_n]
    if name.startswith("QConv2d"):
        if name.endswith("residual"):
            x = rng.integers(0, 256, (2, 7, 8, 4)).astype(np.uint8)
            r = rng.integers(0, 256, layer.output_shape(x.shape)).astype(np.uint8)
            return [layer(x, residual=r)]
        return [layer(rng.integers(-128, 128, (2, 7, 8, 4)).astype(np.int8))]
    if name.startswith("QLinear") and not layer.dynamic:
        x8 = rng.integers(-3 if name.endswith("f32") else 0, 127, (4, 9)).astype(
            np.int8 if name.endswith("f32") else np.uint8)
        return [layer(x8)]
    return [layer(rng.standard_normal((4, 9)).astype(F32) * 3)]


@pytest.mark.parametrize("name", list(make_layers(np.random.default_rng(0))))
@pytest.mark.parametrize("how", ["pickle", "deepcopy", "copy"])
def test_round_trip_is_bit_identical(name, how):
    layer = make_layers(np.random.default_rng(1))[name]
    clone = {"pickle": lambda o: pickle.loads(pickle.dumps(o, protocol=pickle.HIGHEST_PROTOCOL)),
             "deepcopy": copy.deepcopy, "copy": copy.copy}[how](layer)
    assert clone is not layer and type(clone) is type(layer) and repr(clone) == repr(layer)
    for got, want in zip(outputs(name, clone, np.random.default_rng(2)), outputs(name, layer, np.random.default_rng(2))):
        assert got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True)


def test_pickle_stores_weights_not_packed_buffers():
    layer = nnkern.Linear(np.ones((3, 4), F32))
    state = layer.__getstate__()
    assert set(state) == {"weight", "bias", "activation", "precision"}  # settings, no packed buffer
    assert len(pickle.dumps(layer)) < 1000


def test_restored_layer_repacks_for_the_current_cap():
    lin = nnkern.Linear(np.random.default_rng(3).standard_normal((5, 6)).astype(F32))
    blob = pickle.dumps(lin)
    with nnkern.max_isa("scalar"):
        restored = pickle.loads(blob)
        assert restored.kernel == nnkern.cpu_info()["kernels"]["f32_gemm"]
    assert lin.kernel == nnkern.cpu_info()["kernels"]["f32_gemm"]
    if restored.kernel != lin.kernel:  # packed for another kernel: still the same layer, within the bound
        x = np.ones((3, 6), F32)
        np.testing.assert_allclose(restored(x), lin(x), rtol=1e-5, atol=1e-5)


def test_weights_are_read_only_copies():
    rng = np.random.default_rng(4)
    w = rng.standard_normal((4, 3)).astype(F32)
    lin = nnkern.Linear(w)
    w[:] = 0  # the caller's array is not the layer's
    assert lin.weight.any() and not lin.weight.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        lin.weight[0, 0] = 1.0
    lstm = make_layers(rng)["LSTM"]
    for name in ("w_ih", "w_hh", "b_ih", "b_hh"):
        assert not getattr(lstm, name).flags.writeable
    ql = make_layers(rng)["QLinear-dynamic"]
    assert ql.weight.dtype == np.int8 and not ql.weight.flags.writeable and ql.weight is ql.weight_q


# --- from_torch -----------------------------------------------------------------------------------------

def _torch():
    return pytest.importorskip("torch", reason="torch is not installed")


def test_linear_from_torch():
    torch = _torch()
    torch.manual_seed(0)
    for bias in (True, False):
        m = torch.nn.Linear(33, 17, bias=bias)
        layer = nnkern.Linear.from_torch(m)
        assert np.array_equal(layer.weight, m.weight.detach().numpy())
        x = torch.randn(6, 33)
        want = m(x).detach().numpy().astype(np.float64)
        np.testing.assert_allclose(layer(x), want, rtol=1e-5, atol=1e-5)
    relu = nnkern.Linear.from_torch(m, activation="relu")
    assert (relu(x) >= 0).all()


def test_qlinear_from_torch_static_and_dynamic():
    torch = _torch()
    torch.manual_seed(1)
    m = torch.nn.Linear(64, 16)
    x = torch.randn(8, 64)
    want = m(x).detach().numpy()
    dyn = nnkern.QLinear.from_torch(m)
    assert dyn.dynamic and dyn.output_dtype == np.float32
    np.testing.assert_allclose(dyn(x), want, atol=0.05 * np.abs(want).max())
    static = nnkern.QLinear.from_torch(m, input_scale=0.05, input_zero_point=128, output_dtype=np.float32)
    xq = nnkern.quantize(x.numpy(), 0.05, 128)
    np.testing.assert_allclose(static(xq), want, atol=0.05 * np.abs(want).max())
    wq, ws = nnkern.quantize_weights(m.weight.detach().numpy())
    assert np.array_equal(static.weight, wq) and np.array_equal(static.weight_scale, ws)
    with pytest.raises(ValueError, match="weight_scale"):
        nnkern.QLinear.from_torch(m, weight_scale=1.0)


def test_from_torch_refuses_other_modules():
    torch = _torch()
    with pytest.raises(TypeError, match="takes a torch.nn.LSTM, got a GRU"):
        nnkern.LSTM.from_torch(torch.nn.GRU(4, 5))
    with pytest.raises(TypeError, match="got an RNN"):
        nnkern.LSTM.from_torch(torch.nn.RNN(4, 5))
    with pytest.raises(TypeError, match="torch.nn.LSTM, got torch.nn.modules.linear.Linear"):
        nnkern.LSTM.from_torch(torch.nn.Linear(4, 5))
    for cls in (nnkern.Linear, nnkern.QLinear):
        with pytest.raises(TypeError, match="torch.nn.Linear, got .*LSTM"):
            cls.from_torch(torch.nn.LSTM(4, 5))
        with pytest.raises(TypeError, match="torch.float64"):
            cls.from_torch(torch.nn.Linear(4, 5).double())


def test_every_from_torch_follows_one_rule():
    """isinstance against torch's own class (a quantized look-alike is a TypeError naming its class, never an
    AttributeError), and float32 parameters only (float64 / half modules are a TypeError for every layer, the
    LSTM included: nothing is converted silently)."""
    torch = _torch()
    qdyn = torch.ao.nn.quantized.dynamic.Linear(4, 5)
    for cls in (nnkern.Linear, nnkern.QLinear):
        with pytest.raises(TypeError, match="float torch.nn.Linear, got torch.ao.nn.quantized.dynamic"):
            cls.from_torch(qdyn)
    conv = torch.nn.Conv2d(3, 4, 3)
    q = dict(input_scale=0.1, input_zero_point=0, output_dtype=np.float32)
    makers = [(nnkern.Linear.from_torch, torch.nn.Linear(4, 5), {}),
              (nnkern.QLinear.from_torch, torch.nn.Linear(4, 5), {}),
              (nnkern.Conv2d.from_torch, conv, {}), (nnkern.QConv2d.from_torch, conv, q),
              (nnkern.LSTM.from_torch, torch.nn.LSTM(4, 5), {})]
    for make, module, kw in makers:
        make(module, **kw)  # float32: accepted
        for dtype in (torch.float64, torch.float16, torch.bfloat16):
            with pytest.raises(TypeError, match=f"{dtype}, not torch.float32"):
                make(module.to(dtype), **kw)
        module.float()
    for make, module, kw in makers:
        with pytest.raises(TypeError, match="takes a float torch.nn"):
            make(torch.nn.ReLU(), **kw)
