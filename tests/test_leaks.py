"""Resident memory stays flat over 10,000 calls of every op and layer construction (tests/leak_check.py, run
in a child process so that its RSS is its own and a crash is reported)."""
from __future__ import annotations

import pathlib
import sys

import pytest

from conftest import exhaustive_only
from helpers import describe_process, run_python_isolated

HERE = pathlib.Path(__file__).resolve().parent


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
@exhaustive_only  # not in the sanitizer and emulated runs: there the RSS is the quarantine or the code cache

def test_memory_is_stable_over_many_calls():
    code = f"import sys; sys.path.insert(0, {str(HERE)!r}); import leak_check; sys.exit(leak_check.main())"
    proc = run_python_isolated(code, timeout=600)
    assert proc.returncode == 0, describe_process(proc)
    growth = dict(line.rsplit(" ", 1) for line in proc.stdout.splitlines())
    assert {"sgemm", "LSTM()", "QLinear.__init__", "dlpack_input"} <= set(growth)  # every case ran
    print(" ".join(f"{k}:{v}KiB" for k, v in growth.items()), file=sys.stderr)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
@exhaustive_only  # not in the sanitizer and emulated runs: there the RSS is the quarantine or the code cache
def test_a_session_peaks_below_four_times_a_float_weight(tmp_path):
    """A float convolution's weight lives three times: the model's constant, its OHWI copy (the layer's weights
    as given) and the packed layout; no serialized model, no layer copy beside them, and the parsed model freed
    before the plan is compiled. Growth of the peak resident set over loading an 85 MB weight and one run, in a
    fresh process: a fourth copy anywhere (the serialized model, a layer's own copy, the parsed model alive while
    compiling) fails."""
    onnx = pytest.importorskip("onnx")
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    c = 1536
    w = np.random.default_rng(0).standard_normal((c, c, 3, 3)).astype(np.float32)
    graph = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], "conv",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, 4, 4])],
                              [numpy_helper.from_array(w, "w")])
    path = tmp_path / "conv.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    code = (f"import numpy as np, nnkern.onnx\n"
            f"def peak():\n"
            f"    return next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:')) * 1024\n"
            f"before = peak()\n"
            f"s = nnkern.onnx.InferenceSession({str(path)!r}, num_threads=1)\n"
            f"y = s.run(None, {{'x': np.ones((1, {c}, 4, 4), np.float32)}})[0]\n"
            f"assert y.shape == (1, {c}, 4, 4)\n"
            f"print(peak() - before)\n")
    proc = run_python_isolated(code, timeout=300)
    assert proc.returncode == 0, describe_process(proc)
    times = int(proc.stdout.split()[-1]) / w.nbytes
    assert times < 3.5, f"the peak grew by {times:.2f} times the weight's bytes"
