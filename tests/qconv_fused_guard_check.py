"""Guard-page check of QConv2d's fused stages, run as a subprocess by test_qconv_fused.py.

    python qconv_fused_guard_check.py

Every algorithm that applies (dispatched kernels) with pixel_shuffle r = 1..4 and pool="global_avg", output
channels around the tiles (1..70), widths around the pixel blocks, every output dtype, with the input and the
result each ending right before an unmapped page (nnkern._C.GuardedBuffer): the runs of a shuffled tile must not
write a byte past the last output element. Results are checked against the unfused layer. Prints "OK" and exits
0 on success; exits 1 on a wrong result; a fault is a signal.
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nnkern  # noqa: E402
from qhelpers import guarded_array as guarded  # noqa: E402
from test_qconv2d import algorithms_for, make_layer, ref_layer, unfused  # noqa: E402
from test_qconv_fused import check_pool, shuffled  # noqa: E402


def main() -> int:
    rng = np.random.default_rng(5)
    for i, (C, OW) in enumerate([(1, 1), (3, 5), (2, 7), (5, 13), (4, 33), (1, 6), (3, 31), (4, 2)]):
        for r in (1, 2, 3, 4):
            for odt in (np.uint8, np.int8, np.float32, np.int32):
                for groups, fuse in ((1, {"pixel_shuffle": r}), (1, {"pool": "global_avg"}),
                                     (C * r * r, {"pixel_shuffle": r})):
                    ICg = 5 if groups == 1 else 1
                    layer = make_layer(rng, C * r * r, 3, 3, ICg, odt, relu=odt != np.int32, padding=1,
                                       groups=groups, input_zero_point=3, **fuse)
                    x, xbuf = guarded((1, 2, OW, ICg * groups), np.uint8)
                    x[...] = rng.integers(0, 256, x.shape, dtype=np.uint8)
                    want_y = unfused(layer, ref_layer(layer, x))
                    for alg in algorithms_for(layer, x.shape):
                        out, obuf = guarded(layer.result_shape(x.shape), layer._fused.result_dtype())
                        got = layer._run(x, out, alg, "")
                        if "pool" in fuse:
                            check_pool(layer, got, want_y, f"{alg} C={C} OW={OW} r={r} {np.dtype(odt).name}")
                        elif not np.array_equal(got, shuffled(want_y, r)):
                            print(f"{alg} C={C} OW={OW} r={r} groups={groups} {np.dtype(odt).name}: wrong result")
                            return 1
                        del obuf
                    del xbuf
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
