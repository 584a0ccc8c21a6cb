"""NNKERN_VERBOSE=1: one line per call on stderr (op, kernel, algorithm, shapes, threads, time); nothing
wrapped, so nothing paid, when it is off."""
from __future__ import annotations

import os

import nnkern
from helpers import describe_process, run_python_isolated

CALLS = """
import numpy as np, nnkern
f = np.float32
a, b = np.ones((4, 3), f), np.ones((3, 5), f)
nnkern.sgemm(a, b)
nnkern.matmul(np.ones((2, 1, 3), f), b)
nnkern.matmul(np.ones(3, f), b)
nnkern.sigmoid(a)
nnkern.tanh(a, method="minimax")
nnkern.topk(a, 2, largest=False)
nnkern.qgemm(np.ones((2, 3), np.uint8), np.ones((3, 2), np.int8))
nnkern.qgemm16(np.ones((2, 3), np.int16), np.ones((3, 2), np.int16))
q = nnkern.quantize(a, 0.1, axis=1, zero_point=[1, 2, 3], dtype=np.uint8)
nnkern.dequantize(q, 0.1)
nnkern.quantize_dynamic(a)
nnkern.Linear(np.ones((5, 3), f))(a)
nnkern.QLinear(np.ones((5, 3), f))(a)
nnkern.LSTM(np.ones((8, 3), f), np.ones((8, 2), f))(np.ones((6, 1, 3), f))
nnkern.QConv2d(np.ones((5, 3, 3, 2), f), input_scale=0.1, input_zero_point=0, output_dtype=np.int32,
               padding=1)(np.ones((1, 5, 5, 2), np.uint8))
x4 = np.ones((1, 6, 6, 4), f)
nnkern.conv2d(x4, np.ones((3, 1, 1, 4), f))
nnkern.Conv2d(np.ones((8, 3, 3, 4), f), padding=1, algorithm="indirect")(x4)
nnkern.InvertedResidual(nnkern.Conv2d(np.ones((8, 1, 1, 4), f)), nnkern.Conv2d(np.ones((8, 3, 3, 1), f), groups=8,
                        padding=1), nnkern.Conv2d(np.ones((4, 1, 1, 8), f)), residual=True)(x4)
nnkern.max_pool2d(x4, 2)
nnkern.avg_pool2d(np.ones((1, 6, 6, 4), np.uint8), 3, 1, 1)
nnkern.pixel_shuffle(x4, 2, layout="NHWC")
nnkern.pixel_unshuffle(np.ones((1, 4, 6, 6), f), 3)
nnkern.from_bf16(nnkern.to_bf16(a, np.empty(a.shape, np.uint16)))
nnkern.matmul(a, b, precision="medium")
nnkern.Linear(np.ones((5, 3), f), precision="medium")(a)
try:
    nnkern.sigmoid(np.ones(2))  # a failing call logs nothing
except TypeError:
    pass
print(nnkern.cpu_info()["kernels"]["f32_gemm"], nnkern.get_num_threads())
"""

EXPECTED = ["sgemm", "matmul", "matmul", "sigmoid", "tanh", "topk", "qgemm", "qgemm16", "quantize", "dequantize",
            "quantize_dynamic", "Linear", "QLinear", "LSTM", "QConv2d", "conv2d", "Conv2d", "InvertedResidual",
            "max_pool2d", "avg_pool2d", "pixel_shuffle", "pixel_unshuffle", "to_bf16", "from_bf16", "matmul", "Linear"]
# The public callables that compute nothing on arrays (settings, queries, parameter helpers) and LSTMOutput (a
# result type): everything else in nnkern.__all__ must log a line (EXPECTED).
NOT_OPS = {"ISA_LEVELS", "cpu_info", "get_max_isa", "max_isa", "set_max_isa", "supported_isas", "get_num_threads",
           "set_num_threads", "LSTMOutput", "qgemm_max_k", "quantize_weights", "dynamic_quantization_params",
           "float32_precision", "get_float32_precision", "set_float32_precision"}


def run(value):
    env = dict(os.environ)
    env.pop("NNKERN_VERBOSE", None)
    if value is not None:
        env["NNKERN_VERBOSE"] = value
    proc = run_python_isolated(CALLS, env=env)
    assert proc.returncode == 0, describe_process(proc)
    return proc


def test_one_line_per_call():
    proc = run("1")
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("nnkern_verbose,")]
    assert [ln.split(",")[2] for ln in lines] == EXPECTED, proc.stderr
    gemm_kernel, threads = proc.stdout.split()
    fields = {ln.split(",")[2] + str(i): ln.split(",") for i, ln in enumerate(lines)}
    for f in fields.values():
        assert len(f) == 8 and f[1] == "exec" and f[6] == f"threads:{threads}"
        assert float(f[7]) >= 0.0
    sgemm = fields["sgemm0"]
    assert sgemm[3] == gemm_kernel and sgemm[4] in nnkern._C.algorithms("sgemm")
    assert sgemm[5] == "a:float32[4x3] b:float32[3x5]"
    assert fields["matmul1"][5] == "a:float32[2x1x3] b:float32[3x5]"
    assert fields["matmul2"][4] in ("dot", "rows")  # a 1-D a is one row
    assert fields["sigmoid3"][4] == "accurate" and fields["tanh4"][4] == "minimax"
    assert fields["topk5"][4].endswith("/smallest")
    assert fields["quantize8"][4] == "per-channel(axis=1)" and fields["dequantize9"][4] == "per-tensor"
    assert fields["QLinear12"][4] == "dynamic->float32"
    assert fields["LSTM13"][4] == "lstm-accurate" and fields["LSTM13"][5] == "x:float32[6x1x3]"
    assert fields["QConv2d14"][4] == "indirect->int32" and fields["QConv2d14"][5] == "x:uint8[1x5x5x2]"
    assert fields["conv2d15"][4] in nnkern._C.algorithms("conv2d") and fields["Conv2d16"][4] == "indirect"
    assert fields["conv2d15"][5] == "x:float32[1x6x6x4] weight:float32[3x1x1x4]"
    assert fields["InvertedResidual17"][4].startswith("bands(rows=")
    assert fields["max_pool2d18"][4] == "max" and fields["avg_pool2d19"][5] == "x:uint8[1x6x6x4]"
    assert fields["pixel_shuffle20"][4] == "r=2:NHWC" and fields["pixel_unshuffle21"][4] == "r=3:NCHW"
    assert fields["to_bf16" + "22"][4] == "round-nearest-even" and fields["from_bf16" + "23"][5] == "x:uint16[4x3]"
    bf16_kernel = nnkern._C.kernel_list("bf16_gemm")
    assert fields["matmul24"][4] == "bf16" and fields["matmul24"][3] in {k["name"] for k in bf16_kernel}
    assert fields["Linear25"][4] == "bf16-packed" and fields["Linear25"][3] == fields["matmul24"][3]


def test_every_public_op_and_layer_logs():
    """Every name of nnkern.__all__ that computes on arrays is one of the calls above, so each logs its line."""
    ops = {name for name in nnkern.__all__ if callable(getattr(nnkern, name))} - NOT_OPS
    assert ops == set(EXPECTED), ops ^ set(EXPECTED)


def test_off_means_nothing_wrapped():
    for value in (None, "0", ""):
        proc = run(value)
        assert "nnkern_verbose" not in proc.stderr
    # In this process (the test runner's environment has no NNKERN_VERBOSE, or it is on for a reason).
    if os.environ.get("NNKERN_VERBOSE", "").strip() in ("", "0"):
        assert nnkern.sigmoid is nnkern.activations.sigmoid and nnkern.matmul is nnkern.gemm.matmul
        assert not hasattr(nnkern.Linear.__call__, "__wrapped_by_nnkern_verbose__")


# Shapes whose sgemm path is certain (csrc/ops/gemm/gemv.cc): one row of A and a wide B: "rows"; a square
# product: "tiles"; an empty product runs nothing: "none", not the previous call's name; an explicit
# algorithm= that the auto rule would not pick: that one. qgemm's explicit path too.
ROUTED = """
import numpy as np, nnkern
f = np.float32
nnkern.sgemm(np.ones((1, 64), f), np.ones((64, 512), f))
nnkern.sgemm(np.ones((64, 64), f), np.ones((64, 64), f))
nnkern.sgemm(np.ones((0, 4), f), np.ones((4, 4), f))
nnkern.sgemm(np.ones((64, 64), f), np.ones((64, 64), f), algorithm="dot")
nnkern.matmul(np.ones((3, 64, 64), f), np.ones((64, 64), f))
nnkern.qgemm(np.ones((64, 64), np.uint8), np.ones((64, 64), np.int8), algorithm="pack_all")
"""


def test_names_the_algorithm_that_ran():
    env = dict(os.environ, NNKERN_VERBOSE="1")
    proc = run_python_isolated(ROUTED, env=env)
    assert proc.returncode == 0, describe_process(proc)
    algs = [ln.split(",")[4] for ln in proc.stderr.splitlines() if ln.startswith("nnkern_verbose,")]
    assert algs == ["rows", "tiles", "none", "dot", "tiles", "pack_all"], proc.stderr
