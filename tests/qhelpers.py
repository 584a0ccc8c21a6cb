"""Helpers of the integer GEMM tests (imported by test_qgemm.py and the guard-page subprocess script,
so no pytest here): the int64 reference, the packed-panel layout, the kernel-level epilogue reference."""
from __future__ import annotations

import numpy as np

import nnkern
from nnkern import _C

#: kind -> (A element dtype, B element dtype): u8s8 kernels read packed int8 weights and uint8 activations,
#: s8s8 kernels (SDOT) int8 activations, s16 kernels int16 both.
KIND_DTYPES = {"u8s8": (np.int8, np.uint8), "s8s8": (np.int8, np.int8), "s16": (np.int16, np.int16)}
KINDS = tuple(KIND_DTYPES)
OUT_KINDS = {"i32": 0, "f32": 1, "u8": 2, "s8": 3}


def ref_qgemm(a, b, za=0, zb=0):
    """sum_k (a - za)(b - zb) in int64 (zb scalar or per column)."""
    return (a.astype(np.int64) - int(za)) @ (b.astype(np.int64) - np.asarray(zb, np.int64))


def kernel_of(isa, kind):
    """(name, MR, NR, G) of isa's kind kernel, or None."""
    if isa not in nnkern.supported_isas():
        return None
    try:
        return _C.qgemm_tile(isa, kind)
    except ValueError:
        return None


def why_no_kernel(isa, kind):
    """The skip reason when ``isa`` has no ``kind`` micro-kernel (or the CPU cannot run it)."""
    if isa not in nnkern.supported_isas():
        return f"CPU lacks {isa}"
    return (f"{isa} has no {kind} kernel (its 8-bit kernel is of another kind, or 8-bit data runs widened on "
            f"its s16 kernel)")


def kernel_traits(isa, kind):
    """(k step of the kernel's inner loop: the tests sweep k past it, True for the QNNPACK-style kernels
    that subtract x_zero / w_zero themselves)."""
    kstep, zp = _C.qgemm_kernel_traits(isa, kind)
    return int(kstep), bool(zp)


def pack_a(w, MR, G):
    """The kernel's A panel for weights w (m x k, m <= MR): a[(p // G) * MR * G + i * G + p % G]."""
    m, k = w.shape
    groups = -(-k // G)
    panel = np.zeros((groups, MR, G), w.dtype)
    padded = np.zeros((MR, groups * G), w.dtype)
    padded[:m, :k] = w
    panel[...] = padded.reshape(MR, groups, G).transpose(1, 0, 2)
    return panel.ravel()


def epilogue_ref(acc, out, *, col_comp=None, b_zero=None, row_sum=None, scale=None, bias=None, relu=False,
                 lo=0.0, hi=0.0):
    """The kernel epilogue (kernels/qgemm.h) on an (m x n) int64 accumulator, in numpy.
    float32 rounding as the kernels: float(v) rounded to float32, then a single-rounding fma (exact in
    float64 for these magnitudes, then rounded once to float32), clamp, round half to even."""
    v = acc.astype(np.int64)
    if col_comp is not None:
        v = v + col_comp[:v.shape[0], None]
    if b_zero is not None:
        v = v - b_zero[:v.shape[0], None].astype(np.int64) * row_sum[None, :v.shape[1]].astype(np.int64)
    v = ((v + 2 ** 31) % 2 ** 32 - 2 ** 31).astype(np.int64)  # modulo 2^32, as the kernels
    if out == "i32":
        return np.maximum(v, 0).astype(np.int32) if relu else v.astype(np.int32)
    vf = v.astype(np.float32).astype(np.float64)
    s = scale[:v.shape[0], None].astype(np.float64)
    bb = bias[:v.shape[0], None].astype(np.float64) if bias is not None else 0.0
    y = (vf * s + bb).astype(np.float32)
    if out == "f32":
        return np.maximum(y, np.float32(0)) if relu else y
    y = np.minimum(np.maximum(y, np.float32(lo)), np.float32(hi))
    q = np.rint(y).astype(np.int64)
    return q.astype(np.uint8) if out == "u8" else q.astype(np.int8)
