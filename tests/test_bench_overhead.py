"""bench --op overhead: the chains run and give the same outputs in both runtimes; the table has the fitted slope."""
import numpy as np
import pytest

pytest.importorskip("onnx")

from nnkern.bench import overhead  # noqa: E402


def test_chain_runs_the_same_in_every_runtime():
    fns = overhead.calls(overhead.chain_model(3))
    want = -np.maximum(-np.linspace(-1, 1, 8, dtype=np.float32).reshape(1, 8), 0)  # Neg, Relu, Neg
    assert set(fns) >= {"nnkern", "nnkern plan"}
    for name, f in fns.items():
        out = f()
        np.testing.assert_array_equal(out[0] if isinstance(out, (list, tuple)) else out, want, err_msg=name)


def test_table_has_a_row_per_length_and_the_slope():
    records = overhead.measure(lengths=(0, 4), repeats=1)
    assert {r["steps"] for r in records} == {0, 4} and all(r["seconds"] > 0 for r in records)
    text = overhead.table(records)
    assert "| per step |" in text and text.count("\n") == 4
    fit = overhead.slopes(records)
    assert set(fit) == {overhead.label(r) for r in records}
