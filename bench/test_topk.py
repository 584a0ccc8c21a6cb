"""topk at (16 x 32000) (a beam-search vocabulary) vs numpy argpartition+sort and torch.topk, 1 thread.

    python -m pytest bench/test_topk.py
    python -m nnkern bench --op topk
"""
import pytest

import nnkern
from nnkern.bench import anchors as _anchors
from nnkern.bench import elementwise


@pytest.mark.parametrize("column", ["nnkern", "numpy argpartition+sort", "torch.topk"])
@pytest.mark.parametrize("rows,n,k", elementwise.TOPK_SHAPES)
def test_topk(benchmark, rows, n, k, column):
    _anchors.set_threads(1)
    nnkern.set_num_threads(1)
    fns = elementwise.topk_callables(rows, n, k)
    if column not in fns:
        pytest.skip(f"{column} is not installed")
    benchmark.pedantic(fns[column], rounds=7, iterations=10, warmup_rounds=1)
    benchmark.extra_info.update({"rows": rows, "n": n, "k": k})
