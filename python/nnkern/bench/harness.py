"""Shared benchmark harness: shape lists, a robust interleaved timer, per-ISA peaks, result records
and markdown tables.  Used by ``python -m nnkern bench`` and by the pytest-benchmark suites in the
repository's ``bench/``; later ops (INT8 GEMM, conv, sigmoid) plug in through :class:`Op`.

Method: each repetition loops a call until it lasts >= ``min_time``
(20 ms); the figure is the median (and best) of ``repeats`` repetitions.  The libraries of one
shape are *interleaved* repetition by repetition (rotating the order), so drifts of the host's
load (15-30 % here) hit every column alike.  Ratios are only meaningful within one run.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import statistics
import time
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

Shape = Tuple[int, ...]

# --- shape lists, from real models -----------------------------------------------------------------

#: SGEMM (M, N, K): squares; skinny (batch 1/8/32 x 1024 FC layers, LSTM-ish), a 6-column panel;
#: odd sizes; tiny (17,13,9: call overhead); im2col of ResNet-50 conv2_x 3x3 (3136x64x576) and
#: conv3_x 3x3 (784x128x1152).
SGEMM_SHAPES: List[Shape] = [
    (64, 64, 64), (128, 128, 128), (256, 256, 256), (512, 512, 512), (1024, 1024, 1024),
    (2048, 2048, 2048),
    (1, 1024, 1024), (8, 1024, 1024), (32, 1024, 1024), (1024, 6, 1024),
    (1000, 1000, 1000), (1023, 1021, 1019), (17, 13, 9),
    (3136, 64, 576), (784, 128, 1152),
]
#: ``--quick`` subset: one of each kind.
SGEMM_QUICK: List[Shape] = [
    (64, 64, 64), (256, 256, 256), (1024, 1024, 1024), (8, 1024, 1024), (1024, 6, 1024),
    (17, 13, 9), (3136, 64, 576),
]
#: The large shapes on which blocking choices (cache-derived vs fixed O7) matter.
SGEMM_LARGE: List[Shape] = [
    (512, 512, 512), (1024, 1024, 1024), (2048, 2048, 2048), (1000, 1000, 1000),
    (1023, 1021, 1019), (3136, 64, 576), (784, 128, 1152),
]

SHAPES: Dict[str, List[Shape]] = {"sgemm": SGEMM_SHAPES}
QUICK_SHAPES: Dict[str, List[Shape]] = {"sgemm": SGEMM_QUICK}


def shape_id(shape: Shape) -> str:
    """'M-N-K' (the pytest id; select with ``-k 64-64-64``)."""
    return "-".join(str(d) for d in shape)


def parse_shape(text: str) -> Shape:
    """'M,N,K', 'MxNxK' or 'M-N-K' -> (M, N, K)."""
    for sep in ("x", "-", ","):
        text = text.replace(sep, " ")
    return tuple(int(t) for t in text.split())


# --- timing ----------------------------------------------------------------------------------------

@dataclasses.dataclass
class Timing:
    median: float  # seconds per call
    best: float
    repeats: int
    calls_per_repeat: int


def _loop(fn: Callable, n: int) -> float:
    """Seconds per call over ``n`` back-to-back calls."""
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


def calibrate(fn: Callable, min_time: float = 0.02) -> int:
    """Calls needed for one repetition to last >= ``min_time`` (after one warm-up call)."""
    fn()
    n = 1
    while True:
        t = _loop(fn, n) * n
        if t >= min_time:
            return n
        n = max(n + 1, int(math.ceil(n * min_time * 1.1 / max(t, 1e-9))))


def interleaved(fns: Dict[str, Callable], *, repeats: int = 7, min_time: float = 0.02,
                contexts: Optional[Dict[str, Callable]] = None,
                pause_after: Optional[Dict[str, float]] = None) -> Dict[str, Timing]:
    """Time every callable in ``fns``, alternating them repetition by repetition.

    contexts: name -> zero-arg context-manager factory entered around that callable's warm-up and
      each repetition (e.g. an ISA cap, a thread count, a blocking mode: process-wide settings).
    pause_after: name -> seconds to sleep after its repetition (OpenBLAS workers spin ~0.2 s); the
      key "*" gives the pause of the names not listed.
    """
    contexts = contexts or {}
    pause_after = pause_after or {}
    names = list(fns)
    counts, samples = {}, {n: [] for n in names}

    def ctx(name):
        return contexts.get(name, contextlib.nullcontext)()

    for name in names:
        with ctx(name):
            counts[name] = calibrate(fns[name], min_time)
        time.sleep(pause_after.get(name, pause_after.get("*", 0.0)))
    for r in range(repeats):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            with ctx(name):
                if pause_after:  # after a pause the core idled (clock, caches): warm up untimed first
                    _loop(fns[name], max(1, counts[name] // 4))
                samples[name].append(_loop(fns[name], counts[name]))
            time.sleep(pause_after.get(name, pause_after.get("*", 0.0)))
    return {n: Timing(statistics.median(s), min(s), len(s), counts[n]) for n, s in samples.items()}


# --- peak ------------------------------------------------------------------------------------------

#: kind -> function(isa) -> ops/s of one core (0 when the ISA has no loop).  Later issues register
#: e.g. ``PEAK_FUNCS["int8"] = lambda isa: _C.i8_peak_ops(isa, 0.1)``.
PEAK_FUNCS: Dict[str, Callable[[str], float]] = {}


def _f32_peak(isa: str) -> float:
    from .. import _C
    return float(_C.f32_peak_flops(isa, 0.1))


PEAK_FUNCS["f32"] = _f32_peak


@functools.lru_cache(maxsize=None)
def peak(kind: str, isa: str) -> float:
    """Measured peak (ops/s) of one core for ``kind`` ('f32', ...) at ``isa``; cached per process.
    Best of three short runs (the host's load varies)."""
    fn = PEAK_FUNCS.get(kind)
    if fn is None:
        return 0.0
    return max(fn(isa) for _ in range(3))


# --- ops and results ---------------------------------------------------------------------------------

@dataclasses.dataclass
class Op:
    """What the harness needs to benchmark one op.

    work(shape) -> operation count of one call (e.g. 2MNK flops).
    nnkern(shape, isa) -> zero-arg callable (inputs preallocated) or None to skip that ISA there.
    anchors(shape, threads) -> {library: zero-arg callable} (installed libraries only).
    external(shape, threads) -> {library: rate in G ops/s} measured elsewhere (e.g. a subprocess).
    """
    name: str
    unit: str  # 'GFLOP/s' or 'GOP/s'
    peak_kind: str  # key of PEAK_FUNCS
    work: Callable[[Shape], float]
    nnkern: Callable[[Shape, str], Optional[Callable]]
    anchors: Callable[[Shape, int], Dict[str, Callable]]
    external: Optional[Callable[[Shape, int], Dict[str, float]]] = None
    pause_after: Optional[Callable[[int], Dict[str, float]]] = None  # threads -> pauses


@dataclasses.dataclass
class Result:
    op: str
    shape: Shape
    library: str  # 'nnkern' or the comparison library's name
    isa: str  # nnkern's ISA level; '' for other libraries
    threads: int
    seconds: float  # median per call
    best_seconds: float
    rate: float  # median, in G ops/s (unit below)
    unit: str
    ratio: Optional[float] = None  # rate / best comparison library's rate (same shape, threads, run)
    pct_peak: Optional[float] = None  # 100 * rate / (peak of this ISA per core * threads)

    @property
    def label(self) -> str:
        return f"{self.library}/{self.isa}" if self.isa else self.library

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["shape"] = list(self.shape)
        return d


def cpu_label() -> str:
    """The CPU as a table names it: its model name, family / model numbers and the best ISA level nnkern runs."""
    import nnkern
    info = nnkern.cpu_info()
    name, fam = info.get("model", "?"), ""
    try:
        fields = {}
        with open("/proc/cpuinfo") as f:
            for line in f:
                if ":" in line:
                    k, v = (t.strip() for t in line.split(":", 1))
                    fields.setdefault(k, v)
        name = fields.get("model name", name)
        if "cpu family" in fields:
            family, model = int(fields["cpu family"]), int(fields.get("model", "-1"))
            fam = f", family {family} model {model}"
            arch = _microarchitecture(fields.get("vendor_id", ""), family, model)
            if arch:
                name = f"{name} {arch}"
    except (OSError, ValueError):
        pass
    return f"{name} ({info.get('arch', '?')}{fam}; {info['supported_isas'][-1]})"


def _microarchitecture(vendor: str, family: int, model: int) -> str:
    """The core's name for the x86 families this project's machines have had ('' if unknown)."""
    if vendor == "AuthenticAMD":
        if family == 25:
            return "Zen 4" if 0x10 <= model <= 0x1F or 0x60 <= model <= 0xAF else "Zen 3"
        if family == 26:
            return "Zen 5"
    if vendor == "GenuineIntel" and family == 6:
        return {0x8F: "Sapphire Rapids", 0xCF: "Emerald Rapids", 0xAD: "Granite Rapids"}.get(model, "")
    return ""


def nnkern_context(isa: str, threads: int, extra: Optional[Callable] = None):
    """Context factory: nnkern capped at ``isa`` on ``threads`` threads (restored on exit)."""
    import nnkern

    @contextlib.contextmanager
    def ctx():
        old_t = nnkern.get_num_threads()
        nnkern.set_num_threads(threads)
        try:
            with nnkern.max_isa(isa), (extra() if extra else contextlib.nullcontext()):
                yield
        finally:
            nnkern.set_num_threads(old_t)
    return ctx


@functools.lru_cache(maxsize=None)
def _distinct_isas(kernel_key: str) -> Tuple[str, ...]:
    import nnkern
    out, seen = [], set()
    for isa in nnkern.supported_isas():
        with nnkern.max_isa(isa):
            k = nnkern.cpu_info().get("kernels", {}).get(kernel_key, isa)
        if k not in seen:
            seen.add(k)
            out.append(isa)
    return tuple(out)


def top_of_kernel_group(isa: str, kernel_key: str = "f32_gemm") -> str:
    """The highest level this CPU runs from ``isa`` up whose ``kernel_key`` kernel is still ``isa``'s: the levels
    bench_isas folds into ``isa`` (avx512's FP32 GEMM also runs at avx512bf16 and amx, where the bf16 kernels are)."""
    import nnkern
    levels = nnkern.supported_isas()
    if isa not in levels:
        return isa
    with nnkern.max_isa(isa):
        kernel = nnkern.cpu_info().get("kernels", {}).get(kernel_key)
    top = isa
    for level in levels[levels.index(isa) + 1:]:
        with nnkern.max_isa(level):
            if nnkern.cpu_info().get("kernels", {}).get(kernel_key) != kernel:
                break
        top = level
    return top


def bench_isas(kernel_key: str = "f32_gemm") -> List[str]:
    """The ISA levels this CPU can run (scalar included), lowest first, keeping only the first level
    of each distinct kernel of ``kernel_key`` (e.g. avx512vnni runs the same f32 GEMM as avx512)."""
    return list(_distinct_isas(kernel_key))


def measure_shape(op: Op, shape: Shape, threads: int, *, isas: Optional[Sequence[str]] = None,
                  libraries: Optional[Iterable[str]] = None, repeats: int = 7,
                  min_time: float = 0.02) -> List[Result]:
    """All results of one (shape, threads): nnkern per ISA and every comparison library, interleaved.

    libraries: restrict the comparison libraries (None = all installed; [] = none)."""
    isas = list(isas if isas is not None else bench_isas())
    fns, ctxs = {}, {}
    for isa in isas:
        with nnkern_context(isa, threads)():
            fn = op.nnkern(shape, isa)
        if fn is not None:
            fns["nnkern/" + isa] = fn
            ctxs["nnkern/" + isa] = nnkern_context(isa, threads)
    anchors = op.anchors(shape, threads) if libraries is None or list(libraries) else {}
    if libraries is not None:
        anchors = {k: v for k, v in anchors.items() if k in set(libraries)}
    fns.update(anchors)
    pauses = op.pause_after(threads) if op.pause_after else {}
    timings = interleaved(fns, repeats=repeats, min_time=min_time, contexts=ctxs, pause_after=pauses)
    work = op.work(shape)
    results = []
    for name, t in timings.items():
        lib, _, isa = name.partition("/")
        results.append(Result(op.name, tuple(shape), lib, isa, threads, t.median, t.best,
                              work / t.median / 1e9, op.unit))
    if op.external is not None:
        ext = op.external(shape, threads)
        for name, rate in ext.items():
            if libraries is None or name in set(libraries):
                results.append(Result(op.name, tuple(shape), name, "", threads, work / rate / 1e9,
                                      work / rate / 1e9, rate, op.unit))
    annotate(results, op.peak_kind)
    return results


def is_comparison(library: str) -> bool:
    """A library the ratios compare nnkern with: not nnkern itself, nor a column of nnkern's own beside it (bf16's
    'nnkern-f32', its float32 counterpart)."""
    return not library.startswith("nnkern")


def annotate(results: List[Result], peak_kind: str) -> None:
    """Fill ratio (to the best comparison library of the same op/shape/threads) and % of peak."""
    groups: Dict[tuple, List[Result]] = {}
    for r in results:
        groups.setdefault((r.op, r.shape, r.threads), []).append(r)
    for group in groups.values():
        best = max((r.rate for r in group if is_comparison(r.library)), default=0.0)
        for r in group:
            r.ratio = r.rate / best if best > 0 else None
            if r.isa:
                p = peak(peak_kind, r.isa) * r.threads / 1e9
                r.pct_peak = 100.0 * r.rate / p if p > 0 else None


def measure_shape_threads(op: Op, shape: Shape, threads_list: Sequence[int], *,
                          isas: Optional[Sequence[str]] = None, repeats: int = 7,
                          min_time: float = 0.02) -> List[Result]:
    """nnkern alone at every thread count of ``threads_list``, interleaved repetition by repetition,
    so that the host's drift (15-30% from minute to minute) cancels out of the thread-scaling ratios."""
    isas = list(isas if isas is not None else bench_isas())
    fns, ctxs, keys = {}, {}, {}
    for isa in isas:
        for threads in threads_list:
            with nnkern_context(isa, threads)():
                fn = op.nnkern(shape, isa)
            if fn is not None:
                name = f"nnkern/{isa}@{threads}"
                fns[name], ctxs[name], keys[name] = fn, nnkern_context(isa, threads), (isa, threads)
    timings = interleaved(fns, repeats=repeats, min_time=min_time, contexts=ctxs)
    work = op.work(shape)
    results = [Result(op.name, tuple(shape), "nnkern", keys[n][0], keys[n][1], t.median, t.best,
                      work / t.median / 1e9, op.unit) for n, t in timings.items()]
    annotate(results, op.peak_kind)
    return results


def run(op: Op, shapes: Sequence[Shape], threads_list: Sequence[int] = (1,), *,
        progress: Optional[Callable[[str], None]] = print, **kw) -> List[Result]:
    """measure_shape over ``threads_list`` x ``shapes``, one progress line per shape. nnkern alone
    (libraries=[]) at several thread counts: the counts of a shape are interleaved (measure_shape_threads)."""
    if kw.get("libraries") == [] and len(threads_list) > 1:
        kw.pop("libraries")
        jobs = [("threads " + ",".join(map(str, threads_list)),
                 lambda shape: measure_shape_threads(op, shape, threads_list, **kw), lambda r: f"{r.label}@{r.threads}")]
    else:
        jobs = [(f"t={t}", lambda shape, t=t: measure_shape(op, shape, t, **kw), lambda r: r.label)
                for t in threads_list]
    out = []
    for tag, measure, label in jobs:
        for i, shape in enumerate(shapes):
            t0 = time.perf_counter()
            res = measure(shape)
            out += res
            if progress:
                progress(f"[{op.name} {tag} {i + 1}/{len(shapes)}] {shape_id(shape):>16}  "
                         + "  ".join(f"{label(r)} {r.rate:.1f}" for r in res)
                         + f"  ({time.perf_counter() - t0:.1f} s)")
    return out


# --- tables ------------------------------------------------------------------------------------------

def _fmt(x: float) -> str:
    return f"{x:.3g}" if x < 10 else f"{x:.0f}" if x >= 1000 else f"{x:.1f}"


def markdown_table(results: List[Result], threads: int, op: Optional[str] = None) -> str:
    """One markdown table for one thread count: a row per shape, a column per library/ISA.

    nnkern cells read 'rate (ratio x, pct %)'; the last columns give the best comparison library and
    the best nnkern ISA's ratio to it."""
    rs = [r for r in results if r.threads == threads and (op is None or r.op == op)]
    if not rs:
        return ""
    unit = rs[0].unit
    cols: List[str] = []
    import nnkern
    for r in sorted(rs, key=lambda r: (r.library != "nnkern", r.library == "nnkern" and
                                       nnkern.ISA_LEVELS.index(r.isa) if r.isa in nnkern.ISA_LEVELS else 0)):
        if r.label not in cols:
            cols.append(r.label)
    shapes: List[Shape] = []
    for r in rs:
        if r.shape not in shapes:
            shapes.append(r.shape)
    head = ["M,N,K"] + cols + ["best other", "nnkern best / other"]
    lines = [f"**{rs[0].op} {unit}, {threads} thread(s)** - median; nnkern cells: "
             f"{unit} (ratio to best other library, % of that ISA's measured peak x threads)", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in shapes:
        cell = {r.label: r for r in rs if r.shape == s}
        row = [",".join(map(str, s))]
        for c in cols:
            r = cell.get(c)
            if r is None:
                row.append("-")
            elif r.library == "nnkern":
                extra = [f"{r.ratio:.2f}x" if r.ratio is not None else None,
                         f"{r.pct_peak:.0f}%" if r.pct_peak is not None else None]
                extra = [e for e in extra if e]
                row.append(_fmt(r.rate) + (f" ({', '.join(extra)})" if extra else ""))
            else:
                row.append(_fmt(r.rate))
        others = [r for r in cell.values() if is_comparison(r.library)]
        mine = [r for r in cell.values() if r.library == "nnkern"]
        if others:
            bo = max(others, key=lambda r: r.rate)
            row.append(f"{bo.label} {_fmt(bo.rate)}")
        else:
            row.append("-")
        if others and mine:
            bm = max(mine, key=lambda r: r.rate)
            row.append(f"{bm.ratio:.2f}x ({bm.isa})")
        else:
            row.append("-")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def scaling_table(results: List[Result], threads: int, base: int = 1, op: Optional[str] = None) -> str:
    """Speed-up of ``threads`` over ``base`` threads per shape and library (same run, medians)."""
    rs = [r for r in results if op is None or r.op == op]
    rate = {(r.shape, r.label, r.threads): r.rate for r in rs}
    shapes = list(dict.fromkeys(r.shape for r in rs))
    cols = list(dict.fromkeys(r.label for r in rs if (r.shape, r.label, base) in rate and
                              (r.shape, r.label, threads) in rate))
    if not cols or not shapes:
        return ""
    lines = [f"**{rs[0].op}: {threads} threads / {base} thread(s)** - ratio of the medians", "",
             "| M,N,K | " + " | ".join(cols) + " |", "|" + "---|" * (len(cols) + 1)]
    for s in shapes:
        cells = []
        for c in cols:
            lo, hi = rate.get((s, c, base)), rate.get((s, c, threads))
            cells.append(f"{hi / lo:.2f}x" if lo and hi else "-")
        lines.append("| " + ",".join(map(str, s)) + " | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def peaks_line(kind: str, unit: str, isas: Optional[Sequence[str]] = None) -> str:
    """'peak per core: avx2 72 GFLOP/s, avx512 136 GFLOP/s' (measured now, cached)."""
    parts = [f"{isa} {peak(kind, isa) / 1e9:.1f}" for isa in (isas or bench_isas()) if peak(kind, isa) > 0]
    return f"measured {kind} peak per core ({unit}): " + (", ".join(parts) or "n/a")
