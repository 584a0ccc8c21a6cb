"""Helpers of the integer GEMM tests (imported by test_qgemm.py and the guard-page subprocess script,
so no pytest here): the int64 reference, the packed-panel layout, the kernel-level epilogue reference."""
from __future__ import annotations

import numpy as np
import pytest

import nnkern
from nnkern import _C

#: kind -> (A element dtype, B element dtype): u8s8 kernels read packed int8 weights and uint8 activations,
#: s8s8 kernels (SDOT) int8 activations, s16 kernels int16 both.
KIND_DTYPES = {"u8s8": (np.int8, np.uint8), "s8s8": (np.int8, np.int8), "s16": (np.int16, np.int16),
               "s16w8": (np.int8, np.int16)}
KINDS = tuple(KIND_DTYPES)
OUT_KINDS = {"i32": 0, "f32": 1, "u8": 2, "s8": 3}


def guarded_array(shape, dtype):
    """A C-contiguous array of ``shape`` whose last byte is right before an unmapped page, and the buffer that
    owns it (keep it alive as long as the array)."""
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    buf = _C.GuardedBuffer(max(nbytes, 1))
    raw = np.frombuffer(buf, np.uint8)
    arr = raw[raw.size - nbytes:].view(dtype).reshape(shape)
    arr.flags.writeable = True
    return arr, buf


def guarded_layer_matches(layer, x_shape, xdt, odt, algorithm, kernel, rng):
    """The layer run through `algorithm` / `kernel` on a random input of x_shape (xdt) with the input and the output
    each ending right before an unmapped page; whether it equals the numpy int64 convolution (a fault: a signal)."""
    from test_qconv2d import ref_layer, unfused
    info = np.iinfo(xdt)
    x, xbuf = guarded_array(x_shape, xdt)
    x[...] = rng.integers(info.min, info.max + 1, x.shape, dtype=xdt)
    out, obuf = guarded_array(layer.output_shape(x.shape), odt)
    got = layer._run(x, out, algorithm, kernel)
    ok = np.array_equal(got, unfused(layer, ref_layer(layer, x)))
    del xbuf, obuf
    return ok


def guard_cases_exit_code(cases, algorithm, kernel, rng):
    """A guard script's result: guarded_layer_matches on each (layer, x_shape, output dtype, label) of `cases`, uint8
    input; prints the first wrong one's label and returns 1, else prints OK and returns 0."""
    for layer, x_shape, odt, label in cases:
        if not guarded_layer_matches(layer, x_shape, np.uint8, odt, algorithm, kernel, rng):
            print(f"{kernel}: {label}: wrong result")
            return 1
    print("OK")
    return 0


def ref_qgemm(a, b, za=0, zb=0):
    """sum_k (a - za)(b - zb) in int64 (zb scalar or per column)."""
    return (a.astype(np.int64) - int(za)) @ (b.astype(np.int64) - np.asarray(zb, np.int64))


#: Every integer GEMM kernel of this build (kernels/qgemm_list.h): dicts with name, level, mr, nr, kgroup,
#: supported.
QGEMM_KERNELS = _C.kernel_list("qgemm")
#: The ISA levels that have integer GEMM kernels of their own, lowest first (the driver tests' caps).
QGEMM_LEVELS = list(dict.fromkeys(k["level"] for k in QGEMM_KERNELS))


LARGE_TILE = 512  # m x n entries past which the tile sweeps sample (AMX's 32 x 32: 1024 tiles, k to 255)


def edge_sizes(r):
    """The tile sizes where a kernel's code changes, for tiles too large to sweep whole: 1, 2 and both sides
    of each half (AMX's 16-row / 16-channel tiles; the lanes of a 512-bit vector of int32)."""
    return sorted({1, 2, r // 2 - 1, r // 2, r // 2 + 1, r - 1, r} & set(range(1, r + 1)))


def tile_grid(MR, NR):
    """Every (m, n) of an MR x NR tile, or for a large tile (> LARGE_TILE entries) the products of its
    edge sizes; the tests then also run every (m, n) once (see their docstrings)."""
    if MR * NR <= LARGE_TILE:
        return [(m, n) for m in range(1, MR + 1) for n in range(1, NR + 1)]
    return [(m, n) for m in edge_sizes(MR) for n in edge_sizes(NR)]


def weight_range(name, dtype):
    """(lo, hi) of the weights the kernel `name` is exact for: [-64, 64] for those of weight_bits 7 (AVX2's
    VPMADDUBSW kernel), else the whole range of dtype."""
    bits = next(k["weight_bits"] for k in QGEMM_KERNELS if k["name"] == name)
    info = np.iinfo(dtype)
    return (-64, 64) if bits == 7 else (int(info.min), int(info.max))


def kernel_traits(name):
    """(kind, k step of the kernel's inner loop: the tests sweep k past it, True for the QNNPACK-style kernels
    that subtract x_zero / w_zero themselves)."""
    kind, kstep, zp, _ = _C.qgemm_kernel_traits(name)
    return kind, int(kstep), bool(zp)


def has_panels(name):
    """Whether the kernel has the whole-panel form (QGemmKernel::run_panels: several panels in one call)."""
    return bool(_C.qgemm_kernel_traits(name)[3])


def why_cannot_run(kernel):
    """The skip reason for a kernel this CPU cannot run (None if it can), naming the ISA."""
    return None if kernel["supported"] else f"CPU lacks {kernel['level']}: cannot run {kernel['name']}"


def runnable(kernel):
    """The kernel's name; the test skips (naming the ISA) where this CPU cannot run it."""
    reason = why_cannot_run(kernel)
    if reason:
        pytest.skip(reason)
    return kernel["name"]


def first_kernel(level, kinds):
    """The first kernel of the list at ``level`` whose kind is in ``kinds`` and that takes any weights, or None."""
    for k in QGEMM_KERNELS:
        if k["level"] == level and kernel_traits(k["name"])[0] in kinds and k["weight_bits"] == 8:
            return k
    return None


def pack_taps(w, MR, G, ks):
    """The indirect kernel's A panel for weights w (m x ks*k, tap t = columns t*k .. t*k+k-1): the taps' GEMM
    panels one after the other, each padded to whole groups (kernels/qgemm.h)."""
    k = w.shape[1] // ks
    return np.concatenate([pack_a(w[:, t * k:(t + 1) * k], MR, G) for t in range(ks)])


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
