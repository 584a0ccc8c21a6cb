"""Guard-page check of the depthwise kernels, run as a subprocess by test_qconv2d.py.

    python qdwconv_guard_check.py KERNEL

KERNEL: a name of nnkern._C.kernel_list("qdwconv"). QConv2d's "depthwise" algorithm through that kernel on a
uint8 input with channel multiplier 1 (read in place, no copy) for every channel count 1..33 (each tail of
the vector width) and counts around the kernel's channel block (channel_tile, e.g. 64) and two of them, and
every output dtype, with the input and the output each ending right before an unmapped page
(nnkern._C.GuardedBuffer): the channel tail may read no byte past the last channel of the last pixel, nor
write past the last output. Results are checked against the numpy int64 convolution.
Prints "OK" and exits 0 on success; exits 1 on a wrong result; a fault is a signal.
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nnkern  # noqa: E402
from nnkern import _C  # noqa: E402
from qhelpers import guard_cases_exit_code  # noqa: E402
from test_qconv2d import make_layer  # noqa: E402


def cases(kernel: str, rng):
    tile = next(k["mr"] for k in _C.kernel_list("qdwconv") if k["name"] == kernel)
    # every tail of a 16-lane vector, and around the kernel's channel block (64: 4 zmm) and two of them
    around = {tile - 1, tile, tile + 1, tile + 15, tile + 16, tile + 33, 2 * tile + 17}
    counts = sorted(set(range(1, 34)) | {c for c in around if c >= 1})
    for C in counts:
        for odt in (np.int32, np.uint8, np.int8, np.float32):
            layer = make_layer(rng, C, 3, 3, 1, odt, bool(C % 2), groups=C, padding=(1, 1, 1, 1), stride=(1, 1),
                               dilation=(1, 1), input_zero_point=int(rng.integers(0, 256)))
            yield layer, (1, 3, 5, C), odt, f"C={C} {np.dtype(odt).name}"


def main(kernel: str) -> int:
    rng = np.random.default_rng(5)
    return guard_cases_exit_code(cases(kernel, rng), "depthwise", kernel, rng)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
