"""Guard-page check of the indirect convolution, run as a subprocess by test_qconv2d.py.

    python qconv_indirect_guard_check.py KERNEL

KERNEL: a name of nnkern._C.kernel_list("qgemm"). QConv2d's "indirect" algorithm through that GEMM kernel for
input channels 1..9 (each tail of the kernel's K group, which the tiles may read whole away from the input's
end: QEpilogue::k_overread), 1x1 / 3x3 / 7x7 windows with and without padding, strides 1 and 2, groups 1 and 3,
batches 1 and 2, uint8 input read in place, with the input and the output each ending right before an unmapped
page (nnkern._C.GuardedBuffer): no tap may read past the last channel of the last pixel. (The kernels that
widen the input to int16 read a copy in the call's workspace instead, which the guard does not cover: there the
same rule keeps the reads inside the copy.) Results are checked against the numpy int64 convolution. Prints "OK"
and exits 0 on success; exits 1 on a wrong result; a fault is a signal.
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nnkern  # noqa: E402, F401
from qhelpers import guard_cases_exit_code, weight_range  # noqa: E402
from test_qconv2d import make_layer  # noqa: E402


def cases(kernel: str, rng):
    wmax = weight_range(kernel, np.int8)[1]
    i = 0
    for ICg in range(1, 10):
        for k, stride, pad, groups in [(3, 2, 1, 1), (3, 1, 1, 1), (7, 2, 3, 1), (3, 1, 0, 1), (1, 1, 0, 1),
                                       (3, 2, 1, 3)]:
            N = 1 + i % 2
            odt = (np.uint8, np.int32)[i % 2]
            i += 1
            OC = groups * (5 + i % 4)
            layer = make_layer(rng, OC, k, k, ICg, odt, False, weight_max=wmax, groups=groups,
                               padding=(pad,) * 4, stride=(stride, stride), input_zero_point=int(rng.integers(0, 256)))
            H, W = 7 + i % 3, 9 - i % 2
            label = f"IC/group={ICg} {k}x{k}/{stride} pad {pad} groups {groups} N={N}"
            yield layer, (N, H, W, groups * ICg), odt, label


def main(kernel: str) -> int:
    rng = np.random.default_rng(11)
    return guard_cases_exit_code(cases(kernel, rng), "indirect", kernel, rng)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
