"""Every op with its inputs and outputs at every byte offset 0..63 from a 64-byte aligned base.

Run by tests/test_hardening.py in a child process (a fault fails that test instead of killing pytest):
    python offset_sweep.py ISA [quick]
Under the cap ISA, each op's result at each offset must be bit-identical to its result on fresh aligned
arrays, and its inputs unchanged. Sizes reach each code path: small (below one vector), tails of the
kernels' tiles, and for sigmoid/tanh the streaming-store threshold (32 MiB outputs) and above. Prints
one line per op and "ok" at the end; exits non-zero on the first mismatch.
"""
from __future__ import annotations

import sys

import numpy as np

import nnkern

ISA = sys.argv[1]
QUICK = len(sys.argv) > 2 and sys.argv[2] == "quick"
OFFSETS = (0, 1, 4, 7, 60) if QUICK else range(64)  # quick: aligned, odd, float-aligned, near the end
STREAM_FLOATS = 8 * 2**20  # 32 MiB: the smallest output written with streaming stores
rng = np.random.default_rng(64)


_buffers = {}


def at(arr, off, slot=0):
    """A copy of arr whose data starts `off` bytes past a 64-byte boundary (same shape, C order). Large
    arrays reuse one buffer per (size, slot): page faults of fresh 32 MiB buffers would dominate."""
    key = (arr.nbytes, slot)
    buf = _buffers.get(key) if arr.nbytes >= 2**20 else None
    if buf is None:
        buf = np.empty(arr.nbytes + 128, np.uint8)
        if arr.nbytes >= 2**20:
            _buffers[key] = buf
    start = (-buf.ctypes.data) % 64 + off
    view = buf[start:start + arr.nbytes].view(arr.dtype).reshape(arr.shape)
    view[...] = arr
    assert view.ctypes.data % 64 == off
    return view


def same(got, want, what):
    if isinstance(want, tuple):
        for g, w in zip(got, want):
            same(g, w, what)
        return
    g, w = np.asarray(got), np.asarray(want)
    if g.shape != w.shape or g.dtype != w.dtype or g.tobytes() != w.tobytes():
        print(f"MISMATCH {what}")
        sys.exit(3)


def sweep(name, make_inputs, call, offsets=OFFSETS):
    """make_inputs() -> list of arrays; call(*arrays) -> result. Each offset shifts every array by a
    different amount (o, o + 1, o + 2, ... mod 64), so pairs of misalignments vary too."""
    inputs = make_inputs()
    want = call(*inputs)
    for o in offsets:
        shifted = [at(a, (o + 5 * i) % 64, i) for i, a in enumerate(inputs)]
        same(call(*shifted), want, f"{name} offset {o}")
        for a, s in zip(inputs, shifted):
            same(s, a, f"{name} offset {o}: an input changed")
    print(name, "ok")


def f32(*shape):
    return rng.uniform(-4, 4, shape).astype(np.float32)


def with_out(fn):
    """fn(..., o) writes into o, the last array (shifted like the inputs); the result is a copy of o."""
    def call(*arrays):
        *ins, out = arrays
        res = fn(*ins, out)
        assert res is out
        return out.copy()
    return call


def has_streaming_kernels(isa):
    try:
        nnkern._C.activation_ukernel(isa, "sigmoid", "minimax", np.zeros(1, np.float32), 0, np.zeros(1, np.float32), 0,
                                     0, stream=True)
        return True
    except ValueError:
        return False


with nnkern.max_isa(ISA):
    for fn in (nnkern.sigmoid, nnkern.tanh):
        for method in ("minimax", "scalef", "accurate"):
            sizes = [3, 4 * 16 + 13, 1000]
            # The streaming stores exist only in the x86 SIMD kernels; they share one loop template, so the quick
            # run takes the streaming sizes through one kernel, the full run through all.
            quick_stream = (fn, method) == (nnkern.sigmoid, "minimax")
            if has_streaming_kernels(ISA) and (quick_stream or not QUICK):
                sizes += [STREAM_FLOATS, STREAM_FLOATS + 37]
            for n in sizes:
                # Streaming sizes: every offset once (sigmoid minimax above the threshold; all kernels share
                # one loop template), and offsets of each kind (float-aligned or not, vector-aligned or
                # not) for the rest: a 32 MiB call costs tens of ms, mostly page faults of temporaries.
                full = n < STREAM_FLOATS or (fn is nnkern.sigmoid and method == "minimax" and n > STREAM_FLOATS)
                offs = OFFSETS if full else (0, 1, 2, 3, 4, 36, 61)
                tag = f"{fn.__name__} {method} n={n}"
                sweep(tag + " out=", lambda: [f32(n), np.zeros(n, np.float32)],
                      lambda x, o: (fn(x, method, out=o), o.copy())[1], offs)
                if n < STREAM_FLOATS:
                    sweep(tag, lambda: [f32(n)], lambda x: fn(x, method))
                    x0 = f32(n)  # in place (out=x at each offset)
                    want = fn(x0, method)
                    for o in OFFSETS:
                        xi = at(x0, o)
                        fn(xi, method, out=xi)
                        same(xi, want, f"{tag} in place offset {o}")

    for M, N, K in [(1, 5, 3), (17, 13, 9), (37, 29, 45)]:
        sweep(f"sgemm {M}x{N}x{K}", lambda: [f32(M, K), f32(K, N), f32(M, N)],
              lambda a, b, c: nnkern.sgemm(a, b, alpha=1.5, beta=0.5, c=c.copy()))
        a, b, c0 = f32(M, K), f32(K, N), f32(M, N)
        want = nnkern.sgemm(a, b, alpha=1.5, beta=0.5, c=c0.copy())
        for o in OFFSETS:
            c = at(c0, o)
            nnkern.sgemm(at(a, (o + 3) % 64), at(b, (o + 6) % 64), alpha=1.5, beta=0.5, c=c)
            same(c, want, f"sgemm c= {M}x{N}x{K} offset {o}")
        sweep(f"matmul out= {M}x{N}x{K}", lambda: [f32(M, K), f32(K, N), np.zeros((M, N), np.float32)],
              with_out(lambda a, b, o: nnkern.matmul(a, b, out=o)))
        lin = nnkern.Linear(f32(N, K), f32(N), activation="relu")
        sweep(f"Linear {M}x{N}x{K}", lambda: [f32(M, K), np.zeros((M, N), np.float32)],
              with_out(lambda x, o: lin(x, out=o)))

        u8 = lambda *s: rng.integers(0, 256, s, dtype=np.uint8)  # noqa: E731
        s8 = lambda *s: rng.integers(-128, 128, s, dtype=np.int8)  # noqa: E731
        sweep(f"qgemm {M}x{N}x{K}", lambda: [u8(M, K), s8(K, N), np.zeros((M, N), np.int32)],
              with_out(lambda a, b, o: nnkern.qgemm(a, b, a_zero_point=3, b_zero_point=-2, out=o)))
        i16 = lambda *s: rng.integers(-300, 300, s, dtype=np.int16)  # noqa: E731
        sweep(f"qgemm16 {M}x{N}x{K}", lambda: [i16(M, K), i16(K, N), np.zeros((M, N), np.int32)],
              with_out(lambda a, b, o: nnkern.qgemm16(a, b, out=o)))
        for odt in (np.uint8, np.float32, np.int32):
            ql = nnkern.QLinear(f32(N, K), None if odt == np.int32 else f32(N), input_scale=0.02,
                                input_zero_point=128, output_dtype=odt,
                                output_scale=0.1 if odt == np.uint8 else None)
            sweep(f"QLinear {odt.__name__} {M}x{N}x{K}", lambda: [u8(M, K), np.zeros((M, N), odt)],
                  with_out(lambda x, o: ql(x, out=o)))

    for n in (5, 67, 1000):
        sweep(f"quantize n={n}", lambda: [f32(n)], lambda x: nnkern.quantize(x, 0.05, 3))
        sweep(f"quantize per channel n={n}", lambda: [f32(3, n)],
              lambda x: nnkern.quantize(x, np.array([0.1, 0.2, 0.3]), 0, np.int8, axis=0))
        sweep(f"dequantize n={n}", lambda: [rng.integers(0, 256, n, dtype=np.uint8)],
              lambda q: nnkern.dequantize(q, 0.05, 3))
        sweep(f"topk n={n}", lambda: [f32(4, n)], lambda x: nnkern.topk(x, min(n, 20)))

    I, H, B, T = 7, 19, 3, 4
    w = [f32(4 * H, I) * 0.3, f32(4 * H, H) * 0.3, f32(4 * H), f32(4 * H)]
    lstm = nnkern.LSTM(*w)
    sweep("LSTM", lambda: [f32(T, B, I), f32(1, B, H), f32(1, B, H), np.array([4, 1, 3], np.int64)],
          lambda x, h, c, lengths: lstm(x, (h, c), lengths=lengths))
    lstm.precompute_embeddings(f32(11, I))
    sweep("LSTM tokens", lambda: [rng.integers(0, 11, (T, B)).astype(np.int64)], lambda ids: lstm.forward_tokens(ids))

print("ok")
