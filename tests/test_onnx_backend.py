"""ONNX's own backend node tests (``onnx.backend.test.BackendTest``, the cases shipped in the onnx package) through
``nnkern.onnx.backend``: every node test whose operators nnkern supports runs, except the ones listed in EXCLUDED
with the reason each. ``python tests/test_onnx_backend.py`` prints the count run / excluded per operator."""
import re
import sys
import unittest
import warnings
from unittest import mock

import pytest

onnx = pytest.importorskip("onnx")
from helpers import EXHAUSTIVE  # noqa: E402

if not EXHAUSTIVE:  # the onnx package computes its 1,000+ cases when they are loaded: seconds before any runs
    pytest.skip("ONNX's backend node tests run in the exhaustive run (pytest --exhaustive; CI runs it); the quick "
                "run tests each operator against onnxruntime (tests/test_onnx_ops_*.py)", allow_module_level=True)
import onnx.backend.test  # noqa: E402
import onnx.backend.test.runner  # noqa: E402
from onnx.backend.test.loader import load_model_tests  # noqa: E402

import nnkern.onnx  # noqa: E402
import nnkern.onnx.backend  # noqa: E402

# Node tests of supported operators that nnkern does not run, each with its reason. Keys are test names (without
# the "_cpu" suffix) or regular expressions over them.
EXCLUDED = {
    # -- general
    r"test_identity_(opt|sequence)": "optional and sequence values: a plan holds tensors only",
    r"test_training_dropout.*": "training_mode true: plans run inference only",
    # -- elementwise
    r"test_cast(like)?_\w*(FLOAT8|FLOAT4E2M1|INT4|INT2)\w*":
        "float8, float4, 4-bit and 2-bit element types: plans do not hold them",
    r"test_cast(like)?_\w*BFLOAT16\w*": "bfloat16: plans do not hold it",
    r"test_\w+_bfloat16(_expanded)?": "bfloat16: plans do not hold it",
    r"test_(celu|isinf|isnan|max|min)_float16(_expanded)?": "float16 arithmetic: float16 converts (Cast) only",
    r"test_mod_\w*float16\w*": "float16 arithmetic: float16 converts (Cast) only",
    r"test_equal_string\w*": "string tensors: plans do not hold them",

    # -- data movement
    r"test_range_(float16|bfloat16)_type_positive_delta": "float16 / bfloat16 arithmetic: Range computes in float32, "
                                                          "float64 and the integer types",
    r"test_resize_downsample_scales_(linear|cubic)_align_corners":
        "the expected output takes length_resized as scale * length (2.4, fractional); the spec's formula and "
        "onnxruntime (which nnkern matches) take the output's integer length (2)",

    # -- reductions and normalization
    r"test_batchnorm_.*_training_mode": "training_mode 1 (batch statistics, running mean and variance outputs): "
                                         "plans run inference only",
    r"test_(flex)?attention_\w*(fp16|bf16|float16)\w*_expanded(_ver\d+)?|test_attention_\w*_softmax_precision_expanded":
        "float16 / bfloat16 attention (its expanded graph): ReduceMax, Softmax and the arithmetic compute float32 and "
        "float64, plans do not hold bfloat16",

    # -- recurrent

    # -- convolution, matrix products, pooling
    r"test_(average|max)pool_3d_.*": "3-D pooling: 1-D and 2-D only",
    r"test_maxpool_with_argmax_.*": "MaxPool's Indices output",
    r"test_convtranspose_3d": "3-D transposed convolution: 1-D and 2-D only",
    r"test_causal_conv_with_state\w*fp16\w*": "float16 convolution weights: convolutions run float32 and 8-bit",

    # -- quantization
    r"test_(de)?quantizelinear_(e4m3fn|e5m2|float4e2m1|int2|int4|uint2|uint4).*": "float8, float4, 2-bit and 4-bit types",
    r"test_(de)?quantizelinear_blocked.*": "blocked quantization (block_size)",
    r"test_qlinearmatmul_.*_float16": "float16 scales",

}


def _reason(name: str):
    for pattern, why in EXCLUDED.items():
        if re.fullmatch(pattern, name):
            return why
    return None


def _load_node_tests():
    with warnings.catch_warnings():  # the onnx package computes its expected outputs with numpy casts that overflow
        warnings.simplefilter("ignore")
        return load_model_tests(kind="node")


# Loading computes every case's expected outputs (seconds): done once, shared by the selection and the runner.
_NODE_TESTS = _load_node_tests()


def node_cases():
    """(test name, the operators its model uses) of every node test."""
    return [(case.name, sorted({n.op_type for n in case.model.graph.node})) for case in _NODE_TESTS]


def selection():
    """{name: ops} of the tests to run, {name: reason} of those excluded, among tests of supported operators."""
    supported = set(nnkern.onnx.supported_ops())
    run, excluded = {}, {}
    for name, ops in node_cases():
        if not set(ops) <= supported:
            continue
        why = _reason(name)
        if why:
            excluded[name] = why
        else:
            run[name] = ops
    return run, excluded


_RUN, _EXCLUDED = selection()
# The runner is handed the node tests already loaded; the other kinds (real models to download, pytorch-converted
# cases) are not run here.
with mock.patch.object(onnx.backend.test.runner, "load_model_tests",
                       lambda kind: _NODE_TESTS if kind == "node" else []):
    _backend_test = onnx.backend.test.BackendTest(nnkern.onnx.backend, __name__)
# Only the selected tests are collected (the runner would otherwise report every other case as skipped).
_cases = _backend_test.test_cases  # a property that builds new classes on each access: read it once
for _cls in _cases.values():
    for _attr in [a for a in vars(_cls) if a.startswith("test_")]:
        if _attr[:-len("_cpu")] not in _RUN or not _attr.endswith("_cpu"):
            delattr(_cls, _attr)
globals().update({k: v for k, v in _cases.items() if any(a.startswith("test_") for a in vars(v))})
del _cls  # a module-level TestCase class would be collected a second time


def test_every_supported_operator_has_node_tests():
    """Each supported operator of the default domain appears in some node test that runs (or is excluded)."""
    covered = {op for ops in _RUN.values() for op in ops}
    missing = {op for op in nnkern.onnx.supported_ops() if op not in covered and op not in _NO_NODE_TESTS}
    assert not missing, f"supported operators without a running node test: {sorted(missing)}"


# Supported operators the onnx package has no node test for (or only ones combined with unsupported operators):
# onnxruntime's quantized com.microsoft operators are tested against onnxruntime in tests/test_onnx_ops_quant.py.
_NO_NODE_TESTS = {"Constant", "QGemm", "QLinearAdd", "QLinearAveragePool", "QLinearConcat", "QLinearGlobalAveragePool",
                  "QLinearLeakyRelu", "QLinearMul", "QLinearSigmoid", "QLinearSoftmax"}


def report() -> str:
    per_op = {}
    for name, ops in _RUN.items():
        for op in ops:
            per_op.setdefault(op, [0, 0])[0] += 1
    for name in _EXCLUDED:
        for n, ops in node_cases():
            if n == name:
                for op in ops:
                    per_op.setdefault(op, [0, 0])[1] += 1
    lines = [f"{'operator':<28}{'run':>6}{'excluded':>10}"]
    for op in sorted(per_op):
        lines.append(f"{op:<28}{per_op[op][0]:>6}{per_op[op][1]:>10}")
    lines.append(f"{'all':<28}{len(_RUN):>6}{len(_EXCLUDED):>10}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report())
    if "--run" in sys.argv:
        unittest.main(argv=sys.argv[:1])
