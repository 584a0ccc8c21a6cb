"""The per-step overhead of a compiled plan: chains of n cheap nodes (Neg and Relu alternating, which no pass
merges or removes) on a tensor of 8 floats, run through nnkern.onnx and onnxruntime (one thread, all graph
optimizations) in one interleaved run. A step of 8 elements costs a few nanoseconds of work, so the slope of the
run time over n is what the runner adds per step; the time at n = 0 is the call's fixed cost (feeds, checks,
outputs). python -m nnkern bench --op overhead."""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import numpy as np

from nnkern.bench import harness

LENGTHS = (0, 64, 256)


def chain_model(n: int) -> bytes:
    """x (1, 8) -> n nodes alternating Neg and Relu -> y."""
    from onnx import TensorProto, helper
    nodes, prev = [], "x"
    for i in range(n):
        nodes.append(helper.make_node("Neg" if i % 2 == 0 else "Relu", [prev], [f"t{i}"]))
        prev = f"t{i}"
    nodes.append(helper.make_node("Identity", [prev], ["y"]))
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()


def calls(model: bytes, libraries: Sequence[str] = ("onnxruntime",)) -> Dict[str, object]:
    """name -> a zero-argument run of the model: nnkern.onnx's session.run, its compiled plan alone (the C++ run
    loop without the Python call's checks) and onnxruntime where installed."""
    import nnkern.onnx
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(1, 8)
    session = nnkern.onnx.InferenceSession(model, num_threads=1)
    session.run(None, {"x": x})
    plan = next(iter(session._plans.values())).plan  # the one plan of this input shape
    out = {"nnkern": lambda: session.run(None, {"x": x}), "nnkern plan": lambda: plan.run([x], False, False)}
    if "onnxruntime" in libraries:
        try:
            import onnxruntime as ort
        except ImportError:
            return out
        so = ort.SessionOptions()
        so.intra_op_num_threads = so.inter_op_num_threads = 1
        theirs = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        out["onnxruntime"] = lambda: theirs.run(None, {"x": x})
    return out


def measure(lengths: Sequence[int] = LENGTHS, repeats: int = 7) -> List[dict]:
    """Records (op "overhead", shape (n,), library, seconds per run) for each chain length."""
    records = []
    for n in lengths:
        timings = harness.interleaved(calls(chain_model(n)), repeats=repeats, min_time=0.05)
        for name, tm in timings.items():
            lib, isa = ("nnkern", name[len("nnkern"):].strip() or "session") if name.startswith("nnkern") else (name, "")
            records.append(dict(op="overhead", shape=[n], library=lib, isa=isa, threads=1, seconds=tm.median,
                                rate=1.0 / tm.median, unit="runs/s", steps=n))
    return records


def label(r: dict) -> str:
    return f"{r['library']} {r['isa']}".strip()


def slopes(records: List[dict]) -> Dict[str, Tuple[float, float]]:
    """label -> (fixed cost, cost per step) in seconds, a least-squares line through its (steps, seconds)."""
    out = {}
    for lib in dict.fromkeys(label(r) for r in records):
        pts = [(r["steps"], r["seconds"]) for r in records if label(r) == lib]
        if len(pts) >= 2:
            per_step, fixed = np.polyfit([p[0] for p in pts], [p[1] for p in pts], 1)
            out[lib] = (float(fixed), float(per_step))
    return out


def table(records: List[dict]) -> str:
    libs = list(dict.fromkeys(label(r) for r in records))
    lengths = list(dict.fromkeys(r["steps"] for r in records))
    lines = ["| steps | " + " | ".join(f"{lib} (us)" for lib in libs) + " |", "|---" * (len(libs) + 1) + "|"]
    for n in lengths:
        row = {label(r): r["seconds"] for r in records if r["steps"] == n}
        lines.append(f"| {n} | " + " | ".join(f"{row[lib] * 1e6:.2f}" if lib in row else "-" for lib in libs) + " |")
    fit = slopes(records)
    lines.append("| per step | " + " | ".join(f"{fit[lib][1] * 1e6:.3f}" if lib in fit else "-" for lib in libs)
                 + " |")
    return "\n".join(lines)
