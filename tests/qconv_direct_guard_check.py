"""Guard-page check of the direct convolution kernels, run as a subprocess by test_qconv2d.py.

    python qconv_direct_guard_check.py KERNEL

KERNEL: a name of nnkern._C.kernel_list("qconv_direct"). QConv2d's "direct" algorithm through that kernel for
input channels 1..9 and around 64 (each tail of the group of 4 the packed copy pads), output channels 1..33
and around the 64-channel block (each tail of the vector and the block: masked stores), widths around the
pixel block, uint8 and int8 inputs and every output dtype, with the input, the output and the weights each
ending right before an unmapped page (nnkern._C.GuardedBuffer): no byte past the last input channel of the
last pixel may be read, nor any past the last output written. Results are checked against the numpy int64
convolution. Prints "OK" and exits 0 on success; exits 1 on a wrong result; a fault is a signal.
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
    rng = np.random.default_rng(7)
    pixels = next(k["nr"] for k in _C.kernel_list("qconv_direct") if k["name"] == kernel)
    ics = [1, 2, 3, 4, 5, 6, 7, 9, 63, 65]
    ocs = sorted(set(range(1, 34)) | {47, 63, 64, 65, 79, 127, 129})
    for i, OC in enumerate(ocs):
        IC = ics[i % len(ics)]
        OW = [1, pixels - 1, pixels, pixels + 1, 2 * pixels + 3][i % 5] or 1
        xdt = (np.uint8, np.int8)[i % 2]
        for odt in (np.int32, np.uint8, np.int8, np.float32):
            w, wbuf = guarded((OC, 3, 3, IC), np.int8)
            w[...] = rng.integers(-128, 128, w.shape, dtype=np.int8)
            kw = dict(weight_scale=0.01, padding=(1, 1, 1, 1), input_scale=0.02,
                      input_zero_point=int(rng.integers(np.iinfo(xdt).min, np.iinfo(xdt).max + 1)),
                      output_dtype=odt, relu=bool(OC % 2))
            if odt in (np.uint8, np.int8):
                kw.update(output_scale=0.5, output_zero_point=3)
            layer = nnkern.QConv2d(w, rng.uniform(-2, 2, OC).astype(np.float32) if odt != np.int32 else None, **kw)
            x, xbuf = guarded((1, 3, OW, IC), xdt)
            x[...] = rng.integers(np.iinfo(xdt).min, np.iinfo(xdt).max + 1, x.shape, dtype=xdt)
            out, obuf = guarded(layer.output_shape(x.shape), odt)
            got = layer._run(x, out, "direct", kernel)
            want = unfused(layer, ref_layer(layer, x))
            if not np.array_equal(got, want):
                print(f"{kernel}: OC={OC} IC={IC} OW={OW} {np.dtype(odt).name}: wrong result")
                return 1
            del xbuf, obuf, wbuf
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
