"""pixel_shuffle (NCHW, r = 2) vs torch.nn.functional.pixel_shuffle, float32 and uint8, 1 thread; both
return a new contiguous array each call.

    python -m pytest bench/test_pixel_shuffle.py

extra_info: gbytes_per_s (bytes read + written per second / 1e9). Nothing here asserts a timing.
"""
import numpy as np
import pytest

import nnkern
from nnkern.bench import anchors as _anchors

# (N, C*r*r, H, W), r: an ESPCN-style 64-channel feature map, and a 3-channel image out of 12 channels.
SHAPES = [((1, 64, 56, 56), 2), ((1, 12, 256, 256), 2)]


def _callables(shape, r, dtype):
    rng = np.random.default_rng(_anchors.SEED)
    x = rng.integers(0, 256, size=shape).astype(dtype)
    fns = {"nnkern": lambda: nnkern.pixel_shuffle(x, r)}
    torch = _anchors._torch()
    if torch is not None:
        tx = torch.from_numpy(x)
        fns["torch"] = lambda: torch.nn.functional.pixel_shuffle(tx, r)
    return fns


@pytest.mark.parametrize("column", ["nnkern", "torch"])
@pytest.mark.parametrize("dtype", ["float32", "uint8"])
@pytest.mark.parametrize("shape,r", SHAPES, ids=["x".join(map(str, s)) + f"-r{r}" for s, r in SHAPES])
def test_pixel_shuffle(benchmark, shape, r, dtype, column):
    _anchors.set_threads(1)
    nnkern.set_num_threads(1)
    fns = _callables(shape, r, dtype)
    if column not in fns:
        pytest.skip(f"{column} is not installed")
    benchmark.pedantic(fns[column], rounds=7, iterations=20, warmup_rounds=1)
    nbytes = 2 * int(np.prod(shape)) * np.dtype(dtype).itemsize
    benchmark.extra_info.update({"shape": list(shape), "r": r, "dtype": dtype,
                                 "gbytes_per_s": nbytes / benchmark.stats.stats.min / 1e9})
