"""Arrays other than numpy.ndarray: DLPack producers (torch CPU tensors, read without a copy), the buffer
protocol (memoryview, bytearray, array.array), device arrays ("CPU only") and wrong types (TypeError)."""
from __future__ import annotations

import array

import numpy as np
import pytest

import nnkern
from nnkern._arrays import as_array

F32 = np.float32


class FakeDevice:
    """A DLPack producer whose memory is on a CUDA device (nothing else is implemented)."""

    def __init__(self, kind=2):
        self.kind = kind

    def __dlpack_device__(self):
        return (self.kind, 0)

    def __dlpack__(self, *args, **kwargs):  # never reached: the device is checked first
        raise AssertionError("read a device array")


def _torch():
    return pytest.importorskip("torch", reason="torch is not installed (the DLPack tests need a producer)")


def test_torch_tensor_is_viewed_not_copied():
    torch = _torch()
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    a = as_array(t, "x")
    assert a.ctypes.data == t.data_ptr() and a.shape == (3, 4)
    v = as_array(t.T, "x")  # a strided view stays a view
    assert v.ctypes.data == t.data_ptr() and v.strides == (4, 16)


def test_every_op_takes_torch_tensors():
    torch = _torch()
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(5, 7, generator=g), torch.randn(7, 3, generator=g)
    an, bn = a.numpy(), b.numpy()
    assert np.array_equal(nnkern.matmul(a, b), nnkern.matmul(an, bn))
    assert np.array_equal(nnkern.sgemm(a, b, alpha=2.0), nnkern.sgemm(an, bn, alpha=2.0))
    assert np.array_equal(nnkern.sigmoid(a), nnkern.sigmoid(an))
    assert np.array_equal(nnkern.tanh(a, method="minimax"), nnkern.tanh(an, method="minimax"))
    for got, want in zip(nnkern.topk(a, 2, dim=0), nnkern.topk(an, 2, axis=0)):
        assert np.array_equal(got, want)
    q = nnkern.quantize(a, 0.05, 128)
    assert np.array_equal(q, nnkern.quantize(an, 0.05, 128))
    assert np.array_equal(nnkern.dequantize(torch.from_numpy(q), 0.05, 128), nnkern.dequantize(q, 0.05, 128))
    a8 = torch.randint(0, 255, (5, 7), dtype=torch.uint8, generator=g)
    b8 = torch.randint(-128, 127, (7, 3), dtype=torch.int8, generator=g)
    assert np.array_equal(nnkern.qgemm(a8, b8, a_zero_point=3), nnkern.qgemm(a8.numpy(), b8.numpy(), a_zero_point=3))
    a16, b16 = a8.to(torch.int16), b8.to(torch.int16)
    assert np.array_equal(nnkern.qgemm16(a16, b16), nnkern.qgemm16(a16.numpy(), b16.numpy()))
    lin = nnkern.Linear(b.T.contiguous(), torch.zeros(3))
    assert np.array_equal(lin(a), lin(an))
    ql = nnkern.QLinear(b.T.contiguous(), None)
    assert np.array_equal(ql(a), ql(an))
    lstm = nnkern.LSTM(torch.randn(8, 7, generator=g), torch.randn(8, 2, generator=g))
    x = torch.randn(4, 1, 7, generator=g)
    assert np.array_equal(lstm(x).output, lstm(x.numpy()).output)


def test_torch_out_is_written_and_returned():
    torch = _torch()
    a, b = torch.ones(4, 3), torch.ones(3, 2)
    out = torch.zeros(4, 2)
    assert nnkern.matmul(a, b, out=out) is out and torch.all(out == 3)
    y = torch.zeros(4, 3)
    assert nnkern.sigmoid(a, out=y) is y and torch.allclose(y, torch.sigmoid(a))
    t = torch.zeros(5)
    assert nnkern.tanh(t, out=t) is t  # in place through two views of one tensor
    c = torch.zeros(2, 2, dtype=torch.int32)
    assert nnkern.qgemm(torch.ones(2, 3, dtype=torch.uint8), torch.ones(3, 2, dtype=torch.int8), out=c) is c
    assert torch.all(c == 3)


def test_torch_dtype_rules_hold():
    torch = _torch()
    with pytest.raises(TypeError, match="float32"):
        nnkern.sigmoid(torch.zeros(3, dtype=torch.float64))
    with pytest.raises(TypeError, match="float32"):
        nnkern.matmul(torch.zeros(2, 2, dtype=torch.float64), torch.zeros(2, 2))
    with pytest.raises(TypeError, match="uint8 or int8"):
        nnkern.qgemm(torch.zeros(2, 2), torch.zeros(2, 2, dtype=torch.int8))
    with pytest.raises(TypeError, match="DLPack"):  # bfloat16 has no numpy dtype
        nnkern.sigmoid(torch.zeros(3, dtype=torch.bfloat16))
    with pytest.raises(TypeError, match="x:"):  # requires_grad: torch refuses to export it
        nnkern.sigmoid(torch.zeros(3, requires_grad=True))


@pytest.mark.parametrize("kind, name", [(2, "CUDA"), (10, "ROCm"), (99, "device type 99")])
def test_device_arrays_say_cpu_only(kind, name):
    for call in (lambda d: nnkern.sigmoid(d), lambda d: nnkern.matmul(d, np.ones((2, 2), F32)),
                 lambda d: nnkern.topk(d, 1), lambda d: nnkern.quantize(d, 1.0),
                 lambda d: nnkern.Linear(d), lambda d: nnkern.qgemm(d, np.ones((2, 2), np.int8))):
        with pytest.raises(TypeError, match=f"{name}.*CPU only"):
            call(FakeDevice(kind))


def test_buffer_protocol_objects():
    x = np.linspace(-3, 3, 12, dtype=F32)
    mv = memoryview(x.copy()).cast("B").cast("f", (3, 4))
    assert np.array_equal(nnkern.sigmoid(mv), nnkern.sigmoid(x.reshape(3, 4)))
    arr = array.array("f", x.tolist())
    assert np.array_equal(nnkern.topk(arr, 3)[1], nnkern.topk(x, 3)[1])
    buf = bytearray(x.tobytes())
    assert np.array_equal(nnkern.quantize(memoryview(buf).cast("f"), 0.1), nnkern.quantize(x, 0.1))
    q = nnkern.dequantize(bytearray(b"\x00\x80\xff"), 1.0, 128)  # a bytearray is uint8
    assert q.tolist() == [-128.0, 0.0, 127.0]
    out = bytearray(12 * 4)
    nnkern.sigmoid(x, out=memoryview(out).cast("f"))
    assert np.array_equal(np.frombuffer(out, F32), nnkern.sigmoid(x))
    with pytest.raises(ValueError, match="read-only"):
        nnkern.sigmoid(x, out=memoryview(bytes(48)).cast("f"))
    with pytest.raises(TypeError, match="float32"):  # 'd' is float64: the dtype rules hold
        nnkern.sigmoid(array.array("d", [1.0]))


@pytest.mark.parametrize("bad", [[1.0, 2.0], (1.0,), 1.5, "abc", None, {"a": 1}, object()])
def test_wrong_types_name_what_is_expected(bad):
    for name, call in (("x", lambda v: nnkern.sigmoid(v)), ("a", lambda v: nnkern.matmul(v, np.ones((1, 1), F32))),
                       ("b", lambda v: nnkern.sgemm(np.ones((1, 1), F32), v)), ("x", lambda v: nnkern.topk(v, 1)),
                       ("x", lambda v: nnkern.quantize(v, 1.0)), ("q", lambda v: nnkern.dequantize(v, 1.0)),
                       ("a", lambda v: nnkern.qgemm(v, np.ones((1, 1), np.int8))),
                       ("weight", lambda v: nnkern.Linear(v)), ("weight", lambda v: nnkern.QLinear(v)),
                       ("w_ih", lambda v: nnkern.LSTM(v, np.ones((4, 1), F32)))):
        with pytest.raises(TypeError, match=f"{name} must be a numpy.ndarray, or a CPU array exposing DLPack"):
            call(bad)
