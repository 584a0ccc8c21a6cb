"""Fixtures shared by the test modules: the ``isa`` parametrization, RNG, and state restoration.

``isa`` runs a test once per ISA level of this build (nnkern.ISA_LEVELS). A level the CPU lacks, or one
with no f32_gemm kernel, is skipped with a reason naming it; otherwise the test runs inside
``nnkern.max_isa(isa)`` and the fixture checks that the dispatcher really picked that level's kernel.
The float64 reference and the error bound live in helpers.py.
"""
from __future__ import annotations

import numpy as np
import pytest

import nnkern
from nnkern import _C


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes seconds (e.g. runs under qemu), still part of the default run")


def f32_gemm_tile_or_skip(isa: str):
    """(kernel name, MR, NR) of ``isa``'s f32_gemm micro-kernel, or skip naming why it cannot run here."""
    if isa not in nnkern.supported_isas():
        pytest.skip(f"CPU lacks {isa}")
    try:
        return _C.f32_gemm_tile(isa)
    except ValueError:
        pytest.skip(f"{isa} has no f32_gemm kernel of its own (the dispatcher uses the best level below it)")


def kernel_params(family: str):
    """One pytest param per kernel of ``family`` in this build (its kernel list), valued by the kernel's ISA
    level and named after the kernel: a skip then always means this CPU lacks that level."""
    return [pytest.param(k["level"], id=k["name"]) for k in _C.kernel_list(family)]


def require_level(level: str) -> None:
    if level not in nnkern.supported_isas():
        pytest.skip(f"CPU lacks {level}")


@pytest.fixture(params=nnkern.ISA_LEVELS)
def isa(request):
    """Each ISA level in turn, with the dispatch cap set to it for the whole test."""
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


@pytest.fixture(autouse=True)
def _restore_global_state():
    """Tests may change the cap, thread count or blocking mode: put them back afterwards."""
    cap, threads, mode = nnkern.get_max_isa(), nnkern.get_num_threads(), _C.get_blocking_mode()
    yield
    nnkern.set_max_isa(cap)
    nnkern.set_num_threads(threads)
    _C.set_blocking_mode(mode)
