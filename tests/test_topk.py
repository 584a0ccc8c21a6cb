"""topk: against a stable descending argsort (NaN largest, -0 == +0, ties to the lower index)."""
from __future__ import annotations

import numpy as np
import pytest

import nnkern
from nnkern import _C

from conftest import kernel_params, require_level
from helpers import QUICK


@pytest.fixture(params=kernel_params("f32_topk"))
def topk_isa(request):
    """Each level of the top-k kernel list (the scalar kernel is the general path of every other level)."""
    name = request.param
    require_level(name)
    with nnkern.max_isa(name):
        try:
            want = _C.topk_kernel_name(name)
        except ValueError:
            want = None
        if want is not None:
            assert nnkern.cpu_info()["kernels"]["f32_topk"] == want
        yield name


def ref_topk(x, k):
    """First k of a stable descending sort of the last axis: NaN first, then by value, then by index."""
    x = np.asarray(x)
    n = x.shape[-1]
    idx = np.empty(x.shape[:-1] + (k,), np.int64)
    for r in np.ndindex(x.shape[:-1]):
        row = x[r]
        nan = np.isnan(row)
        val = np.where(nan, 0, row).astype(np.float64) + 0.0  # -0 -> +0
        order = np.lexsort((np.arange(n), -val, ~nan))
        idx[r] = order[:k]
    return np.take_along_axis(x, idx, -1), idx


def check(x, k, axis=-1):
    v, i = nnkern.topk(x, k, axis=axis)
    xm = np.moveaxis(x, axis, -1)
    rv, ri = ref_topk(xm, k)
    np.testing.assert_array_equal(np.moveaxis(i, axis, -1), ri)
    np.testing.assert_array_equal(np.moveaxis(v, axis, -1).view(np.uint32), rv.view(np.uint32))
    assert v.dtype == np.float32 and i.dtype == np.int64


def test_random_all_k(topk_isa, rng):
    sizes = [1, 2, 15, 16, 17, 31, 63, 64, 65, 100, 129] if QUICK else list(range(1, 70)) + [100, 127, 128, 129, 257]
    for n in sizes:
        x = rng.standard_normal((3, n)).astype(np.float32)
        for k in sorted({0, 1, min(n, 2), n // 2, min(n, 15), min(n, 16), min(n, 17), n}):
            check(x, k)


def test_ties_nan_inf_zero(topk_isa, rng):
    for n in (5, 16, 40, 200, 1000):
        for trial in range(4):
            x = rng.integers(-3, 4, size=(2, n)).astype(np.float32)  # many ties
            pick = rng.random((2, n))
            x[pick < 0.05] = np.nan
            x[(pick >= 0.05) & (pick < 0.08)] = -np.nan
            x[(pick >= 0.08) & (pick < 0.1)] = np.inf
            x[(pick >= 0.1) & (pick < 0.12)] = -np.inf
            x[(pick >= 0.12) & (pick < 0.2)] = -0.0
            for k in (1, 3, 8, 16, min(17, n), n):
                check(x, min(k, n))


def test_all_nan_and_all_equal(topk_isa):
    x = np.full((2, 100), np.nan, np.float32)
    check(x, 16)
    check(x, 20)
    check(np.zeros((1, 100), np.float32), 16)
    check(np.full((1, 100), -np.inf, np.float32), 5)
    x = np.arange(100, dtype=np.float32)[None, :]  # ascending: every element is inserted
    check(x, 16)
    check(x[:, ::-1].copy(), 16)


def test_rising_data_refills_the_candidate_buffer(topk_isa, rng):
    """Rising data (every element a candidate), with ties and NaN: the general path's buffer of 2k + 64
    candidates fills and is cut back to the best k many times per row."""
    n = 3000
    x = (np.arange(n) // 3).astype(np.float32)[None, :].repeat(2, 0)  # ascending, in runs of 3 equal values
    x[1, rng.choice(n, 40, replace=False)] = np.nan
    for k in (1, 2, 17, 50, 200, n - 1):
        check(x, k)
    check(x[:, ::-1].copy(), 50)


def test_vocab_shape(topk_isa, rng):
    x = rng.standard_normal((16, 32000)).astype(np.float32)
    for k in (1, 4, 10, 16, 50):
        check(x, k)


def test_axes_and_layouts(rng):
    x = rng.standard_normal((4, 37, 6)).astype(np.float32)
    for axis in (0, 1, 2, -1, -2):
        check(x, 3, axis=axis)
    check(np.asfortranarray(x), 5, axis=1)
    check(x[:, ::2, :], 4, axis=1)
    v, i = nnkern.topk(np.zeros((0, 5), np.float32), 2)
    assert v.shape == (0, 2) and i.shape == (0, 2)
    v, i = nnkern.topk(np.zeros((3, 5), np.float32), 0)
    assert v.shape == (3, 0)
    check(rng.standard_normal(50).astype(np.float32), 7)


def test_threads_deterministic(rng):
    x = rng.standard_normal((64, 5000)).astype(np.float32)
    nnkern.set_num_threads(1)
    a = nnkern.topk(x, 10)
    nnkern.set_num_threads(2)
    b = nnkern.topk(x, 10)
    np.testing.assert_array_equal(a[1], b[1])


def test_bad_arguments():
    x = np.zeros((2, 5), np.float32)
    with pytest.raises(TypeError):
        nnkern.topk(x.astype(np.float64), 2)
    with pytest.raises(ValueError):
        nnkern.topk(x, 6)
    with pytest.raises(ValueError):
        nnkern.topk(x, -1)
    with pytest.raises(TypeError):
        nnkern.topk(x, 2.5)
    with pytest.raises(ValueError):
        nnkern.topk(x, 2, axis=2)
    with pytest.raises(ValueError):
        nnkern.topk(np.zeros((), np.float32), 1)


def ref_smallest(x, k):
    """First k of a stable ascending sort of the last axis: by value, then by index, NaN last."""
    idx = np.argsort(x, axis=-1, kind="stable")[..., :k]  # numpy: -0 == +0, NaN last
    return np.take_along_axis(x, idx, -1), idx


@pytest.mark.parametrize("k", [0, 1, 3, 16, 17, 40])
def test_smallest(topk_isa, rng, k):
    x = rng.standard_normal((9, 40)).astype(np.float32)
    x[1, ::3] = np.nan
    x[2, :] = np.nan
    x[3, 5:20] = 0.5  # ties
    x[4, ::2] = -0.0
    x[4, 1::2] = 0.0
    x[5, [3, 9]] = [np.inf, -np.inf]
    v, i = nnkern.topk(x, k, largest=False)
    rv, ri = ref_smallest(x, k)
    np.testing.assert_array_equal(i, ri)
    np.testing.assert_array_equal(v.view(np.uint32), rv.view(np.uint32))  # x's own bits (signed zeros, NaN)


def test_torch_keywords_match_torch(rng):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    x = rng.standard_normal((6, 30, 5)).astype(np.float32)
    for dim in (0, 1, -1):
        for largest in (True, False):
            v, i = nnkern.topk(x, 4, dim=dim, largest=largest)
            tv, ti = torch.topk(torch.from_numpy(x), 4, dim=dim, largest=largest)
            np.testing.assert_array_equal(i, ti.numpy())  # distinct random values: no tie-order question
            np.testing.assert_array_equal(v, tv.numpy())
    a = nnkern.topk(x, 2, axis=1)
    b = nnkern.topk(x, 2, dim=1)
    assert all(np.array_equal(p, q) for p, q in zip(a, b))


def test_torch_keyword_errors():
    x = np.zeros((2, 5), np.float32)
    with pytest.raises(TypeError, match="not both"):
        nnkern.topk(x, 2, axis=0, dim=0)
    with pytest.raises(ValueError, match="dim 3"):
        nnkern.topk(x, 2, dim=3)
    with pytest.raises(TypeError, match="largest must be a bool"):
        nnkern.topk(x, 2, largest="no")
    with pytest.raises(TypeError, match="k must be an integer, got bool"):
        nnkern.topk(x, True)
    with pytest.raises(TypeError, match="dim must be an integer"):
        nnkern.topk(x, 2, dim=1.0)
