"""One-node (or small) ONNX models built in the tests, run through nnkern.onnx and onnxruntime side by side."""
import numpy as np
from onnx import helper, numpy_helper

import nnkern.onnx

OPSET = 17


def node_model(op: str, inputs: dict, outputs, attrs=None, constants=None, opset: int = OPSET, domain: str = ""):
    """A model of one node. inputs: {name: array} (graph inputs, their dtypes and shapes); constants: {name: array}
    (initializers, also node inputs, after the graph inputs unless `order` is given via the names in `inputs`);
    outputs: names. Node inputs are the graph inputs then the constants, in dict order; a name None leaves an
    optional input out."""
    constants = constants or {}
    names = list(inputs) + list(constants)
    node = helper.make_node(op, [n or "" for n in names], list(outputs), domain=domain, **(attrs or {}))
    graph_inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
                    for n, a in inputs.items() if n]
    graph_outputs = [helper.make_empty_tensor_value_info(o) for o in outputs]
    inits = [numpy_helper.from_array(np.asarray(a), n) for n, a in constants.items() if n]
    graph = helper.make_graph([node], op, graph_inputs, graph_outputs, inits)
    opsets = [helper.make_opsetid("", opset)]
    if domain:
        opsets.append(helper.make_opsetid(domain, 1))
    return helper.make_model(graph, opset_imports=opsets, ir_version=8)


def run_nnkern(model, feeds: dict, **kwargs):
    return nnkern.onnx.InferenceSession(model.SerializeToString(), **kwargs).run(None, feeds)


def run_ort(model, feeds: dict):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)


def assert_same(model, feeds: dict, rtol: float = 0.0, atol: float = 0.0, **kwargs):
    """nnkern's outputs against onnxruntime's: dtype and shape equal, values within rtol / atol (0: bit-exact,
    NaN where onnxruntime has NaN)."""
    ours = run_nnkern(model, feeds, **kwargs)
    same_outputs(ours, run_ort(model, feeds), rtol, atol)
    return ours


def same_outputs(ours, theirs, rtol: float = 0.0, atol: float = 0.0):
    """Two lists of outputs: dtypes and shapes equal, values within rtol / atol (0: bit-exact; NaN where NaN)."""
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert a.dtype == b.dtype, (a.dtype, b.dtype)
        assert a.shape == b.shape, (a.shape, b.shape)
        if rtol == 0 and atol == 0:
            np.testing.assert_array_equal(a, b)
        else:
            with np.errstate(invalid="ignore"):
                np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), rtol=rtol, atol=atol)
