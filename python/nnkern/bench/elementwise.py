"""Benchmarks of the elementwise activations (sigmoid, tanh) and of top-k, against numpy, scipy,
torch and onnxruntime where installed, next to the copy bandwidth (numpy.copyto) of the same size.

    python -m nnkern bench --op sigmoid        (or tanh, topk)

Rates: Gelem/s (elements per second / 1e9); the copy column is the same size's np.copyto (8 bytes per
element moved, as a sigmoid with out=). All columns time the same input, interleaved, 1 thread, each
writing into a preallocated output (onnxruntime through I/O binding); the last columns are the ratios the
issue's goals name (minimax/scalef vs the best of torch and onnxruntime, tanh vs np.tanh, vs copy).
"""
from __future__ import annotations

from typing import Callable, Dict, List, Sequence, Tuple

import numpy as np

from . import anchors as _anchors
from .harness import interleaved

ACT_SIZES = (4096, 65536, 1 << 20, 1 << 24)
TOPK_SHAPES = ((16, 32000, 1), (16, 32000, 4), (16, 32000, 10), (16, 32000, 16), (16, 32000, 50))


def _onnx_unary_model(op: str, n: int) -> bytes:
    """The ONNX model y = op(x), x and y float32 of shape [n] (opset 13, IR version 8), serialized: with the
    onnx package if installed, else protobuf-encoded here (onnxruntime does not need the onnx package)."""
    try:
        from onnx import TensorProto, helper
    except ImportError:
        pass
    else:
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])
        return _anchors.onnx_model_bytes(helper.make_graph([helper.make_node(op, ["x"], ["y"])], "g", [x], [y]))

    def varint(v):
        out = bytearray()
        while True:
            out.append((v & 0x7F) | (0x80 if v >> 7 else 0))
            v >>= 7
            if not v:
                return bytes(out)

    def field(number, payload):  # length-delimited (wire type 2)
        return varint(number << 3 | 2) + varint(len(payload)) + payload

    def integer(number, value):  # varint (wire type 0)
        return varint(number << 3) + varint(value)

    def value_info(name):  # ValueInfoProto{name, type: TypeProto{tensor_type{elem_type FLOAT, shape [n]}}}
        shape = field(1, integer(1, n))  # TensorShapeProto{dim: Dimension{dim_value}}
        return field(1, name.encode()) + field(2, field(1, integer(1, 1) + field(2, shape)))

    node = field(1, b"x") + field(2, b"y") + field(4, op.encode())  # NodeProto{input, output, op_type}
    graph = field(1, node) + field(2, b"g") + field(11, value_info("x")) + field(12, value_info("y"))
    return integer(1, 8) + field(7, graph) + field(8, integer(2, 13))  # ir_version, graph, opset_import


def _ort_unary(op: str, x: np.ndarray, y: np.ndarray, threads: int):
    """A callable running ONNX Runtime's op on x into the preallocated y (I/O binding, like out=), or None."""
    ort = _anchors._import("onnxruntime")
    if ort is None:
        return None
    sess = _anchors.ort_session(_onnx_unary_model(op, x.size), threads)
    io = sess.io_binding()
    io.bind_cpu_input("x", x)
    io.bind_output("y", "cpu", 0, np.float32, [x.size], y.ctypes.data)
    return lambda _keep=(x, y): sess.run_with_iobinding(io)


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
        ort_fn = _ort_unary("Sigmoid" if function == "sigmoid" else "Tanh", x, y, threads)
    except Exception:
        ort_fn = None
    if ort_fn is not None:
        fns["onnxruntime"] = ort_fn
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
    # The goals: minimax and scalef sigmoid >= 3x the best of torch and onnxruntime (64K), tanh >= 2x
    # np.tanh (64K), >= 90% of the copy rate out of cache (16M), in place and with out=.
    def ratio(r, a, b):
        den = max((r[k] for k in b if k in r), default=None) if isinstance(b, tuple) else r.get(b)
        return f"{r[a] / den:.2f}x" if den and a in r else "-"
    anchors = ("torch", "onnxruntime")
    if function == "sigmoid":
        summary = [("minimax / best(torch, ort)", lambda r: ratio(r, "nnkern-minimax", anchors)),
                   ("scalef / best(torch, ort)", lambda r: ratio(r, "nnkern-scalef", anchors))]
    else:
        summary = [("minimax / numpy", lambda r: ratio(r, "nnkern-minimax", "numpy")),
                   ("minimax / best(torch, ort)", lambda r: ratio(r, "nnkern-minimax", anchors))]
    summary += [("minimax / copy", lambda r: ratio(r, "nnkern-minimax", "copy")),
                ("minimax in place / copy", lambda r: ratio(r, "nnkern-minimax-inplace", "copy"))]
    head = "| n | " + " | ".join(cols) + " | " + " | ".join(name for name, _ in summary) + " |"
    lines = [f"### {function}, Gelem/s, {threads} thread(s) (copy = np.copyto, 8 B/elem; all with out= "
             f"preallocated, onnxruntime by I/O binding)", "", head, "|" + "---|" * (len(cols) + len(summary) + 1)]
    for n, r in rows:
        lines.append(f"| {n} | " + " | ".join(f"{r[c]:.2f}" if c in r else "-" for c in cols)
                     + " | " + " | ".join(f(r) for _, f in summary) + " |")
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
