"""Benchmarks of the elementwise activations (sigmoid, tanh) and of top-k, against numpy, scipy,
torch and onnxruntime where installed, next to the copy bandwidth (numpy.copyto) of the same size.

    python -m nnkern bench --op sigmoid        (or tanh, topk)

Rates: Gelem/s (elements per second / 1e9); the copy column is the same size's np.copyto (8 bytes per
element moved, as a sigmoid with out=). All columns time the same input, interleaved, 1 thread.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Sequence, Tuple

import numpy as np

from . import anchors as _anchors
from .harness import interleaved

ACT_SIZES = (4096, 65536, 1 << 20, 1 << 24)
TOPK_SHAPES = ((16, 32000, 1), (16, 32000, 4), (16, 32000, 10), (16, 32000, 16), (16, 32000, 50))


def _ort_unary(op: str, n: int, threads: int):
    ort = _anchors._import("onnxruntime")
    onnx = _anchors._import("onnx")
    if ort is None or onnx is None:
        return None
    from onnx import TensorProto, helper
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"])], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess


def activation_callables(function: str, n: int, threads: int = 1, in_place: bool = False) -> Dict[str, Callable]:
    """name -> zero-arg callable computing ``function`` on n float32 elements (out= preallocated)."""
    import nnkern
    rng = np.random.default_rng(_anchors.SEED)
    x = rng.uniform(-10, 10, n).astype(np.float32)
    y = np.empty_like(x)
    fns: Dict[str, Callable] = {}
    fns["copy"] = lambda: np.copyto(y, x)
    for m in ("minimax", "scalef", "accurate"):
        f = getattr(nnkern, function)
        if in_place:
            fns[f"nnkern-{m}-inplace"] = (lambda f=f, m=m: f(y, method=m, out=y))
        fns[f"nnkern-{m}"] = (lambda f=f, m=m: f(x, method=m, out=y))
    if function == "sigmoid":
        def np_sig():
            np.negative(x, out=y)
            np.exp(y, out=y)
            np.add(y, 1.0, out=y)
            np.reciprocal(y, out=y)
        fns["numpy"] = np_sig
        try:
            from scipy.special import expit
            fns["scipy.expit"] = lambda: expit(x, out=y)
        except Exception:
            pass
    else:
        fns["numpy"] = lambda: np.tanh(x, out=y)
    torch = _anchors._torch()
    if torch is not None:
        tx, ty = torch.from_numpy(x), torch.from_numpy(y)
        tf = torch.sigmoid if function == "sigmoid" else torch.tanh
        fns["torch"] = lambda: tf(tx, out=ty)
    try:
        sess = _ort_unary("Sigmoid" if function == "sigmoid" else "Tanh", n, threads)
    except Exception:
        sess = None
    if sess is not None:
        fns["onnxruntime"] = lambda: sess.run(None, {"x": x})
    return fns


def activation_table(function: str = "sigmoid", sizes: Sequence[int] = ACT_SIZES, repeats: int = 5,
                     threads: int = 1) -> Tuple[str, List[dict]]:
    """Markdown table of Gelem/s per size and column, and the raw records."""
    import nnkern
    _anchors.set_threads(threads)
    old = nnkern.get_num_threads()
    nnkern.set_num_threads(threads)
    rows, records = [], []
    cols: List[str] = []
    try:
        for n in sizes:
            fns = activation_callables(function, n, threads, in_place=True)
            min_time = 0.03 if n >= (1 << 20) else 0.02
            t = interleaved(fns, repeats=repeats, min_time=min_time)
            rates = {k: n / v.median / 1e9 for k, v in t.items()}
            for k in rates:
                if k not in cols:
                    cols.append(k)
            records.append({"function": function, "n": n, "threads": threads, **{k: round(r, 3) for k, r in rates.items()}})
            rows.append((n, rates))
    finally:
        nnkern.set_num_threads(old)
    head = "| n | " + " | ".join(cols) + " | best nnkern / best of torch,ort | nnkern-minimax / copy |"
    lines = [f"### {function}, Gelem/s, {threads} thread(s) (copy = np.copyto, 8 B/elem)", "", head,
             "|" + "---|" * (len(cols) + 3)]
    for n, r in rows:
        anchors = [r[k] for k in ("torch", "onnxruntime") if k in r]
        best_nn = max(v for k, v in r.items() if k.startswith("nnkern") and "inplace" not in k)
        ratio = f"{best_nn / max(anchors):.2f}x" if anchors else "-"
        lines.append(f"| {n} | " + " | ".join(f"{r[c]:.2f}" if c in r else "-" for c in cols)
                     + f" | {ratio} | {r['nnkern-minimax'] / r['copy']:.0%} |")
    return "\n".join(lines), records


def topk_callables(rows: int, n: int, k: int) -> Dict[str, Callable]:
    import nnkern
    rng = np.random.default_rng(_anchors.SEED)
    x = rng.standard_normal((rows, n)).astype(np.float32)
    fns: Dict[str, Callable] = {"nnkern": lambda: nnkern.topk(x, k)}

    def np_topk():
        part = np.argpartition(-x, k - 1, axis=-1)[:, :k]
        vals = np.take_along_axis(x, part, -1)
        order = np.argsort(-vals, axis=-1, kind="stable")
        return np.take_along_axis(vals, order, -1), np.take_along_axis(part, order, -1)
    fns["numpy argpartition+sort"] = np_topk
    torch = _anchors._torch()
    if torch is not None:
        tx = torch.from_numpy(x)
        fns["torch.topk"] = lambda: torch.topk(tx, k, dim=-1)
    return fns


def topk_table(shapes=TOPK_SHAPES, repeats: int = 5) -> Tuple[str, List[dict]]:
    """Markdown table of microseconds per call (1 thread) and nnkern's speed-up over torch.topk."""
    import nnkern
    _anchors.set_threads(1)
    old = nnkern.get_num_threads()
    nnkern.set_num_threads(1)
    lines = ["### topk, microseconds per call, 1 thread", "", "| rows x n, k | nnkern | numpy argpartition+sort | torch.topk | torch / nnkern |",
             "|---|---|---|---|---|"]
    records = []
    try:
        for rows, n, k in shapes:
            t = interleaved(topk_callables(rows, n, k), repeats=repeats)
            us = {name: v.median * 1e6 for name, v in t.items()}
            records.append({"rows": rows, "n": n, "k": k, **{a: round(b, 2) for a, b in us.items()}})
            tt = us.get("torch.topk")
            lines.append(f"| {rows}x{n}, {k} | {us['nnkern']:.1f} | {us['numpy argpartition+sort']:.1f} | "
                         f"{tt:.1f} | {tt / us['nnkern']:.2f}x |" if tt else
                         f"| {rows}x{n}, {k} | {us['nnkern']:.1f} | {us['numpy argpartition+sort']:.1f} | - | - |")
    finally:
        nnkern.set_num_threads(old)
    return "\n".join(lines), records
