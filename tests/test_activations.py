"""sigmoid / tanh: the documented accuracy contract on every ISA path, special values, tails, layouts.

The contract sweep runs in C++ (nnkern._C.activation_sweep) over every 19th float32 bit pattern in
[-20, 20] (1.17e8 inputs per kernel, both signs, interval boundaries included) against a float64
reference in the exhaustive run (tests/helpers.py), every 1009th in the quick default run, and all 2.2e9 of them
with NNKERN_TEST_EXHAUSTIVE=every.
"""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import nnkern
from nnkern import _C
from nnkern.activations import ACTIVATION_METHODS, SIGMOID_MAX_ABS_ERROR, TANH_MAX_ABS_ERROR

from conftest import exhaustive_only, kernel_params
from helpers import QUICK, run_python_isolated

FUNCTIONS = ("sigmoid", "tanh")
STRIDE = 1 if os.environ.get("NNKERN_TEST_EXHAUSTIVE") == "every" else (1009 if QUICK else 19)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def kernel_or_skip(isa, function="sigmoid", method="minimax"):
    if isa not in nnkern.supported_isas():
        pytest.skip(f"CPU lacks {isa}")
    try:
        return _C.activation_kernel_name(isa, function, method)
    except ValueError:
        pytest.skip(f"{isa} has no activation kernels of its own (the dispatcher uses the best level below it)")


@pytest.fixture(params=kernel_params("f32_activation"))
def act_isa(request):
    """Each level of the activation kernel list, with the dispatch cap set to it."""
    name = request.param
    kernel = kernel_or_skip(name)
    with nnkern.max_isa(name):
        assert nnkern.cpu_info()["kernels"]["f32_sigmoid"].startswith(kernel), f"cap {name} did not dispatch {kernel}"
        yield name


def ref_sigmoid(x):
    x = np.asarray(x, np.float64)
    with np.errstate(over="ignore"):
        e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def bound(function, method):
    return (SIGMOID_MAX_ABS_ERROR if function == "sigmoid" else TANH_MAX_ABS_ERROR)[method]


@pytest.mark.slow
@pytest.mark.parametrize("method", ACTIVATION_METHODS)
@pytest.mark.parametrize("function", FUNCTIONS)
def test_accuracy_contract_sweep(act_isa, function, method):
    r = _C.activation_sweep(act_isa, function, method, 20.0, STRIDE)
    assert r["count"] >= (1e8 if STRIDE <= 19 else 1e6)
    assert r["out_of_range"] == 0, f"{r['out_of_range']} outputs outside the range (or NaN)"
    assert r["max_abs_err"] <= bound(function, method), (
        f"{act_isa} {function} {method}: max abs error {r['max_abs_err']:.3e} at x = {r['worst_x']!r} "
        f"(got {r['worst_y']!r}) exceeds {bound(function, method):.1e}")


def test_neon_kernels_dispatched_on_aarch64():
    """aarch64 builds have NEON kernels of their own, and the dispatcher reports them (neondot and
    neoni8mm have none: they use the neon ones)."""
    if "neon" not in nnkern.ISA_LEVELS:
        pytest.skip(f"neon kernels exist only in aarch64 builds (this one: {nnkern.cpu_info()['arch']})")
    assert "neon" in nnkern.supported_isas()
    for function in FUNCTIONS:
        assert nnkern.cpu_info()["kernels"][f"f32_{function}"] == f"f32_{function}__neon_minimax|scalef|accurate"
        for method in ACTIVATION_METHODS:
            assert _C.activation_kernel_name("neon", function, method) == f"f32_{function}__neon_{method}"


def test_study_figures_reproduced():
    """The fit reproduces the exhaustive study of the two schemes: A16d2 2.838e-4, Bmm2 + rcp14 about 5e-4, Bmm5 1e-7."""
    isa = "avx512" if "avx512" in nnkern.supported_isas() else "scalar"
    stride = 1009 if QUICK else 97
    minimax = _C.activation_sweep(isa, "sigmoid", "minimax", 20.0, stride)["max_abs_err"]
    assert 2.80e-4 <= minimax <= 2.84e-4
    scalef = _C.activation_sweep(isa, "sigmoid", "scalef", 20.0, stride)["max_abs_err"]
    assert 4.5e-4 <= scalef <= 5.3e-4
    accurate = _C.activation_sweep(isa, "sigmoid", "accurate", 20.0, stride)["max_abs_err"]
    assert accurate <= 1.3e-7


SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e30, -1e30, -88.0, -89.0, -100.0, 88.0,
                    16.0, -16.0, 17.5, -17.5, 3.4e38, -3.4e38, 1e-45, -1e-45, 1.2e-38, -1.2e-38], np.float32)


@pytest.mark.parametrize("method", ACTIVATION_METHODS)
def test_sigmoid_special_values(act_isa, method):
    y = nnkern.sigmoid(SPECIAL, method=method)
    assert y[0] == 0.5 and y[1] == 0.5
    assert y[2] == 1.0
    assert y[3] == 0.0 and not np.signbit(y[3])
    assert np.isnan(y[4]) and np.isnan(y[5])
    assert y[6] == 1.0 and y[7] == 0.0
    fin = ~np.isnan(SPECIAL)
    assert np.all((y[fin] >= 0) & (y[fin] <= 1))
    assert not np.any(np.signbit(y[fin]))
    err = np.abs(y[fin].astype(np.float64) - ref_sigmoid(SPECIAL[fin]))
    assert err.max() <= SIGMOID_MAX_ABS_ERROR[method], list(zip(SPECIAL[fin], y[fin]))


@pytest.mark.parametrize("method", ACTIVATION_METHODS)
def test_tanh_special_values(act_isa, method):
    y = nnkern.tanh(SPECIAL, method=method)
    assert y[0] == 0.0 and not np.signbit(y[0])
    assert y[1] == 0.0 and np.signbit(y[1])  # odd by construction
    assert y[2] == 1.0 and y[3] == -1.0
    assert np.isnan(y[4]) and np.isnan(y[5])
    assert y[6] == 1.0 and y[7] == -1.0
    fin = ~np.isnan(SPECIAL)
    assert np.all(np.abs(y[fin]) <= 1)
    assert np.all(np.abs(y[fin] - np.tanh(SPECIAL[fin].astype(np.float64))) <= TANH_MAX_ABS_ERROR[method])
    x = np.linspace(-30, 30, 10001, dtype=np.float32)
    np.testing.assert_array_equal(nnkern.tanh(-x, method=method), -nnkern.tanh(x, method=method))


def has_stream_kernels(isa):
    """Whether isa's kernel set has streaming-store variants (used for outputs of 32 MiB and more)."""
    x = np.zeros(1, np.float32)
    try:
        _C.activation_ukernel(isa, "sigmoid", "minimax", x, 0, np.empty_like(x), 0, 1, stream=True)
        return True
    except ValueError:
        return False


@pytest.mark.parametrize("stream", [False, True], ids=["store", "stream"])
@pytest.mark.parametrize("method", ACTIVATION_METHODS)
@pytest.mark.parametrize("function", FUNCTIONS)
def test_tails_match_body(act_isa, function, method, stream, rng):
    """Every length 0..2 x 64 + 1 at several offsets gives the same bits as the full vector body (of the
    regular kernel, also for the streaming-store variant), and writes nothing beyond n."""
    if stream and not has_stream_kernels(act_isa):
        pytest.skip(f"{act_isa} has no streaming-store kernels")
    base = rng.uniform(-12, 12, size=256).astype(np.float32)
    full = np.empty_like(base)
    _C.activation_ukernel(act_isa, function, method, base, 0, full, 0, base.size)
    for off in range(4):
        for n in range(0, 130):
            y = np.full(n + 40, 7.0, np.float32)
            _C.activation_ukernel(act_isa, function, method, base, off, y, 3, n, stream=stream)
            np.testing.assert_array_equal(y[3:3 + n], full[off:off + n], err_msg=f"n={n} off={off}")
            assert np.all(y[:3] == 7.0) and np.all(y[3 + n:] == 7.0), f"wrote outside [0, {n}) (off={off})"


@pytest.mark.parametrize("method", ACTIVATION_METHODS)
def test_large_outputs_same_bits(act_isa, method, rng):
    """Outputs of 32 MiB and more that are not in place take the streaming-store kernels: the same bits as
    in place, with the thread pool splitting the work too."""
    if not has_stream_kernels(act_isa):
        pytest.skip(f"{act_isa} has no streaming-store kernels (large outputs take the regular ones)")
    n = (32 << 20) // 4 + 1001
    x = rng.uniform(-20, 20, n).astype(np.float32)
    for function in FUNCTIONS:
        f = getattr(nnkern, function)
        want = x.copy()
        f(want, method=method, out=want)
        np.testing.assert_array_equal(f(x, method=method), want)
        out = np.empty(n + 3, np.float32)[3:]  # y misaligned against x
        np.testing.assert_array_equal(f(x, method=method, out=out), want)


GUARD_SCRIPT = r"""
import numpy as np, sys
from nnkern import _C
isa = sys.argv[1]
stream = sys.argv[2] == "1"
for fn in ("sigmoid", "tanh"):
    for m in ("minimax", "scalef", "accurate"):
        for n in range(0, 140):
            gx = _C.GuardedBuffer(max(n, 1) * 4); gy = _C.GuardedBuffer(max(n, 1) * 4)
            x = np.frombuffer(gx, np.float32); y = np.frombuffer(gy, np.float32)
            x[:] = np.linspace(-5, 5, x.size)
            _C.activation_ukernel(isa, fn, m, x, x.size - n, y, y.size - n, n, stream=stream)
            if not stream:
                _C.activation_ukernel(isa, fn, m, y, y.size - n, y, y.size - n, n)  # in place
print("ok")
"""


@pytest.mark.parametrize("stream", [False, True], ids=["store", "stream"])
@pytest.mark.parametrize("isa", kernel_params("f32_activation"))
def test_no_access_past_the_end(isa, stream):
    kernel_or_skip(isa)
    if stream and not has_stream_kernels(isa):
        pytest.skip(f"{isa} has no streaming-store kernels")
    proc = run_python_isolated(GUARD_SCRIPT, args=(isa, int(stream)))
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr[-2000:]


@pytest.mark.parametrize("method", ACTIVATION_METHODS)
def test_layouts_and_in_place(act_isa, method, rng):
    x = rng.uniform(-10, 10, size=(7, 33, 5)).astype(np.float32)
    want = nnkern.sigmoid(x, method=method)
    assert want.shape == x.shape and want.dtype == np.float32
    assert np.abs(want - ref_sigmoid(x)).max() <= SIGMOID_MAX_ABS_ERROR[method]
    # strided / transposed inputs are copied: same bits
    xt = np.asfortranarray(x)
    np.testing.assert_array_equal(nnkern.sigmoid(xt, method=method), want)
    xs = x[:, ::3, 1:]
    np.testing.assert_array_equal(nnkern.sigmoid(xs, method=method), want[:, ::3, 1:])
    # in place, contiguous and strided
    y = x.copy()
    assert nnkern.sigmoid(y, method=method, out=y) is y
    np.testing.assert_array_equal(y, want)
    big = x.copy()
    view = big[:, ::2, :]
    nnkern.sigmoid(view, method=method, out=view)
    np.testing.assert_array_equal(big[:, ::2, :], want[:, ::2, :])
    np.testing.assert_array_equal(big[:, 1::2, :], x[:, 1::2, :])
    # out= of another layout
    out = np.empty(x.shape[::-1], np.float32).T
    nnkern.tanh(x, method=method, out=out)
    np.testing.assert_array_equal(out, nnkern.tanh(x, method=method))
    # 0-d, empty
    assert nnkern.sigmoid(np.zeros((), np.float32), method=method)[()] == 0.5
    assert nnkern.sigmoid(np.zeros((0, 3), np.float32), method=method).shape == (0, 3)


@pytest.mark.parametrize("function", FUNCTIONS)
def test_large_threaded_matches_single_thread(function, rng):
    x = rng.uniform(-20, 20, size=(1 << 21) + 3).astype(np.float32)  # above the op's 1M-element inline limit
    f = getattr(nnkern, function)
    for method in ACTIVATION_METHODS:
        nnkern.set_num_threads(1)
        a = f(x, method=method)
        nnkern.set_num_threads(2)
        b = f(x, method=method)
        np.testing.assert_array_equal(a, b, err_msg=method)


def test_bad_arguments():
    x = np.zeros(4, np.float32)
    with pytest.raises(TypeError):
        nnkern.sigmoid(np.zeros(4))
    with pytest.raises(TypeError):
        nnkern.sigmoid([0.0, 1.0])
    with pytest.raises(TypeError):
        nnkern.tanh(x, out=np.zeros(4))
    with pytest.raises(ValueError):
        nnkern.sigmoid(x, method="fast")
    with pytest.raises(ValueError):
        nnkern.sigmoid(x, out=np.zeros(5, np.float32))
    ro = np.zeros(4, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError):
        nnkern.sigmoid(x, out=ro)
    buf = np.zeros(8, np.float32)
    with pytest.raises(ValueError, match="overlap"):
        nnkern.sigmoid(buf[:6], out=buf[2:])


@exhaustive_only
def test_coefficients_rederived():
    """tools/fit_sigmoid.py re-derives the checked-in header bit for bit."""
    pytest.importorskip("scipy")
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "fit_sigmoid.py"), "--check"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@exhaustive_only
def test_erf_coefficients_rederived():
    """tools/fit_erf.py re-derives the erf polynomials of kernels/f32_erf.h bit for bit, and its float32 model of
    the formula stays within the documented 2.7 ulp."""
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "fit_erf.py"), "--check"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_default_method_is_accurate():
    """The default is the accurate method: sigmoid(-10) within 1e-6 relative of scipy's expit (minimax is 14%
    off there), and the fast methods are one keyword away."""
    special = pytest.importorskip("scipy.special", reason="scipy is not installed")
    x = np.array([-10.0, -20.0, -3.0, 0.0, 3.0, 10.0], np.float32)
    want = special.expit(x.astype(np.float64))
    assert np.array_equal(nnkern.sigmoid(x), nnkern.sigmoid(x, method="accurate"))
    assert np.array_equal(nnkern.tanh(x), nnkern.tanh(x, method="accurate"))
    np.testing.assert_allclose(nnkern.sigmoid(x), want, rtol=1e-6)
    np.testing.assert_allclose(nnkern.tanh(x), np.tanh(x.astype(np.float64)), rtol=1e-6, atol=5e-7)
    assert abs(nnkern.sigmoid(x, method="minimax")[0] / want[0] - 1) > 0.1  # why the default changed
    import inspect
    for fn in (nnkern.sigmoid, nnkern.tanh):
        assert inspect.signature(fn).parameters["method"].default == "accurate"
