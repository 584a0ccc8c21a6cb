"""Post-op fusion: an activation that is the only reader of a convolution's output runs in the convolution's
epilogue (Relu, Clip to [0, 6] or [0, inf), Sigmoid, x * sigmoid(x) as SiLU, HardSwish, HardSigmoid, LeakyRelu:
the same formulas as the separate ops, so the same bits); a float32 MatMul's or Gemm's, in the GEMM's epilogue
(Relu)."""
from __future__ import annotations

import numpy as np

#: The activations each op's epilogue runs.
FUSABLE = {"nnkern.Conv": {"relu", "relu6", "sigmoid", "silu", "hardswish", "hardsigmoid", "leaky_relu"},
           "Gemm": {"relu"}, "MatMul": {"relu"}}
#: ONNX activations fused as they are: (the epilogue's name, {the op's attribute: (the conv's attribute, default)}).
SIMPLE = {"Relu": ("relu", {}), "Sigmoid": ("sigmoid", {}), "HardSwish": ("hardswish", {}),
          "HardSigmoid": ("hardsigmoid", {"alpha": ("activation_alpha", 0.2), "beta": ("activation_beta", 0.5)}),
          "LeakyRelu": ("leaky_relu", {"alpha": ("activation_alpha", 0.01)})}


def fuse_activations(net) -> None:
    changed = True
    while changed:
        changed = False
        users = net.consumers()
        for conv in net.nodes:
            if conv.op not in FUSABLE or conv.attr("activation", "none") != "none":
                continue
            y = conv.outputs[0]
            readers = users.get(y, [])
            if y in net.outputs:
                continue
            found = _activation(net, y, readers)
            if found is None or found[0] not in FUSABLE[conv.op] or net.values[y].dtype != 1:
                continue
            act, absorbed, out, params = found
            conv.attrs = dict(conv.attrs, activation=("s", act), **params)
            conv.outputs = [out]
            conv.sources = "+".join([conv.sources] + [n.sources for n in absorbed])
            dropped = {id(n) for n in absorbed}
            net.nodes = [n for n in net.nodes if id(n) not in dropped]
            net.infer(conv)
            changed = True
            break


def _activation(net, y: str, readers: list):
    """(activation, the nodes it replaces, the value the fused conv produces, its parameters as the conv's
    attributes) or None."""
    if len(readers) == 2:
        sig = next((n for n in readers if n.op == "Sigmoid"), None)
        mul = next((n for n in readers if n.op == "Mul"), None)
        if sig is not None and mul is not None and sorted(mul.inputs) == sorted([y, sig.outputs[0]]):
            if sig.outputs[0] not in net.outputs and len(net.consumers().get(sig.outputs[0], [])) == 1:
                return "silu", [sig, mul], mul.outputs[0], {}
        return None
    if len(readers) != 1:
        return None
    n = readers[0]
    if n.op in SIMPLE:
        act, names = SIMPLE[n.op]
        params = {conv_attr: ("f", float(n.attr(attr, default))) for attr, (conv_attr, default) in names.items()}
        return act, [n], n.outputs[0], params
    if n.op == "Clip":
        lo = net.const(n.inputs[1]) if len(n.inputs) > 1 and n.inputs[1] else None
        hi = net.const(n.inputs[2]) if len(n.inputs) > 2 and n.inputs[2] else None
        if (len(n.inputs) > 1 and n.inputs[1] and lo is None) or (len(n.inputs) > 2 and n.inputs[2] and hi is None):
            return None  # bounds known only while running
        lo = float(lo) if lo is not None else -np.inf
        hi = float(hi) if hi is not None else np.inf
        if lo == 0.0 and hi == 6.0:
            return "relu6", [n], n.outputs[0], {}
        if lo == 0.0 and hi >= 3.4e38:
            return "relu", [n], n.outputs[0], {}
    return None
