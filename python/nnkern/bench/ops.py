"""Benchmark op definitions (what to time) for the harness: SGEMM now; INT8 GEMM, conv and sigmoid
add theirs here."""
from __future__ import annotations

from typing import Dict, Optional

import numpy as np

from . import anchors as _anchors
from .harness import Op, Shape

#: nnkern's scalar fallback runs ~1 GFLOP/s: time it only on shapes up to this many flops.
SCALAR_MAX_WORK = 2 ** 26


def sgemm_work(shape: Shape) -> float:
    M, N, K = shape
    return 2.0 * M * N * K


def sgemm_nnkern(shape: Shape, isa: str):
    """nnkern.sgemm(A, B, c=C) on the anchors' data (same seed), or None for scalar on big shapes."""
    import nnkern
    if isa == "scalar" and sgemm_work(shape) > SCALAR_MAX_WORK:
        return None
    M, N, K = shape
    rng = np.random.default_rng(_anchors.SEED)
    A = rng.standard_normal((M, K), dtype=np.float32)
    B = rng.standard_normal((K, N), dtype=np.float32)
    C = np.zeros((M, N), np.float32)
    sgemm = nnkern.sgemm

    def call():
        sgemm(A, B, c=C)
    call.A, call.B, call.C = A, B, C
    return call


def sgemm_anchors(shape: Shape, threads: int) -> Dict[str, object]:
    return _anchors.sgemm_anchors(*shape, threads=threads)


def sgemm_numpy_unset(shape: Shape, threads: int) -> Dict[str, float]:
    """numpy with OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset (child process), as 'numpy-envunset'."""
    try:
        return {"numpy-envunset": _anchors.numpy_unset_subprocess_gflops([shape], threads)[tuple(shape)]}
    except Exception:  # no child python / numpy failure: skip the column
        return {}


def _pauses(threads: int) -> Dict[str, float]:
    # OpenBLAS's (and TBB's) workers busy-wait ~0.1-0.2 s after a multi-threaded call.
    return {"numpy": 0.3, "onednn": 0.05, "torch": 0.05} if threads > 1 else {}


def sgemm_op(numpy_unset: bool = True, anchors: bool = True) -> Op:
    """The SGEMM op. numpy_unset: include the 'numpy-envunset' subprocess column."""
    return Op(name="sgemm", unit="GFLOP/s", peak_kind="f32", work=sgemm_work, nnkern=sgemm_nnkern,
              anchors=sgemm_anchors if anchors else (lambda shape, threads: {}),
              external=sgemm_numpy_unset if numpy_unset else None, pause_after=_pauses)


def numpy_only_anchors(shape: Shape, threads: int) -> Dict[str, object]:
    """Just numpy (np.matmul(out=)), for the main job's short table."""
    _anchors.set_threads(threads)
    M, N, K = shape
    rng = np.random.default_rng(_anchors.SEED)
    A = rng.standard_normal((M, K), dtype=np.float32)
    B = rng.standard_normal((K, N), dtype=np.float32)
    C = np.zeros((M, N), np.float32)
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
