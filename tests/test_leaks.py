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
@pytest.mark.parametrize("precision", ["float", "int8"])
def test_a_session_peaks_below_four_times_a_weight(tmp_path, precision):
    """A convolution's weight is held twice once the plan runs: in its layer's layout (for a float convolution the
    OHWI weights as given, for an INT8 one the layer's grouped layout; the model's constant a view of it) and
    packed (int16 where the INT8 kernel packs int16 pairs, twice the bytes: AVX-512 without VNNI). Loading peaks higher: the parsed model, one tensor read out of it and the constants. Growth of the
    resident set after loading a weight of 37-85 MB and one run, and of its peak, in a fresh process: a third copy
    kept (the model's constant beside the layer's, the serialized model, a layer's own copy) or a fourth at the
    peak (the parsed model alive while compiling) fails."""
    onnx = pytest.importorskip("onnx")
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    if precision == "float":
        c, x_type, x_dtype = 1536, TensorProto.FLOAT, "np.float32"
        w = rng.standard_normal((c, c, 3, 3)).astype(np.float32)
        node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])
        inits = [numpy_helper.from_array(w, "w")]
    else:
        c, x_type, x_dtype = 2048, TensorProto.UINT8, "np.uint8"
        w = rng.integers(-128, 128, (c, c, 3, 3), dtype=np.int8)
        node = helper.make_node("QLinearConv", ["x", "sx", "zx", "w", "sw", "zw", "sy", "zy"], ["y"], pads=[1, 1, 1, 1])
        inits = [numpy_helper.from_array(a, n) for n, a in [
            ("sx", np.float32(0.1)), ("zx", np.uint8(128)), ("w", w), ("sw", np.float32(0.01)), ("zw", np.int8(0)),
            ("sy", np.float32(5.0)), ("zy", np.uint8(128))]]
    graph = helper.make_graph([node], "conv", [helper.make_tensor_value_info("x", x_type, [1, c, 4, 4])],
                              [helper.make_tensor_value_info("y", x_type, [1, c, 4, 4])], inits)
    path = tmp_path / "conv.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    code = (f"import numpy as np, nnkern.onnx\n"
            f"def kib(field):\n"
            f"    return next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith(field)) * 1024\n"
            f"before, peak_before = kib('VmRSS:'), kib('VmHWM:')\n"
            f"s = nnkern.onnx.InferenceSession({str(path)!r}, num_threads=1)\n"
            f"y = s.run(None, {{'x': np.ones((1, {c}, 4, 4), {x_dtype})}})[0]\n"
            f"assert y.shape == (1, {c}, 4, 4)\n"
            f"print(kib('VmRSS:') - before, kib('VmHWM:') - peak_before, int(' s16_' in s.describe()))\n")
    proc = run_python_isolated(code, timeout=300)
    assert proc.returncode == 0, describe_process(proc)
    *growth, widened = proc.stdout.split()[-3:]
    held, peak = (int(v) / w.nbytes for v in growth)
    packed = 2 if int(widened) else 1  # an s16 kernel's packed weights are int16: twice as large
    assert held < 1.5 + packed, f"the session holds {held:.2f} times the weight's bytes after its first run"
    assert peak < 2.5 + packed, f"the peak grew by {peak:.2f} times the weight's bytes"
