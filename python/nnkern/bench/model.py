"""Whole models from ONNX files: nnkern.onnx against onnxruntime (all graph optimizations, the same thread count)
on the same inputs, latency and the outputs' differences (``python -m nnkern bench --model MODEL.onnx``)."""
from __future__ import annotations

import os
from typing import Dict, List, Optional, Sequence

import numpy as np

from . import harness


def _ort_session(model_bytes: bytes, threads: int):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])


def run(model, feeds_fn, threads_list: Sequence[int], *, repeats: int = 7, libraries: Optional[Sequence[str]] = None,
        name: str = "model", progress=print):
    """Times the model at each thread count, nnkern and onnxruntime interleaved. feeds_fn(session) -> feeds.
    Returns (results, differences: [(output, max abs, max rel)], outputs' names)."""
    import nnkern.onnx
    from nnkern.onnx._tool import differences
    base = nnkern.onnx.InferenceSession(model)
    model_bytes = base._model_bytes()
    feeds = feeds_fn(base)
    names = [o.name for o in base.get_outputs()]
    results: List[harness.Result] = []
    diffs = []
    use_ort = libraries is None or "onnxruntime" in libraries
    shape = tuple(int(np.prod(v.shape)) for v in feeds.values())[:1] or (1,)
    for t in threads_list:
        sess = nnkern.onnx.InferenceSession(model_bytes, num_threads=t)
        fns = {"nnkern": lambda s=sess: s.run(None, feeds)}
        if use_ort:
            try:
                ort = _ort_session(model_bytes, t)
                fns["onnxruntime"] = lambda s=ort: s.run(None, feeds)
            except Exception as e:  # noqa: BLE001 - a library that refuses the model is left out, with a note
                progress(f"onnxruntime refuses the model: {e}")
                use_ort = False
        timings = harness.interleaved(fns, repeats=repeats, min_time=0.05, pause_after={"*": 0.05} if t > 1 else None)
        for lib, tm in timings.items():
            results.append(harness.Result(op=f"model:{name}", shape=shape, library=lib, isa="", threads=t,
                                          seconds=tm.median, best_seconds=tm.best, rate=1.0 / tm.median,
                                          unit="runs/s"))
        progress(f"{name}, {t} thread(s): " + ", ".join(f"{k} {v.median * 1e3:.3f} ms" for k, v in timings.items()))
        if use_ort and not diffs:
            diffs = differences(sess.run(None, feeds), fns["onnxruntime"](), names)
    return results, diffs


def table(results: List[harness.Result]) -> str:
    lines = ["| model | threads | nnkern ms | onnxruntime ms | nnkern vs onnxruntime |", "|---|---|---|---|---|"]
    for t in sorted({r.threads for r in results}):
        rows = {r.library: r for r in results if r.threads == t}
        ours = rows.get("nnkern")
        theirs = rows.get("onnxruntime")
        ratio = f"{theirs.seconds / ours.seconds:.2f}x" if ours and theirs else "-"
        lines.append(f"| {results[0].op[len('model:'):]} | {t} | {ours.seconds * 1e3:.3f} | "
                     f"{theirs.seconds * 1e3 if theirs else float('nan'):.3f} | {ratio} |")
    return "\n".join(lines)


def model_name(path: str) -> str:
    return os.path.splitext(os.path.basename(path))[0]


def feeds_factory(files: Dict[str, str], dims: Dict[str, str], batch: Optional[int], seed: int = 0):
    from nnkern.onnx._tool import load_feeds
    return lambda session: load_feeds(session, files, dims, seed, batch)
