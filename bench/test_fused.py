"""QConv2d's fused output stages (pool="global_avg", pixel_shuffle=r) against the unfused sequences (QConv2d then
numpy's mean / nnkern.avg_pool2d / nnkern.pixel_shuffle) and torch's quantized conv2d then adaptive_avg_pool2d /
pixel_shuffle, on the cases of ``nnkern.bench.fused``. Batch 1, 1 and 2 threads. (The ESPCN network end to end:
``python -m nnkern bench --op espcn``, a selection of ``--op networks``.)

    python -m pytest bench/test_fused.py -k "gap and t1"        # the pooling cases, 1 thread
    python -m nnkern bench --op fused                            # the same as a table

extra_info: case, variant, us (median, from the pytest-benchmark stats), fused_us (the fused call's time in one
interleaved measurement of every variant) and speedup (the variant's over the fused call's of the same result
type, from that measurement), max_diff against the fused result. Nothing here asserts a timing.
"""
import pytest

from nnkern.bench import conv, fused, harness

from .conftest import run_benchmark

ISA = harness.bench_isas("u8s8_gemm")[-1]
VARIANTS = ["fused", "fused u8", "conv + numpy mean", "conv + avg_pool2d", "conv + pixel_shuffle", "torch"]


def pytest_generate_tests(metafunc):
    if "case" in metafunc.fixturenames:
        cases = fused.QUICK if metafunc.config.getoption("--bench-quick") else fused.CASES
        metafunc.parametrize("case", cases, ids=[c.name for c in cases])


_TABLES = {}


def _table(case, threads, enabled):
    """Every variant of (case, threads) measured once, interleaved (fused.measure): the speed-ups come from
    there. [] with --no-anchors."""
    key = (case.name, threads)
    if key not in _TABLES:
        _TABLES[key] = fused.measure(case, threads, isa=ISA) if enabled else []
    return _TABLES[key]


@pytest.mark.parametrize("variant", VARIANTS)
def test_fused_stage(benchmark, case, threads, variant, other_libraries):
    d = conv.make_data(case.layer)
    ctx = harness.nnkern_context(ISA, threads)
    if variant == "torch":
        fns, notes = conv.try_libraries({"torch": lambda: fused.torch_call(case, d, threads)}, case.name)
        if "torch" not in fns:
            pytest.skip(f"torch: {notes.get('torch', 'not available')}")
        fn, context = fns["torch"], None
    else:
        with ctx():
            fns = fused.nnkern_calls(case, d)
        if variant not in fns:
            pytest.skip(f"{variant} does not apply to a {case.stage} case")
        fn, context = fns[variant], ctx
    table = _table(case, threads, other_libraries.enabled)
    row = next((r for r in table if r.variant == variant), None)
    extra = run_benchmark(benchmark, fn, work=conv.conv_ops(case.layer), unit="GOP/s",
                          **({"context": context} if context else {}),
                          op="fused", case=case.name, layer=case.describe(), variant=variant, threads=threads,
                          isa=ISA)
    if row is not None:
        extra.update(speedup=row.speedup, max_diff=row.max_diff,
                     fused_us=round(next(r for r in table if r.variant == "fused").seconds * 1e6, 2))
    if getattr(benchmark, "stats", None) is not None:
        extra["us"] = round(benchmark.stats.stats.median * 1e6, 2)
    conv._anchors.set_threads(1)
