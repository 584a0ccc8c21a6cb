"""INT8 GEMM benchmarks: nnkern.qgemm (B packed per call) and nnkern.QLinear (prepacked weights, fused
requantization to uint8) per ISA level, and each comparison library (onnxruntime MatMulInteger, oneDNN
dnnl_gemm_u8s8s32, torch._int_mm, torch quantized Linear), on the SGEMM shape list plus transformer
shapes, 1 and 2 threads. qgemm is compared with the libraries taking B per call (onnxruntime's B a graph
input); QLinear with the same plus the prepacked ones (onnxruntime's B an initializer, torch's quantized
Linear).

    python -m pytest bench/test_qgemm.py -k "128-768-768"            # one shape, every column
    python -m pytest bench/test_qgemm.py -k "avx512vnni and t1"       # nnkern VNNI, 1 thread
    python -m nnkern bench --op int8                                  # the same as a table

extra_info: gops, anchor_<library> (GOP/s of each library in this run), best_anchor(_rate), ratio (to
the best), pct_peak (of the ISA's measured int8 peak x threads: tdpbusd for amx, vpdpbusd for avxvnni /
avx512vnni, the saturating vpmaddubsw + vpmaddwd + vpaddd sequence for avx2 / avx512). Nothing here asserts a
timing.
"""
import pytest

import nnkern
from nnkern.bench import anchors as _anchors
from nnkern.bench import harness, ops

from .conftest import run_benchmark

QGEMM = ops.qgemm_op()
QLINEAR = ops.qlinear_op()
ANCHOR_LIBS = ["onnxruntime", "onednn", "torch_int_mm", "torch_qlinear"]
ISAS = list(nnkern.ISA_LEVELS)


def pytest_generate_tests(metafunc):
    if "qshape" in metafunc.fixturenames:
        shapes = ops.QGEMM_QUICK if metafunc.config.getoption("--bench-quick") else ops.QGEMM_SHAPES
        metafunc.parametrize("qshape", shapes, ids=[harness.shape_id(s) for s in shapes])


def _require_isa(isa):
    if isa not in nnkern.supported_isas():
        pytest.skip(f"this CPU (or OS) does not support ISA level {isa}")
    if isa not in harness.bench_isas("u8s8_gemm"):
        pytest.skip(f"{isa} runs the same int8 GEMM kernel as a lower level")


@pytest.mark.parametrize("op", [QGEMM, QLINEAR], ids=["qgemm", "qlinear"])
@pytest.mark.parametrize("isa", ISAS)
def test_int8_nnkern(benchmark, qshape, threads, isa, op, anchor_cache):
    _require_isa(isa)
    ctx = harness.nnkern_context(isa, threads)
    with ctx():
        fn = op.nnkern(qshape, isa)
        kernel = nnkern.cpu_info()["kernels"].get("u8s8_gemm")
    if fn is None:
        pytest.skip(f"{isa} is too slow for {qshape} (> {ops.SCALAR_MAX_WORK} ops)")
    run_benchmark(benchmark, fn, work=op.work(qshape), unit=op.unit, context=ctx,
                  peak_ops=harness.peak("int8", isa) * threads,
                  anchors=anchor_cache.get(op, qshape, threads),
                  op=op.name, shape=list(qshape), library="nnkern", isa=isa, threads=threads, kernel=kernel)


@pytest.mark.parametrize("op", [QGEMM, QLINEAR], ids=["qgemm", "qlinear"])
@pytest.mark.parametrize("library", ANCHOR_LIBS)
def test_int8_anchor(benchmark, qshape, threads, library, op, anchor_cache):
    fns = op.anchors(qshape, threads)
    if library not in fns:
        pytest.skip(f"{library} is not installed (or cannot run this shape, or is not a {op.name} counterpart)")
    run_benchmark(benchmark, fns[library], work=op.work(qshape), unit=op.unit,
                  anchors=anchor_cache.get(op, qshape, threads),
                  op=op.name, shape=list(qshape), library=library, isa="", threads=threads)
    _anchors.set_threads(1)
