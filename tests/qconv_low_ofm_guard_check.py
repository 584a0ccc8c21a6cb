"""Guard-page check of the low-output-channel convolution kernels, run as a subprocess by
test_qconv_low_ofm.py.

    python qconv_low_ofm_guard_check.py KERNEL

KERNEL: a name of nnkern._C.kernel_list("qconv_low_ofm"). QConv2d's "low_ofm" algorithm through that kernel for
input channels 1..9, 15..17 and around 64 (each tail of the group of 4 the kernels gather: the last pixel's last
group must not read past the input), output channels 1..4, widths around the 8 / 16-pixel vector and the block
(masked stores), 1x1 and 3x3 with padding, uint8 and int8 inputs, every output dtype, NHWC and planar, with the
input, the output and the weights each ending right before an unmapped page (nnkern._C.GuardedBuffer). Results
are checked against the numpy int64 convolution. Prints "OK" and exits 0 on success; exits 1 on a wrong result;
a fault is a signal.
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nnkern  # noqa: E402
from nnkern import _C  # noqa: E402
from qhelpers import guarded_array as guarded  # noqa: E402
from test_qconv2d import ref_layer, unfused  # noqa: E402


def main(kernel: str) -> int:
    rng = np.random.default_rng(8)
    pixels = next(k["nr"] for k in _C.kernel_list("qconv_low_ofm") if k["name"] == kernel)
    ics = [1, 2, 3, 4, 5, 6, 7, 9, 15, 17, 63, 65, 66, 67]
    widths = sorted({1, 2, 7, 8, 9, 15, 16, 17, pixels - 1, pixels, pixels + 1, 2 * pixels + 3} - {0})
    for i, IC in enumerate(ics):
        for j, OW in enumerate(widths):
            OC = 1 + (i + j) % 4
            KH, pad = ((1, 0), (3, 1))[(i + j) % 2]
            xdt = (np.uint8, np.int8)[j % 2]
            odt = (np.int32, np.uint8, np.int8, np.float32)[(i + 3 * j) % 4]
            w, wbuf = guarded((OC, KH, KH, IC), np.int8)
            w[...] = rng.integers(-128, 128, w.shape, dtype=np.int8)
            kw = dict(weight_scale=0.01, padding=pad, input_scale=0.02,
                      input_zero_point=int(rng.integers(np.iinfo(xdt).min, np.iinfo(xdt).max + 1)),
                      output_dtype=odt, relu=bool(OC % 2))
            if odt in (np.uint8, np.int8):
                kw.update(output_scale=0.5, output_zero_point=3)
            layer = nnkern.QConv2d(w, rng.uniform(-2, 2, OC).astype(np.float32) if odt != np.int32 else None, **kw)
            x, xbuf = guarded((1, 2, OW, IC), xdt)
            x[...] = rng.integers(np.iinfo(xdt).min, np.iinfo(xdt).max + 1, x.shape, dtype=xdt)
            want = unfused(layer, ref_layer(layer, x))
            for planar in (False, True):
                shape = want.shape if not planar else (want.shape[0], want.shape[3], want.shape[1], want.shape[2])
                out, obuf = guarded(shape, odt)
                got = layer._run(x, out, "low_ofm", kernel, planar=planar)
                if not np.array_equal(got, want.transpose(0, 3, 1, 2) if planar else want):
                    print(f"{kernel}: OC={OC} IC={IC} OW={OW} {np.dtype(odt).name} planar={planar}: wrong result")
                    return 1
                del obuf
            del xbuf, wbuf
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
