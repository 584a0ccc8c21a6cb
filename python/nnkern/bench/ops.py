"""Benchmark op definitions (what to time) for the harness: SGEMM, INT8 GEMM (qgemm, QLinear); conv and
sigmoid add theirs here."""
from __future__ import annotations

from typing import Dict, Optional

import numpy as np

from . import anchors as _anchors
from .harness import SGEMM_SHAPES, Op, Shape

#: nnkern's scalar fallback runs ~1 GFLOP/s: time it only on shapes up to this many flops.
SCALAR_MAX_WORK = 2 ** 26


def sgemm_work(shape: Shape) -> float:
    M, N, K = shape
    return 2.0 * M * N * K


def _too_slow(isa: str, work: float) -> bool:
    return isa == "scalar" and work > SCALAR_MAX_WORK


def _timed(fn, A, B, C):
    """fn as the harness times it, carrying its arrays (fn.A, fn.B, fn.C) as the anchors' callables do."""
    fn.A, fn.B, fn.C = A, B, C
    return fn


def sgemm_nnkern(shape: Shape, isa: str):
    """nnkern.sgemm(A, B, c=C) on the anchors' data (same seed), or None for scalar on big shapes."""
    import nnkern
    if _too_slow(isa, sgemm_work(shape)):
        return None
    A, B = _anchors._f32_inputs(*shape)
    C = np.zeros((shape[0], shape[1]), np.float32)
    sgemm = nnkern.sgemm
    return _timed(lambda: sgemm(A, B, c=C), A, B, C)


def sgemm_anchors(shape: Shape, threads: int) -> Dict[str, object]:
    return _anchors.sgemm_anchors(*shape, threads=threads)


def linear_nnkern(shape: Shape, isa: str):
    """nnkern.Linear (weights B^T, prepacked at construction) on the anchors' data: the prepacked counterpart
    of sgemm, against onnxruntime with B an initializer."""
    import nnkern
    if _too_slow(isa, sgemm_work(shape)):
        return None
    A, B = _anchors._f32_inputs(*shape)
    layer = nnkern.Linear(np.ascontiguousarray(B.T))
    out = np.zeros((shape[0], shape[1]), np.float32)
    return _timed(lambda: layer(A, out=out), A, B, out)


def linear_anchors(shape: Shape, threads: int) -> Dict[str, object]:
    return _anchors.sgemm_anchors(*shape, threads=threads, prepacked=True)


def sgemm_numpy_unset(shape: Shape, threads: int) -> Dict[str, float]:
    """numpy with OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset (child process), as 'numpy-envunset'."""
    try:
        return {"numpy-envunset": _anchors.numpy_unset_subprocess_gflops([shape], threads)[tuple(shape)]}
    except Exception:  # no child python / numpy failure: skip the column
        return {}


def _pauses(threads: int) -> Dict[str, float]:
    # Worker threads busy-wait after a multi-threaded call (OpenBLAS ~0.1-0.2 s; onnxruntime, OpenMP and
    # TBB pools shorter): on 2 cores they would steal the next library's second core, so every library
    # ("*") pauses after its repetition.
    return {"numpy": 0.3, "*": 0.05} if threads > 1 else {}


def sgemm_op(numpy_unset: bool = True, anchors: bool = True) -> Op:
    """The SGEMM op. numpy_unset: include the 'numpy-envunset' subprocess column."""
    return Op(name="sgemm", unit="GFLOP/s", peak_kind="f32", work=sgemm_work, nnkern=sgemm_nnkern,
              anchors=sgemm_anchors if anchors else (lambda shape, threads: {}),
              external=sgemm_numpy_unset if numpy_unset else None, pause_after=_pauses)


def linear_op() -> Op:
    """FP32 Linear with prepacked weights (nnkern.Linear, onnxruntime's initializer) next to the libraries that
    take B per call."""
    return Op(name="linear", unit="GFLOP/s", peak_kind="f32", work=sgemm_work, nnkern=linear_nnkern,
              anchors=linear_anchors, pause_after=_pauses)


# --- bf16 (float32 precision "medium") --------------------------------------------------------------

def bf16_nnkern(shape: Shape, isa: str):
    """nnkern.Linear(precision="medium") on the anchors' data: weights rounded to bf16 and packed once, A rounded
    per call, float32 out."""
    import nnkern
    if _too_slow(isa, sgemm_work(shape)):
        return None
    A, B = _anchors._f32_inputs(*shape)
    layer = nnkern.Linear(np.ascontiguousarray(B.T), precision="medium")
    out = np.zeros((shape[0], shape[1]), np.float32)
    layer(A, out=out)  # packs the bf16 weights (on the first call at "medium")
    return _timed(lambda: layer(A, out=out), A, B, out)


def bf16_anchors(shape: Shape, threads: int) -> Dict[str, object]:
    """nnkern's own float32 Linear ('nnkern-f32', its best ISA level, on `threads` threads as nnkern's own column),
    torch.nn.functional.linear on bf16 tensors ('torch-bf16', weights converted once, a bf16 result) and on float32
    ones under torch.set_float32_matmul_precision("medium") ('torch-medium')."""
    import nnkern
    _anchors.set_threads(threads)
    A, B = _anchors._f32_inputs(*shape)
    W = np.ascontiguousarray(B.T)
    out = np.zeros((shape[0], shape[1]), np.float32)
    f32 = nnkern.Linear(W)

    def f32_call():
        # Anchors run outside nnkern's own context (harness.nnkern_context): take the table's thread count here,
        # set only where it differs (the context then restores this same count after nnkern's own calls).
        if nnkern.get_num_threads() != threads:
            nnkern.set_num_threads(threads)
        return f32(A, out=out)
    found = {"nnkern-f32": _timed(f32_call, A, B, out)}
    torch = _anchors._torch()
    if torch is not None:
        F = torch.nn.functional
        tA, tW = torch.from_numpy(A), torch.from_numpy(W)
        bA, bW = tA.bfloat16(), tW.bfloat16()
        found["torch-bf16"] = _timed(lambda: F.linear(bA, bW), A, B, out)

        def medium():
            before = torch.get_float32_matmul_precision()
            torch.set_float32_matmul_precision("medium")
            try:
                return F.linear(tA, tW)
            finally:
                torch.set_float32_matmul_precision(before)
        found["torch-medium"] = _timed(medium, A, B, out)
    return found


def bf16_op() -> Op:
    """bf16 products (precision "medium") on the GEMM shapes, prepacked weights, next to nnkern's float32 and
    torch's bf16 and "medium" paths."""
    return Op(name="bf16", unit="GFLOP/s", peak_kind="f32", work=sgemm_work, nnkern=bf16_nnkern,
              anchors=bf16_anchors, pause_after=_pauses)


def numpy_only_anchors(shape: Shape, threads: int) -> Dict[str, object]:
    """Just numpy (np.matmul(out=)), for the main job's short table."""
    _anchors.set_threads(threads)
    A, B = _anchors._f32_inputs(*shape)
    C = np.zeros((shape[0], shape[1]), np.float32)
    return {"numpy": lambda: np.matmul(A, B, out=C)}


def sgemm_vs_numpy_op() -> Op:
    return Op(name="sgemm", unit="GFLOP/s", peak_kind="f32", work=sgemm_work, nnkern=sgemm_nnkern,
              anchors=numpy_only_anchors, pause_after=_pauses)


def openblas_note() -> Optional[str]:
    """Which OpenBLAS core numpy ran (as-is and with the OPENBLAS_* variables unset)."""
    import os
    k = _anchors.openblas_kernel_name()
    env = {v: os.environ[v] for v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if v in os.environ}
    return (f"OpenBLAS core: numpy (env as-is{', ' + str(env) if env else ', no OPENBLAS_* set'}) = {k['asis']}; "
            f"numpy-envunset = {k['unset']}")


# --- INT8 GEMM -------------------------------------------------------------------------------------

#: qgemm (M, N, K): the SGEMM list plus transformer shapes (BERT-base 128 tokens: QKV/out 768x768,
#: FFN up 3072 and down; an LLM decode step 1 x 4096 x 4096).
QGEMM_SHAPES = list(dict.fromkeys(
    [tuple(s) for s in SGEMM_SHAPES]
    + [(128, 768, 768), (128, 3072, 768), (128, 768, 3072), (1, 4096, 4096)]))
QGEMM_QUICK = [(64, 64, 64), (256, 256, 256), (1024, 1024, 1024), (8, 1024, 1024), (1, 1024, 1024),
               (128, 768, 768), (1, 4096, 4096)]


def _i8_peak(isa: str) -> float:
    """int8 ops/s of one core: tdpbusd for amx, vpdpbusd for the VNNI levels, the saturating vpmaddubsw +
    vpmaddwd + vpaddd sequence for avx2 / avx512 (the reference of their exact kernels)."""
    from .. import _C
    return float(_C.i8_peak_ops(isa, 0.1)) if hasattr(_C, "i8_peak_ops") else 0.0


def _register():
    from . import harness
    harness.PEAK_FUNCS["int8"] = _i8_peak
    harness.SHAPES["qgemm"] = QGEMM_SHAPES
    harness.QUICK_SHAPES["qgemm"] = QGEMM_QUICK
    harness.SHAPES["qlinear"] = QGEMM_SHAPES
    harness.QUICK_SHAPES["qlinear"] = QGEMM_QUICK


_register()


def qgemm_work(shape: Shape) -> float:
    M, N, K = shape
    return 2.0 * M * N * K


def qgemm_nnkern(shape: Shape, isa: str):
    """nnkern.qgemm(A, B) on the anchors' data (A uint8, B int8, unpacked: packed per call). Its output is
    allocated per call, as onnxruntime's and torch's are (nnkern's start on a cache line, as theirs do;
    a large numpy array given as out= starts 16 bytes past one, which costs the AMX tile stores 20%)."""
    import nnkern
    if _too_slow(isa, qgemm_work(shape)):
        return None
    A, B = _anchors._i8_inputs(*shape)
    qgemm = nnkern.qgemm
    return _timed(lambda: qgemm(A, B), A, B, None)


def qlinear_nnkern(shape: Shape, isa: str):
    """nnkern.QLinear (weights B^T prepacked at construction) with uint8 output: GEMM + the fused
    requantization, as torch's quantized Linear (same scales as the torch_qlinear anchor)."""
    import nnkern
    if _too_slow(isa, qgemm_work(shape)):
        return None
    M, N, K = shape
    A, B = _anchors._i8_inputs(M, N, K)
    layer = nnkern.QLinear(np.ascontiguousarray(B.T), None, weight_scale=1.0, input_scale=1.0, input_zero_point=0,
                           output_scale=_anchors._qlinear_out_scale(K), output_zero_point=128,
                           output_dtype=np.uint8)
    out = np.empty((M, N), np.uint8)
    return _timed(lambda: layer(A, out=out), A, B, out)


def qgemm_anchors(shape: Shape, threads: int) -> Dict[str, object]:
    return _anchors.qgemm_anchors(*shape, threads=threads)


def qlinear_anchors(shape: Shape, threads: int) -> Dict[str, object]:
    return _anchors.qgemm_anchors(*shape, threads=threads, prepacked=True)


def qgemm_op(anchors: bool = True) -> Op:
    """qgemm (unpacked B: packing is part of every call) against MatMulInteger with B a graph input /
    dnnl_gemm_u8s8s32 / torch._int_mm, all taking B per call."""
    return Op(name="qgemm", unit="GOP/s", peak_kind="int8", work=qgemm_work, nnkern=qgemm_nnkern,
              anchors=qgemm_anchors if anchors else (lambda shape, threads: {}), pause_after=_pauses)


def qlinear_op(anchors: bool = True) -> Op:
    """QLinear (prepacked weights, fused requantization to uint8) against MatMulInteger with B an initializer
    (prepacked), torch's quantized Linear (prepacked), dnnl_gemm_u8s8s32 and torch._int_mm."""
    return Op(name="qlinear", unit="GOP/s", peak_kind="int8", work=qgemm_work, nnkern=qlinear_nnkern,
              anchors=qlinear_anchors if anchors else (lambda shape, threads: {}), pause_after=_pauses)
