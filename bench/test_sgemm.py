"""SGEMM benchmarks: one per (shape, threads, nnkern ISA | comparison library), nnkern.Linear (prepacked
weights) against onnxruntime with B an initializer and the same libraries, plus the
cache-derived vs fixed (seed O7: kc/mc/nc = 256/48/4032) blocking comparison on the large shapes.

    python -m pytest bench/test_sgemm.py -k "64-64-64"          # one shape, every column
    python -m pytest bench -k "nnkern and avx512 and t1"        # nnkern AVX-512, 1 thread
    python -m pytest bench -k blocking --bench-threads 1        # cache vs fixed blocking

extra_info: gflops, anchor_<library> (GFLOP/s of each comparison library measured in this run,
numpy with OPENBLAS_* unset included), best_anchor(_rate), ratio (to the best), pct_peak (of the
ISA's peak measured by nnkern's own FMA loop, x threads).  Nothing here asserts a timing.
"""
import contextlib

import pytest

import nnkern
from nnkern import _C
from nnkern.bench import anchors as _anchors
from nnkern.bench import harness, ops

from .conftest import run_benchmark

SGEMM = ops.sgemm_op()
LINEAR = ops.linear_op()
ANCHOR_LIBS = ["numpy", "onnxruntime", "onednn", "torch"]
ISAS = list(nnkern.ISA_LEVELS)
SIMD_ISAS = [i for i in ISAS if i != "scalar"]


def _require_isa(isa):
    if isa not in nnkern.supported_isas():
        pytest.skip(f"this CPU (or OS) does not support ISA level {isa}")
    if isa not in harness.bench_isas("f32_gemm"):
        pytest.skip(f"{isa} runs the same f32 GEMM kernel as a lower level")


@pytest.mark.parametrize("op", [SGEMM, LINEAR], ids=["sgemm", "linear"])
@pytest.mark.parametrize("isa", ISAS)
def test_sgemm_nnkern(benchmark, sgemm_shape, threads, isa, op, anchor_cache):
    """nnkern.sgemm (B per call), and nnkern.Linear (weights prepacked at construction) against onnxruntime
    with B an initializer (prepacked too) and the libraries taking B per call."""
    _require_isa(isa)
    ctx = harness.nnkern_context(isa, threads)
    with ctx():
        fn = op.nnkern(sgemm_shape, isa)
        kernel = nnkern.cpu_info()["kernels"].get("f32_gemm")
    if fn is None:
        pytest.skip(f"{isa} is too slow for {sgemm_shape} (> {ops.SCALAR_MAX_WORK} flops)")
    run_benchmark(benchmark, fn, work=op.work(sgemm_shape), unit=op.unit, context=ctx,
                  peak_ops=harness.peak("f32", isa) * threads,
                  anchors=anchor_cache.get(op, sgemm_shape, threads),
                  op=op.name, shape=list(sgemm_shape), library="nnkern", isa=isa, threads=threads,
                  kernel=kernel, blocking=_C.get_blocking_mode() if hasattr(_C, "get_blocking_mode") else None)


@pytest.mark.parametrize("op", [SGEMM, LINEAR], ids=["sgemm", "linear"])
@pytest.mark.parametrize("library", ANCHOR_LIBS)
def test_sgemm_anchor(benchmark, sgemm_shape, threads, library, op, anchor_cache):
    fns = op.anchors(sgemm_shape, threads)
    if library not in fns:
        pytest.skip(f"{library} is not installed (or cannot run this shape)")
    run_benchmark(benchmark, fns[library], work=op.work(sgemm_shape), unit=op.unit,
                  anchors=anchor_cache.get(op, sgemm_shape, threads),
                  op=op.name, shape=list(sgemm_shape), library=library, isa="", threads=threads)
    _anchors.set_threads(1)


# --- blocking: cache-derived vs fixed (O7) ------------------------------------------------------

def _blocking(mode):
    @contextlib.contextmanager
    def ctx():
        old = _C.get_blocking_mode()
        _C.set_blocking_mode(mode)
        try:
            yield
        finally:
            _C.set_blocking_mode(old)
    return ctx


_AB = {}


def _ab(shape, isa, threads):
    """cache vs fixed timed interleaved (same window): {mode: GFLOP/s}, computed once per key."""
    key = (tuple(shape), isa, threads)
    if key not in _AB:
        fns, ctxs = {}, {}
        for mode in ("cache", "fixed"):
            with harness.nnkern_context(isa, threads)():
                fns[mode] = SGEMM.nnkern(shape, isa)
            ctxs[mode] = harness.nnkern_context(isa, threads, _blocking(mode))
        t = harness.interleaved(fns, repeats=7, contexts=ctxs)
        _AB[key] = {m: SGEMM.work(shape) / t[m].median / 1e9 for m in t}
    return _AB[key]


@pytest.mark.parametrize("mode", ["cache", "fixed"])
@pytest.mark.parametrize("isa", SIMD_ISAS)
@pytest.mark.parametrize("shape", harness.SGEMM_LARGE, ids=harness.shape_id)
def test_sgemm_blocking(benchmark, shape, isa, threads, mode):
    _require_isa(isa)
    if not hasattr(_C, "set_blocking_mode"):
        pytest.skip("this build has no set_blocking_mode")
    ctx = harness.nnkern_context(isa, threads, _blocking(mode))
    with ctx():
        fn = SGEMM.nnkern(shape, isa)
        blocks = _C.gemm_blocking(shape[2])
    ab = _ab(shape, isa, threads)
    run_benchmark(benchmark, fn, work=SGEMM.work(shape), unit=SGEMM.unit, context=ctx,
                  peak_ops=harness.peak("f32", isa) * threads,
                  op="sgemm", shape=list(shape), library="nnkern", isa=isa, threads=threads,
                  blocking=mode, kc_mc_nc=list(blocks),
                  ab_cache_gflops=round(ab["cache"], 3), ab_fixed_gflops=round(ab["fixed"], 3),
                  ab_cache_over_fixed=round(ab["cache"] / ab["fixed"], 4))
