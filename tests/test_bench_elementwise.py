"""The sigmoid/tanh benchmark table (python -m nnkern bench --op sigmoid|tanh): its comparison columns work.

Timings are never asserted; these tests only check that the table is built and that the onnxruntime
column can be built without the onnx package (the model is then protobuf-encoded by nnkern itself).
"""
from __future__ import annotations

import sys

import numpy as np
import pytest

from nnkern.bench import elementwise


@pytest.mark.parametrize("op, ref", [("Sigmoid", lambda x: 1 / (1 + np.exp(-x))), ("Tanh", np.tanh)])
def test_onnxruntime_model_without_the_onnx_package(monkeypatch, op, ref):
    pytest.importorskip("onnxruntime")
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx now raises ImportError
    x = np.linspace(-8, 8, 1001).astype(np.float32)
    y = np.full_like(x, np.nan)
    run = elementwise._ort_unary(op, x, y, threads=1)
    run()
    np.testing.assert_allclose(y, ref(x.astype(np.float64)), atol=1e-6)


@pytest.mark.parametrize("function", ["sigmoid", "tanh"])
def test_activation_table_has_the_goal_columns(function):
    table, records = elementwise.activation_table(function, sizes=(256,), repeats=1)
    header = table.splitlines()[2]
    for column in ("copy", "nnkern-minimax", "nnkern-scalef", "nnkern-accurate", "nnkern-minimax-inplace", "numpy",
                   "minimax / copy", "minimax in place / copy"):
        assert f"| {column} |" in header, header
    assert ("| minimax / numpy |" in header) == (function == "tanh")
    assert records[0]["n"] == 256 and records[0]["nnkern-minimax"] > 0
