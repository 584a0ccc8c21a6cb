"""The worker pool: idle workers sleep, thread counts change safely."""
from __future__ import annotations

import os

import nnkern

from helpers import describe_process, run_python_isolated

IDLE_CHECK = """
import time, numpy as np, nnkern
nnkern.set_num_threads(2)
a = np.random.default_rng(0).uniform(-1, 1, (384, 384)).astype(np.float32)
for _ in range(3):
    nnkern.sgemm(a, a)          # big enough to wake the second worker
cpu0, wall0 = time.process_time(), time.perf_counter()
time.sleep(0.5)
print(round(time.process_time() - cpu0, 4))
"""


def test_idle_workers_sleep_after_a_call():
    # A spinning worker would burn about 0.5 s of CPU during the sleep. OpenBLAS is kept to one
    # thread so that numpy's own spinning workers cannot be mistaken for ours.
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    proc = run_python_isolated(IDLE_CHECK, env=env)
    assert proc.returncode == 0, describe_process(proc)
    assert float(proc.stdout) < 0.05, f"{proc.stdout.strip()} s of CPU while idle"


def test_thread_count_round_trip():
    before = nnkern.get_num_threads()
    try:
        for n in (1, 3, 2):
            nnkern.set_num_threads(n)
            assert nnkern.get_num_threads() == n
    finally:
        nnkern.set_num_threads(before)
