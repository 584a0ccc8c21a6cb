"""bf16 (float32 precision "medium"): the conversions, every bf16_gemm micro-kernel against the reference's sums
(bit for bit on x86, the stated bound on NEON), and matmul / Linear at "medium" with float32 and bf16 arrays.

The reference sum (kernels/bf16_gemm.h): per pair q, acc += A(i, 2q+1) B(2q+1, j), then acc += A(i, 2q) B(2q, j),
each product exact in float32 and each sum rounded: emulated here with NumPy float32 arithmetic."""
from __future__ import annotations

import pickle
import sys

import numpy as np
import pytest

import nnkern
from nnkern import _C
from conftest import kernel_params, require_level
from helpers import EPS, TINY, rand, same_for_thread_counts, check_within_bound

try:
    import ml_dtypes
    BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # the optional dependency: only the tests of bf16 NumPy arrays need it
    BF16 = None
needs_ml_dtypes = pytest.mark.skipif(BF16 is None, reason="ml_dtypes is not installed (pip install 'nnkern[bf16]')")
KERNELS = {k["name"]: k for k in _C.kernel_list("bf16_gemm")}


def round_bits(x):
    """float32 -> bf16 bits, round to nearest even, NaN quieted: the conversion's specification in NumPy."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    return np.where(nan, ((u >> 16) | 0x40).astype(np.uint16), rounded)


def widen(bits):
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def rounded(x):
    return widen(round_bits(x))


def to_bits(x):
    """nnkern.to_bf16 into a uint16 array (no ml_dtypes needed)."""
    out = np.empty(np.shape(x), np.uint16)
    nnkern.to_bf16(x, out)
    return out


# --- conversions ---------------------------------------------------------------------------------------------------

SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, -np.nan, 1e-40, -1e-40, 1.5e-45,
                    np.finfo(np.float32).max, -np.finfo(np.float32).max, 3.3895314e38, 1.00390625, 1.01171875,
                    1.0078125 + 2**-20, np.finfo(np.float32).tiny], np.float32)


def test_to_bf16_is_round_to_nearest_even_on_random_bits(rng):
    x = np.concatenate([SPECIAL, rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32).view(np.float32)])
    bits = to_bits(x)
    np.testing.assert_array_equal(bits, round_bits(x))
    nan = np.isnan(x)
    assert np.isnan(widen(bits)[nan]).all()  # NaN stays NaN (quiet), whatever its payload
    # ties to even, overflow to Inf
    assert to_bits(np.float32([1.00390625, 1.01171875])).tolist() == [0x3F80, 0x3F82]
    assert np.isinf(nnkern.from_bf16(to_bits(np.float32([3.4e38])))).all()


@needs_ml_dtypes
def test_to_bf16_gives_ml_dtypes_arrays(rng):
    x = np.concatenate([SPECIAL, rand(rng, 1000) * np.float32(1e5)])
    got = nnkern.to_bf16(x)
    assert got.dtype == BF16 and got.shape == x.shape
    np.testing.assert_array_equal(got.view(np.uint16), round_bits(x))
    nan = np.isnan(x)
    np.testing.assert_array_equal(got.astype(np.float32)[~nan], x[~nan].astype(BF16).astype(np.float32))


@pytest.mark.parametrize("level", kernel_params("bf16_convert"))
def test_every_conversion_kernel_gives_the_same_bits(level, rng):
    require_level(level)
    x = np.concatenate([SPECIAL, rng.integers(0, 2**32, 70_001, dtype=np.uint64).astype(np.uint32).view(np.float32)])
    with nnkern.max_isa(level):
        assert nnkern.cpu_info()["kernels"]["bf16_convert"] == f"bf16_convert__{level}"
        bits = to_bits(x)
        np.testing.assert_array_equal(bits, round_bits(x))
        np.testing.assert_array_equal(nnkern.from_bf16(bits).view(np.uint32), bits.astype(np.uint32) << 16)
        # the rounded float32 values the b_f32 GEMM kernels read: a product with one column of ones picks them out
        w = rand(rng, 3, 40)
        xs = rand(rng, 37, 40) * np.float32(1000)
        got = nnkern.Linear(w, precision="medium")(xs)
        np.testing.assert_array_equal(got, reference_sums(np.hstack([round_bits(xs)]), round_bits(w.T)))


def test_from_bf16_is_exact_and_round_trips(rng):
    bits = rng.integers(0, 2**16, 100_000, dtype=np.uint32).astype(np.uint16)
    f = nnkern.from_bf16(bits)
    assert f.dtype == np.float32
    np.testing.assert_array_equal(f.view(np.uint32), bits.astype(np.uint32) << 16)
    finite = ~np.isnan(f)
    np.testing.assert_array_equal(to_bits(f)[finite], bits[finite])
    if BF16 is not None:
        np.testing.assert_array_equal(nnkern.from_bf16(bits.view(BF16)), f)


def test_conversions_threaded_and_large(rng):
    x = rand(rng, 3, 700, 513)  # above the threading threshold, odd sizes
    want = round_bits(x)
    got = same_for_thread_counts(lambda: to_bits(x), counts=(1, 2, 3))
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(nnkern.from_bf16(got), widen(want))


def test_to_bf16_without_ml_dtypes_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # import ml_dtypes now raises ImportError
    with pytest.raises(ImportError, match=r"nnkern\[bf16\]"):
        nnkern.to_bf16(np.zeros(2, np.float32))
    assert to_bits(np.float32([1.0])).tolist() == [0x3F80]  # bits into a uint16 out need nothing


@needs_ml_dtypes
def test_conversions_into_out_and_torch(rng):
    x = rand(rng, 4, 33)
    out = np.empty((4, 33), BF16)
    assert nnkern.to_bf16(x, out) is out
    np.testing.assert_array_equal(out.view(np.uint16), round_bits(x))
    bits = np.empty((4, 33), np.uint16)
    nnkern.to_bf16(x, bits)
    np.testing.assert_array_equal(bits, round_bits(x))
    f = np.empty((4, 33), np.float32)
    assert nnkern.from_bf16(out, f) is f
    np.testing.assert_array_equal(f, widen(round_bits(x)))
    torch = pytest.importorskip("torch")
    t = torch.from_numpy(x).bfloat16()  # torch rounds to nearest even too
    np.testing.assert_array_equal(nnkern.from_bf16(t), t.float().numpy())
    tout = torch.empty(4, 33, dtype=torch.bfloat16)
    nnkern.to_bf16(x, tout)
    assert torch.equal(tout, t)


@needs_ml_dtypes
def test_conversions_refuse_bad_input(rng):
    x = rand(rng, 5)
    with pytest.raises(TypeError, match="float32"):
        nnkern.to_bf16(x.astype(np.float64))
    with pytest.raises(TypeError, match="bfloat16"):
        nnkern.from_bf16(x)
    with pytest.raises(ValueError, match="shape"):
        nnkern.to_bf16(x, np.empty(6, BF16))
    with pytest.raises(TypeError, match="bfloat16"):
        nnkern.to_bf16(x, np.empty(5, np.float32))
    with pytest.raises(TypeError, match="float32"):
        nnkern.from_bf16(np.zeros(5, np.uint16), np.empty(5, np.float64))
    with pytest.raises(ValueError, match="contiguous"):
        nnkern.to_bf16(x[:2], np.empty(4, BF16)[::2])
    buf = np.zeros(8, np.float32)
    with pytest.raises(ValueError, match="overlaps"):
        nnkern.from_bf16(buf.view(np.uint16)[:4], buf[1:5])
    with pytest.raises(TypeError):
        nnkern.to_bf16([1.0, 2.0])  # a list: no silent dtype choice
    assert nnkern.to_bf16(np.zeros((0, 3), np.float32)).shape == (0, 3)


# --- micro-kernels ---------------------------------------------------------------------------------------------------

def reference_sums(a_bits, b_bits):
    """C = A B in the contract's order: a_bits (m, 2 kq), b_bits (2 kq, n) bf16 bits -> float32 (m, n)."""
    a, b = widen(a_bits), widen(b_bits)
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        for q in range(a.shape[1] // 2):
            acc = acc + np.outer(a[:, 2 * q + 1], b[2 * q + 1])
            acc = acc + np.outer(a[:, 2 * q], b[2 * q])
    return acc


def pack_panel(a_bits, mr, g=2):
    """A (m, 2 kq) bits -> the packed panel a[t * g mr + g i + h] = A(i, g t + h) in groups of g k (rows past m and
    k past 2 kq zero)."""
    m, k2 = a_bits.shape
    groups = -(-k2 // g)
    padded = np.zeros((m, groups * g), np.uint16)
    padded[:, :k2] = a_bits
    panel = np.zeros((groups, mr, g), np.uint16)
    panel[:, :m, :] = padded.reshape(m, groups, g).transpose(1, 0, 2)
    return panel.reshape(-1)


def bit_exact(kernel):
    # BFDOT rounds each pair's sum once; tdpbf16ps sums in its own order (kernels/bf16_gemm.h)
    return not kernel.endswith(("neonbf16", "amx"))


def check_kernel(kernel, m, n, kq, rng, *, alpha=1.0, beta=0.0, bias=None, relu=False, a_bits=None, b_bits=None):
    info = KERNELS[kernel]
    mr, nr = info["mr"], info["nr"]
    a_bits = round_bits(rand(rng, m, 2 * kq)) if a_bits is None else a_bits
    b_bits = round_bits(rand(rng, 2 * kq, n)) if b_bits is None else b_bits
    ldc = mr + 3
    c = rand(rng, max(n, 1) * ldc + 5)
    c0 = c.copy()
    rows = np.ascontiguousarray(b_bits.T).reshape(-1)  # column j of B: 2 kq bits from row j * 2 kq
    panel = pack_panel(a_bits, mr, info["kgroup"])
    _C.bf16_gemm_ukernel(kernel, m, n, kq, panel, rows, [j * 2 * kq for j in range(n)], c, 1, ldc, alpha, beta, bias,
                         relu)
    got = np.stack([c[1 + j * ldc:1 + j * ldc + m] for j in range(n)], axis=1) if n else np.zeros((m, 0), np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        want = np.float32(alpha) * reference_sums(a_bits, b_bits)
        if beta != 0.0:
            want = want + np.float32(beta) * np.stack([c0[1 + j * ldc:1 + j * ldc + m] for j in range(n)], axis=1)
        if bias is not None:
            want = want + bias[:m, None]
        if relu:
            want = np.where(want < 0, np.float32(0), want)
    # nothing outside the m x n tile is touched
    mask = np.ones(c.size, bool)
    for j in range(n):
        mask[1 + j * ldc:1 + j * ldc + m] = False
    np.testing.assert_array_equal(c[mask], c0[mask], err_msg=f"{kernel}: wrote outside the tile")
    if bit_exact(kernel):
        np.testing.assert_array_equal(got, want, err_msg=f"{kernel} m={m} n={n} kq={kq}")
    else:
        a, b = widen(a_bits).astype(np.float64), widen(b_bits).astype(np.float64)
        exact = alpha * (a @ b)
        bound = (2 * kq + 2) * EPS * abs(alpha) * (np.abs(a) @ np.abs(b)) + TINY
        if beta != 0.0 or bias is not None or relu:
            exact = want.astype(np.float64)  # the epilogue's float32 steps: compare with the emulation
        for special in (np.isnan, np.isposinf, np.isneginf):  # non-finite where the emulation's are
            np.testing.assert_array_equal(special(got), special(want), err_msg=f"{kernel}: {special.__name__}")
        finite = np.isfinite(want)
        check_within_bound(got[finite], exact[finite], bound[finite], f"{kernel} m={m} n={n} kq={kq}")
    return got


# Every kernel by name (a level may have two: the first listed is dispatched, the others are tested here), and
# every level once (what dispatch runs there).
EVERY_KERNEL = [pytest.param(name, id=name) for name in KERNELS]
EVERY_LEVEL = list(dict.fromkeys(v["level"] for v in KERNELS.values()))


@pytest.mark.parametrize("kernel", EVERY_KERNEL)
def test_kernel_every_tail(kernel, rng):
    require_level(KERNELS[kernel]["level"])
    mr, nr = KERNELS[kernel]["mr"], KERNELS[kernel]["nr"]
    for kq in (0, 1, 2, 3, 4, 5, 7, 9, 16, 17, 35):  # past 16: the AMX kernel's whole 16-pair steps and a tail
        for m in range(1, mr + 1):
            for n in range(1, nr + 1):
                if kq > 4 and (m % 5 and m != mr) and n != nr:
                    continue  # deep K on a subset of (m, n): every tail is covered at kq <= 4
                check_kernel(kernel, m, n, kq, rng)


@pytest.mark.parametrize("kernel", EVERY_KERNEL)
def test_kernel_hook_refuses_a_short_panel(kernel, rng):
    """The kernel test hook sizes the panel by the kernel's group of K (BFMMLA's panel of an odd kq ends in a padded
    group): one element short raises instead of being read past its end."""
    require_level(KERNELS[kernel]["level"])
    info = KERNELS[kernel]
    mr, kq = info["mr"], 3
    panel = pack_panel(round_bits(rand(rng, mr, 2 * kq)), mr, info["kgroup"])
    rows, c = round_bits(rand(rng, 2 * kq)), np.zeros(mr, np.float32)
    _C.bf16_gemm_ukernel(kernel, mr, 1, kq, panel, rows, [0], c, 0, mr, 1.0, 0.0, None, False)
    with pytest.raises(ValueError, match="packed panel"):
        _C.bf16_gemm_ukernel(kernel, mr, 1, kq, panel[:-1].copy(), rows, [0], c, 0, mr, 1.0, 0.0, None, False)


@pytest.mark.parametrize("kernel", EVERY_KERNEL)
def test_kernel_epilogue_and_nonfinite(kernel, rng):
    require_level(KERNELS[kernel]["level"])
    mr, nr = KERNELS[kernel]["mr"], KERNELS[kernel]["nr"]
    bias = rand(rng, mr)
    for m, n in ((mr, nr), (mr - 1, nr - 1), (1, 1)):
        check_kernel(kernel, m, n, 6, rng, alpha=0.5, beta=-1.25, bias=bias, relu=True)
        check_kernel(kernel, m, n, 6, rng, alpha=2.0, bias=bias)
    a_bits = round_bits(rand(rng, mr, 12))
    a_bits[1, 3] = round_bits(np.float32([np.nan]))[0]
    a_bits[2, 5] = round_bits(np.float32([np.inf]))[0]
    got = check_kernel(kernel, mr, nr, 6, rng, a_bits=a_bits)
    assert np.isnan(got[1]).all() and np.isinf(got[2]).all() == (not np.isnan(got[2]).any())


def test_fallback_kernels_agree_on_denormals(rng):
    """The scalar and AVX2 kernels take bf16 denormals as the values they are (vdpbf16ps reads them as zero)."""
    require_level("avx2")
    tiny = round_bits(rand(rng, 16, 8) * np.float32(1e-38))
    assert (np.abs(widen(tiny)) < np.finfo(np.float32).tiny).any()
    b = round_bits(rand(rng, 8, 4))
    for kernel in ("bf16_gemm_8x4__scalar", "bf16_gemm_16x5__avx2"):
        m = KERNELS[kernel]["mr"]
        check_kernel(kernel, min(m, 16), 4, 4, rng, a_bits=tiny[:min(m, 16)], b_bits=b)


# --- matmul and Linear at "medium" -----------------------------------------------------------------------------------

def dispatched_exact():
    return bit_exact(nnkern.cpu_info()["kernels"]["bf16_gemm"])


def medium_reference(a, b):
    """(the contract's float32 sums of the rounded operands, float64 product of the rounded ones, its bound)."""
    ab, bb = round_bits(a), round_bits(b)
    a64, b64 = widen(ab).astype(np.float64), widen(bb).astype(np.float64)
    K = a.shape[-1]
    return reference_sums(ab, bb) if K % 2 == 0 else None, a64 @ b64, (K + 2) * EPS * (np.abs(a64) @ np.abs(b64)) + TINY


@pytest.mark.parametrize("M,N,K", [(1, 1, 1), (3, 5, 2), (7, 17, 33), (16, 16, 64), (37, 45, 130), (1, 300, 257),
                                   (65, 9, 1000), (200, 130, 31)])
def test_matmul_medium(rng, M, N, K):
    a, b = rand(rng, M, K), rand(rng, K, N)
    got = same_for_thread_counts(lambda: nnkern.matmul(a, b, precision="medium"), counts=(1, 2, 3))
    sums, exact, bound = medium_reference(a, b)
    if sums is not None and dispatched_exact():
        np.testing.assert_array_equal(got, sums)
    check_within_bound(got, exact, bound, f"matmul medium {M}x{N}x{K}")
    # against the float32 operands: rounding each operand is a relative error of at most 2^-8, the product 2^-7 + 2^-16
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    check_within_bound(got, a64 @ b64, (2 ** -7 + 2 ** -16 + (K + 2) * EPS) * (np.abs(a64) @ np.abs(b64)) + TINY,
                       "against float32 operands")
    with nnkern.float32_precision("medium"):
        np.testing.assert_array_equal(nnkern.matmul(a, b), got)
    assert not np.array_equal(nnkern.matmul(a, b), got) or M * N * K < 50  # "highest" does not round


@needs_ml_dtypes
def test_matmul_medium_batches_strides_and_bf16_arrays(rng):
    a, b = rand(rng, 2, 3, 5, 40), rand(rng, 3, 40, 6)
    got = nnkern.matmul(a, b, precision="medium")
    np.testing.assert_array_equal(got, np.stack([np.stack([nnkern.matmul(a[i, j], b[j], precision="medium")
                                                           for j in range(3)]) for i in range(2)]))
    at = rand(rng, 40, 9).T  # transposed view
    bn = rand(rng, 80, 7)[::-2]  # negative stride
    np.testing.assert_array_equal(nnkern.matmul(at, bn, precision="medium"),
                                  nnkern.matmul(np.ascontiguousarray(at), np.ascontiguousarray(bn), precision="medium"))
    # bf16 operands: as they are at "medium" (the same result as rounding float32 ones), widened exactly at "highest"
    x, w = rand(rng, 9, 24), rand(rng, 24, 11)
    xb, wb = nnkern.to_bf16(x), nnkern.to_bf16(w)
    np.testing.assert_array_equal(nnkern.matmul(xb, wb, precision="medium"), nnkern.matmul(x, w, precision="medium"))
    np.testing.assert_array_equal(nnkern.matmul(xb, wb), nnkern.matmul(rounded(x), rounded(w)))
    out = np.empty((9, 11), BF16)
    assert nnkern.matmul(x, w, out, precision="medium") is out
    np.testing.assert_array_equal(out.view(np.uint16), round_bits(nnkern.matmul(x, w, precision="medium")))
    torch = pytest.importorskip("torch")
    np.testing.assert_array_equal(nnkern.matmul(torch.from_numpy(x).bfloat16(), wb, precision="medium"),
                                  nnkern.matmul(x, w, precision="medium"))
    with pytest.raises(ValueError, match="shape"):
        nnkern.matmul(x, w, np.empty((9, 12), BF16), precision="medium")
    with pytest.raises(TypeError, match="float32"):
        nnkern.matmul(x.astype(np.float16), w, precision="medium")
    with pytest.raises(ValueError, match="precision"):
        nnkern.matmul(x, w, precision="low")


def test_row_blocks_rounded_per_task(rng):
    """Enough rows that every thread gets blocks (each task rounds its block into its scratch: ops/bf16/gemm.cc) for
    any L2 up to 4 MB, and few enough for the (block, panel) tasks over rows rounded once: the same bits both ways."""
    K = 4096
    a, b = rand(rng, 1030, K), rand(rng, K, 7)
    many = same_for_thread_counts(lambda: nnkern.matmul(a, b, precision="medium"), counts=(1, 3))
    few = nnkern.matmul(a[:9], b, precision="medium")
    np.testing.assert_array_equal(many[:9], few)
    if dispatched_exact():
        np.testing.assert_array_equal(many, reference_sums(round_bits(a), round_bits(b)))
    else:
        _, exact, bound = medium_reference(a, b)
        check_within_bound(many, exact, bound, "row blocks")


def test_long_k_stays_within_bound(rng):
    K = 1 << 16
    a, b = rand(rng, 3, K), rand(rng, K, 5)
    got = nnkern.matmul(a, b, precision="medium")
    sums, exact, bound = medium_reference(a, b)
    check_within_bound(got, exact, bound, "K = 65536")
    if dispatched_exact():
        np.testing.assert_array_equal(got, sums)


@pytest.mark.parametrize("level", EVERY_LEVEL)
def test_linear_medium_every_kernel(level, rng):
    require_level(level)
    w, bias, x = rand(rng, 70, 45), rand(rng, 70), rand(rng, 2, 13, 45)
    with nnkern.max_isa(level):
        layer = nnkern.Linear(w, bias, activation="relu", precision="medium")
        assert KERNELS[layer.bf16_kernel]["level"] == level
        got = same_for_thread_counts(lambda: layer(x), counts=(1, 2, 3))
    pad = np.zeros((26, 1), np.uint16)  # K = 45: the last pair's other member is a zero
    sums = reference_sums(np.hstack([round_bits(x.reshape(-1, 45)), pad]), np.vstack([round_bits(w.T), pad[:1].repeat(70, 1)]))
    want = np.maximum(sums + bias, 0).reshape(2, 13, 70)
    if bit_exact(layer.bf16_kernel):
        np.testing.assert_array_equal(got, want)
    else:
        check_within_bound(got, want.astype(np.float64), 50 * 47 * EPS * np.ones(want.shape) + 1e-5, level)
    if BF16 is not None:  # bf16 input of an even K: read in place by the kernels that take bits (not b_f32 ones)
        w2, x2 = rand(rng, 21, 64), rand(rng, 9, 64)
        with nnkern.max_isa(level):
            even = nnkern.Linear(w2, precision="medium")
            np.testing.assert_array_equal(even(nnkern.to_bf16(x2)), even(x2))


@needs_ml_dtypes
def test_linear_medium_follows_the_setting_cap_and_pickle(rng):
    w, x = rand(rng, 33, 20), rand(rng, 6, 20)
    layer = nnkern.Linear(w)
    highest = layer(x)
    with nnkern.float32_precision("medium"):
        medium = layer(x)
    np.testing.assert_array_equal(medium, nnkern.matmul(x, w.T, precision="medium"))
    assert not np.array_equal(medium, highest)
    np.testing.assert_array_equal(layer(x), highest)
    fixed = nnkern.Linear(w, precision="medium")
    np.testing.assert_array_equal(fixed(x), medium)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(fixed))(x), medium)
    # packed under one cap, called under another: repacked for that cap's kernel, the same bits on x86 (but from
    # the AMX tiles, which sum in their own order: the fallback is then within the bound)
    if "avx2" in nnkern.supported_isas():
        exact_here = dispatched_exact()
        with nnkern.max_isa("scalar"):
            if exact_here:
                np.testing.assert_array_equal(fixed(x), medium)
            else:
                _, exact, bound = medium_reference(x, w.T)
                check_within_bound(fixed(x), exact, bound, "scalar cap")
                check_within_bound(medium, exact, bound, "full cap")
    out = np.empty((6, 33), BF16)
    assert fixed(nnkern.to_bf16(x), out) is out
    np.testing.assert_array_equal(out.view(np.uint16), round_bits(medium))
    np.testing.assert_array_equal(layer(nnkern.to_bf16(x)), layer(rounded(x)))  # "highest": widened exactly
    with pytest.raises(ValueError, match="shape"):
        fixed(rand(rng, 6, 21))


def test_cpu_info_names_the_bf16_kernel():
    info = nnkern.cpu_info()
    name = info["kernels"]["bf16_gemm"]
    assert name in KERNELS
    assert KERNELS[name]["level"] in nnkern.supported_isas()
    if info["arch"] == "x86_64":
        assert ("avx512bf16" in nnkern.supported_isas()) == info["features"]["avx512_bf16"] and \
            info["features"]["avx512_vnni"] or "avx512bf16" not in nnkern.supported_isas()
    for level in nnkern.supported_isas():
        with nnkern.max_isa(level):
            got = KERNELS[nnkern.cpu_info()["kernels"]["bf16_gemm"]]["level"]
            assert got in nnkern.supported_isas()


# --- convolutions and the ONNX session at "medium" -----------------------------------------------------------------

def im2col(x, kh, kw, pad):
    """NHWC x -> rows of (kh, kw, ic) windows, stride 1, zero padding."""
    N, H, W, C = x.shape
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    OH, OW = H + 2 * pad - kh + 1, W + 2 * pad - kw + 1
    cols = np.stack([xp[:, i:i + OH, j:j + OW] for i in range(kh) for j in range(kw)], axis=3)
    return cols.reshape(N * OH * OW, kh * kw * C), (N, OH, OW)


@pytest.mark.parametrize("OC,IC,k,groups", [(24, 16, 1, 1), (33, 5, 3, 1), (16, 8, 3, 2), (8, 3, 5, 1)])
def test_conv2d_medium_is_the_bf16_gemm_of_its_windows(rng, OC, IC, k, groups):
    x, w, b = rand(rng, 2, 9, 11, IC), rand(rng, OC, k, k, IC // groups), rand(rng, OC)
    layer = nnkern.Conv2d(w, b, padding=k // 2, groups=groups, activation="relu", precision="medium")
    assert layer.algorithm_for((2, 9, 11, IC)) == "bf16"
    got = same_for_thread_counts(lambda: layer(x), counts=(1, 2, 3))
    ocg, icg = OC // groups, IC // groups
    parts = []
    for g in range(groups):
        cols, (N, OH, OW) = im2col(x[..., g * icg:(g + 1) * icg], k, k, k // 2)
        lin = nnkern.Linear(w[g * ocg:(g + 1) * ocg].reshape(ocg, -1), b[g * ocg:(g + 1) * ocg], activation="relu",
                            precision="medium")
        parts.append(lin(cols).reshape(N, OH, OW, ocg))
    np.testing.assert_array_equal(got, np.concatenate(parts, axis=-1))  # the same packed GEMM, the same bits
    # and within the bound of the rounded operands' exact convolution
    cols, _ = im2col(rounded(x), k, k, k // 2)
    if groups == 1:
        w64 = rounded(w).reshape(OC, -1).astype(np.float64)
        exact = np.maximum(cols.astype(np.float64) @ w64.T + b, 0).reshape(got.shape)
        bound = (w64.shape[1] + 4) * EPS * (np.abs(cols) @ np.abs(w64.T) + np.abs(b)).reshape(got.shape) + TINY
        check_within_bound(got, exact, bound, "conv2d medium")
    # "highest" is the float32 convolution; the explicit algorithm runs at any level
    assert nnkern.Conv2d(w, b, padding=k // 2, groups=groups).algorithm_for((2, 9, 11, IC)) != "bf16"
    np.testing.assert_array_equal(nnkern.conv2d(x, w, b, padding=k // 2, groups=groups, activation="relu",
                                                algorithm="bf16"), got)


def test_conv2d_medium_keeps_depthwise_in_float32(rng):
    w = rand(rng, 16, 3, 3, 1)
    with nnkern.float32_precision("medium"):
        assert nnkern.Conv2d(w, padding=1, groups=16).algorithm_for((1, 8, 8, 16)) == "depthwise"


def test_onnx_session_medium(rng):
    onnx = pytest.importorskip("onnx")
    from onnx import helper, numpy_helper
    import nnkern.onnx
    w1, w2, w3, b3 = rand(rng, 32, 16, 3, 3), rand(rng, 32, 32, 1, 1), rand(rng, 10, 32 * 8 * 8), rand(rng, 10)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["h"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Conv", ["r", "w2"], ["h2"]), helper.make_node("Flatten", ["h2"], ["f"]),
             helper.make_node("Gemm", ["f", "w3", "b3"], ["g"], transB=1),
             helper.make_node("MatMul", ["g", "w4"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 16, 8, 8])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(w, n) for w, n in
                               ((w1, "w1"), (w2, "w2"), (w3, "w3"), (b3, "b3"), (rand(rng, 10, 7), "w4"))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()
    x = {"x": rand(rng, 2, 16, 8, 8)}
    highest = nnkern.onnx.InferenceSession(model)
    medium = nnkern.onnx.InferenceSession(model, precision="medium")
    plan = medium.describe()
    assert plan.count("bf16") >= 4, plan  # both convolutions, the Gemm and the MatMul
    a, b = highest.run(None, x)[0], medium.run(None, x)[0]
    assert 0 < np.abs(a - b).max() < 3e-2 * np.abs(a).max()
    with nnkern.float32_precision("medium"):
        np.testing.assert_array_equal(nnkern.onnx.InferenceSession(model).run(None, x)[0], b)


def test_sgemm_medium_transposes_alpha_beta(rng):
    a, b, c0 = rand(rng, 30, 20), rand(rng, 30, 12), rand(rng, 20, 12)
    c = c0.copy()
    got = nnkern.sgemm(a, b, trans_a=True, alpha=0.5, beta=2.0, c=c, precision="medium")
    assert got is c
    want = np.float32(0.5) * nnkern.matmul(np.ascontiguousarray(a.T), b, precision="medium") + np.float32(2.0) * c0
    np.testing.assert_array_equal(got, want)  # alpha, then + beta C: the kernels' epilogue order
    cf = np.asfortranarray(c0)
    nnkern.sgemm(a, b, trans_a=True, alpha=0.5, beta=2.0, c=cf, precision="medium")
    np.testing.assert_array_equal(cf, want)
    with nnkern.float32_precision("medium"):
        np.testing.assert_array_equal(nnkern.sgemm(a.T, b), nnkern.matmul(a.T, b, precision="medium"))
        assert not np.array_equal(nnkern.sgemm(a.T, b, algorithm="tiles"), nnkern.sgemm(a.T, b))  # float32, named


def test_lstm_medium_rounds_the_input_projection(rng):
    I, H, S, B = 24, 16, 7, 3
    w_ih, w_hh, b = rand(rng, 4 * H, I), rand(rng, 4 * H, H) * np.float32(0.5), rand(rng, 4 * H)
    x = rand(rng, S, B, I)
    medium = nnkern.LSTM(w_ih, w_hh, b, precision="medium")
    assert medium.precision == "medium"
    y = same_for_thread_counts(lambda: medium(x, lengths=[7, 3, 5])[0], counts=(1, 2, 3))
    # the same layer in float32 over the rounded x and W_ih: only the projection's summation order differs
    on_rounded = nnkern.LSTM(rounded(w_ih), w_hh, b)(rounded(x), lengths=[7, 3, 5])[0]
    assert np.abs(y - on_rounded).max() < 1e-5
    highest = nnkern.LSTM(w_ih, w_hh, b)(x, lengths=[7, 3, 5])[0]
    assert np.abs(y - highest).max() > 1e-4
    with nnkern.float32_precision("medium"):
        np.testing.assert_array_equal(nnkern.LSTM(w_ih, w_hh, b)(x, lengths=[7, 3, 5])[0], y)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(medium))(x, lengths=[7, 3, 5])[0], y)
    with pytest.raises(ValueError, match="precision"):
        nnkern.LSTM(w_ih, w_hh, precision="bf16")


def test_onnx_lstm_medium(rng):
    onnx = pytest.importorskip("onnx")
    from onnx import helper, numpy_helper
    import nnkern.onnx
    I, H = 12, 8
    W, R, Bias = rand(rng, 1, 4 * H, I), rand(rng, 1, 4 * H, H), rand(rng, 1, 8 * H)
    node = helper.make_node("LSTM", ["x", "W", "R", "B"], ["y"], hidden_size=H)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [5, 2, I])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(a, n) for a, n in ((W, "W"), (R, "R"), (Bias, "B"))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()
    x = {"x": rand(rng, 5, 2, I)}
    a = nnkern.onnx.InferenceSession(model).run(None, x)[0]
    b = nnkern.onnx.InferenceSession(model, precision="medium").run(None, x)[0]
    assert 1e-5 < np.abs(a - b).max() < 2e-2


@needs_ml_dtypes
def test_conv2d_takes_and_gives_bf16_arrays(rng):
    x, w, b = rand(rng, 2, 7, 6, 8), rand(rng, 12, 3, 3, 8), rand(rng, 12)
    layer = nnkern.Conv2d(w, b, padding=1, precision="medium")
    xb = nnkern.to_bf16(x)
    np.testing.assert_array_equal(layer(xb), layer(x))  # "medium" rounds x itself: the same operands
    np.testing.assert_array_equal(nnkern.Conv2d(w, b, padding=1)(xb), nnkern.Conv2d(w, b, padding=1)(rounded(x)))
    out = np.empty((2, 7, 6, 12), BF16)
    assert layer(x, out) is out
    np.testing.assert_array_equal(out.view(np.uint16), round_bits(layer(x)))
    nchw = np.empty((2, 12, 7, 6), BF16)
    layer(np.ascontiguousarray(x.transpose(0, 3, 1, 2)), nchw, layout="NCHW")
    np.testing.assert_array_equal(nchw.view(np.uint16), round_bits(layer(x)).transpose(0, 3, 1, 2))
    with pytest.raises(ValueError, match="shape"):
        layer(x, np.empty((2, 7, 6, 11), BF16))
    torch = pytest.importorskip("torch")
    np.testing.assert_array_equal(layer(torch.from_numpy(x).bfloat16()), layer(x))
