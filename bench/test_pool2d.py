"""max_pool2d 3x3/2 pad 1 (the ResNet stem's pool) and avg_pool2d 2x2/2 on a 1x112x112x64 NHWC map, uint8
and float32, 1 thread, vs torch (uint8: quantized quint8 channels_last tensors; float32: a channels_last
view, so torch runs its NHWC kernels) and onnxruntime (float32 MaxPool / AveragePool, NCHW as ORT
requires, I/O bound once). Each call returns a new array.

    python -m pytest bench/test_pool2d.py

extra_info: gbytes_per_s (bytes read + written per second / 1e9). Nothing here asserts a timing.
"""
import warnings

import numpy as np
import pytest

import nnkern
from nnkern.bench import anchors as _anchors

SHAPE = (1, 112, 112, 64)  # NHWC
# name: (op, kernel, stride, padding)
POOLS = {"max3x3s2": ("max", 3, 2, 1), "avg2x2s2": ("avg", 2, 2, 0)}


def _ort(op, k, s, p, x_nchw):
    """An onnxruntime session of one MaxPool / AveragePool node, input and output bound once."""
    try:
        from onnx import TensorProto, helper
    except ImportError:
        return None
    out_hw = [(d + 2 * p - k) // s + 1 for d in x_nchw.shape[2:]]
    node = helper.make_node("MaxPool" if op == "max" else "AveragePool", ["X"], ["Y"], kernel_shape=[k, k],
                            strides=[s, s], pads=[p, p, p, p])
    graph = helper.make_graph([node], "pool", [helper.make_tensor_value_info("X", TensorProto.FLOAT, list(x_nchw.shape))],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [*x_nchw.shape[:2], *out_hw])])
    sess = _anchors.ort_session(_anchors.onnx_model_bytes(graph), 1)
    y = np.empty((*x_nchw.shape[:2], *out_hw), np.float32)
    io = sess.io_binding()
    io.bind_cpu_input("X", x_nchw)
    io.bind_output("Y", "cpu", 0, y.dtype, list(y.shape), y.ctypes.data)

    def call(_keep=(x_nchw, y)):  # the bound buffers must outlive the session's use of them
        sess.run_with_iobinding(io)
    return call


def _callables(name, dtype):
    op, k, s, p = POOLS[name]
    rng = np.random.default_rng(_anchors.SEED)
    x = rng.integers(0, 256, size=SHAPE).astype(dtype)
    if op == "max":
        fns = {"nnkern": lambda: nnkern.max_pool2d(x, k, s, p)}
    else:
        fns = {"nnkern": lambda: nnkern.avg_pool2d(x, k, s, p)}
    torch = _anchors._torch()
    if torch is not None:
        F = torch.nn.functional
        t = torch.from_numpy(x).permute(0, 3, 1, 2)  # channels_last memory
        if dtype == "uint8":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t = torch._make_per_tensor_quantized_tensor(t, 1.0, 0)
        fns["torch"] = (lambda: F.max_pool2d(t, k, s, p)) if op == "max" else (lambda: F.avg_pool2d(t, k, s, p))
    if dtype == "float32" and _anchors._import("onnxruntime") is not None:
        fn = _ort(op, k, s, p, np.ascontiguousarray(x.transpose(0, 3, 1, 2)))
        if fn is not None:
            fns["onnxruntime"] = fn
    return fns


@pytest.mark.parametrize("column", ["nnkern", "torch", "onnxruntime"])
@pytest.mark.parametrize("dtype", ["uint8", "float32"])
@pytest.mark.parametrize("pool", list(POOLS))
def test_pool2d(benchmark, pool, dtype, column):
    _anchors.set_threads(1)
    nnkern.set_num_threads(1)
    fns = _callables(pool, dtype)
    if column not in fns:
        why = "onnxruntime's pooling is float32 only here" if column == "onnxruntime" and dtype == "uint8" else \
            f"{column} is not installed"
        pytest.skip(why)
    benchmark.pedantic(fns[column], rounds=7, iterations=50, warmup_rounds=1)
    _, k, s, p = POOLS[pool]
    out = np.prod(SHAPE) // (s * s)
    nbytes = (int(np.prod(SHAPE)) + int(out)) * np.dtype(dtype).itemsize
    benchmark.extra_info.update({"shape": list(SHAPE), "pool": pool, "dtype": dtype,
                                 "gbytes_per_s": nbytes / benchmark.stats.stats.min / 1e9})
