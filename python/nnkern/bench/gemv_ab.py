"""Interleaved best-of-N A/B for the skinny SGEMM paths: nnkern (avx512, avx2, Linear) vs numpy / onnxruntime /
oneDNN / torch.  python -m nnkern.bench.gemv_ab [MxNxK ...]  (single thread; compare within one run only)."""
import sys, time
import numpy as np
import nnkern
from nnkern import _C
from nnkern.bench.anchors import sgemm_anchors

shapes = [(1, 1024, 1024), (8, 1024, 1024), (1024, 6, 1024), (1, 4096, 4096), (1024, 3, 1024), (1024, 8, 1024)]
if len(sys.argv) > 1:
    shapes = [tuple(int(v) for v in s.split("x")) for s in sys.argv[1:]]
threads = 1
nnkern.set_num_threads(threads)
peak = {i: _C.f32_peak_flops(i, 0.2) for i in ("avx512", "avx2")}
print("peak GFLOP/s", {k: round(v / 1e9, 1) for k, v in peak.items()})

def timeit(fn, reps):
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t) / reps

for (M, N, K) in shapes:
    anchors = sgemm_anchors(M, N, K, threads)
    A, B = next(iter(anchors.values())).A, next(iter(anchors.values())).B
    C = np.zeros((M, N), np.float32)
    W = np.ascontiguousarray(B.T)
    lin = nnkern.Linear(W)
    Y = np.zeros((M, N), np.float32)
    fns = dict(anchors)
    prepacked = sgemm_anchors(M, N, K, threads, prepacked=True)
    if "onnxruntime" in prepacked:
        fns["onnxruntime_prepacked"] = prepacked["onnxruntime"]
    for isa in ("avx512", "avx2"):
        def mk(isa=isa):
            def f():
                with nnkern.max_isa(isa):
                    nnkern.sgemm(A, B, c=C)
            return f
        fns["nnk_" + isa] = mk()
        def mkl(isa=isa):
            def f():
                with nnkern.max_isa(isa):
                    lin(A, out=Y)
            return f
        fns["lin_" + isa] = mkl()
    # Linear packs for the dispatched kernel at construction (avx512 here); lin_avx2 is its fallback path: skip
    del fns["lin_avx2"]
    flops = 2.0 * M * N * K
    reps = {}
    for name, fn in fns.items():
        fn()
        r = 1
        while timeit(fn, r) * r < 0.01:
            r *= 2
        reps[name] = r
    best = {n: 1e9 for n in fns}
    for _ in range(15):
        for name, fn in fns.items():
            best[name] = min(best[name], timeit(fn, reps[name]))
    row = {n: flops / t / 1e9 for n, t in best.items()}
    anc = max(v for n, v in row.items() if not n.startswith(("nnk", "lin")))
    print(f"{M}x{N}x{K}: " + "  ".join(f"{n}={v:.1f}" for n, v in row.items()) +
          f"  | best anchor {anc:.1f}; nnk_avx512/anchor {row['nnk_avx512']/anc:.2f}; %peak512 {100*row['nnk_avx512']*1e9/peak['avx512']:.0f}")
