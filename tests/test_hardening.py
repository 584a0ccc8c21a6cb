"""Hostile input: misaligned arrays, layer attributes changed after construction, bad arguments.

The cases that used to crash run in a child process, so that a regression fails its test instead of
killing the suite.
"""
from __future__ import annotations

import math
import os

import numpy as np
import pytest

import nnkern
from nnkern import _C
from helpers import EXEC_PREFIX, QUICK, describe_process, run_python_isolated

HERE = os.path.dirname(os.path.abspath(__file__))
F32 = np.float32


def at_byte_offset(arr, off):
    """A copy of arr starting `off` bytes past a 64-byte boundary."""
    buf = np.empty(arr.nbytes + 128, np.uint8)
    start = (-buf.ctypes.data) % 64 + off
    view = buf[start:start + arr.nbytes].view(arr.dtype).reshape(arr.shape)
    view[...] = arr
    return view


# --- 1. alignment ----------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("level", nnkern.ISA_LEVELS)
def test_every_op_at_every_byte_offset(level):
    """Inputs and outputs at byte offsets 0..63 (small, tail and streaming sizes) give the aligned
    result bit for bit, under each ISA cap the CPU has."""
    if level not in nnkern.supported_isas():
        pytest.skip(f"CPU lacks {level}")
    args = [os.path.join(HERE, "offset_sweep.py"), level] + (["quick"] if QUICK else [])
    proc = run_python_isolated(open(args[0]).read(), args=args[1:], timeout=900)
    assert proc.returncode == 0 and proc.stdout.rstrip().endswith("ok"), describe_process(proc)


MISALIGNED_OUT = """
import sys
import numpy as np, nnkern
n = 8 * 2**20
x = np.linspace(-9, 9, n, dtype=np.float32)
with nnkern.max_isa(sys.argv[1]):
    for fn in (nnkern.sigmoid, nnkern.tanh):
        for method in ("minimax", "scalef", "accurate"):
            out = np.zeros(4 * n + 1, np.uint8)[1:].view(np.float32)  # C-contiguous, not 4-byte aligned
            fn(x, method, out=out)
            assert np.array_equal(out, fn(x, method)), (fn.__name__, method)
print("ok")
"""


@pytest.mark.slow
@pytest.mark.parametrize("level", nnkern.ISA_LEVELS)
def test_misaligned_streaming_output_regression(level):
    """The issue's case: a misaligned out= of 32 MiB made the streaming-store kernels fault."""
    if level not in nnkern.supported_isas():
        pytest.skip(f"CPU lacks {level}")
    if level not in streaming_levels():
        pytest.skip(f"{level} has no streaming-store kernels (the offset sweep covers its paths)")
    proc = run_python_isolated(MISALIGNED_OUT, args=[level], timeout=600)
    assert proc.returncode == 0, describe_process(proc)


def streaming_levels():
    levels = []
    for level in nnkern.ISA_LEVELS:
        try:
            nnkern._C.activation_ukernel(level, "sigmoid", "minimax", np.zeros(1, F32), 0, np.zeros(1, F32), 0, 0,
                                         stream=True)
            levels.append(level)
        except ValueError:
            pass
    return levels


@pytest.mark.parametrize("fn", ["sigmoid", "tanh"])
@pytest.mark.parametrize("method", ["minimax", "scalef", "accurate"])
def test_streaming_kernels_take_any_output_address(fn, method):
    """Called directly with y 1..3 bytes off float alignment, the streaming kernels fall back to regular
    stores and give the regular kernel's bits (every level of this CPU that has them)."""
    levels = streaming_levels()
    if not levels:
        pytest.skip("no level of this CPU has streaming-store kernels (avx2, avx512)")
    rng = np.random.default_rng(1)
    for level in levels:
        for n in (64, 1000, 4099):
            x = rng.uniform(-10, 10, n).astype(F32)
            want = np.empty(n, F32)
            nnkern._C.activation_ukernel(level, fn, method, x, 0, want, 0, n, stream=False)
            for shift in (1, 2, 3):
                y = np.zeros(n + 1, F32)
                nnkern._C.activation_ukernel(level, fn, method, x, 0, y, 0, n, stream=True, y_shift_bytes=shift)
                got = y.view(np.uint8)[shift:shift + 4 * n].copy().view(F32)
                assert np.array_equal(got, want), f"{level} {fn} {method} n={n} shift={shift}"


# --- 2. layer attributes ----------------------------------------------------------------------------

def layers():
    rng = np.random.default_rng(2)
    lin = nnkern.Linear(rng.standard_normal((6, 5)).astype(F32), np.ones(6, F32), activation="relu")
    ql = nnkern.QLinear(rng.standard_normal((6, 5)).astype(F32), np.ones(6, F32), input_scale=0.1,
                        input_zero_point=128, output_scale=0.2, output_zero_point=3)
    lstm = nnkern.LSTM(rng.standard_normal((12, 5)).astype(F32), rng.standard_normal((12, 3)).astype(F32))
    return {"Linear": lin, "QLinear": ql, "LSTM": lstm}


READ_ONLY = {
    "Linear": ["in_features", "out_features", "weight", "bias", "activation", "kernel", "bf16_kernel", "precision"],
    "QLinear": ["in_features", "out_features", "output_dtype", "relu", "dynamic", "input_scale", "input_zero_point",
                "weight", "weight_q", "weight_scale", "bias", "factor", "offset", "kernel"],
    "LSTM": ["input_size", "hidden_size", "batch_first", "activation", "kernel", "projected_embeddings", "precision",
             "w_ih", "w_hh", "b_ih", "b_hh"],
}


@pytest.mark.parametrize("kind", sorted(READ_ONLY))
def test_layer_attributes_are_read_only(kind):
    layer = layers()[kind]
    for name in READ_ONLY[kind]:
        with pytest.raises(AttributeError):
            setattr(layer, name, 1)
    public = {n for n in dir(layer) if not n.startswith("_") and not callable(getattr(layer, n))}
    assert public <= set(READ_ONLY[kind]), f"{kind} has attributes not known read-only: {public - set(READ_ONLY[kind])}"


def test_layer_arrays_cannot_change_the_layer():
    ls = layers()
    x = np.ones((4, 5), F32)
    want = ls["Linear"](x)
    ls["Linear"].bias[:] = 100.0  # a copy
    assert np.array_equal(ls["Linear"](x), want)
    ql = ls["QLinear"]
    for name in ("weight", "weight_q", "weight_scale", "bias", "factor", "offset"):
        assert not getattr(ql, name).flags.writeable, name
    assert not ls["Linear"].weight.flags.writeable
    for name in ("w_ih", "w_hh"):
        assert not getattr(ls["LSTM"], name).flags.writeable, name


def test_the_cpp_objects_check_what_the_kernels_use():
    """Bypassing the Python layer (its private objects called directly with wrong arrays) gives a
    ValueError or TypeError from C++, never an out-of-bounds access."""
    ls = layers()
    f = np.zeros
    with pytest.raises(ValueError, match="out"):
        ls["Linear"]._packed.run(f((4, 5), F32), f((4, 1), F32))
    with pytest.raises(ValueError, match="x"):
        ls["Linear"]._packed.run(f((4, 1), F32), f((4, 6), F32))
    with pytest.raises(TypeError):
        ls["Linear"]._packed.run(f((4, 5), np.float64), f((4, 6), F32))
    with pytest.raises(ValueError, match="out"):
        ls["QLinear"]._packed.run(f((4, 5), np.uint8), f((4, 1), np.uint8))
    with pytest.raises(TypeError):
        ls["QLinear"]._packed.run(f((4, 5), np.uint8), f((4, 6), np.int32))  # the layer outputs uint8
    op = ls["LSTM"]._op
    x = f((2, 4, 5), F32)
    good = dict(h0=None, c0=None, lengths=None, out3=f((2, 4, 3), F32), h_n=f((1, 4, 3), F32), c_n=f((1, 4, 3), F32))

    def run(**kw):
        a = dict(good, **kw)
        op.run(kw.get("x", x), False, False, a["h0"], a["c0"], a["lengths"], a["out3"], a["h_n"], a["c_n"], "accurate")

    run()  # the good call works
    for bad in (dict(out3=f((2, 4, 1), F32)), dict(h_n=f((1, 4, 1), F32)), dict(h0=f((4, 1), F32)),
                dict(x=f((2, 4, 1), F32)), dict(lengths=np.array([9, 1, 1, 1])), dict(lengths=np.array([1, 1]))):
        with pytest.raises((ValueError, TypeError)):
            run(**bad)
    op.set_table(f((3, 5), F32))
    with pytest.raises(ValueError, match="ids"):
        op.run(np.array([[0, 3]], np.int64), True, False, None, None, None, f((1, 2, 3), F32), f((1, 2, 3), F32),
               f((1, 2, 3), F32), "accurate")


LAYER_CASES = """
import numpy as np, nnkern
L = nnkern.LSTM(np.ones((1024, 3), np.float32), np.ones((1024, 256), np.float32))
try:
    L.hidden_size = 1
except AttributeError:
    pass
L(np.ones((50, 4, 3), np.float32))
lin = nnkern.Linear(np.ones((252, 8), np.float32), np.ones(252, np.float32))
for name, value in (("out_features", 1), ("in_features", 1), ("bias", np.ones(1, np.float32)),
                    ("bias", np.ones(252))):
    try:
        setattr(lin, name, value)
    except AttributeError:
        pass
    assert lin(np.ones((4, 8), np.float32)).shape == (4, 252)
q = nnkern.QLinear(np.ones((252, 8), np.float32), None, input_scale=1.0, input_zero_point=0, output_scale=1.0)
try:
    q.out_features = 1
except AttributeError:
    pass
assert q(np.ones((4, 8), np.uint8)).shape == (4, 252)
print("ok")
"""


def test_issue_layer_cases_in_a_child_process():
    """The issue's heap-corruption recipes: the assignments fail, the layers keep working."""
    proc = run_python_isolated(LAYER_CASES, timeout=300)
    assert proc.returncode == 0 and "ok" in proc.stdout, describe_process(proc)


# --- 3. arguments ---------------------------------------------------------------------------------

def test_sgemm_arguments():
    a = np.ones((3, 4), F32)
    b = np.ones((4, 2), F32)
    with pytest.raises(TypeError, match="trans_a"):
        nnkern.sgemm(a.T.copy(), b, trans_a="False")
    with pytest.raises(TypeError, match="trans_b"):
        nnkern.sgemm(a, b, trans_b=1)
    assert nnkern.sgemm(a.T.copy(), b, trans_a=np.bool_(True)).shape == (3, 2)
    with pytest.raises(TypeError, match="alpha"):
        nnkern.sgemm(a, b, alpha="2")
    with pytest.raises(TypeError, match="alpha"):
        nnkern.sgemm(a, b, alpha=True)
    with pytest.raises(ValueError, match="alpha.*overflows float32"):
        nnkern.sgemm(a, b, alpha=1e39)
    with pytest.raises(ValueError, match="beta.*overflows float32"):
        nnkern.sgemm(a, b, beta=-1e39, c=np.ones((3, 2), F32))
    c = np.full((3, 2), np.nan, F32)
    with pytest.raises(ValueError, match="beta.*rounds to 0"):
        nnkern.sgemm(a, b, beta=1e-50, c=c)
    assert np.isnan(nnkern.sgemm(a, b, beta=1e-40, c=c)).all()  # a float32 subnormal: NaN in c propagates
    assert nnkern.sgemm(a, b, alpha=np.float64(2), beta=np.array(0.5), c=np.ones((3, 2), F32))[0, 0] == 8.5


def test_qgemm_arguments():
    assert nnkern.qgemm_max_k(np.uint8) == 65793
    with pytest.raises(TypeError, match="a_dtype"):
        nnkern.qgemm_max_k(np.float32)
    with pytest.raises(TypeError, match="a_dtype"):
        nnkern.qgemm_max_k(None)
    with pytest.raises(ValueError, match="a_zero_point"):
        nnkern.qgemm_max_k(np.uint8, -10**12)
    with pytest.raises(TypeError, match="a_zero_point"):
        nnkern.qgemm_max_k(np.uint8, "5")
    with pytest.raises(ValueError, match="b_zero_point"):
        nnkern.qgemm_max_k(np.uint8, 0, [0, 300])
    assert nnkern.qgemm_max_k(np.int8, 0, [0, -128]) == (2**31 - 1) // (128 * 255)
    out = nnkern.qgemm(np.zeros((3, 4), np.uint8), np.zeros((4, 0), np.int8), b_zero_point=[])
    assert out.shape == (3, 0)
    w = np.ones((2, 3), np.int8)
    with pytest.raises(TypeError, match="weight_scale"):
        nnkern.QLinear(w, None, weight_scale="1", input_scale=1.0, input_zero_point=0, output_dtype=np.int32)
    with pytest.raises(TypeError, match="input_scale"):
        nnkern.QLinear(w, None, weight_scale=1.0, input_scale="a", input_zero_point=0, output_dtype=np.int32)
    with pytest.raises(TypeError, match="relu"):
        nnkern.QLinear(w, None, weight_scale=1.0, input_scale=1.0, input_zero_point=0, output_dtype=np.int32,
                       relu="no")


def test_lstm_arguments():
    rng = np.random.default_rng(3)
    lstm = nnkern.LSTM(rng.standard_normal((8, 3)).astype(F32), rng.standard_normal((8, 2)).astype(F32))
    r = lstm(np.zeros((4, 0, 3), F32), lengths=[])
    assert r.output.shape == (4, 0, 2)
    with pytest.raises(TypeError, match="batch_first"):
        nnkern.LSTM(np.ones((8, 3), F32), np.ones((8, 2), F32), batch_first="no")


HUGE_IDS = """
import resource, sys, numpy as np, nnkern
if sys.argv[1] == "limit":  # a 16 TiB output must fail where the OS grants any allocation (overcommit 1)
    with open("/proc/self/status") as f:
        vm = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize:"))
    resource.setrlimit(resource.RLIMIT_AS, (vm + (8 << 30), resource.getrlimit(resource.RLIMIT_AS)[1]))
lstm = nnkern.LSTM(np.ones((8, 3), np.float32), np.ones((8, 2), np.float32))
lstm.precompute_embeddings(np.ones((5, 3), np.float32))
try:
    lstm.forward_tokens(np.broadcast_to(np.int64(1), (2**40, 2)))
except MemoryError as e:
    print("ok", type(e).__name__)
"""


def test_huge_token_batch_fails_before_scanning():
    """The outputs are sized before the ids are read: 2**40 x 2 ids fail at the allocation at once instead
    of scanning 2**41 ids first (the child would run for minutes; 120 s is the hang guard)."""
    env = dict(os.environ)  # under AddressSanitizer, a failed malloc must return NULL (numpy: MemoryError)
    env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":allocator_may_return_null=1"
    # ASan's allocator refuses it itself, and ASan and qemu reserve address space beyond any limit.
    limit = not os.environ.get("NNKERN_SANITIZED") and not EXEC_PREFIX
    proc = run_python_isolated(HUGE_IDS, ["limit" if limit else "none"], env=env, timeout=120)
    assert proc.returncode == 0 and "ok" in proc.stdout, describe_process(proc)


def test_activation_arguments():
    x = np.linspace(-3, 3, 10, dtype=F32)
    with pytest.raises(TypeError, match="method"):
        nnkern.sigmoid(x, method=np.array(["minimax", "accurate"]))
    with pytest.raises(ValueError, match="method"):
        nnkern.tanh(x, method="fast")
    with pytest.raises(ValueError, match="another order"):
        nnkern.sigmoid(x, out=x[::-1])
    with pytest.raises(ValueError, match="partially overlaps"):
        nnkern.sigmoid(x[:8], out=x[2:])


def test_quantize_arguments():
    x = np.ones(4, F32)
    with pytest.raises(TypeError, match="dtype.*None"):
        nnkern.quantize(x, 0.1, 0, dtype=None)
    with pytest.raises(TypeError, match="scale"):
        nnkern.quantize(x, "0.1")


@pytest.mark.parametrize("n", [1, 2, 3, 4, 1000])
def test_misaligned_inputs_are_copied_not_refused(n):
    """A misaligned array is a legal numpy array: accepted (copied), never 'internal' errors."""
    rng = np.random.default_rng(n)
    x = rng.uniform(-2, 2, (2, n)).astype(F32)
    for off in (1, 2, 3):
        xm = at_byte_offset(x, off)
        assert np.array_equal(nnkern.quantize(xm, 0.01, 0), nnkern.quantize(x, 0.01, 0))
        assert np.array_equal(nnkern.topk(xm, 1)[1], nnkern.topk(x, 1)[1])
        assert np.array_equal(nnkern.sigmoid(xm), nnkern.sigmoid(x))
        lin = nnkern.Linear(np.ones((3, n), F32))
        assert np.array_equal(lin(xm), lin(x))
    assert math.isfinite(float(nnkern.sigmoid(x).sum()))


def test_workspace_release_path_above_the_retention_limit():
    """A call whose workspace exceeds the 8 MiB the arena keeps gets its block freed when it ends, and the arena
    forgets it (retained bytes back under the limit); the calls after it, smaller and as large again, are right."""
    limit = 8 << 20
    rng = np.random.default_rng(2)
    a = rng.standard_normal((1200, 2000), dtype=np.float32)
    b = rng.standard_normal((2000, 40), dtype=np.float32)
    want = a @ b
    for t in (1, 2):
        nnkern.set_num_threads(t)
        nnkern.sgemm(np.ones((3, 3), np.float32), np.ones((3, 3), np.float32))
        before = _C.workspace_retained_bytes()
        got = nnkern.sgemm(a.T.copy(), b, trans_a=True)  # the transposed operand is packed: 9.6 MB of workspace
        assert _C.workspace_last_bytes() > limit
        assert _C.workspace_retained_bytes() <= max(before, limit) and _C.workspace_retained_bytes() < 1200 * 2000 * 4
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
        small = nnkern.sgemm(a[:30].T.copy(), b, trans_a=True)
        np.testing.assert_allclose(small, want[:30], rtol=1e-4, atol=1e-3)
        np.testing.assert_allclose(nnkern.sgemm(a.T.copy(), b, trans_a=True), want, rtol=1e-4, atol=1e-3)
        assert _C.workspace_retained_bytes() < 1200 * 2000 * 4


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_workspace_and_scratch_guards_catch_an_overrun(threads):
    """The guards the tests run with (conftest.py): one byte written past a workspace is counted, one past a
    thread's scratch slice raises from the parallel call; writing exactly the bytes asked for is clean."""
    nnkern.set_num_threads(threads)
    assert _C.workspace_guard_violations(reset=True) == 0
    for nbytes in (1, 64, 1000, 3 << 20):
        _C.workspace_overrun_probe(False, nbytes, 0)
        _C.workspace_overrun_probe(True, nbytes, 0)
        assert _C.workspace_guard_violations() == 0
        _C.workspace_overrun_probe(False, nbytes, 1)
        assert _C.workspace_guard_violations(reset=True) == 1
        with pytest.raises(RuntimeError, match="past its thread's scratch slice"):
            _C.workspace_overrun_probe(True, nbytes, 8)
        assert _C.workspace_guard_violations(reset=True) >= 1
