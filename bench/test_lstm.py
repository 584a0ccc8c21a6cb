"""nnkern.LSTM (per activation method) vs torch.nn.LSTM with the same weights: seq 50, input_size =
hidden, batch 1 / 8 / 64, hidden 512 / 1024, 1 thread (issue 5's benchmark). One benchmark per
(hidden, batch, column); extra_info holds the milliseconds of every column measured interleaved once
per shape in this run (``ms_<column>``) and this column's ``ratio`` = torch ms / its ms (> 1: faster
than torch). Nothing asserts a timing. The goal to work toward: ratio >= 1.5 at batch 1.

    python -m pytest bench/test_lstm.py
    python -m pytest bench/test_lstm.py -k "h512-b1"
    python -m nnkern bench --op lstm                 # the same as one table, plus the dynamic batch
"""
import pytest

import nnkern
from nnkern.bench import anchors as _anchors
from nnkern.bench import harness
from nnkern.bench import lstm

COLUMNS = [f"nnkern-{m}" for m in lstm.METHODS] + ["torch"]
_INTERLEAVED = {}


def _interleaved_ms(hidden, batch):
    """Every column of one shape timed interleaved, once per run (the robust ratio)."""
    key = (hidden, batch)
    if key not in _INTERLEAVED:
        t = harness.interleaved(lstm.lstm_callables(hidden, batch), repeats=5, min_time=0.05)
        _INTERLEAVED[key] = {k: v.median * 1e3 for k, v in t.items()}
    return _INTERLEAVED[key]


@pytest.mark.parametrize("column", COLUMNS)
@pytest.mark.parametrize("hidden,batch", lstm.LSTM_SHAPES, ids=[f"h{h}-b{b}" for h, b in lstm.LSTM_SHAPES])
def test_lstm(benchmark, hidden, batch, column):
    _anchors.set_threads(1)
    nnkern.set_num_threads(1)
    fns = lstm.lstm_callables(hidden, batch, methods=lstm.METHODS if column == "torch" else (column[7:],))
    if column not in fns:
        pytest.skip(f"{column} is not installed")
    fn = fns[column]
    iterations = max(1, harness.calibrate(fn, 0.05))
    benchmark.pedantic(fn, rounds=5, iterations=iterations, warmup_rounds=1)
    ms = _interleaved_ms(hidden, batch)
    extra = benchmark.extra_info
    extra.update({"hidden": hidden, "batch": batch, "seq": lstm.SEQ, "input_size": hidden, "threads": 1,
                  "column": column, "unit": "GFLOP/s", "work": lstm.lstm_flops(hidden, batch)})
    extra.update({f"ms_{k}": round(v, 3) for k, v in ms.items()})
    if "torch" in ms and column in ms:
        extra["ratio"] = round(ms["torch"] / ms[column], 3)
    stats = getattr(benchmark, "stats", None)
    if stats is not None:
        extra["gflops"] = round(lstm.lstm_flops(hidden, batch) / stats.stats.median / 1e9, 2)


def test_lstm_dynamic_batch(benchmark):
    """Seed I20: lengths= against the padded batch (extra_info: both, torch packed/padded, wasted fractions)."""
    _anchors.set_threads(1)
    nnkern.set_num_threads(1)
    fns, static_waste, waste = lstm.dynamic_batch_callables()
    t = harness.interleaved(fns, repeats=5, min_time=0.05)
    benchmark.pedantic(fns["nnkern lengths="], rounds=5, iterations=1, warmup_rounds=1)
    benchmark.extra_info.update({"static_wasted_fraction": round(static_waste, 4), "wasted_fraction": waste,
                                 **{f"ms_{k}": round(v.median * 1e3, 3) for k, v in t.items()}})
