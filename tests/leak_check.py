"""Resident memory over 10,000 calls of every op and layer construction; run by tests/test_leaks.py in a child
process. Prints one line per case: name, RSS growth in KiB after a warm-up; exits 1 if any grows more than
LIMIT_KIB (a leak of 100 bytes per call would show as ~1 MiB)."""
from __future__ import annotations

import gc
import os
import sys

import numpy as np

import nnkern

CALLS = int(os.environ.get("NNKERN_LEAK_CALLS", "10000"))
LIMIT_KIB = 512
PAGE = os.sysconf("SC_PAGE_SIZE")
F32 = np.float32


def rss_kib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE // 1024


def cases():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((8, 16)).astype(F32), rng.standard_normal((16, 8)).astype(F32)
    a8, b8 = rng.integers(0, 255, (8, 16)).astype(np.uint8), rng.integers(-128, 127, (16, 8)).astype(np.int8)
    a16, b16 = a8.astype(np.int16), b8.astype(np.int16)
    w, bias = rng.standard_normal((8, 16)).astype(F32), rng.standard_normal(8).astype(F32)
    lin, ql = nnkern.Linear(w, bias), nnkern.QLinear(w, bias, input_scale=0.1, input_zero_point=128, output_scale=0.2)
    qd = nnkern.QLinear(w, bias)
    w_ih, w_hh = rng.standard_normal((16, 16)).astype(F32), rng.standard_normal((16, 4)).astype(F32)
    lstm = nnkern.LSTM(w_ih, w_hh)
    x3 = rng.standard_normal((3, 2, 16)).astype(F32)
    b3 = rng.standard_normal((3, 16, 4)).astype(F32)  # a batch per entry: the per-batch loop
    out = np.empty((8, 8), F32)  # sgemm c; tanh of a strided view into it
    bad = np.ones(3)  # float64: every call raises
    torch = None
    try:
        import torch
    except ImportError:
        pass
    t = torch.from_numpy(a) if torch is not None else memoryview(a)

    def raises(fn):
        def call():
            try:
                fn()
            except (TypeError, ValueError):
                pass
        return call

    return {
        "sgemm": lambda: nnkern.sgemm(a, b, c=out, beta=0.5), "matmul": lambda: nnkern.matmul(a, b),
        "matmul_batched": lambda: nnkern.matmul(x3, b3),
        "sigmoid": lambda: nnkern.sigmoid(a), "tanh_out": lambda: nnkern.tanh(b.T[:, ::2], method="minimax", out=out),
        "topk": lambda: nnkern.topk(a, 3), "topk_smallest": lambda: nnkern.topk(a, 3, largest=False),
        "qgemm": lambda: nnkern.qgemm(a8, b8, a_zero_point=3), "qgemm16": lambda: nnkern.qgemm16(a16, b16),
        "quantize": lambda: nnkern.quantize(a, 0.1, 3), "dequantize": lambda: nnkern.dequantize(a8, 0.1, 3),
        "quantize_dynamic": lambda: nnkern.quantize_dynamic(a), "quantize_weights": lambda: nnkern.quantize_weights(w),
        "dlpack_input": lambda: nnkern.sigmoid(t), "errors": raises(lambda: nnkern.sigmoid(bad)),
        "Linear()": lambda: lin(a), "QLinear()": lambda: ql(a8), "QLinear_dynamic()": lambda: qd(a),
        "LSTM()": lambda: lstm(x3), "LSTM_lengths()": lambda: lstm(x3, lengths=[3, 1]),
        "Linear.__init__": lambda: nnkern.Linear(w, bias), "QLinear.__init__": lambda: nnkern.QLinear(w, bias),
        "LSTM.__init__": lambda: nnkern.LSTM(w_ih, w_hh), "bad_construction": raises(lambda: nnkern.Linear(bad)),
    }


def main():
    failed = []
    for name, fn in cases().items():
        for _ in range(min(300, CALLS)):  # warm-up: caches, arenas, pools reach their steady size
            fn()
        gc.collect()
        before = rss_kib()
        for _ in range(CALLS):
            fn()
        gc.collect()
        grew = rss_kib() - before
        print(f"{name} {grew}")
        if grew > LIMIT_KIB:
            failed.append(f"{name} grew {grew} KiB over {CALLS} calls")
    if failed:
        print("LEAK: " + "; ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
