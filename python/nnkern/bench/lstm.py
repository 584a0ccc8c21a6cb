"""LSTM benchmarks: nnkern.LSTM per activation method against torch.nn.LSTM with the same weights,
seq 50, input_size = hidden, batch 1 / 8 / 64, hidden 512 / 1024 (issue 5), 1 thread by default; and the
dynamic batch of seed I20 (lengths=) against running the padded batch, next to torch's PackedSequence.

    python -m nnkern bench --op lstm
    python -m pytest bench/test_lstm.py

All columns of one shape are timed interleaved (harness.interleaved), so the host's drifting load hits
them alike; ratios are torch's time over nnkern's (> 1: nnkern is faster). GFLOP/s counts the two
GEMMs, 2 * seq * batch * 4H * (input_size + H) flops.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import anchors as _anchors
from .harness import interleaved

#: (hidden, batch); input_size = hidden, seq = SEQ.
LSTM_SHAPES: List[Tuple[int, int]] = [(512, 1), (512, 8), (512, 64), (1024, 1), (1024, 8), (1024, 64)]
SEQ = 50
METHODS = ("accurate", "scalef", "minimax")


def lstm_flops(hidden: int, batch: int, seq: int = SEQ, input_size: Optional[int] = None) -> float:
    I = hidden if input_size is None else input_size
    return 2.0 * seq * batch * 4 * hidden * (I + hidden)


def _weights(hidden: int, input_size: int, rng):
    """torch.nn.LSTM's default initialization, U(-1/sqrt(H), 1/sqrt(H)), as float32 arrays."""
    s = 1.0 / np.sqrt(hidden)
    u = lambda *shape: rng.uniform(-s, s, shape).astype(np.float32)  # noqa: E731
    return u(4 * hidden, input_size), u(4 * hidden, hidden), u(4 * hidden), u(4 * hidden)


def _torch_lstm(w, batch_first=False):
    torch = _anchors._torch()
    if torch is None:
        return None
    w_ih, w_hh, b_ih, b_hh = w
    m = torch.nn.LSTM(w_ih.shape[1], w_hh.shape[1], batch_first=batch_first).eval()
    with torch.no_grad():
        for name, a in zip(("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"), w):
            getattr(m, name).copy_(torch.from_numpy(a))
    return m


def lstm_callables(hidden: int, batch: int, seq: int = SEQ, input_size: Optional[int] = None,
                   methods: Sequence[str] = METHODS) -> Dict[str, Callable]:
    """name -> zero-arg callable running one forward pass of seq steps: 'nnkern-<method>' and 'torch'
    (when installed), all with the same weights and input."""
    import nnkern
    I = hidden if input_size is None else input_size
    rng = np.random.default_rng(_anchors.SEED)
    w = _weights(hidden, I, rng)
    x = rng.standard_normal((seq, batch, I)).astype(np.float32)
    fns: Dict[str, Callable] = {}
    for m in methods:
        layer = nnkern.LSTM(*w, activation=m)
        fns[f"nnkern-{m}"] = (lambda layer=layer: layer(x))
    module = _torch_lstm(w)
    if module is not None:
        torch = _anchors._torch()
        tx = torch.from_numpy(x)

        def run_torch():
            with torch.inference_mode():
                return module(tx)
        fns["torch"] = run_torch
    return fns


def dynamic_batch_callables(hidden: int = 512, batch: int = 64, seq: int = SEQ) -> Tuple[Dict[str, Callable], float, float]:
    """Seed I20: a batch of sequences of random lengths in [1, seq]. Returns the callables (nnkern with
    lengths=, nnkern on the padded batch, torch on a PackedSequence and on the padded batch), and the
    static / dynamic wasted fractions nnkern reports."""
    import nnkern
    rng = np.random.default_rng(_anchors.SEED)
    w = _weights(hidden, hidden, rng)
    x = rng.standard_normal((seq, batch, hidden)).astype(np.float32)
    lengths = rng.integers(1, seq + 1, batch)
    layer = nnkern.LSTM(*w)
    fns: Dict[str, Callable] = {"nnkern lengths=": lambda: layer(x, lengths=lengths),
                                "nnkern padded": lambda: layer(x)}
    module = _torch_lstm(w)
    if module is not None:
        torch = _anchors._torch()
        from torch.nn.utils.rnn import pack_padded_sequence
        tx, tl = torch.from_numpy(x), torch.from_numpy(lengths)

        def run_packed():
            with torch.inference_mode():
                return module(pack_padded_sequence(tx, tl, enforce_sorted=False))

        def run_padded():
            with torch.inference_mode():
                return module(tx)
        fns["torch packed"] = run_packed
        fns["torch padded"] = run_padded
    r = layer(x, lengths=lengths)
    return fns, r.static_wasted_fraction, r.wasted_fraction


def _with_threads(threads: int):
    import nnkern
    _anchors.set_threads(threads)
    old = nnkern.get_num_threads()
    nnkern.set_num_threads(threads)
    return old


def lstm_table(shapes: Sequence[Tuple[int, int]] = LSTM_SHAPES, repeats: int = 5, threads: int = 1,
               seq: int = SEQ, progress: Optional[Callable[[str], None]] = None) -> Tuple[str, List[dict]]:
    """Markdown table of milliseconds per forward pass (median) per (hidden, batch) and column, with
    torch / nnkern ratios; and the raw records."""
    import nnkern
    old = _with_threads(threads)
    rows, records, cols = [], [], []
    try:
        for hidden, batch in shapes:
            fns = lstm_callables(hidden, batch, seq)
            t = interleaved(fns, repeats=repeats, min_time=0.05)
            ms = {k: v.median * 1e3 for k, v in t.items()}
            for k in ms:
                if k not in cols:
                    cols.append(k)
            rec = {"hidden": hidden, "batch": batch, "seq": seq, "input_size": hidden, "threads": threads,
                   "flops": lstm_flops(hidden, batch, seq), **{f"{k} ms": round(v, 3) for k, v in ms.items()}}
            if "torch" in ms:
                rec.update({f"torch / nnkern-{m}": round(ms["torch"] / ms[f"nnkern-{m}"], 3) for m in METHODS
                            if f"nnkern-{m}" in ms})
            records.append(rec)
            rows.append((hidden, batch, ms))
            if progress:
                progress(f"[lstm t={threads}] hidden {hidden} batch {batch}: "
                         + "  ".join(f"{k} {v:.2f} ms" for k, v in ms.items()))
    finally:
        nnkern.set_num_threads(old)
    head = ["hidden", "batch"] + [f"{c} ms" for c in cols]
    nn_cols = [c for c in cols if c.startswith("nnkern-")]
    if "torch" in cols:
        head += [f"torch / {c}" for c in nn_cols]
    head += ["best nnkern GFLOP/s"]
    lines = [f"### LSTM forward, seq {seq}, input_size = hidden, {threads} thread(s), median ms per call "
             "(torch / nnkern > 1: nnkern faster)", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for hidden, batch, ms in rows:
        cells = [str(hidden), str(batch)] + [f"{ms[c]:.2f}" if c in ms else "-" for c in cols]
        if "torch" in cols:
            cells += [f"{ms['torch'] / ms[c]:.2f}x" if "torch" in ms and c in ms else "-" for c in nn_cols]
        best = min(ms[c] for c in nn_cols)
        cells.append(f"{lstm_flops(hidden, batch, seq) / best / 1e6:.0f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines), records


def dynamic_batch_table(hidden: int = 512, batch: int = 64, seq: int = SEQ, repeats: int = 5,
                        threads: int = 1) -> Tuple[str, List[dict]]:
    """Seed I20: lengths= (sorted, shrinking batch) vs the padded batch, nnkern and torch."""
    import nnkern
    old = _with_threads(threads)
    try:
        fns, static_waste, waste = dynamic_batch_callables(hidden, batch, seq)
        t = interleaved(fns, repeats=repeats, min_time=0.05)
    finally:
        nnkern.set_num_threads(old)
    ms = {k: v.median * 1e3 for k, v in t.items()}
    lines = [f"### Dynamic batch (seed I20): hidden {hidden}, batch {batch}, lengths uniform in [1, {seq}], "
             f"{threads} thread(s), median ms", "",
             f"padding would waste {static_waste:.1%} of the useful work; lengths= computes {waste:.1%} beyond it", "",
             "| " + " | ".join(ms) + " | padded / lengths= (nnkern) |", "|" + "---|" * (len(ms) + 1),
             "| " + " | ".join(f"{v:.2f}" for v in ms.values())
             + f" | {ms['nnkern padded'] / ms['nnkern lengths=']:.2f}x |"]
    record = {"hidden": hidden, "batch": batch, "seq": seq, "threads": threads, "static_wasted_fraction": static_waste,
              "wasted_fraction": waste, **{f"{k} ms": round(v, 3) for k, v in ms.items()}}
    return "\n".join(lines), [record]
