"""nnkern as an ``onnx.backend.base.Backend``, so that ONNX's backend test suite runs against it:

    import onnx.backend.test, nnkern.onnx.backend
    tests = onnx.backend.test.BackendTest(nnkern.onnx.backend, __name__)
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep, namedtupledict

from ._session import InferenceSession


class NnkernRep(BackendRep):
    """A prepared model: its session."""

    def __init__(self, session: InferenceSession):
        self.session = session
        self.input_names = [i.name for i in session.get_inputs()]
        self.output_names = [o.name for o in session.get_outputs()]

    def run(self, inputs, **kwargs):
        if isinstance(inputs, dict):
            feed = dict(inputs)
        else:
            if isinstance(inputs, np.ndarray):
                inputs = [inputs]
            if len(inputs) != len(self.input_names):
                raise ValueError(f"the model takes {len(self.input_names)} inputs, got {len(inputs)}")
            feed = dict(zip(self.input_names, inputs))
        outputs = self.session.run(None, feed)
        return namedtupledict("Outputs", self.output_names)(*outputs)


class NnkernBackend(Backend):
    @classmethod
    def is_compatible(cls, model, device: str = "CPU", **kwargs) -> bool:
        return cls.supports_device(device)

    @classmethod
    def prepare(cls, model, device: str = "CPU", **kwargs) -> NnkernRep:
        if not cls.supports_device(device):
            raise ValueError(f"nnkern runs on the CPU only, not {device!r}")
        return NnkernRep(InferenceSession(model, **kwargs))

    @classmethod
    def run_model(cls, model, inputs, device: str = "CPU", **kwargs):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node, inputs, device: str = "CPU", outputs_info=None, **kwargs):
        """One node on the given inputs: a one-node model with the inputs' types and shapes."""
        if isinstance(inputs, dict):
            named = list(inputs.items())
        else:
            named = list(zip([i for i in node.input if i], inputs))
        graph_inputs = [onnx.helper.make_tensor_value_info(name, onnx.helper.np_dtype_to_tensor_dtype(a.dtype),
                                                           a.shape) for name, a in named]
        graph_outputs = [onnx.helper.make_empty_tensor_value_info(o) for o in node.output if o]
        if outputs_info:
            graph_outputs = [onnx.helper.make_tensor_value_info(o, onnx.helper.np_dtype_to_tensor_dtype(np.dtype(t)),
                                                                shape) for o, (t, shape) in zip(node.output, outputs_info)]
        opset = kwargs.pop("opset_version", onnx.defs.onnx_opset_version())
        model = onnx.helper.make_model(onnx.helper.make_graph([node], "node", graph_inputs, graph_outputs),
                                       opset_imports=[onnx.helper.make_opsetid("", opset)])
        rep = cls.prepare(model, device, **kwargs)
        return rep.run([a for _, a in named])

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return str(device).upper() == "CPU"


prepare = NnkernBackend.prepare
run_model = NnkernBackend.run_model
run_node = NnkernBackend.run_node
supports_device = NnkernBackend.supports_device
is_compatible = NnkernBackend.is_compatible
