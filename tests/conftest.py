"""Fixtures shared by the test modules: the ``isa`` parametrization, RNG, and state restoration.

``isa`` runs a test once per f32_gemm kernel of this build (``_C.kernel_list("f32_gemm")``, test id = the
kernel's name) with its ISA level; a kernel the CPU cannot run is skipped with a reason naming the ISA;
otherwise the test runs inside ``nnkern.max_isa(isa)`` and the fixture checks that the dispatcher really
picked that kernel.
The float64 reference and the error bound live in helpers.py.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

import nnkern
from nnkern import _C


def pytest_addoption(parser):
    parser.addoption("--exhaustive", action="store_true",
                     help="every size of every sweep and the slow checks (as NNKERN_TEST_EXHAUSTIVE=1)")


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes seconds (e.g. runs under qemu), still part of the default run")
    if config.getoption("--exhaustive"):  # before the test modules read it (tests/helpers.py), and for their children
        os.environ["NNKERN_TEST_EXHAUSTIVE"] = "1"


def _names_scalar_level(name: str, value) -> bool:
    """Whether a test parameter is the scalar level: a kernel of a kernel list, a kernel's name, a conv path
    naming one, or the level itself in a parameter named after it (isa, qisa, level, ...)."""
    if isinstance(value, dict):
        return value.get("level") == "scalar"
    if isinstance(value, (tuple, list)):
        return any(_names_scalar_level("", v) for v in value)
    if not isinstance(value, str):
        return False
    return value.endswith("__scalar") or (value == "scalar" and (name.endswith("isa") or name == "level"))


def pytest_collection_modifyitems(config, items):
    """NNKERN_TEST_SKIP_PORTABLE=1 (the emulated aarch64 run, tools/test-aarch64.sh) deselects the cases of the
    portable scalar level: the host's suite runs that same C++ natively, and the native tests run each scalar
    kernel emulated, while an emulated case costs many times a native one. (The dispatch tests' levels are a
    `cap`: they keep every level.)"""
    if os.environ.get("NNKERN_TEST_SKIP_PORTABLE", "") in ("", "0"):
        return
    keep, drop = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        (drop if any(_names_scalar_level(name, v) for name, v in params.items()) else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def exhaustive_only(test):
    """Runs the test only in the exhaustive run (tests/helpers.py EXHAUSTIVE)."""
    from helpers import EXHAUSTIVE
    return pytest.mark.skipif(not EXHAUSTIVE, reason="exhaustive run only (NNKERN_TEST_EXHAUSTIVE=1 or pytest "
                                                     "--exhaustive; CI runs it)")(test)


F32_GEMM_KERNELS = _C.kernel_list("f32_gemm")  # this build's f32_gemm kernels (csrc/kernels/f32_gemm_list.h)


def f32_gemm_tile_or_skip(isa: str):
    """(kernel name, MR, NR) of ``isa``'s f32_gemm micro-kernel, or skip naming the ISA this CPU lacks."""
    if isa not in nnkern.supported_isas():
        pytest.skip(f"CPU lacks {isa}")
    return _C.f32_gemm_tile(isa)


def kernel_params(family: str):
    """One pytest param per kernel of ``family`` in this build (its kernel list), valued by the kernel's ISA
    level and named after the kernel: a skip then always means this CPU lacks that level."""
    return [pytest.param(k["level"], id=k["name"]) for k in _C.kernel_list(family)]


def require_level(level: str) -> None:
    if level not in nnkern.supported_isas():
        pytest.skip(f"CPU lacks {level}")


def conv_kernel_paths(algorithms) -> list:
    """pytest params (algorithm, kernel name, level) of each conv2d algorithm on every kernel of the family it runs
    (`_C.conv2d_algorithm_families()`), ids "algorithm-kernel"; for a `path` fixture through at_kernel_level."""
    family = dict(_C.conv2d_algorithm_families())
    return [pytest.param((a, k["name"], k["level"]), id=f"{a}-{k['name']}")
            for a in algorithms for k in _C.kernel_list(family[a])]


def at_kernel_level(param):
    """Yields (algorithm, kernel) of a conv_kernel_paths param with the ISA cap at the kernel's level (the GEMM
    kernel follows the cap); skips, naming the ISA, where this CPU lacks it."""
    algorithm, kernel, level = param
    require_level(level)
    with nnkern.max_isa(level):
        yield algorithm, kernel


@pytest.fixture(params=[k["level"] for k in F32_GEMM_KERNELS], ids=[k["name"] for k in F32_GEMM_KERNELS])
def isa(request):
    """The ISA level of each f32_gemm kernel in turn (test id = kernel name), with the dispatch cap set to
    it for the whole test; skipped, naming the ISA, where the CPU cannot run it."""
    name = request.param
    kernel, _, _ = f32_gemm_tile_or_skip(name)
    with nnkern.max_isa(name):
        assert nnkern.cpu_info()["kernels"]["f32_gemm"] == kernel, f"cap {name} did not dispatch {kernel}"
        yield name


@pytest.fixture
def rng(request):
    """A deterministic generator, seeded per test so failures reproduce."""
    seed = sum(map(ord, request.node.nodeid)) % (2 ** 32)
    return np.random.default_rng(seed)


# Every workspace and every thread's scratch slice is followed by a guard pattern in the tests (core/workspace.h): an
# op that writes past what it asked for fails the test that ran it, even where the arena's block was larger.
_C.set_workspace_guards(True)


@pytest.fixture(autouse=True)
def _restore_global_state():
    """Tests may change the cap, thread count, blocking mode or elementwise thread limit: put them back afterwards.
    And no workspace guard may have been overwritten during the test."""
    cap, threads, mode = nnkern.get_max_isa(), nnkern.get_num_threads(), _C.get_blocking_mode()
    _C.workspace_guard_violations(reset=True)
    yield
    nnkern.set_max_isa(cap)
    nnkern.set_num_threads(threads)
    _C.set_blocking_mode(mode)
    _C.set_elementwise_parallel_min(0)  # the default
    assert _C.workspace_guard_violations(reset=True) == 0, "an op wrote past its workspace or scratch slice"


@pytest.fixture(autouse=True)
def _restore_blas_threads(request):
    """The benchmarks hold numpy's BLAS to the thread count they compare at, for good (bench/anchors.py
    set_threads): after a benchmark test it gets its threads back, or every later test's numpy reference would
    run on one core."""
    if not request.module.__name__.startswith("test_bench"):
        yield
        return
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        yield
        return
    with threadpool_limits(limits=None, user_api="blas"):  # restores the original limits on exit
        yield
