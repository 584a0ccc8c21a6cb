"""sigmoid / tanh throughput (Gelem/s) vs numpy, scipy.special.expit, torch and onnxruntime, next to
the copy bandwidth (np.copyto) of the same size, 1 thread. One benchmark per (function, size, column);
the comparison rates of the same size go into extra_info. Nothing asserts a timing.

    python -m pytest bench/test_activations.py -k "65536"
    python -m nnkern bench --op sigmoid         # the same as one table
"""
import pytest

import nnkern
from nnkern.bench import anchors as _anchors
from nnkern.bench import elementwise

SIZES = list(elementwise.ACT_SIZES)
COLUMNS = ["nnkern-minimax", "nnkern-scalef", "nnkern-accurate", "nnkern-minimax-inplace", "copy", "numpy",
           "scipy.expit", "torch", "onnxruntime"]


@pytest.mark.parametrize("column", COLUMNS)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("function", ["sigmoid", "tanh"])
def test_activation(benchmark, function, n, column):
    _anchors.set_threads(1)
    nnkern.set_num_threads(1)
    fns = elementwise.activation_callables(function, n, 1, in_place=True)
    if column not in fns:
        pytest.skip(f"{column} is not available for {function} here")
    fn = fns[column]
    fn()
    iterations = max(1, int(2e6 // n))
    benchmark.pedantic(fn, rounds=7, iterations=iterations, warmup_rounds=1)
    stats = getattr(benchmark, "stats", None)
    benchmark.extra_info.update({"unit": "Gelem/s", "n": n, "function": function})
    if stats is not None:
        benchmark.extra_info["rate"] = round(n / stats.stats.median / 1e9, 3)
