"""Comparison libraries ("anchors") for the GEMM benchmarks.

Each ``*_anchors(M, N, K, threads)`` returns ``{name: fn}`` where ``fn()`` performs one GEMM on
inputs/outputs preallocated inside (random data, fixed seed); time ``fn`` directly.  A library
that is not installed (or cannot run the shape) is simply absent from the dict.

Threads: ``set_threads(n)`` (called by both ``*_anchors`` functions) sets each library's
process-wide thread count: threadpoolctl for numpy's OpenBLAS, ``torch.set_num_threads``,
a TBB ``global_control`` for oneDNN (see ``_onednn.py``).  ONNX Runtime's count is per session
(``intra_op_num_threads``).  The process-wide settings are those of the *latest* call, so build
and time the callables of one thread count before asking for another.

numpy with ``OPENBLAS_CORETYPE`` / ``OPENBLAS_L2_SIZE`` unset needs a fresh process (OpenBLAS reads
them when it loads): ``numpy_unset_subprocess_gflops``; ``openblas_kernel_name`` reports which
OpenBLAS core runs in both cases.  ``self_check()`` verifies every anchor against numpy.

Quirks seen on the dev machine (2 vCPUs, numpy 2.4 / OpenBLAS 0.3.31, onnxruntime 1.31.1,
torch 2.13.0+cpu, onednn 2026.1.0 = libdnnl 3.13.2 with SYCL/TBB CPU runtime):
* After a numpy call with 2 threads, OpenBLAS's worker busy-waits ~0.1-0.2 s; with only 2 cores this
  slows whatever runs next (even another process).  Pause ~0.3 s between libraries when interleaving.
* ``torch_int_mm`` is s8 x s8 (the others are u8 x s8); ``torch_qlinear`` requantizes to quint8.
* oneDNN's thread count is a TBB ``global_control`` (changeable at any time); CPU affinity is not needed.

Run ``python -m nnkern.bench.anchors`` for the self-check and the OpenBLAS core names.
"""
import json
import os
import subprocess
import sys
import time
import warnings

import numpy as np

from . import _onednn

SEED = 1234
_UNSET_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


# --- optional imports ---------------------------------------------------------------------------

def _import(name):
    """Module ``name`` or None when it is not installed (or fails to import)."""
    try:
        return __import__(name, fromlist=["_"])
    except Exception:
        return None


def _torch():
    return _import("torch")


# --- threads --------------------------------------------------------------------------------------

def set_threads(threads):
    """Set the process-wide thread count of numpy/OpenBLAS, torch and oneDNN (best effort)."""
    tpc = _import("threadpoolctl")
    if tpc is not None:
        tpc.threadpool_limits(limits=threads, user_api="blas")  # not used as a context: stays in force
    torch = _torch()
    if torch is not None:
        torch.set_num_threads(threads)
    _onednn.set_num_threads(threads)


# --- inputs -------------------------------------------------------------------------------------

def _f32_inputs(M, N, K):
    rng = np.random.default_rng(SEED)
    A = rng.standard_normal((M, K), dtype=np.float32)
    B = rng.standard_normal((K, N), dtype=np.float32)
    return A, B


def _i8_inputs(M, N, K):
    """A uint8 in [0, 255], B int8 in [-128, 127]."""
    rng = np.random.default_rng(SEED)
    A = rng.integers(0, 256, (M, K), dtype=np.uint8)
    B = rng.integers(-128, 128, (K, N), dtype=np.int8)
    return A, B


# --- ONNX Runtime -------------------------------------------------------------------------------

def _ort_session(op, A_type, B, B_type, out_type, M, threads, prepacked):
    """InferenceSession for Y = op(A, B): B an initializer (ORT prepacks it once, at session creation) when
    ``prepacked``, else a second graph input (bound per call, so ORT packs it in every call, as nnkern.sgemm /
    qgemm do)."""
    from onnx import helper, numpy_helper
    K, N = B.shape
    inputs = [helper.make_tensor_value_info("A", A_type, [M, K])]
    if not prepacked:
        inputs.append(helper.make_tensor_value_info("B", B_type, [K, N]))
    graph = helper.make_graph(
        [helper.make_node(op, ["A", "B"], ["Y"])], "gemm", inputs,
        [helper.make_tensor_value_info("Y", out_type, [M, N])],
        [numpy_helper.from_array(B, "B")] if prepacked else [])
    return ort_session(onnx_model_bytes(graph), threads)


def onnx_model_bytes(graph) -> bytes:
    """An onnx GraphProto as a serialized model: opset 13, IR version 8 (old enough for any recent onnxruntime)."""
    from onnx import helper
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()


def ort_session(model: bytes, threads: int):
    """A CPU InferenceSession of a serialized model on ``threads`` intra-op threads, run sequentially."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def ort_nchw_call(name: str, nodes, inits, x_nchw, y_nchw, threads: int):
    """One graph of ``nodes`` (input "A", output "Y", element types from the arrays' dtypes; ``inits`` the
    initializers) run with I/O binding on the preallocated NCHW input and output; ``call.out()`` the output
    as an NHWC view. Shared by the convolution benchmarks."""
    from onnx import helper
    def value(n, a):
        return helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape))
    graph = helper.make_graph(nodes, name, [value("A", x_nchw)], [value("Y", y_nchw)], inits)
    sess = ort_session(onnx_model_bytes(graph), threads)
    call = _ort_call(sess, x_nchw, y_nchw)
    call.out = lambda: y_nchw.transpose(0, 2, 3, 1)
    return call


def _ort_call(sess, A, C, B=None):
    """Callable running ``sess`` with A (and B, if given) bound as inputs and C (preallocated) bound as
    output."""
    io = sess.io_binding()
    io.bind_cpu_input("A", A)
    if B is not None:
        io.bind_cpu_input("B", B)
    io.bind_output("Y", "cpu", 0, C.dtype, list(C.shape), C.ctypes.data)

    def call(_keep=(A, B, C)):
        sess.run_with_iobinding(io)
    return call


def _ort_sgemm(A, B, C, threads, prepacked):
    from onnx import TensorProto
    sess = _ort_session("MatMul", TensorProto.FLOAT, B, TensorProto.FLOAT, TensorProto.FLOAT, A.shape[0], threads,
                        prepacked)
    return _ort_call(sess, A, C, None if prepacked else B)


def _ort_qgemm(A, B, C, threads, prepacked):
    """MatMulInteger, u8 A input x s8 B (initializer or input) -> int32, zero points omitted (= 0)."""
    from onnx import TensorProto
    sess = _ort_session("MatMulInteger", TensorProto.UINT8, B, TensorProto.INT8, TensorProto.INT32, A.shape[0],
                        threads, prepacked)
    return _ort_call(sess, A, C, None if prepacked else B)


# --- torch ----------------------------------------------------------------------------------------

def _torch_sgemm(A, B, C):
    torch = _torch()
    tA, tB, tC = (torch.from_numpy(x) for x in (A, B, C))  # share memory with the numpy arrays
    return lambda: torch.matmul(tA, tB, out=tC)


def _torch_int_mm(A, B, C):
    """torch._int_mm is s8 x s8 -> s32: A is shifted to int8 (A - 128); C receives the result."""
    torch = _torch()
    tA = torch.from_numpy((A.astype(np.int16) - 128).astype(np.int8))
    tB, tC = torch.from_numpy(B), torch.from_numpy(C)
    return lambda: torch._int_mm(tA, tB, out=tC)


def _qlinear_out_scale(K):
    """Output scale putting +-6 sigma of the u8 x s8 accumulator (uniform data) into quint8 with zp 128."""
    sigma = np.sqrt(K * (255.0 ** 2 / 3) * (128.0 ** 2 / 3))
    return float(6 * sigma / 127)


def _torch_qlinear(A, B, threads):
    """torch.ops.quantized.linear (engine as set, default 'x86'): quint8 A, prepacked qint8 weight B^T,
    all scales 1 / zero points 0 on the inputs; output requantized to quint8 (so not bit-exact)."""
    torch = _torch()
    K = A.shape[1]
    with warnings.catch_warnings():  # torch 2.13 warns that quantized tensors are deprecated
        warnings.simplefilter("ignore")
        xq = torch._make_per_tensor_quantized_tensor(torch.from_numpy(A), 1.0, 0)
        wq = torch._make_per_tensor_quantized_tensor(torch.from_numpy(np.ascontiguousarray(B.T)), 1.0, 0)
    packed = torch.ops.quantized.linear_prepack(wq, None)
    scale = _qlinear_out_scale(K)
    op = torch.ops.quantized.linear
    return lambda: op(xq, packed, scale, 128)


# --- public: anchor dicts -----------------------------------------------------------------------

#: An anchor whose warm-up call takes longer is left out of that shape (printed): a reference loop
#: (torch._int_mm without VNNI: 1-3 GOP/s) would spend minutes on 2048^3 and time nothing useful.
MAX_CALL_SECONDS = 2.0


def _try_make(make, name="?"):
    """make() if it works and one call of the result succeeds (warm-up, proof that the library
    handles the shape) within MAX_CALL_SECONDS; None otherwise."""
    try:
        fn = make()
        t0 = time.perf_counter()
        fn()
    except Exception:
        return None
    took = time.perf_counter() - t0
    if took > MAX_CALL_SECONDS:
        print(f"  ({name} left out of this shape: one call took {took:.1f} s)", flush=True)
        return None
    return fn


def sgemm_anchors(M, N, K, threads=1, prepacked=False):
    """{name: fn}: fn() computes C = A @ B for float32 row-major A (MxK), B (KxN) in that library.

    Names: 'numpy', 'onnxruntime', 'onednn', 'torch' (those installed).  Each fn has its own
    preallocated A, B, C (same data for all, seed ``SEED``); ``fn.A``, ``fn.B``, ``fn.C`` expose them.
    onnxruntime's B is a graph input, packed in every call (the counterpart of nnkern.sgemm), or with
    ``prepacked`` an initializer packed once (of nnkern.Linear); the others take B per call either way."""
    set_threads(threads)
    A, B = _f32_inputs(M, N, K)
    makers = {"numpy": lambda C: (lambda: np.matmul(A, B, out=C)),
              "onnxruntime": lambda C: _ort_sgemm(A, B, C, threads, prepacked)}
    if _onednn.load() is not None:
        makers["onednn"] = lambda C: _onednn.sgemm_call(A, B, C)
    if _torch() is not None:
        makers["torch"] = lambda C: _torch_sgemm(A, B, C)
    return _build(makers, A, B, lambda: np.zeros((M, N), np.float32))


def qgemm_anchors(M, N, K, threads=1, prepacked=False):
    """{name: fn}: int8 GEMM, A uint8 (MxK) x B int8 (KxN) -> int32 C, in that library.

    Names: 'onnxruntime' (MatMulInteger u8 x s8), 'onednn' (dnnl_gemm_u8s8s32),
    'torch_int_mm' (torch._int_mm, **s8 x s8**: its A is A - 128), and with ``prepacked`` 'torch_qlinear'
    (torch.ops.quantized.linear u8 x s8 with requantization to quint8; returns a quantized tensor,
    C unused).  ``fn.A``, ``fn.B``, ``fn.C`` expose the arrays.  Without ``prepacked`` (the counterparts of
    nnkern.qgemm) every library takes B per call: onnxruntime's B is a graph input; with it (of QLinear)
    onnxruntime's B is an initializer packed once and torch's quantized Linear is added (prepacked too)."""
    set_threads(threads)
    A, B = _i8_inputs(M, N, K)
    makers = {"onnxruntime": lambda C: _ort_qgemm(A, B, C, threads, prepacked)}
    if _onednn.load() is not None:
        makers["onednn"] = lambda C: _onednn.gemm_u8s8s32_call(A, B, C)
    if _torch() is not None:
        makers["torch_int_mm"] = lambda C: _torch_int_mm(A, B, C)
        if prepacked:
            makers["torch_qlinear"] = lambda C: _torch_qlinear(A, B, threads)
    return _build(makers, A, B, lambda: np.zeros((M, N), np.int32))


def _build(makers, A, B, new_out):
    """Run each maker with its own output array; keep the working ones, tagged with their arrays."""
    anchors = {}
    for name, make in makers.items():
        C = new_out()
        fn = _try_make(lambda: make(C), name)
        if fn is not None:
            fn.A, fn.B, fn.C = A, B, C  # functions and lambdas accept attributes
            anchors[name] = fn
    return anchors


# --- numpy with OPENBLAS_* unset (child process) ------------------------------------------------

_CHILD_TIMING = r"""
import json, statistics, sys, time
import numpy as np
shapes, threads = json.loads(sys.argv[1])
try:
    from threadpoolctl import threadpool_limits
    threadpool_limits(limits=threads, user_api="blas")
except ImportError:
    pass
time.sleep(0.3)  # a parent's OpenBLAS workers busy-wait ~0.1-0.2 s after their last call
rng = np.random.default_rng(1234)
out = {}
for M, N, K in shapes:
    A = rng.standard_normal((M, K), dtype=np.float32)
    B = rng.standard_normal((K, N), dtype=np.float32)
    C = np.empty((M, N), np.float32)
    np.matmul(A, B, out=C)  # warm-up
    per_call = []
    for _ in range(7):                      # 7 repetitions, each looping until >= 20 ms
        n, t0 = 0, time.perf_counter()
        while True:
            np.matmul(A, B, out=C)
            n += 1
            t = time.perf_counter() - t0
            if t >= 0.02:
                break
        per_call.append(t / n)
    out["%d,%d,%d" % (M, N, K)] = 2.0 * M * N * K / statistics.median(per_call) / 1e9
print(json.dumps(out))
"""

_CHILD_CORE = r"""
import numpy
try:
    from threadpoolctl import threadpool_info
except ImportError:
    print("unknown"); raise SystemExit
import json
print(json.dumps(threadpool_info()))
"""


def _unset_env(threads=None):
    """os.environ without OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE (thread vars set if ``threads``)."""
    env = {k: v for k, v in os.environ.items() if k not in _UNSET_VARS}
    if threads is not None:
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
            env[var] = str(threads)
    return env


def _run_child(code, args=(), env=None):
    """stdout (last line) of ``python -c code args`` run with ``env``."""
    res = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True,
                         text=True, check=True)
    return res.stdout.strip().splitlines()[-1]


def numpy_unset_subprocess_gflops(shapes, threads=1):
    """{(M, N, K): GFLOP/s} of np.matmul(out=) float32 in a child python with the OPENBLAS_* vars unset.

    Median of 7 repetitions, each looping the call until it lasts >= 20 ms; GFLOP/s = 2MNK / t."""
    shapes = [tuple(int(x) for x in s) for s in shapes]
    raw = json.loads(_run_child(_CHILD_TIMING, [json.dumps([shapes, threads])], _unset_env(threads)))
    return {s: raw["%d,%d,%d" % s] for s in shapes}


def _openblas_core(info):
    """'architecture' of numpy's OpenBLAS in a threadpool_info() list, else of any OpenBLAS."""
    blas = [i for i in info if i.get("internal_api") == "openblas"]
    blas.sort(key=lambda i: "numpy" not in i.get("filepath", ""))  # numpy's own first
    return blas[0].get("architecture", "unknown") if blas else "unknown"


def openblas_kernel_name():
    """{'asis': core, 'unset': core}: OpenBLAS core numpy runs in this process / with OPENBLAS_* unset."""
    tpc = _import("threadpoolctl")
    if tpc is None:
        return {"asis": "unknown", "unset": "unknown"}
    asis = _openblas_core(tpc.threadpool_info())
    try:
        out = _run_child(_CHILD_CORE, env=_unset_env())
        unset = "unknown" if out == "unknown" else _openblas_core(json.loads(out))
    except (subprocess.CalledProcessError, ValueError, IndexError):
        unset = "unknown"
    return {"asis": asis, "unset": unset}


# --- self-check -----------------------------------------------------------------------------------

def _result(fn):
    """Run fn and return its result as a numpy array (C, or the dequantized output of torch_qlinear)."""
    r = fn()
    if r is not None and hasattr(r, "is_quantized") and r.is_quantized:
        return r.dequantize().numpy()
    return fn.C


def _both_kinds(anchors, M, N, K, threads):
    """(name, fn) of every anchor with B per call, then (name/prepacked, fn) of every prepacked one."""
    for prepacked in (False, True):
        for name, fn in anchors(M, N, K, threads, prepacked=prepacked).items():
            yield name + ("/prepacked" if prepacked else ""), fn


def _check_sgemm(M, N, K, threads):
    """{name: max relative error} of each fp32 anchor (B per call, and prepacked: name/prepacked) vs a float64
    reference."""
    errs = {}
    for name, fn in _both_kinds(sgemm_anchors, M, N, K, threads):
        ref = fn.A.astype(np.float64) @ fn.B.astype(np.float64)
        err = np.abs(_result(fn) - ref).max() / max(np.abs(ref).max(), 1e-30)
        assert err < 1e-5, f"sgemm {name} {M}x{N}x{K}: rel err {err:.2e}"
        errs[name] = float(err)
    return errs


def _check_qgemm(M, N, K, threads):
    """{name: max abs error} of each int8 anchor (B per call, and prepacked: name/prepacked) vs an int64
    reference (0 = exact)."""
    errs = {}
    for name, fn in _both_kinds(qgemm_anchors, M, N, K, threads):
        A = fn.A.astype(np.int64) - (128 if name.startswith("torch_int_mm") else 0)
        ref = A @ fn.B.astype(np.int64)
        got = _result(fn)
        if name.startswith("torch_qlinear"):  # requantized: compare with the clipped reference, within one step
            s = _qlinear_out_scale(K)
            err = np.abs(got - np.clip(ref, -128 * s, 127 * s)).max()
            assert err <= s * (0.5 + 1e-3), f"qgemm {name} {M}x{N}x{K}: err {err} > scale {s}"
        else:
            err = np.abs(got.astype(np.int64) - ref).max()
            assert err == 0, f"qgemm {name} {M}x{N}x{K}: max abs err {err}"
        errs[name] = float(err)
    return errs


def self_check(shapes=((64, 64, 64), (17, 13, 9), (1, 256, 128), (100, 70, 300)), threads=(1, 2)):
    """Verify every available anchor on ``shapes`` for each thread count; returns a report dict."""
    report = {"onednn": _onednn.version(), "openblas": openblas_kernel_name()}
    for t in threads:
        for M, N, K in shapes:
            report[f"sgemm {M}x{N}x{K} t{t}"] = _check_sgemm(M, N, K, t)
            report[f"qgemm {M}x{N}x{K} t{t}"] = _check_qgemm(M, N, K, t)
    report["numpy_unset_gflops"] = {str(k): round(v, 1) for k, v in
                                    numpy_unset_subprocess_gflops([(256, 256, 256)], 1).items()}
    set_threads(1)
    return report


if __name__ == "__main__":
    for key, value in self_check().items():
        print(f"{key}: {value}")
