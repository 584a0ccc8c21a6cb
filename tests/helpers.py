"""Shared test helpers: the float64 GEMM reference, the documented error bound and small utilities.

Imported by conftest.py and the test modules (pytest puts tests/ on sys.path), and by the guard-page
subprocess script, so it must not import pytest.
"""
from __future__ import annotations

import os
import runpy
import select
import shlex
import signal
import subprocess
import sys
import threading
import time
import traceback

import numpy as np

from nnkern.gemm import GEMM_ERROR_FACTOR

#: float32 unit roundoff (the ``eps`` of nnkern's documented GEMM bound).
EPS = 2.0 ** -24
#: Absolute slack for results that are exactly zero in exact arithmetic.
TINY = 1e-30

#: How much of each sweep runs. By default the quick run: every kernel, algorithm, ISA level and dtype, with fewer
#: repeated sizes (about two minutes on two cores). NNKERN_TEST_EXHAUSTIVE=1, or `pytest --exhaustive`, runs every
#: size of every sweep and the slow checks (CI does); NNKERN_TEST_QUICK=1 keeps a run quick even then (the sanitizer
#: and emulated runs, where each call is many times slower).
EXHAUSTIVE = (os.environ.get("NNKERN_TEST_EXHAUSTIVE", "") not in ("", "0")
              and os.environ.get("NNKERN_TEST_QUICK", "") in ("", "0"))
QUICK = not EXHAUSTIVE


def rand(rng, *shape, low=-1.0, high=1.0):
    """float32 uniform random array."""
    return rng.uniform(low, high, size=shape).astype(np.float32)


def gemm_bound(a64, b64, K, alpha=1.0, beta=0.0, c0=None, factor=GEMM_ERROR_FACTOR):
    """nnkern's documented per-element bound for C = alpha a b + beta c0 (a64, b64 already op()'d):
    (factor K + 2) eps |alpha| (|a| @ |b|) + 2 eps |beta c0|."""
    bound = (factor * K + 2) * EPS * abs(alpha) * (np.abs(a64) @ np.abs(b64))
    if c0 is not None and beta != 0.0:
        bound = bound + 2 * EPS * np.abs(beta * c0.astype(np.float64))
    return bound + TINY


def ref_gemm(a, b, alpha=1.0, beta=0.0, c0=None, trans_a=False, trans_b=False):
    """float64 reference and its bound: returns (C64, bound) for alpha op(a) op(b) + beta c0."""
    a64 = np.asarray(a, np.float64)
    b64 = np.asarray(b, np.float64)
    if trans_a:
        a64 = a64.T
    if trans_b:
        b64 = b64.T
    K = a64.shape[1]
    c64 = alpha * (a64 @ b64)
    if c0 is not None and beta != 0.0:
        c64 = c64 + beta * c0.astype(np.float64)
    return c64, gemm_bound(a64, b64, K, alpha, beta, c0)


def check_within_bound(got, c64, bound, what=""):
    """Raise AssertionError naming the worst element if |got - c64| > bound anywhere (NaN fails)."""
    got64 = np.asarray(got, np.float64)
    assert got64.shape == c64.shape, f"{what}: shape {got64.shape} != reference {c64.shape}"
    err = np.abs(got64 - c64)
    bad = ~(err <= bound)  # NaN in got counts as bad
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        ratio = np.nanmax(np.where(np.isfinite(err), err / bound, np.inf))
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {bad.size} elements outside the bound; first at {idx}: "
            f"got {got64[idx]!r}, want {c64[idx]!r} +- {bound[idx]!r} (worst err/bound {ratio:.3g})")


def assert_gemm_close(got, a, b, *, alpha=1.0, beta=0.0, c0=None, trans_a=False, trans_b=False, what="sgemm"):
    c64, bound = ref_gemm(a, b, alpha, beta, c0, trans_a, trans_b)
    check_within_bound(got, c64, bound, what)


def same_for_thread_counts(run, counts=(1, 2, 3, 5)):
    """run() under nnkern.set_num_threads(t) for each count, asserting every result equals the first bit for bit;
    returns that result (the thread count is left at the last one: the autouse fixture restores it)."""
    import nnkern
    results = []
    for t in counts:
        nnkern.set_num_threads(t)
        results.append(run())
    for t, r in zip(counts[1:], results[1:]):
        np.testing.assert_array_equal(r, results[0], err_msg=f"{t} threads")
    return results[0]


def run_concurrently(work, n_threads=6):
    """Runs work(t) for t in range(n_threads) on that many threads at once; an exception in any of
    them is raised here (a thread's exception would otherwise only be printed)."""
    errors = []

    def guarded(t):
        try:
            work(t)
        except BaseException as e:  # noqa: B902 - handed to the caller
            errors.append(e)

    threads = [threading.Thread(target=guarded, args=(t,)) for t in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def numpy_f32_semantics(a, b):
    """What numpy computes for a @ b in float32 (for NaN/Inf pattern comparisons)."""
    with np.errstate(all="ignore"):
        return np.asarray(a, np.float64) @ np.asarray(b, np.float64)


#: Set by tools/run-aarch64.sh when the suite runs under qemu-user without binfmt: the emulated
#: interpreter cannot exec another aarch64 program itself, so child interpreters start through qemu.
EXEC_PREFIX = tuple(shlex.split(os.environ.get("NNKERN_TEST_EXEC_PREFIX", "")))


def python_command(*args, executable=None):
    """The command line that runs this interpreter (through EXEC_PREFIX when emulated) with args."""
    return [*EXEC_PREFIX, executable or sys.executable, *map(str, args)]


def run_python_isolated(code, args=(), env=None, timeout=300, executable=None, prefix=()):
    """Run ``code`` in a fresh interpreter (so a fault fails one test instead of killing pytest)."""
    if prefix:  # the caller's own emulator (test_qemu.py) replaces EXEC_PREFIX
        cmd = [*prefix, executable or sys.executable, "-c", code, *map(str, args)]
    else:
        cmd = python_command("-c", code, *args, executable=executable)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ) if env is None else env)


def run_script_isolated(script, *args, timeout=600):
    """Run the check script ``script`` as __main__ with ``args`` in a child process, so a fault fails one test
    instead of killing pytest. The child is a fork of this process where that is possible (no interpreter start-up:
    the guard-page checks are many and short; under qemu-user too, whose fork copies the emulated process), a fresh
    interpreter otherwise (no fork). The result is a
    subprocess.CompletedProcess (the fork's stderr is in its stdout); subprocess.TimeoutExpired past the timeout."""
    argv = [str(script), *map(str, args)]
    if not hasattr(os, "fork"):
        return run_python_isolated(f"import runpy, sys; sys.argv = {argv!r}; "
                                   f"runpy.run_path({argv[0]!r}, run_name='__main__')", timeout=timeout)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: run the script with stdout and stderr on the pipe, never return into pytest
        code = 1
        try:
            os.close(read_end)
            os.dup2(write_end, 1)
            os.dup2(write_end, 2)
            sys.stdout = sys.stderr = open(1, "w", closefd=False)
            sys.argv = argv
            runpy.run_path(argv[0], run_name="__main__")
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            os._exit(code)
    os.close(write_end)
    output, deadline = [], time.monotonic() + timeout
    with os.fdopen(read_end, "rb") as pipe:
        while select.select([pipe], [], [], max(0.0, deadline - time.monotonic()))[0]:
            chunk = pipe.read1(1 << 16)
            if not chunk:
                break
            output.append(chunk)
        else:  # out of time: as subprocess.run does
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise subprocess.TimeoutExpired(argv, timeout, b"".join(output))
    status = os.waitpid(pid, 0)[1]
    text = b"".join(output).decode(errors="replace")
    return subprocess.CompletedProcess(argv, os.waitstatus_to_exitcode(status), text, "")


def describe_process(proc):
    rc = proc.returncode
    why = f"killed by {signal.Signals(-rc).name}" if rc < 0 else f"exit code {rc}"
    return f"{why}\n--- stdout ---\n{proc.stdout[-4000:]}\n--- stderr ---\n{proc.stderr[-4000:]}"
