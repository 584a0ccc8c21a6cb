"""pixel_shuffle / pixel_unshuffle: against a reshape/transpose reference and torch, every element size,
both layouts, round trips bit for bit, out=, argument errors, threads."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import nnkern

DTYPES = [np.uint8, np.int8, np.int16, np.float16, np.int32, np.float32, np.int64, np.float64]
UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def ref_shuffle(x, r, layout="NCHW"):
    """The formula out[n, c, h*r+i, w*r+j] = x[n, c*r*r + i*r + j, h, w] as reshape/transpose."""
    if layout == "NHWC":
        return np.moveaxis(ref_shuffle(np.moveaxis(x, -1, -3), r), -3, -1)
    *lead, crr, h, w = x.shape
    c = crr // (r * r)
    y = x.reshape(*lead, c, r, r, h, w)
    k = len(lead)
    y = y.transpose(*range(k), k, k + 3, k + 1, k + 4, k + 2)  # (.., c, h, i, w, j)
    return y.reshape(*lead, c, h * r, w * r)


def ref_unshuffle(x, r, layout="NCHW"):
    if layout == "NHWC":
        return np.moveaxis(ref_unshuffle(np.moveaxis(x, -1, -3), r), -3, -1)
    *lead, c, hr, wr = x.shape
    h, w = hr // r, wr // r
    y = x.reshape(*lead, c, h, r, w, r)
    k = len(lead)
    y = y.transpose(*range(k), k, k + 2, k + 4, k + 1, k + 3)  # (.., c, i, j, h, w)
    return y.reshape(*lead, c * r * r, h, w)


def random_array(rng, shape, dtype):
    """Every bit pattern is possible (NaN payloads included for the float dtypes)."""
    dtype = np.dtype(dtype)
    bits = rng.integers(0, 256, size=int(np.prod(shape)) * dtype.itemsize, dtype=np.uint8)
    return bits.view(dtype).reshape(shape)


def same_bits(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(
        np.ascontiguousarray(a).view(UINT[a.dtype.itemsize]), np.ascontiguousarray(b).view(UINT[b.dtype.itemsize]))


def shuffled_shape(n, c, h, w, r, layout, batch):
    """(unshuffled shape, shuffled shape) for c output channels of h x w small pixels."""
    un, sh = (n, c * r * r, h, w), (n, c, h * r, w * r)
    if layout == "NHWC":
        un, sh = (n, h, w, c * r * r), (n, h * r, w * r, c)
    return (un, sh) if batch else (un[1:], sh[1:])


def test_reference_matches_the_formula():
    """The reference itself, checked against the index formula element by element (NCHW and NHWC)."""
    rng = np.random.default_rng(0)
    r, n, c, h, w = 2, 2, 3, 2, 3
    x = rng.integers(0, 1000, size=(n, c * r * r, h, w))
    y = ref_shuffle(x, r)
    xt = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    yt = ref_shuffle(xt, r, "NHWC")
    for n_, c_, h_, w_, i, j in itertools.product(range(n), range(c), range(h), range(w), range(r), range(r)):
        assert y[n_, c_, h_ * r + i, w_ * r + j] == x[n_, c_ * r * r + i * r + j, h_, w_]
        assert yt[n_, h_ * r + i, w_ * r + j, c_] == xt[n_, h_, w_, c_ * r * r + i * r + j]
    assert np.array_equal(ref_unshuffle(y, r), x) and np.array_equal(ref_unshuffle(yt, r, "NHWC"), xt)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("r", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("batch", [True, False], ids=["4d", "3d"])
def test_matches_reference_and_round_trips(dtype, layout, r, batch):
    rng = np.random.default_rng(r)
    for c, h, w in [(1, 1, 1), (1, 5, 7), (7, 5, 1), (5, 7, 5), (3, 1, 9)]:
        un_shape, sh_shape = shuffled_shape(2, c, h, w, r, layout, batch)
        x = random_array(rng, un_shape, dtype)
        y = nnkern.pixel_shuffle(x, r, layout=layout)
        assert type(y) is np.ndarray and y.shape == sh_shape
        assert same_bits(y, ref_shuffle(x, r, layout))
        back = nnkern.pixel_unshuffle(y, r, layout=layout)
        assert same_bits(back, x)  # NaN payloads too: compared as unsigned integers
        z = random_array(rng, sh_shape, dtype)
        assert same_bits(nnkern.pixel_unshuffle(z, r, layout=layout), ref_unshuffle(z, r, layout))


@pytest.mark.parametrize("dtype", ["float32", "float64", "uint8", "int16", "int64"])
@pytest.mark.parametrize("r", [1, 2, 3])
@pytest.mark.parametrize("batch", [True, False], ids=["4d", "3d"])
def test_matches_torch(dtype, r, batch):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(7)
    for c, h, w in [(1, 1, 1), (3, 5, 7), (2, 7, 5)]:
        un_shape, sh_shape = shuffled_shape(2, c, h, w, r, "NCHW", batch)
        x = random_array(rng, un_shape, dtype)
        want = F.pixel_shuffle(torch.from_numpy(x.copy()), r).numpy()
        assert same_bits(nnkern.pixel_shuffle(x, r), want)
        z = random_array(rng, sh_shape, dtype)
        want = F.pixel_unshuffle(torch.from_numpy(z.copy()), r).numpy()
        assert same_bits(nnkern.pixel_unshuffle(z, r), want)
        # NHWC is torch's NCHW op between two transposes.
        xt = np.ascontiguousarray(np.moveaxis(x, -3, -1))
        want = np.moveaxis(F.pixel_shuffle(torch.from_numpy(x.copy()), r).numpy(), -3, -1)
        assert same_bits(nnkern.pixel_shuffle(xt, r, layout="NHWC"), want)


def test_torch_tensor_and_buffer_inputs():
    torch = pytest.importorskip("torch")
    x = torch.arange(2 * 8 * 3 * 5, dtype=torch.float32).reshape(2, 8, 3, 5)
    y = nnkern.pixel_shuffle(x, 2)
    assert type(y) is np.ndarray
    assert np.array_equal(y, torch.nn.functional.pixel_shuffle(x, 2).numpy())
    xt = x.permute(0, 2, 3, 1)  # a non-contiguous tensor: copied first
    assert np.array_equal(nnkern.pixel_shuffle(xt, 2, layout="NHWC"), y.transpose(0, 2, 3, 1))
    buf = bytearray(np.arange(4 * 2 * 2, dtype=np.uint8).tobytes())
    m = memoryview(buf).cast("B", (4, 2, 2))
    assert np.array_equal(nnkern.pixel_shuffle(m, 2), ref_shuffle(np.asarray(m), 2))


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_non_contiguous_input(layout):
    rng = np.random.default_rng(3)
    base = random_array(rng, (2, 9, 9, 4), np.float32)
    x = base.transpose(0, 3, 1, 2) if layout == "NCHW" else base.transpose(0, 2, 1, 3)
    assert not x.flags.c_contiguous
    want = ref_shuffle(np.ascontiguousarray(x), 2, layout)
    assert same_bits(nnkern.pixel_shuffle(x, 2, layout=layout), want)
    s = random_array(rng, (3, 2, 12, 10), np.int16)[:, :, ::2, ::-1]  # strided and reversed
    assert same_bits(nnkern.pixel_unshuffle(s, 2, layout=layout), ref_unshuffle(np.ascontiguousarray(s), 2, layout))
    raw = np.zeros(4 * 2 * 2 * 4 + 1, np.uint8)[1:].view(np.float32).reshape(4, 2, 2)  # misaligned
    raw[...] = np.arange(16).reshape(4, 2, 2)
    assert not raw.flags.aligned
    assert np.array_equal(nnkern.pixel_shuffle(raw, 2), ref_shuffle(raw.copy(), 2))


def test_byte_swapped_and_other_dtypes():
    x = np.arange(2 * 4 * 3 * 3, dtype=">f4").reshape(2, 4, 3, 3)
    y = nnkern.pixel_shuffle(x, 2)
    assert y.dtype == x.dtype and np.array_equal(y, ref_shuffle(x, 2))
    for dt in (np.bool_, np.complex64, "datetime64[s]", "V2"):  # copied as bytes, whatever they mean
        size = np.dtype(dt).itemsize
        z = np.frombuffer(np.random.default_rng(1).bytes(9 * 2 * 2 * size), dtype=dt).reshape(9, 2, 2)
        got = nnkern.pixel_shuffle(z, 3)
        assert got.dtype == z.dtype and same_bits(got.view(UINT[size]), ref_shuffle(z, 3).view(UINT[size]))


def test_empty_arrays():
    for shape, r in [((0, 4, 3, 3), 2), ((1, 0, 3, 3), 2), ((1, 4, 0, 3), 2), ((4, 5, 0), 2), ((0, 9, 1, 1), 3)]:
        x = np.zeros(shape, np.float32)
        y = nnkern.pixel_shuffle(x, r)
        assert y.shape == ref_shuffle(x, r).shape and y.size == 0
        assert nnkern.pixel_unshuffle(y, r).shape == shape
    y = nnkern.pixel_shuffle(np.zeros((1, 0, 2, 2), np.uint8), 3, layout="NCHW")
    assert y.shape == (1, 0, 6, 6)
    with pytest.raises(ValueError, match="too large"):
        nnkern.pixel_shuffle(np.zeros((1, 0, 2, 2), np.uint8), 2**62)


@pytest.mark.parametrize("inverse", [False, True])
def test_out(inverse):
    rng = np.random.default_rng(5)
    fn = nnkern.pixel_unshuffle if inverse else nnkern.pixel_shuffle
    ref = ref_unshuffle if inverse else ref_shuffle
    x = random_array(rng, (2, 8, 6, 6), np.float32)
    want = ref(x, 2)
    out = np.full(want.shape, 7, np.float32)
    assert fn(x, 2, out=out) is out and same_bits(out, want)
    # A misaligned out is written through a temporary.
    raw = np.zeros(want.size * 4 + 1, np.uint8)[1:].view(np.float32).reshape(want.shape)
    assert fn(x, 2, out=raw) is raw and same_bits(raw, want)
    with pytest.raises(TypeError, match="dtype"):
        fn(x, 2, out=np.empty(want.shape, np.float64))
    with pytest.raises(TypeError, match="dtype"):
        fn(x, 2, out=np.empty(want.shape, np.int32))  # same itemsize, other dtype
    with pytest.raises(ValueError, match="shape"):
        fn(x, 2, out=np.empty(x.shape if x.shape != want.shape else (1,), np.float32))
    with pytest.raises(ValueError, match="C-contiguous"):
        fn(x, 2, out=np.empty(want.shape[::-1], np.float32).T)
    ro = np.empty(want.shape, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        fn(x, 2, out=ro)
    with pytest.raises(ValueError, match="overlaps"):
        fn(x, 2, out=x.reshape(want.shape))
    shared = np.zeros(x.size * 2, np.float32)
    xs = shared[: x.size].reshape(x.shape)
    xs[...] = x
    with pytest.raises(ValueError, match="overlaps"):
        fn(xs, 2, out=shared[x.size // 2: x.size // 2 + x.size].reshape(want.shape))
    assert fn(xs, 2, out=shared[x.size:].reshape(want.shape)) is not None  # adjacent, not overlapping
    assert same_bits(shared[x.size:].reshape(want.shape), want)


def test_native_checks():
    """The binding checks what it is handed, whatever the Python layer did."""
    from nnkern import _C
    x = np.zeros((1, 8, 3, 3), np.float32)
    with pytest.raises(ValueError, match="shape"):
        _C.pixel_shuffle(x, np.empty((1, 2, 6, 5), np.float32), 2, False)
    with pytest.raises(TypeError, match="dtype"):
        _C.pixel_shuffle(x, np.empty((1, 2, 6, 6), np.int32), 2, False)
    with pytest.raises(TypeError, match="dtype"):
        _C.pixel_shuffle(x.astype(object), np.empty((1, 2, 6, 6), object), 2, False)
    with pytest.raises(ValueError, match="C-contiguous"):
        _C.pixel_shuffle(x.transpose(0, 1, 3, 2), np.empty((1, 2, 6, 6), np.float32), 2, False)
    with pytest.raises(ValueError, match="divisible"):
        _C.pixel_shuffle(x, np.empty((1, 2, 6, 6), np.float32), 3, False)
    with pytest.raises(ValueError, match="divisible"):
        _C.pixel_unshuffle(x, np.empty((1, 72, 1, 1), np.float32), 2, False)
    with pytest.raises(ValueError, match="overflow"):
        _C.pixel_unshuffle(np.zeros((1, 2**40, 0, 0), np.uint8), np.zeros(0, np.uint8), 2**22, False)
    with pytest.raises(ValueError, match="overlaps"):
        _C.pixel_shuffle(x, x.reshape(1, 2, 6, 6), 2, False)
    with pytest.raises(ValueError, match="positive"):
        _C.pixel_shuffle(x, np.empty((1, 8, 3, 3), np.float32), 0, False)
    with pytest.raises(ValueError, match="4-D"):
        _C.pixel_shuffle(x[0], np.empty((2, 6, 6), np.float32), 2, False)


def test_bad_arguments():
    x = np.zeros((1, 8, 4, 4), np.float32)
    for r in (0, -1):
        with pytest.raises(ValueError, match="positive"):
            nnkern.pixel_shuffle(x, r)
    for r in (2.0, True, np.bool_(True), "2", None):
        with pytest.raises(TypeError, match="r must be an integer"):
            nnkern.pixel_shuffle(x, r)
    assert nnkern.pixel_shuffle(np.zeros((1, 4, 4, 4), np.float32), np.int64(2)).shape == (1, 1, 8, 8)
    for layout in ("nchw", "NCW", "", "NHWC "):
        with pytest.raises(ValueError, match="layout"):
            nnkern.pixel_shuffle(x, 2, layout=layout)
    with pytest.raises(TypeError, match="layout"):
        nnkern.pixel_shuffle(x, 2, layout=None)
    with pytest.raises(ValueError, match="channel count 8 is not divisible by r\\*r = 9"):
        nnkern.pixel_shuffle(x, 3)
    with pytest.raises(ValueError, match="channel count 4 is not divisible"):
        nnkern.pixel_shuffle(np.zeros((1, 8, 8, 4), np.float32), 4, layout="NHWC")
    with pytest.raises(ValueError, match="height 4 and width 4 must be divisible by r = 3"):
        nnkern.pixel_unshuffle(x, 3)
    with pytest.raises(ValueError, match="height 6 and width 5"):
        nnkern.pixel_unshuffle(np.zeros((6, 5, 2), np.float32), 2, layout="NHWC")
    for shape in ((16, 4), (4,), (1, 1, 4, 4, 4), ()):
        with pytest.raises(ValueError, match="3-D or 4-D"):
            nnkern.pixel_shuffle(np.zeros(shape, np.float32), 2)
    with pytest.raises(TypeError, match="object"):
        nnkern.pixel_shuffle(np.zeros((4, 2, 2), object), 2)
    with pytest.raises(TypeError, match="bytes per element"):
        nnkern.pixel_shuffle(np.zeros((4, 2, 2), np.complex128), 2)
    with pytest.raises(TypeError, match="must be"):
        nnkern.pixel_shuffle([[[1.0]]], 1)
    with pytest.raises(TypeError):
        nnkern.pixel_shuffle(x, 2, "NCHW")  # layout is keyword-only


def test_threads_give_identical_results():
    rng = np.random.default_rng(11)
    before = nnkern.get_num_threads()
    cases = [(random_array(rng, (2, 48, 33, 66), np.float32), "NCHW"),
             (random_array(rng, (2, 33, 66, 48), np.uint8), "NHWC")]
    try:
        results = []
        for threads in (1, 2):
            nnkern.set_num_threads(threads)
            results.append([(nnkern.pixel_shuffle(x, 4, layout=lo), nnkern.pixel_unshuffle(x, 3, layout=lo))
                            for x, lo in cases])
    finally:
        nnkern.set_num_threads(before)
    for (a1, b1), (a2, b2), (x, lo) in zip(*results, cases):
        assert same_bits(a1, a2) and same_bits(b1, b2)
        assert same_bits(a1, ref_shuffle(x, 4, lo)) and same_bits(b1, ref_unshuffle(x, 3, lo))


def test_large_array():
    rng = np.random.default_rng(13)
    x = rng.standard_normal((1, 256, 128, 128), dtype=np.float32)
    y = nnkern.pixel_shuffle(x, 2)
    assert y.shape == (1, 64, 256, 256) and np.array_equal(y, ref_shuffle(x, 2))
    assert np.array_equal(nnkern.pixel_unshuffle(y, 2), x)
    xt = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    assert np.array_equal(nnkern.pixel_shuffle(xt, 4, layout="NHWC"), ref_shuffle(xt, 4, "NHWC"))
