"""No instruction leaks past the dispatcher: run nnkern under qemu-user CPU models that lack an ISA.

-cpu Haswell has AVX2+FMA but no AVX-512: nnkern must pick avx2 and compute correctly.
-cpu SandyBridge has AVX but no AVX2: nnkern must pick scalar (and numpy still imports there).
Needs Debian's qemu-user (`qemu-x86_64`, or `qemu-x86_64-static`); skipped with a reason where it is absent. Each run takes a few
seconds of emulation (marked ``slow``, but part of the default run).
"""
from __future__ import annotations

import os
import platform
import shutil
import sys

import pytest

import nnkern
from helpers import describe_process, run_python_isolated

QEMU = shutil.which("qemu-x86_64") or shutil.which("qemu-x86_64-static")

# numpy's OpenBLAS reads OPENBLAS_CORETYPE (some hosts set it to Haswell): in the emulated child it must
# name a core the emulated model has, or OpenBLAS runs AVX2 code on a CPU without it (SIGILL).
OPENBLAS_CORE = {"Haswell": "Haswell", "SandyBridge": "Sandybridge"}

pytestmark = [
    pytest.mark.skipif(platform.machine() != "x86_64", reason="qemu-x86_64 CPU models apply to x86-64 hosts"),
    pytest.mark.skipif(QEMU is None, reason="neither qemu-x86_64 nor qemu-x86_64-static on PATH (Debian's qemu-user)"),
    # The sanitizer runtimes preloaded into the suite would be preloaded into qemu itself too.
    pytest.mark.skipif(bool(os.environ.get("NNKERN_SANITIZED")), reason="not under the sanitizer build"),
]

CHECK = """
import sys
import numpy as np
import nnkern
info = nnkern.cpu_info()
print("isa", info["isa"], "kernel", info["kernels"]["f32_gemm"], "supported", ",".join(info["supported_isas"]))
rng = np.random.default_rng(0)
worst = 0.0
for M, N, K in [(37, 29, 45), (1, 50, 33), (64, 17, 300), (5, 3, 1)]:
    a = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    b = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    for got, want, bnd in [
        (nnkern.matmul(a, b), a.astype(np.float64) @ b, np.abs(a).astype(np.float64) @ np.abs(b)),
        (nnkern.sgemm(a.T.copy(), b.T.copy(), trans_a=True, trans_b=True), a.astype(np.float64) @ b,
         np.abs(a).astype(np.float64) @ np.abs(b)),
        (nnkern.Linear(b.T.copy(), activation="relu")(a), np.maximum(a.astype(np.float64) @ b, 0),
         np.abs(a).astype(np.float64) @ np.abs(b)),
    ]:
        bound = 2.0 * K * 2.0 ** -24 * bnd + 1e-30
        worst = max(worst, float((np.abs(got - want) / bound).max()))
print("worst", worst)
# LSTM (panel GEMM + cell post-op + lengths) on the fallback kernels: a float64 recurrence, tolerance 1e-3
# (the documented per-step bound here is ~1e-4 per gate; a wrong gate or step is off by ~0.1).
I, H, B, T = 7, 37, 5, 6
w = [rng.uniform(-0.3, 0.3, s).astype(np.float32) for s in ((4 * H, I), (4 * H, H), (4 * H,), (4 * H,))]
x = rng.standard_normal((T, B, I)).astype(np.float32)
lengths = np.array([6, 0, 3, 6, 1])
out, (h_n, c_n) = nnkern.LSTM(*w)(x, lengths=lengths)
sig = lambda z: 0.5 * (1 + np.tanh(0.5 * z))
h, c, ref = np.zeros((B, H)), np.zeros((B, H)), np.zeros((T, B, H))
for t in range(T):
    z = x[t].astype(np.float64) @ w[0].T + h @ w[1].T + w[2] + w[3]
    c1 = sig(z[:, H:2 * H]) * c + sig(z[:, :H]) * np.tanh(z[:, 2 * H:3 * H])
    h1 = sig(z[:, 3 * H:]) * np.tanh(c1)
    run = (lengths > t)[:, None]
    c, h, ref[t] = np.where(run, c1, c), np.where(run, h1, h), np.where(run, h1, 0.0)
lstm_err = max(float(np.abs(out - ref).max()), float(np.abs(c_n[0] - c).max()))
print("lstm_err", lstm_err)
sys.exit(0 if worst <= 1.0 and lstm_err <= 1e-3 else 3)
"""


def run_under(cpu, **extra_env):
    python = os.path.realpath(sys.executable)  # a pyenv shim is a script: qemu needs the real binary
    env = dict(os.environ, **extra_env)
    env.pop("NNKERN_MAX_ISA", None)
    if "OPENBLAS_CORETYPE" in env:
        env["OPENBLAS_CORETYPE"] = OPENBLAS_CORE[cpu]
    # The installed nnkern and numpy must be importable by the emulated interpreter exactly as here.
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    proc = run_python_isolated(CHECK, env=env, timeout=600, executable=python, prefix=(QEMU, "-cpu", cpu))
    assert proc.returncode == 0, f"under -cpu {cpu}: {describe_process(proc)}"
    fields = {}
    for line in proc.stdout.splitlines():
        parts = line.split()
        fields.update(zip(parts[::2], parts[1::2]))
    return fields


def kernel_of(level):
    return nnkern._C.f32_gemm_tile(level)[0]


@pytest.mark.slow
def test_haswell_picks_avx2_and_computes_correctly():
    try:
        kernel_of("avx2")
    except ValueError:
        pytest.skip("this build has no avx2 f32_gemm kernel")
    out = run_under("Haswell")
    assert out["isa"] == "avx2"
    assert out["kernel"] == kernel_of("avx2")
    assert out["supported"] == "scalar,avx2"
    assert float(out["worst"]) <= 1.0
    assert float(out["lstm_err"]) <= 1e-3


@pytest.mark.slow
def test_sandybridge_picks_scalar_and_computes_correctly():
    out = run_under("SandyBridge")
    assert out["isa"] == "scalar"
    assert out["kernel"] == kernel_of("scalar")
    assert out["supported"] == "scalar"
    assert float(out["worst"]) <= 1.0
    assert float(out["lstm_err"]) <= 1e-3


@pytest.mark.slow
def test_host_openblas_coretype_does_not_reach_the_emulated_cpu():
    """Hosts that set OPENBLAS_CORETYPE=Haswell (AMD machines of this kind do) must still pass under
    SandyBridge: numpy's OpenBLAS in the child gets a core the emulated model has."""
    out = run_under("SandyBridge", OPENBLAS_CORETYPE="Haswell")
    assert out["isa"] == "scalar"
    assert float(out["worst"]) <= 1.0
