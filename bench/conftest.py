"""Fixtures shared by the benchmark suites: options, the comparison libraries' figures measured once
per (op, shape, threads) in this run (interleaved by the harness), and the helper that times one
callable with pytest-benchmark and fills ``extra_info``.  Timings are never asserted."""
import contextlib

import pytest

pytest.importorskip("pytest_benchmark")

from nnkern.bench import harness  # noqa: E402


def pytest_addoption(parser):
    g = parser.getgroup("nnkern bench")
    g.addoption("--bench-threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    g.addoption("--bench-quick", action="store_true", help="only the quick shape subset")
    g.addoption("--no-anchors", action="store_true",
                help="skip measuring comparison libraries (no ratio in extra_info)")


def pytest_generate_tests(metafunc):
    cfg = metafunc.config
    if "threads" in metafunc.fixturenames:
        threads = [int(t) for t in cfg.getoption("--bench-threads").split(",") if t.strip()]
        metafunc.parametrize("threads", threads, ids=[f"t{t}" for t in threads])
    if "sgemm_shape" in metafunc.fixturenames:
        shapes = harness.SGEMM_QUICK if cfg.getoption("--bench-quick") else harness.SGEMM_SHAPES
        metafunc.parametrize("sgemm_shape", shapes, ids=[harness.shape_id(s) for s in shapes])


class AnchorCache:
    """Comparison-library results per (op name, shape, threads), measured on first use."""

    def __init__(self, enabled):
        self.enabled = enabled
        self._cache = {}

    def get(self, op, shape, threads):
        key = (op.name, tuple(shape), threads)
        if key not in self._cache:
            self._cache[key] = (harness.measure_shape(op, shape, threads, isas=[])
                                if self.enabled else [])
        return self._cache[key]

    def best(self, op, shape, threads):
        res = self.get(op, shape, threads)
        return max(res, key=lambda r: r.rate) if res else None


@pytest.fixture(scope="session")
def anchor_cache(request):
    return AnchorCache(not request.config.getoption("--no-anchors"))


class OtherLibraries:
    """The comparison libraries' results per key (e.g. (op, layer name, threads)), taken from one interleaved
    measurement of every column (``measure()`` -> harness results, nnkern's included) on first use; [] with
    --no-anchors. The convolution suites' counterpart of AnchorCache, whose ops are not harness.Op."""

    def __init__(self, enabled):
        self.enabled, self._cache = enabled, {}

    def get(self, key, measure):
        if key not in self._cache:
            self._cache[key] = [r for r in measure() if r.library != "nnkern"] if self.enabled else []
        return self._cache[key]


@pytest.fixture(scope="session")
def other_libraries(request):
    return OtherLibraries(not request.config.getoption("--no-anchors"))


def run_benchmark(benchmark, fn, *, work, unit, context=contextlib.nullcontext, rounds=7,
                  min_time=0.02, peak_ops=0.0, anchors=(), **info):
    """Time ``fn`` (each round looping it >= ``min_time``) and record in benchmark.extra_info:
    the rate (unit), the comparison libraries' rates from this run, the ratio to the best of them
    and % of ``peak_ops`` (ops/s; 0 = unknown).  Returns the extra_info dict."""
    with context():
        iterations = harness.calibrate(fn, min_time)
        benchmark.pedantic(fn, rounds=rounds, iterations=iterations, warmup_rounds=1)
    extra = benchmark.extra_info
    extra.update(info)
    extra["unit"] = unit
    extra["work"] = work
    for r in anchors:
        extra[f"anchor_{r.label}"] = round(r.rate, 3)
    stats = getattr(benchmark, "stats", None)
    if stats is None:  # --benchmark-disable
        return extra
    median = stats.stats.median
    rate = work / median / 1e9
    extra["rate"] = round(rate, 3)
    extra["gflops" if unit == "GFLOP/s" else "gops"] = round(rate, 3)
    if anchors:
        best = max(anchors, key=lambda r: r.rate)
        extra["best_anchor"] = best.label
        extra["best_anchor_rate"] = round(best.rate, 3)
        extra["ratio"] = round(rate / best.rate, 4)
    if peak_ops > 0:
        extra["peak"] = round(peak_ops / 1e9, 2)
        extra["pct_peak"] = round(100.0 * rate * 1e9 / peak_ops, 2)
    return extra
