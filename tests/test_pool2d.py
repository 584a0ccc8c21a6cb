"""max_pool2d / avg_pool2d (NHWC): bit for bit against a numpy reference (int64 sums, float32 in the kernels'
order) on every pool2d kernel of this build, against torch (float channels_last and quantized quint8 /
qint8), ceil_mode and padding edge cases, requantization, out=, layouts, argument errors, threads."""
from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

import nnkern
from nnkern import _C
from conftest import kernel_params, require_level

F32 = np.float32
RANGE = {np.dtype(np.uint8): (0, 255), np.dtype(np.int8): (-128, 127)}


# --- the reference ----------------------------------------------------------------------------------

def out_size(n, k, s, p0, p1, ceil_mode):
    """torch's pooling_output_shape with padding p0 before and p1 after."""
    span = n + p0 + p1 - k
    o = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (o - 1) * s >= n + p0:
        o -= 1
    return o


def windows(x, k, s, pads, ceil_mode, fill):
    """(windows (N, OH, OW, C, kh, kw) of x padded with `fill`, valid (OH, OW) tap counts, padded counts)."""
    (kh, kw), (sh, sw), (pt, pb, pl, pr) = k, s, pads
    n, h, w, c = x.shape
    oh, ow = out_size(h, kh, sh, pt, pb, ceil_mode), out_size(w, kw, sw, pl, pr, ceil_mode)
    eb, er = max(pb, (oh - 1) * sh + kh - pt - h), max(pr, (ow - 1) * sw + kw - pl - w)
    xp = np.full((n, pt + h + eb, pl + w + er, c), fill, dtype=x.dtype)
    xp[:, pt:pt + h, pl:pl + w] = x
    win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(1, 2))[:, ::sh, ::sw][:, :oh, :ow]

    def counts(o, k_, s_, p0, p1, size):
        start = np.arange(o) * s_ - p0
        stop = np.minimum(start + k_, size + p1)
        return np.minimum(stop, size) - np.maximum(start, 0), stop - start

    vh, ph = counts(oh, kh, sh, pt, pb, h)
    vw, pw = counts(ow, kw, sw, pl, pr, w)
    return win, np.outer(vh, vw), np.outer(ph, pw)


def ref_max(x, k, s, pads, ceil_mode):
    if x.dtype == F32:  # torch's fold from -inf: a NaN tap replaces the running maximum
        win, _, _ = windows(x, k, s, pads, ceil_mode, -np.inf)
        acc = np.full(win.shape[:4], -np.inf, F32)
        for i, j in itertools.product(range(k[0]), range(k[1])):
            v = win[..., i, j]
            acc = np.where((v > acc) | np.isnan(v), v, acc)
        return acc
    win, _, _ = windows(x.astype(np.int64), k, s, pads, ceil_mode, -10**9)
    return win.max(axis=(-2, -1)).astype(x.dtype)


def ref_avg(x, k, s, pads, ceil_mode, count_include_pad=True, divisor=None, scales=None, zi=0, zo=None):
    """float32: taps summed in window order from +0, / float32(d). Integers: acc = sum(t - zi) exactly,
    m = f32(f32(si) / f32(so)) / f32(d), out = clip(rint(f32(acc) * m) + zo)."""
    if x.dtype == F32:
        win, valid, padded = windows(x, k, s, pads, ceil_mode, 0.0)
        acc = np.zeros(win.shape[:4], F32)
        for i, j in itertools.product(range(k[0]), range(k[1])):
            acc = acc + win[..., i, j]
        d = divisor if divisor else (padded if count_include_pad else valid)
        return acc / np.asarray(d, F32)[..., None]
    zo = zi if zo is None else zo
    win, valid, padded = windows(x.astype(np.int64) - zi, k, s, pads, ceil_mode, 0)
    acc = win.sum(axis=(-2, -1))
    d = np.asarray(divisor if divisor else (padded if count_include_pad else valid))
    ratio = F32(1) if scales is None else F32(scales[0]) / F32(scales[1])
    m = (ratio / d.astype(F32)).astype(F32)[..., None]
    v = acc.astype(F32) * m
    assert v.dtype == F32
    lo, hi = RANGE[x.dtype]
    return np.clip(np.rint(v).astype(np.int64) + zo, lo, hi).astype(x.dtype)


def test_reference_against_loops():
    """The vectorized reference, checked on one case against plain loops over every output element."""
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (2, 7, 6, 3), dtype=np.uint8)
    k, s, pads = (3, 2), (2, 2), (1, 0, 1, 1)
    got_max, got_avg = ref_max(x, k, s, pads, True), ref_avg(x, k, s, pads, True, False, zi=3)
    oh, ow = out_size(7, 3, 2, 1, 0, True), out_size(6, 2, 2, 1, 1, True)
    assert got_max.shape == got_avg.shape == (2, oh, ow, 3)
    for n, i, j, c in itertools.product(range(2), range(oh), range(ow), range(3)):
        rows = [r for r in range(i * 2 - 1, i * 2 - 1 + 3) if 0 <= r < 7]
        cols = [q for q in range(j * 2 - 1, j * 2 - 1 + 2) if 0 <= q < 6]
        taps = [int(x[n, r, q, c]) for r in rows for q in cols]
        assert got_max[n, i, j, c] == max(taps)
        v = F32(sum(t - 3 for t in taps)) * (F32(1) / F32(len(taps)))
        assert got_avg[n, i, j, c] == np.clip(int(np.rint(v)) + 3, 0, 255)


# --- the kernels --------------------------------------------------------------------------------------

@pytest.fixture(params=kernel_params("pool2d"))
def level(request):
    """Each pool2d kernel of this build in turn, dispatched through the ISA cap."""
    require_level(request.param)
    with nnkern.max_isa(request.param):
        assert nnkern.cpu_info()["kernels"]["pool2d"].endswith("__" + request.param)
        yield request.param


def random_config(rng):
    kh, kw = [(1, 3), (3, 1), (1, 1)][rng.integers(3)] if rng.random() < 0.2 else tuple(rng.integers(1, 8, 2))
    sh, sw = rng.integers(1, 4, 2)
    pads = tuple(int(rng.integers(0, min(kk // 2, 3) + 1)) for kk in (kh, kh, kw, kw))
    if rng.random() < 0.5:
        pads = (pads[0], pads[0], pads[2], pads[2])  # torch's symmetric padding
    h = int(rng.integers(max(1, kh - pads[0] - pads[1]), 21))
    w = int(rng.integers(max(1, kw - pads[2] - pads[3]), 21))
    return (int(kh), int(kw)), (int(sh), int(sw)), pads, h, w


def test_uint8_random_grid(level):
    """Kernels 1..7 (1x3, 3x1), strides 1..3, padding 0..3 (symmetric and not), H, W 1..20, C 1..70,
    batch 1..3, both ceil modes and count_include_pad settings, zero points."""
    rng = np.random.default_rng(1)
    for _ in range(120):
        k, s, pads, h, w = random_config(rng)
        c, n = int(rng.integers(1, 71)), int(rng.integers(1, 4))
        x = rng.integers(0, 256, (n, h, w, c), dtype=np.uint8)
        ceil_mode, cip = bool(rng.integers(2)), bool(rng.integers(2))
        zi = int(rng.choice([0, 128, int(rng.integers(256))]))
        got = nnkern.max_pool2d(x, k, s, pads, ceil_mode=ceil_mode)
        np.testing.assert_array_equal(got, ref_max(x, k, s, pads, ceil_mode), err_msg=f"{k} {s} {pads} {x.shape}")
        got = nnkern.avg_pool2d(x, k, s, pads, ceil_mode=ceil_mode, count_include_pad=cip, input_zero_point=zi)
        want = ref_avg(x, k, s, pads, ceil_mode, cip, zi=zi)
        np.testing.assert_array_equal(got, want, err_msg=f"{k} {s} {pads} {x.shape} cip={cip} zi={zi}")


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.float32])
def test_every_channel_count(level, dtype):
    """C = 1..70: every vector tail of every width, in the max and the average paths."""
    rng = np.random.default_rng(2)
    for c in range(1, 71):
        x = (rng.standard_normal((2, 5, 6, c), dtype=F32) if dtype == np.float32
             else rng.integers(*RANGE[np.dtype(dtype)], (2, 5, 6, c), endpoint=True).astype(dtype))
        for k, s, pads, cm in [((3, 3), (2, 2), (1, 1, 1, 1), True), ((2, 3), (1, 2), (0, 1, 1, 0), False)]:
            assert np.array_equal(nnkern.max_pool2d(x, k, s, pads, ceil_mode=cm), ref_max(x, k, s, pads, cm))
            assert np.array_equal(nnkern.avg_pool2d(x, k, s, pads, ceil_mode=cm, count_include_pad=False),
                                  ref_avg(x, k, s, pads, cm, False))



@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.float32])
def test_whole_windows(level, dtype):
    """The 3x3 and 2x2 max pools' unrolled path for windows inside the image, next to the clipped ones at its
    edges: C = 1..70, strides 1 and 2, float32 NaNs in interior windows (the same NaN wins as in the tap loop)."""
    rng = np.random.default_rng(9)
    for c in range(1, 71):
        if dtype == np.float32:
            x = rng.standard_normal((1, 7, 8, c), dtype=F32)
            flat = x.reshape(-1)
            flat[rng.integers(0, flat.size, 4)] = np.array([np.nan, -np.nan, np.inf, -np.inf], F32)
            payloads = np.frombuffer(np.array([0x7FC01234, 0xFFC0ABCD, 0x7FC00042, 0xFFC00777], np.uint32), F32)
            x[0, 2:4, 3:5] = payloads.reshape(2, 2, 1)  # windows holding several NaNs: the last one in tap order
        else:
            x = rng.integers(*RANGE[np.dtype(dtype)], (1, 7, 8, c), endpoint=True).astype(dtype)
        for k, s, p in [(3, 2, 1), (3, 1, 1), (3, 1, 0), (2, 2, 0), (2, 1, 0), (2, 2, 1)]:
            got, want = nnkern.max_pool2d(x, k, s, p), ref_max(x, (k, k), (s, s), (p,) * 4, False)
            assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), f"C={c} k={k} s={s} p={p}"
def test_extreme_values(level):
    """All 0, all 255 and a 0/255 checkerboard, with zero points at both ends and requantization."""
    rng = np.random.default_rng(3)
    base = [np.zeros((2, 9, 9, 37), np.uint8), np.full((2, 9, 9, 37), 255, np.uint8),
            (np.indices((2, 9, 9, 37)).sum(0) % 2 * 255).astype(np.uint8),
            rng.choice(np.array([0, 255], np.uint8), (2, 9, 9, 37))]
    for x, (k, s, p), zi, cip in itertools.product(base, [(3, 2, 1), (2, 2, 0), (7, 1, 3), (5, 3, 2)], (0, 255, 128),
                                                 (True, False)):
        pads = (p,) * 4
        assert np.array_equal(nnkern.max_pool2d(x, k, s, p, ceil_mode=True), ref_max(x, (k, k), (s, s), pads, True))
        got = nnkern.avg_pool2d(x, k, s, p, ceil_mode=True, count_include_pad=cip, input_zero_point=zi)
        assert np.array_equal(got, ref_avg(x, (k, k), (s, s), pads, True, cip, zi=zi))
        for scales, zo in [((0.02, 0.001), 0), ((0.5, 7.0), 255), ((1.0, 1.0), 3)]:
            got = nnkern.avg_pool2d(x, k, s, p, count_include_pad=cip, input_scale=scales[0], input_zero_point=zi,
                                    output_scale=scales[1], output_zero_point=zo)
            assert np.array_equal(got, ref_avg(x, (k, k), (s, s), pads, False, cip, scales=scales, zi=zi, zo=zo))


def test_requantized(level):
    """out = clip(rint(f32(acc) * f32(f32(si / so) / d)) + zo): scales up and down, int8 too."""
    rng = np.random.default_rng(4)
    for _ in range(40):
        k, s, pads, h, w = random_config(rng)
        dtype = np.uint8 if rng.random() < 0.7 else np.int8
        lo, hi = RANGE[np.dtype(dtype)]
        x = rng.integers(lo, hi, (2, h, w, int(rng.integers(1, 40))), endpoint=True).astype(dtype)
        si, so = float(rng.uniform(0.001, 0.1)), float(rng.uniform(0.001, 0.1))
        zi, zo = (int(v) for v in rng.integers(lo, hi + 1, 2))
        cm, cip = bool(rng.integers(2)), bool(rng.integers(2))
        divisor = None if rng.random() < 0.7 else int(rng.choice([-1, 1]) * rng.integers(1, 60))
        got = nnkern.avg_pool2d(x, k, s, pads, ceil_mode=cm, count_include_pad=cip, divisor_override=divisor,
                                input_scale=si, input_zero_point=zi, output_scale=so, output_zero_point=zo)
        want = ref_avg(x, k, s, pads, cm, cip, divisor, (si, so), zi, zo)
        np.testing.assert_array_equal(got, want, err_msg=f"{k} {s} {pads} {x.shape} {si} {so} {zi} {zo}")


def test_int8(level):
    rng = np.random.default_rng(5)
    for _ in range(40):
        k, s, pads, h, w = random_config(rng)
        x = rng.integers(-128, 128, (2, h, w, int(rng.integers(1, 71))), dtype=np.int8)
        cm, cip = bool(rng.integers(2)), bool(rng.integers(2))
        zi = int(rng.integers(-128, 128))
        assert np.array_equal(nnkern.max_pool2d(x, k, s, pads, ceil_mode=cm), ref_max(x, k, s, pads, cm))
        got = nnkern.avg_pool2d(x, k, s, pads, ceil_mode=cm, count_include_pad=cip, input_zero_point=zi)
        assert np.array_equal(got, ref_avg(x, k, s, pads, cm, cip, zi=zi))


def test_float32(level):
    """Max exact (NaN, +-inf, -0); average exact: the kernel sums in the reference's order."""
    rng = np.random.default_rng(6)
    for i in range(60):
        k, s, pads, h, w = random_config(rng)
        x = rng.standard_normal((2, h, w, int(rng.integers(1, 71))), dtype=F32) * F32(100)
        if i % 3 == 0:
            flat = x.reshape(-1)
            picks = rng.integers(0, flat.size, 6)
            flat[picks] = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, np.nan], F32)
        cm, cip = bool(rng.integers(2)), bool(rng.integers(2))
        divisor = None if rng.random() < 0.8 else int(rng.integers(1, 10))
        got, want = nnkern.max_pool2d(x, k, s, pads, ceil_mode=cm), ref_max(x, k, s, pads, cm)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32))  # NaN bits and zero signs too
        got = nnkern.avg_pool2d(x, k, s, pads, ceil_mode=cm, count_include_pad=cip, divisor_override=divisor)
        want = ref_avg(x, k, s, pads, cm, cip, divisor)
        assert np.array_equal(got, want, equal_nan=True)


def test_large_windows_use_int32_sums(level):
    """Over 257 taps the 16-bit sums would wrap: the kernels switch to int32."""
    x = np.full((1, 20, 20, 19), 255, np.uint8)
    x[0, ::3, ::2] = 0
    for k in (16, 17, 20):  # 256, 289, 400 taps
        assert np.array_equal(nnkern.avg_pool2d(x, k, 1), ref_avg(x, (k, k), (1, 1), (0,) * 4, False))
        xs = (x.astype(np.int16) - 128).astype(np.int8)
        assert np.array_equal(nnkern.avg_pool2d(xs, k, 1, input_zero_point=-128),
                              ref_avg(xs, (k, k), (1, 1), (0,) * 4, False, zi=-128))


def test_rounding_is_torchs_not_exact_division():
    """d = 14: the float32 multiplier rounds some half quotients the other way (documented)."""
    x = np.zeros((1, 2, 7, 1), np.uint8)
    x.reshape(-1)[:3] = [255, 255, 1]  # sum 511 -> 511/14 = 36.5: exactly rounded (even) 36
    got = int(nnkern.avg_pool2d(x, (2, 7))[0, 0, 0, 0])
    assert got == int(np.rint(F32(511) * (F32(1) / F32(14))))
    exact = [a // 14 + (2 * (a % 14) > 14 or (2 * (a % 14) == 14 and (a // 14) % 2 == 1)) for a in range(14 * 255 + 1)]
    fast = np.rint(np.arange(14 * 255 + 1, dtype=F32) * (F32(1) / F32(14))).astype(int)
    assert (np.array(exact) != fast).sum() > 0


# --- against torch -------------------------------------------------------------------------------------

def _torch():
    return pytest.importorskip("torch", reason="torch is not installed: the comparison with it is skipped")


def _nchw(torch, x):
    return torch.from_numpy(x).permute(0, 3, 1, 2)  # channels_last memory, NCHW shape


def _quantized(torch, x, scale, zp):
    dtype = torch.quint8 if x.dtype == np.uint8 else torch.qint8
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = torch._make_per_tensor_quantized_tensor(_nchw(torch, x.copy()), scale, zp)
    assert t.dtype == dtype and t.is_contiguous(memory_format=torch.channels_last)
    return t


def _back(t):
    return t.permute(0, 2, 3, 1).contiguous().numpy()


TORCH_CASES = [((3, 3), (2, 2), 1), ((2, 2), (2, 2), 0), ((3, 2), (1, 2), (1, 1)), ((5, 5), (3, 3), 2), ((7, 7), (2, 2), 3),
               ((1, 3), (1, 1), (0, 1)), ((4, 4), (3, 3), 2)]


@pytest.mark.parametrize("ceil_mode", [False, True])
def test_float_matches_torch(ceil_mode):
    torch = _torch()
    F = torch.nn.functional
    rng = np.random.default_rng(7)
    for (k, s, p), c, (h, w) in itertools.product(TORCH_CASES, (1, 13, 64), ((9, 11), (16, 16))):
        x = rng.standard_normal((2, h, w, c), dtype=F32)
        t = _nchw(torch, x)
        pads = (p, p, p, p) if isinstance(p, int) else (p[0], p[0], p[1], p[1])
        assert np.array_equal(nnkern.max_pool2d(x, k, s, pads, ceil_mode=ceil_mode),
                              _back(F.max_pool2d(t, k, s, p, ceil_mode=ceil_mode)))
        for cip in (True, False):
            got = nnkern.avg_pool2d(x, k, s, pads, ceil_mode=ceil_mode, count_include_pad=cip)
            assert np.array_equal(got, _back(F.avg_pool2d(t, k, s, p, ceil_mode=ceil_mode, count_include_pad=cip)))
        for divisor in (3, -7):
            got = nnkern.avg_pool2d(x, k, s, pads, ceil_mode=ceil_mode, divisor_override=divisor)
            assert np.array_equal(got, _back(F.avg_pool2d(t, k, s, p, ceil_mode=ceil_mode, divisor_override=divisor)))


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("ceil_mode", [False, True])
def test_quantized_matches_torch(dtype, ceil_mode):
    """torch's quantized max_pool2d / avg_pool2d on channels_last quint8 / qint8, zero points at the ends
    and inside. torch's average rounds the channels of its vector path (the first C // 16 * 16; C // 8 * 8
    on AVX2 builds) as zo + rne(float32(acc) * m), as nnkern does for every channel: those must match bit
    for bit. Its leftover channels go through quantize_val, which rounds rne(float32(zo + v)) instead: the
    float32 addition absorbs the multiplier's error and an odd zo flips a half, so there torch is within
    one step of nnkern (and of itself on the vector channels)."""
    torch = _torch()
    F = torch.nn.functional
    rng = np.random.default_rng(8)
    lo, hi = RANGE[np.dtype(dtype)]
    for (k, s, p), c in itertools.product(TORCH_CASES, (1, 7, 16, 30, 64, 67)):
        x = rng.integers(lo, hi, (2, 10, 13, c), endpoint=True).astype(dtype)
        pads = (p, p, p, p) if isinstance(p, int) else (p[0], p[0], p[1], p[1])
        vec = c // 16 * 16
        for zp in (lo, 0 if dtype == np.int8 else 128, hi, int(rng.integers(lo, hi + 1))):
            t = _quantized(torch, x, 0.05, zp)
            want = _back(F.max_pool2d(t, k, s, p, ceil_mode=ceil_mode).int_repr())
            assert np.array_equal(nnkern.max_pool2d(x, k, s, pads, ceil_mode=ceil_mode), want)
            for cip in (True, False):
                want = _back(F.avg_pool2d(t, k, s, p, ceil_mode=ceil_mode, count_include_pad=cip).int_repr())
                got = nnkern.avg_pool2d(x, k, s, pads, ceil_mode=ceil_mode, count_include_pad=cip,
                                        input_zero_point=zp)
                assert np.array_equal(got[..., :vec], want[..., :vec]), f"{k} {s} {p} c={c} zp={zp} cip={cip}"
                assert np.abs(got.astype(int) - want).max() <= 1
            for divisor in (5, -3):  # torch takes any nonzero divisor
                want = _back(F.avg_pool2d(t, k, s, p, ceil_mode=ceil_mode, divisor_override=divisor).int_repr())
                got = nnkern.avg_pool2d(x, k, s, pads, ceil_mode=ceil_mode, divisor_override=divisor,
                                        input_zero_point=zp)
                assert np.array_equal(got[..., :vec], want[..., :vec]) and np.abs(got.astype(int) - want).max() <= 1


def test_torch_leftover_channels_round_after_the_zero_point():
    """The difference described above, shown: C = 1 goes through torch's scalar path, C = 16 its vector path.
    Which rounding the scalar path takes depends on torch's build: rne(zo + v) = 0 with torch 2.13 on Sapphire
    Rapids, zo + rne(v) = 1 (nnkern's) with torch 2.11 on Emerald Rapids; nnkern's is the same everywhere."""
    torch = _torch()
    x = np.array([0, 0, 0, 2], np.uint8).reshape(1, 2, 2, 1)  # sum(t - 255) = -1018 -> v = -254.5
    t = _quantized(torch, x, 1.0, 255)
    theirs = int(torch.nn.functional.avg_pool2d(t, 2).int_repr().reshape(-1)[0])
    ours = int(nnkern.avg_pool2d(x, 2, input_zero_point=255)[0, 0, 0, 0])
    assert ours == 255 + int(np.rint(-254.5)) == 1  # zo + rne(v)
    assert theirs in (int(np.rint(F32(255) - F32(254.5))), ours) == (0, 1)  # rne(zo + v), or ours
    x16 = np.repeat(x, 16, axis=3)
    vector = torch.nn.functional.avg_pool2d(_quantized(torch, x16, 1.0, 255), 2).int_repr()
    assert (vector == 1).all() and (nnkern.avg_pool2d(x16, 2, input_zero_point=255) == 1).all()


def test_torch_rejects_what_nnkern_rejects():
    torch = _torch()
    t = torch.zeros(1, 1, 5, 5)
    with pytest.raises(RuntimeError):
        torch.nn.functional.max_pool2d(t, 3, 1, 2)
    with pytest.raises(ValueError, match="at most half"):
        nnkern.max_pool2d(np.zeros((1, 5, 5, 1), F32), 3, 1, 2)


# --- arrays, out=, layouts -----------------------------------------------------------------------------

def test_unbatched_torch_and_non_contiguous_inputs():
    rng = np.random.default_rng(9)
    x = rng.integers(0, 256, (2, 11, 9, 24), dtype=np.uint8)
    want = ref_max(x, (3, 3), (2, 2), (1,) * 4, False)
    assert np.array_equal(nnkern.max_pool2d(x[0], 3, 2, 1), want[0])  # (H, W, C)
    nchw = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    view = nchw.transpose(0, 2, 3, 1)  # NHWC view of NCHW memory: copied first
    assert not view.flags.c_contiguous
    assert np.array_equal(nnkern.max_pool2d(view, 3, 2, 1), want)
    big = rng.integers(0, 256, (2, 22, 9, 48), dtype=np.uint8)
    sl = big[:, ::2, :, ::2]
    assert np.array_equal(nnkern.avg_pool2d(sl, 2), ref_avg(np.ascontiguousarray(sl), (2, 2), (2, 2), (0,) * 4, False))
    raw = np.zeros(2 * 5 * 5 * 3 * 4 + 1, np.uint8)[1:].view(F32).reshape(2, 5, 5, 3)  # misaligned
    raw[...] = rng.standard_normal(raw.shape)
    assert not raw.flags.aligned
    assert np.array_equal(nnkern.avg_pool2d(raw, 2), ref_avg(raw.copy(), (2, 2), (2, 2), (0,) * 4, False))
    torch = pytest.importorskip("torch")
    tx = torch.from_numpy(x).permute(0, 3, 1, 2).contiguous(memory_format=torch.channels_last).permute(0, 2, 3, 1)
    assert np.array_equal(nnkern.max_pool2d(tx, 3, 2, 1), want)


def test_out():
    rng = np.random.default_rng(10)
    x = rng.standard_normal((2, 8, 8, 5), dtype=F32)
    want = ref_avg(x, (3, 3), (2, 2), (1,) * 4, True)
    out = np.full(want.shape, 7, F32)
    assert nnkern.avg_pool2d(x, 3, 2, 1, ceil_mode=True, out=out) is out and np.array_equal(out, want)
    raw = np.zeros(want.size * 4 + 1, np.uint8)[1:].view(F32).reshape(want.shape)
    assert nnkern.avg_pool2d(x, 3, 2, 1, ceil_mode=True, out=raw) is raw and np.array_equal(raw, want)
    with pytest.raises(TypeError, match="dtype"):
        nnkern.max_pool2d(x, 3, 2, 1, ceil_mode=True, out=np.empty(want.shape, np.float64))
    with pytest.raises(ValueError, match="shape"):
        nnkern.max_pool2d(x, 3, 2, 1, out=np.empty(want.shape, F32))  # ceil_mode off: (2, 4, 4, 5)
    with pytest.raises(ValueError, match="C-contiguous"):
        nnkern.max_pool2d(x, 3, 2, 1, ceil_mode=True, out=np.empty(want.shape[::-1], F32).T)
    ro = np.empty(want.shape, F32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        nnkern.max_pool2d(x, 3, 2, 1, ceil_mode=True, out=ro)
    with pytest.raises(ValueError, match="overlaps"):
        nnkern.max_pool2d(x, 1, 1, out=x)
    y = nnkern.max_pool2d(x[0], 2, out=np.empty((4, 4, 5), F32))
    assert y.shape == (4, 4, 5)


def test_empty():
    for shape in [(0, 4, 4, 3), (2, 4, 4, 0)]:
        for dt in (np.uint8, F32):
            y = nnkern.max_pool2d(np.zeros(shape, dt), 2)
            assert y.shape == (shape[0], 2, 2, shape[3]) and y.dtype == dt
            assert nnkern.avg_pool2d(np.zeros(shape, dt), 2).shape == y.shape


def test_threads_give_identical_results():
    rng = np.random.default_rng(11)
    before = nnkern.get_num_threads()
    x8 = rng.integers(0, 256, (3, 57, 45, 70), dtype=np.uint8)
    xf = rng.standard_normal((3, 57, 45, 70), dtype=F32)
    calls = [lambda: nnkern.max_pool2d(x8, 3, 2, 1), lambda: nnkern.avg_pool2d(x8, 3, 2, 1, input_zero_point=9),
             lambda: nnkern.max_pool2d(xf, 3, 2, 1, ceil_mode=True), lambda: nnkern.avg_pool2d(xf, 2)]
    try:
        results = []
        for threads in (1, 2, 3):
            nnkern.set_num_threads(threads)
            results.append([f() for f in calls])
    finally:
        nnkern.set_num_threads(before)
    for r in results[1:]:
        for a, b in zip(results[0], r):
            assert np.array_equal(a.view(np.uint8), b.view(np.uint8))
    assert np.array_equal(results[0][0], ref_max(x8, (3, 3), (2, 2), (1,) * 4, False))
    assert np.array_equal(results[0][1], ref_avg(x8, (3, 3), (2, 2), (1,) * 4, False, zi=9))


# --- hostile arguments --------------------------------------------------------------------------------

def test_bad_arguments():
    x = np.zeros((1, 6, 6, 3), np.uint8)
    xf = x.astype(F32)
    for fn in (nnkern.max_pool2d, nnkern.avg_pool2d):
        for dt in (np.float64, np.int16, np.uint16, np.bool_, object, ">f4", np.complex64):
            with pytest.raises(TypeError, match="uint8, int8 or float32"):
                fn(x.astype(dt), 2)
        for shape in [(6, 6), (1, 1, 6, 6, 3), (6,)]:
            with pytest.raises(ValueError, match="3-D or 4-D"):
                fn(np.zeros(shape, np.uint8), 2)
        with pytest.raises(TypeError, match="must be"):
            fn([[[1]]], 1)
        for k in (0, -1, (2, 0), (2, 2, 2)):
            with pytest.raises(ValueError, match="kernel_size"):
                fn(x, k)
        for k in (2.0, "2", None, True, (2, 2.5)):
            with pytest.raises(TypeError, match="kernel_size"):
                fn(x, k)
        for s in (0, (1, 0), -2):
            with pytest.raises(ValueError, match="stride"):
                fn(x, 2, s)
        with pytest.raises(TypeError, match="stride"):
            fn(x, 2, 1.5)
        for p in (-1, (0, -1), (1, 1, 1)):
            with pytest.raises(ValueError, match="padding"):
                fn(x, 3, 1, p)
        for p in (2, (0, 2), (0, 0, 0, 2), (2, 0, 0, 0)):
            with pytest.raises(ValueError, match="at most half the kernel"):
                fn(x, 3, 1, p)
        with pytest.raises(TypeError, match="padding"):
            fn(x, 3, 1, 0.5)
        with pytest.raises(ValueError, match="smaller than the kernel"):
            fn(x, 9, 1, 1)
        with pytest.raises(ValueError, match="height and width"):
            fn(np.zeros((1, 0, 4, 3), np.uint8), 1)
        for cm in ("True", 1, None):
            with pytest.raises(TypeError, match="ceil_mode"):
                fn(x, 2, ceil_mode=cm)
        for layout in ("NCHW", "nhwc", ""):
            with pytest.raises(ValueError, match="layout"):
                fn(x, 2, layout=layout)
        with pytest.raises(TypeError, match="layout"):
            fn(x, 2, layout=None)
        with pytest.raises(TypeError):
            fn(x, 2, 2, 0, False)  # ceil_mode is keyword-only
        with pytest.raises(ValueError, match="2\\^23"):
            fn(np.zeros((1, 3000, 3000, 1), np.uint8)[:, :1], (1, 2**23))
    with pytest.raises(TypeError, match="count_include_pad"):
        nnkern.avg_pool2d(x, 2, count_include_pad="no")
    for d in (0, 2**31):
        with pytest.raises(ValueError, match="divisor_override"):
            nnkern.avg_pool2d(x, 2, divisor_override=d)
    for d in (1.5, "2", True):
        with pytest.raises(TypeError, match="divisor_override"):
            nnkern.avg_pool2d(x, 2, divisor_override=d)
    with pytest.raises(ValueError, match="float32"):
        nnkern.avg_pool2d(xf, 2, input_zero_point=0)
    with pytest.raises(ValueError, match="both"):
        nnkern.avg_pool2d(x, 2, input_scale=0.1)
    with pytest.raises(ValueError, match="both"):
        nnkern.avg_pool2d(x, 2, output_scale=0.1)
    for sc in (0.0, -1.0, float("nan"), float("inf"), 1e39):
        with pytest.raises(ValueError, match="scale"):
            nnkern.avg_pool2d(x, 2, input_scale=sc, output_scale=1.0)
    with pytest.raises(ValueError, match="input_scale / output_scale"):
        nnkern.avg_pool2d(x, 2, input_scale=1e-30, output_scale=1e30)
    with pytest.raises(TypeError, match="input_scale"):
        nnkern.avg_pool2d(x, 2, input_scale="1", output_scale=1.0)
    for zp, dt in ((256, np.uint8), (-1, np.uint8), (128, np.int8), (-129, np.int8)):
        with pytest.raises(ValueError, match="zero_point"):
            nnkern.avg_pool2d(x.astype(dt), 2, input_zero_point=zp)
        with pytest.raises(ValueError, match="zero_point"):
            nnkern.avg_pool2d(x.astype(dt), 2, output_zero_point=zp)
    with pytest.raises(TypeError, match="input_zero_point"):
        nnkern.avg_pool2d(x, 2, input_zero_point=1.0)


def test_native_checks():
    """The binding rechecks what it is handed, whatever the Python layer did."""
    x = np.zeros((1, 6, 6, 3), np.uint8)
    out = np.empty((1, 3, 3, 3), np.uint8)
    args = dict(average=True, kernel=(2, 2), stride=(2, 2), padding=(0, 0, 0, 0), ceil_mode=False,
                count_include_pad=True, divisor=0, scale_ratio=1.0, input_zero_point=0, output_zero_point=0)
    _C.pool2d(x, out, **args)
    with pytest.raises(ValueError, match="shape"):
        _C.pool2d(x, np.empty((1, 3, 2, 3), np.uint8), **args)
    with pytest.raises(TypeError, match="dtype"):
        _C.pool2d(x, np.empty((1, 3, 3, 3), np.int8), **args)
    with pytest.raises(TypeError, match="uint8, int8 or float32"):
        _C.pool2d(x.astype(np.int16), out, **args)
    with pytest.raises(ValueError, match="4-D"):
        _C.pool2d(x[0], out, **args)
    with pytest.raises(ValueError, match="C-contiguous"):
        _C.pool2d(x.transpose(0, 2, 1, 3), out, **args)
    with pytest.raises(ValueError, match="overlaps"):
        _C.pool2d(x, x.reshape(-1)[:27].reshape(1, 3, 3, 3), **args)
    with pytest.raises(ValueError, match="half the kernel"):
        _C.pool2d(x, out, **{**args, "padding": (2, 0, 0, 0)})
    with pytest.raises(ValueError, match=">= 1"):
        _C.pool2d(x, out, **{**args, "stride": (0, 2)})
    with pytest.raises(ValueError, match="out of range"):
        _C.pool2d(x, out, **{**args, "kernel": (-1, 2)})
    with pytest.raises(ValueError, match="zero point"):
        _C.pool2d(x, out, **{**args, "input_zero_point": 300})
    with pytest.raises(ValueError, match="scale_ratio"):
        _C.pool2d(x, out, **{**args, "scale_ratio": float("nan")})
    with pytest.raises(ValueError, match="smaller than the kernel"):
        _C.pool2d(x, out, **{**args, "kernel": (8, 8)})
    assert _C.pool2d_output_size(112, 3, 2, 1, 1, False) == 56
    assert _C.pool2d_output_size(5, 2, 2, 0, 0, True) == 3 and _C.pool2d_output_size(5, 3, 2, 1, 1, True) == 3
    assert _C.pool2d_output_size(5, 2, 2, 1, 1, True) == 3  # a 4th window would start in the bottom padding


def test_kernel_list():
    names = [k["name"] for k in _C.kernel_list("pool2d")]
    assert names[0] == "pool2d__scalar" and all(n.startswith("pool2d__") for n in names)
    assert nnkern.cpu_info()["kernels"]["pool2d"] in names


def test_windows_larger_than_the_input():
    """A window larger than the (padded) input that torch accepts: ceil_mode lets the last window reach past the
    padding (counting only the positions within it); without it the padded input must hold one whole window."""
    x = np.array([3.0, -1.0], F32).reshape(1, 1, 2, 1)
    assert np.array_equal(nnkern.max_pool2d(x, (1, 3), 3, ceil_mode=True), np.full((1, 1, 1, 1), 3.0, F32))
    assert np.array_equal(nnkern.avg_pool2d(x, (1, 3), 3, ceil_mode=True), np.full((1, 1, 1, 1), 1.0, F32))
    assert np.array_equal(nnkern.avg_pool2d(x, (1, 7), 4, (0, 0, 2, 2), ceil_mode=True),
                          np.full((1, 1, 1, 1), F32(2) / F32(6), F32))  # the 6 padded positions count, not the 7th
    with pytest.raises(ValueError, match="smaller than the kernel"):
        nnkern.max_pool2d(x, (1, 3), 3)
    for k, s, pads in [((1, 3), (1, 3), (0, 0, 0, 0)), ((3, 5), (2, 4), (1, 1, 2, 2)), ((4, 4), (5, 5), (1, 2, 0, 2))]:
        xi = np.random.default_rng(3).standard_normal((2, 1, 2, 3), dtype=F32)
        assert np.array_equal(nnkern.max_pool2d(xi, k, s, pads, ceil_mode=True), ref_max(xi, k, s, pads, True))
        for cip in (True, False):
            assert np.array_equal(nnkern.avg_pool2d(xi, k, s, pads, ceil_mode=True, count_include_pad=cip),
                                  ref_avg(xi, k, s, pads, True, cip))


def test_accepts_what_torch_accepts():
    """Random small geometries, windows up to twice the input: where torch's max_pool2d / avg_pool2d accept one,
    nnkern gives the same output (shape and bits); where torch refuses it, nnkern raises ValueError."""
    torch = _torch()
    F = torch.nn.functional
    rng = np.random.default_rng(11)
    accepted = refused = 0
    for _ in range(400):
        h, w = (int(v) for v in rng.integers(1, 6, 2))
        kh, kw = (int(v) for v in rng.integers(1, 2 * max(h, w) + 2, 2))
        sh, sw = (int(v) for v in rng.integers(1, 5, 2))
        ph, pw = int(rng.integers(0, kh // 2 + 1)), int(rng.integers(0, kw // 2 + 1))
        ceil_mode = bool(rng.integers(2))
        x = rng.standard_normal((1, h, w, 3), dtype=F32)
        t = _nchw(torch, x)
        args = ((kh, kw), (sh, sw), (ph, ph, pw, pw))
        try:
            want_max = _back(F.max_pool2d(t, (kh, kw), (sh, sw), (ph, pw), ceil_mode=ceil_mode))
            want_avg = _back(F.avg_pool2d(t, (kh, kw), (sh, sw), (ph, pw), ceil_mode=ceil_mode))
        except RuntimeError:
            refused += 1
            with pytest.raises(ValueError):
                nnkern.max_pool2d(x, *args, ceil_mode=ceil_mode)
            continue
        accepted += 1
        assert np.array_equal(nnkern.max_pool2d(x, *args, ceil_mode=ceil_mode), want_max), (x.shape, args, ceil_mode)
        assert np.array_equal(nnkern.avg_pool2d(x, *args, ceil_mode=ceil_mode), want_avg), (x.shape, args, ceil_mode)
    assert accepted > 50 and refused > 50
