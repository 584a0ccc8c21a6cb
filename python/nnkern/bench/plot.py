"""``python -m nnkern bench ... --plot FILE.png``: one bar chart per printed table, stacked in one image.

Each chart has a group of bars per shape (a table row) and a bar per column: nnkern's next to each
comparison library's, with the unit and direction ("higher is better" or "lower is better") in the
title. matplotlib is the optional extra ``nnkern[plot]``; it is imported only here.
"""
from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional, Sequence


@dataclasses.dataclass
class Chart:
    title: str
    unit: str
    higher_is_better: bool
    categories: List[str]  # one per table row (shape)
    series: Dict[str, List[Optional[float]]]  # column -> a value per category (None: not measured)


def require_matplotlib() -> None:
    """Fail before a long benchmark, not after it, when the extra is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise SystemExit("--plot needs matplotlib: pip install 'nnkern[plot]'") from None


def from_results(results: Sequence, threads_list: Sequence[int], ops: Sequence[str]) -> List[Chart]:
    """The charts of harness.markdown_table: one per (op, thread count), GOP/s per library/ISA."""
    charts = []
    for op in ops:
        for t in threads_list:
            rs = [r for r in results if r.threads == t and r.op == op]
            if not rs:
                continue
            cats, series = [], {}
            for r in rs:
                cat = "x".join(map(str, r.shape))
                if cat not in cats:
                    cats.append(cat)
            for r in rs:
                series.setdefault(r.label, [None] * len(cats))[cats.index("x".join(map(str, r.shape)))] = r.rate
            charts.append(Chart(f"{op}, {t} thread(s) (M x N x K)", rs[0].unit, True, cats, _nnkern_first(series)))
    return charts


def from_records(kind: str, records: Sequence[dict], threads: int = 1) -> List[Chart]:
    """The charts of the elementwise, top-k and LSTM tables, from their records."""
    if not records:
        return []
    if kind in ("sigmoid", "tanh"):
        keys = ("function", "n", "threads")
        return [_chart(f"{kind}, {threads} thread(s) (elements)", "Gelem/s", True, records,
                       lambda r: str(r["n"]), keys)]
    if kind == "topk":
        return [_chart("topk, 1 thread (rows x n, k)", "us per call", False, records,
                       lambda r: f"{r['rows']}x{r['n']}, k={r['k']}", ("rows", "n", "k"))]
    if kind == "lstm":
        recs = [r for r in records if "flops" in r]
        dyn = [r for r in records if "static_wasted_fraction" in r]
        charts = [_chart(f"LSTM forward, seq {recs[0]['seq']}, {threads} thread(s) (hidden, batch)", "ms per call",
                         False, recs, lambda r: f"{r['hidden']}, {r['batch']}", (), suffix=" ms")] if recs else []
        if dyn:
            charts.append(_chart(f"LSTM dynamic batch, {threads} thread(s) (hidden, batch)", "ms per call", False, dyn,
                                 lambda r: f"{r['hidden']}, {r['batch']}", (), suffix=" ms"))
        return charts
    raise ValueError(f"no chart for {kind!r}")


def _chart(title, unit, higher, records, category, skip, suffix=None) -> Chart:
    cats = [category(r) for r in records]
    series: Dict[str, List[Optional[float]]] = {}
    for i, r in enumerate(records):
        for k, v in r.items():
            if k in skip or not isinstance(v, (int, float)) or isinstance(v, bool):
                continue
            if suffix is not None and not k.endswith(suffix):
                continue
            name = k[: -len(suffix)] if suffix else k
            series.setdefault(name, [None] * len(cats))[i] = float(v)
    return Chart(title, unit, higher, cats, _nnkern_first(series))


def _nnkern_first(series):
    return dict(sorted(series.items(), key=lambda kv: not kv[0].startswith("nnkern")))


def save(charts: Sequence[Chart], path: str) -> None:
    """All charts into one PNG (or any format matplotlib infers from the name), one subplot each."""
    require_matplotlib()
    import matplotlib
    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt
    if not charts:
        raise ValueError("nothing to plot: the benchmark produced no table")
    width = max(6.0, max(len(c.categories) * (0.4 + 0.18 * len(c.series)) for c in charts))
    fig, axes = plt.subplots(len(charts), 1, figsize=(min(width, 24.0), 3.8 * len(charts)), squeeze=False)
    cmap = plt.get_cmap("tab10")
    for ax, chart in zip(axes[:, 0], charts):
        n = len(chart.series)
        bar = 0.8 / max(n, 1)
        for j, (name, values) in enumerate(chart.series.items()):
            xs = [i + (j - (n - 1) / 2) * bar for i in range(len(chart.categories))]
            ys = [v if v is not None else 0.0 for v in values]
            ax.bar(xs, ys, bar, label=name, color=cmap(j % 10),
                   edgecolor="black" if name.startswith("nnkern") else "none", linewidth=0.6)
        ax.set_xticks(range(len(chart.categories)))
        ax.set_xticklabels(chart.categories, rotation=30 if len(chart.categories) > 6 else 0, ha="right"
                           if len(chart.categories) > 6 else "center", fontsize=8)
        better = "higher is better" if chart.higher_is_better else "lower is better"
        ax.set_title(f"{chart.title}: {chart.unit}, {better}", fontsize=10)
        ax.set_ylabel(chart.unit)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))  # outside: never over a bar
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
