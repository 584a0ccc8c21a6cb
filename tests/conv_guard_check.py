"""Guard-page check of the FP32 convolution algorithms, run as a subprocess by test_conv2d.py and test_winograd.py.

    python conv_guard_check.py ALGORITHM KERNEL

Conv2d's ALGORITHM on KERNEL (a kernel of its family; the ISA cap at the kernel's level) for output channels
around every vector and block tail, input channels 1..9, widths around the tiles, padding 0 and 1 and a stride of
2 (not for Winograd's), with the input, the output and the weights each ending right before an unmapped page (nnkern._C.GuardedBuffer):
no float past the last input channel of the last pixel may be read, nor any past the last output written.
Results are checked against the float64 convolution within the documented bound. Prints "OK" and exits 0 on
success; exits 1 on a wrong result; a fault is a signal.
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nnkern  # noqa: E402
from nnkern import _C  # noqa: E402
from helpers import check_within_bound  # noqa: E402
from qhelpers import guarded_array as guarded  # noqa: E402
from test_conv2d import FAMILY, ref_conv  # noqa: E402
from test_winograd import ALGORITHMS as WINOGRAD, winograd_ref  # noqa: E402


def main(algorithm: str, kernel: str) -> int:
    rng = np.random.default_rng(11)
    level = next(k["level"] for k in _C.kernel_list(FAMILY[algorithm]) if k["name"] == kernel)
    ocs = sorted(set(range(1, 34)) | {47, 48, 63, 64, 65, 79, 129})
    with nnkern.max_isa(level):
        for i, OC in enumerate(ocs):
            IC, groups = (OC, OC) if algorithm == "depthwise" else (1 + i % 9, 1)
            W = [1, 2, 5, 8, 9, 15, 17, 25][i % 8]
            pad, stride = (i % 2, 2 if i % 5 == 4 and algorithm != "mgemm" and algorithm not in WINOGRAD else 1)
            w, wbuf = guarded((OC, 3, 3, IC // groups), np.float32)
            w[...] = rng.uniform(-1, 1, w.shape)
            if W + 2 * pad < 3:
                pad = 1
            layer = nnkern.Conv2d(w, rng.uniform(-1, 1, OC).astype(np.float32), padding=pad, stride=stride,
                                  groups=groups)
            x, xbuf = guarded((1, 4, W, IC), np.float32)
            x[...] = rng.uniform(-1, 1, x.shape)
            out, obuf = guarded(layer.output_shape(x.shape), np.float32)
            got = layer._run(x, out, algorithm, kernel)
            if algorithm in WINOGRAD:  # its own bound
                want = winograd_ref(x, w, layer.bias, layer.padding, groups, WINOGRAD[algorithm])
            else:
                want = ref_conv(x, w, layer.bias, layer.stride, layer.padding, layer.dilation, groups)
            try:
                check_within_bound(got, *want, f"{algorithm} {kernel} OC={OC} IC={IC} W={W}")
            except AssertionError as e:
                print(e)
                return 1
            del xbuf, obuf, wbuf
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
