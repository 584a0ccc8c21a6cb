"""Lowering the convolutional ops onto nnkern's NHWC ops (seed I3): each becomes transpose -> NHWC op ->
transpose back, which the layout pass (_layout) then cancels between neighbours. A BatchNormalization that
follows a convolution is folded into its weights and bias first."""
from __future__ import annotations

import numpy as np

from ._graph import Node

TO_NHWC = [0, 2, 3, 1]
TO_NCHW = [0, 3, 1, 2]


def prepare(net, optimize: frozenset) -> None:
    """What lowering needs done first, over the whole graph: onnxruntime's QLinear ops without a kernel of their
    own expanded, batch norms folded into their convolutions, QDQ patterns fused and quantized elementwise ops made
    tables (_quant, _tables); the last three where
    `optimize` (names of _compile.OPTIMIZATIONS) has them."""
    from . import _quant, _tables
    _quant.expand(net)
    if "fold_batch_norm" in optimize:
        _fold_batch_norm(net)
    if "fuse_qdq" in optimize:
        _quant.fuse_qdq(net)
    if "quantized_lookup" in optimize:
        _tables.lookup_tables(net)


def lowering(op: str):
    """The function that lowers a node of this op (net, node) -> nodes, called when its inputs' shapes are known;
    None for ops that run as they are."""
    return _LOWERINGS.get(op)


def _wrap_nhwc(net, n: Node, op: str, inputs: list, attrs: dict, rank: int = 4) -> list:
    """x (NCHW) -> Transpose -> op (NHWC) -> Transpose -> n's output; 1-D ops (rank 3) through an H of 1."""
    x = n.inputs[0]
    nodes = []
    to_nhwc, to_nchw = TO_NHWC, TO_NCHW
    if rank == 3:  # N, C, L -> N, 1, L, C
        u = net.fresh(f"{n.name}::unsq")
        nodes.append(Node("Unsqueeze", f"{n.name}::unsq", [x, net.add_constant(np.array([2], np.int64), "axes")],
                          [u], {}, n.sources))
        x = u
    t_in = net.fresh(f"{n.name}::nhwc_in")
    nodes.append(Node("Transpose", f"{n.name}::to_nhwc", [x], [t_in], {"perm": ("ints", to_nhwc)}, n.sources))
    y = net.fresh(f"{n.name}::nhwc_out")
    nodes.append(Node(op, n.name, [t_in] + inputs, [y] + [""] * 0, attrs, n.sources))
    out = n.outputs[0]
    if rank == 3:
        t_out = net.fresh(f"{n.name}::nchw_out")
        nodes.append(Node("Transpose", f"{n.name}::to_nchw", [y], [t_out], {"perm": ("ints", to_nchw)}, n.sources))
        nodes.append(Node("Squeeze", f"{n.name}::sq", [t_out, net.add_constant(np.array([2], np.int64), "axes")],
                          [out], {}, n.sources))
    else:
        nodes.append(Node("Transpose", f"{n.name}::to_nchw", [y], [out], {"perm": ("ints", to_nchw)}, n.sources))
    return nodes


def _spatial_attrs(n: Node, spatial: int, kernel: list) -> tuple:
    """strides, dilations and pads (top, left, bottom, right) of a 1-D or 2-D op, auto_pad resolved later by the
    C++ op when it is SAME_* (the pads depend on the input size)."""
    strides = n.attr("strides", [1] * spatial)
    dilations = n.attr("dilations", [1] * spatial)
    pads = n.attr("pads", [0] * (2 * spatial))
    if spatial == 1:
        strides, dilations, pads = [1] + list(strides), [1] + list(dilations), [0, pads[0], 0, pads[1]]
    return list(strides), list(dilations), list(pads)


def _lower_conv(net, n: Node) -> list:
    w = net.const(n.inputs[1])
    if w is None:  # the session plans for the values of the inputs it comes from, if they are small enough
        raise net.needs_constant(n, 1, f"Conv node {n.name!r}: the weight must be a constant (an initializer), "
                                       f"not computed while running")
    if w.ndim not in (3, 4):
        raise NotImplementedError(f"Conv node {n.name!r}: only 1-D and 2-D convolutions are supported, the weight "
                                  f"has rank {w.ndim}")
    if w.dtype != np.float32:
        raise NotImplementedError(f"Conv node {n.name!r}: weights of dtype {w.dtype} (float32 only)")
    if "kernel_shape" in n.attrs and list(n.attr("kernel_shape")) != list(w.shape[2:]):
        raise ValueError(f"Conv node {n.name!r}: kernel_shape {n.attr('kernel_shape')} contradicts the weight's "
                         f"{list(w.shape[2:])}")
    spatial = w.ndim - 2
    strides, dilations, pads = _spatial_attrs(n, spatial, list(w.shape[2:]))
    wk = w if spatial == 2 else w[:, :, None, :]
    w_nhwc = net.add_constant(np.ascontiguousarray(wk.transpose(0, 2, 3, 1)), f"{n.name}::w",
                              key=("conv_w", n.name), source=n.inputs[1])
    del w, wk
    # The model's weight is now a view of the plan's: one copy (the inverse transpose; 1-D: no height axis).
    o, kh, kw, i = net.values[w_nhwc].shape
    grouped, perm = ((o, kh, kw, i), (0, 3, 1, 2)) if spatial == 2 else ((o, kw, i), (0, 2, 1))
    net.hold_once(n.inputs[1], w_nhwc, grouped, perm)
    inputs = [w_nhwc, n.inputs[2] if len(n.inputs) > 2 else ""]
    attrs = {"strides": ("ints", strides), "dilations": ("ints", dilations), "pads": ("ints", pads),
             "group": ("i", n.attr("group", 1)), "auto_pad": ("s", n.attr("auto_pad", "NOTSET"))}
    return _wrap_nhwc(net, n, "nnkern.Conv", inputs, attrs, rank=spatial + 2)


def _fold_batch_norm(net) -> None:  # noqa: C901
    """Conv -> BatchNormalization (constant parameters, the conv's output used by nothing else) becomes one Conv
    with w * gamma / sqrt(var + eps) and (b - mean) * gamma / sqrt(var + eps) + beta, computed in float64."""
    users = net.consumers()
    producer = {o: n for n in net.nodes for o in n.outputs}
    drop = set()
    for bn in net.nodes:
        if bn.op != "BatchNormalization" or len([o for o in bn.outputs if o]) != 1:
            continue
        conv = producer.get(bn.inputs[0])
        if conv is None or conv.op != "Conv" or len(users.get(bn.inputs[0], [])) != 1 or bn.inputs[0] in net.outputs:
            continue
        names = [conv.inputs[1]] + [i for i in conv.inputs[2:3] if i] + list(bn.inputs[1:5])
        if not all(i in net.model.constants for i in names):
            continue  # only the model's own constants: the folded weights are shared by every plan
        params = [net.const(i) for i in bn.inputs[1:5]]
        w = net.const(conv.inputs[1])
        b = net.const(conv.inputs[2]) if len(conv.inputs) > 2 and conv.inputs[2] else None
        if any(p is None for p in params) or w is None or (len(conv.inputs) > 2 and conv.inputs[2] and b is None):
            continue
        gamma, beta, mean, var = (p.astype(np.float64) for p in params)
        scale = gamma / np.sqrt(var + float(bn.attr("epsilon", 1e-5)))
        shape = (-1,) + (1,) * (w.ndim - 1)
        w2 = (w.astype(np.float64) * scale.reshape(shape)).astype(np.float32)
        b0 = b.astype(np.float64) if b is not None else np.zeros(w.shape[0])
        b2 = ((b0 - mean) * scale + beta).astype(np.float32)
        conv.inputs = [conv.inputs[0], net.add_constant(w2, f"{conv.name}::w_bn", key=("bn_w", conv.name)),
                       net.add_constant(b2, f"{conv.name}::b_bn", key=("bn_b", conv.name))]
        conv.outputs = [bn.outputs[0]]
        conv.sources = f"{conv.sources}+{bn.sources}"
        drop.add(id(bn))
    net.nodes = [n for n in net.nodes if id(n) not in drop]


def _lower_conv_transpose(net, n: Node) -> list:
    w = net.const(n.inputs[1])
    if w is None:
        raise net.needs_constant(n, 1, f"ConvTranspose node {n.name!r}: the weight must be a constant")
    if w.ndim not in (3, 4) or w.dtype != np.float32:
        raise NotImplementedError(f"ConvTranspose node {n.name!r}: only 1-D and 2-D float32 transposed convolutions "
                                  f"are supported (weight {w.dtype} of rank {w.ndim})")
    spatial = w.ndim - 2
    strides, dilations, pads = _spatial_attrs(n, spatial, list(w.shape[2:]))
    out_pad = list(n.attr("output_padding", [0] * spatial))
    out_shape = list(n.attr("output_shape", []))
    if spatial == 1:
        out_pad = [0] + out_pad
        out_shape = [1] + out_shape[-1:] if out_shape else []
        w = w[:, :, None, :]
    elif len(out_shape) > 2:
        out_shape = out_shape[-2:]
    weight = net.add_constant(np.ascontiguousarray(w), f"{n.name}::w", key=("convT_w", n.name), source=n.inputs[1]) \
        if spatial == 1 else n.inputs[1]
    attrs = {"strides": ("ints", strides), "dilations": ("ints", dilations), "pads": ("ints", pads),
             "output_padding": ("ints", out_pad), "group": ("i", n.attr("group", 1)),
             "auto_pad": ("s", n.attr("auto_pad", "NOTSET"))}
    if out_shape:
        attrs["output_shape"] = ("ints", out_shape)
    return _wrap_nhwc(net, n, "nnkern.ConvTranspose", [weight, n.inputs[2] if len(n.inputs) > 2 else ""], attrs,
                      rank=spatial + 2)


def _lower_pool(net, n: Node) -> list:
    kernel = n.attr("kernel_shape")
    if kernel is None or len(kernel) not in (1, 2):
        raise NotImplementedError(f"{n.op} node {n.name!r}: only 1-D and 2-D pooling is supported")
    spatial = len(kernel)
    if len([o for o in n.outputs if o]) > 1:
        raise NotImplementedError(f"{n.op} node {n.name!r}: the Indices output is not supported")
    strides, dilations, pads = _spatial_attrs(n, spatial, kernel)
    attrs = {"kernel_shape": ("ints", ([1] if spatial == 1 else []) + list(kernel)), "strides": ("ints", strides),
             "dilations": ("ints", dilations), "pads": ("ints", pads), "ceil_mode": ("i", n.attr("ceil_mode", 0)),
             "auto_pad": ("s", n.attr("auto_pad", "NOTSET"))}
    if n.op == "AveragePool":
        attrs["count_include_pad"] = ("i", n.attr("count_include_pad", 0))
    if "storage_order" in n.attrs:
        attrs["storage_order"] = ("i", n.attr("storage_order"))
    return _wrap_nhwc(net, n, "nnkern." + n.op, [], attrs, rank=spatial + 2)


def _lower_global_pool(net, n: Node) -> list:
    rank = len(net.values[n.inputs[0]].shape)
    if rank not in (3, 4):
        written = "GlobalAveragePool" if n.op == "QGlobalAveragePool" else n.op  # the op of the user's model
        raise NotImplementedError(f"{written} node {n.name!r}: only 1-D and 2-D inputs (rank 3 or 4) are supported")
    return _wrap_nhwc(net, n, "nnkern." + n.op, n.inputs[1:], {}, rank=rank)  # QGlobalAveragePool's parameters


def _lower_qconv(net, n: Node) -> list:
    from ._quant import lower_qlinear_conv
    return lower_qlinear_conv(net, n)


_LOWERINGS = {"Conv": _lower_conv, "ConvTranspose": _lower_conv_transpose, "QLinearConv": _lower_qconv,
              "ConvInteger": _lower_qconv, "MaxPool": _lower_pool, "AveragePool": _lower_pool,
              "GlobalAveragePool": _lower_global_pool, "GlobalMaxPool": _lower_global_pool,
              "QGlobalAveragePool": _lower_global_pool}
#: Lowered ops that only the session's fusions write (fuse_qdq's pooling on 8-bit values): not operators of ONNX,
#: so a model that names one is refused like any unknown operator.
INTERNAL = frozenset({"QGlobalAveragePool"})
