"""The worker pool: idle workers sleep, thread counts are validated and change safely, concurrent callers,
fork() children, the environment's thread count, and the threadpoolctl controller.

Hang-prone scenarios (fork, concurrency) run in a child interpreter with a timeout, so a deadlock fails
one test instead of blocking the suite. The pool's own semantics (every task once in 1-, 2- and 3-D,
nested calls, exceptions) are tested natively in tests/native/test_threadpool.cc.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import nnkern
from nnkern import _C
from nnkern._threads import MAX_NUM_THREADS

from helpers import EXEC_PREFIX, describe_process, run_concurrently, run_python_isolated

# OpenBLAS keeps its own spinning workers: one thread, so that numpy cannot be mistaken for us.
QUIET_ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1")

IDLE_CHECK = """
import json, os, time, numpy as np, nnkern

def worker_cpu():
    # utime + stime of every thread but the main one (fields 14 and 15 of /proc/<pid>/task/<tid>/stat)
    total = 0
    for tid in os.listdir("/proc/self/task"):
        if int(tid) != os.getpid():
            try:
                with open(f"/proc/self/task/{tid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except FileNotFoundError:
                continue
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")

nnkern.set_num_threads(2)
a = np.random.default_rng(0).uniform(-1, 1, (384, 384)).astype(np.float32)
for _ in range(20):
    nnkern.sgemm(a, a)          # big enough to use the second worker; back to back, so it spins between
worker0, cpu0 = worker_cpu(), time.process_time()
time.sleep(1.0)
print(json.dumps({"threads": len(os.listdir("/proc/self/task")), "workers": worker_cpu() - worker0,
                  "process": time.process_time() - cpu0}))
"""


def test_idle_workers_sleep_after_the_spin_window():
    # Workers poll for about 300 us after a call, then sleep: over an idle second a spinning worker would
    # burn about 1 s of CPU; a sleeping one none (the slack covers a few clock ticks).
    proc = run_python_isolated(IDLE_CHECK, env=QUIET_ENV, timeout=120)
    assert proc.returncode == 0, describe_process(proc)
    got = json.loads(proc.stdout)
    assert got["threads"] >= 2, got  # the worker exists, so there was something to measure
    assert got["workers"] <= 0.03, f"workers used {got['workers']} s of CPU while idle"
    assert got["process"] <= 0.05, f"the process used {got['process']} s of CPU while idle"


def test_thread_count_round_trip():
    for n in (1, 3, 2, np.int64(2)):
        nnkern.set_num_threads(n)
        assert nnkern.get_num_threads() == n
        assert type(nnkern.get_num_threads()) is int


@pytest.mark.parametrize("bad, exc", [(True, TypeError), (False, TypeError), (2.0, TypeError), ("2", TypeError),
                                      (None, TypeError), (0, ValueError), (-3, ValueError),
                                      (MAX_NUM_THREADS + 1, ValueError), (2 ** 70, ValueError)])
def test_set_num_threads_rejects_bad_values_and_changes_nothing(bad, exc):
    nnkern.set_num_threads(2)
    with pytest.raises(exc):
        nnkern.set_num_threads(bad)
    assert nnkern.get_num_threads() == 2


THREAD_START_FAILS = """
import resource, numpy as np, nnkern
nnkern.set_num_threads(2)
a = np.random.default_rng(0).uniform(-1, 1, (256, 256)).astype(np.float32)
ref = nnkern.matmul(a, a)
with open("/proc/self/status") as f:
    vm = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize:"))
# Room for Python, not for 1000 thread stacks: starting the threads fails part way.
resource.setrlimit(resource.RLIMIT_AS, (vm + (64 << 20), resource.getrlimit(resource.RLIMIT_AS)[1]))
try:
    nnkern.set_num_threads(1000)
    print("started")
except RuntimeError as e:
    print("RuntimeError", nnkern.get_num_threads(), np.array_equal(nnkern.matmul(a, a), ref), e)
"""


@pytest.mark.skipif(bool(os.environ.get("NNKERN_SANITIZED")) or bool(EXEC_PREFIX),
                    reason="ASan and qemu reserve address space far beyond an address-space limit")
def test_failed_thread_start_raises_and_keeps_the_previous_pool():
    proc = run_python_isolated(THREAD_START_FAILS, env=QUIET_ENV, timeout=120)
    assert proc.returncode == 0, describe_process(proc)
    if proc.stdout.startswith("started"):
        pytest.skip("1000 thread stacks fit in 64 MiB of address space here")
    assert proc.stdout.startswith("RuntimeError 2 True"), describe_process(proc)


CONCURRENT = """
import sys, threading, numpy as np, nnkern
sys.path.insert(0, sys.argv[1])
from helpers import run_concurrently
rng = np.random.default_rng(0)
a = rng.uniform(-1, 1, (200, 300)).astype(np.float32)
b = rng.uniform(-1, 1, (300, 150)).astype(np.float32)
qa = rng.integers(0, 256, (64, 500), dtype=np.uint8)
qb = rng.integers(-128, 128, (500, 300), dtype=np.int8)
nnkern.set_num_threads(1)
ref, qref = nnkern.matmul(a, b), nnkern.qgemm(qa, qb, a_zero_point=3)
stop = False

def resize():  # keeps changing the pool under the callers
    i = 0
    while not stop:
        nnkern.set_num_threads(1 + i % 3)
        i += 1

def work(t):
    for _ in range(40):
        assert np.array_equal(nnkern.matmul(a, b).view(np.uint32), ref.view(np.uint32))
        assert np.array_equal(nnkern.qgemm(qa, qb, a_zero_point=3), qref)

nnkern.set_num_threads(2)
run_concurrently(work, 4)
resizer = threading.Thread(target=resize)
resizer.start()
try:
    run_concurrently(work, 3)
finally:
    stop = True
    resizer.join()
print("ok")
"""


def test_concurrent_callers_get_bit_identical_results():
    # Calls that find the pool busy run on their own thread; results never depend on where tasks ran.
    tests_dir = os.path.dirname(os.path.abspath(__file__))
    proc = run_python_isolated(CONCURRENT, args=(tests_dir,), env=QUIET_ENV, timeout=240)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", describe_process(proc)


def test_concurrent_callers_in_process(rng):
    # The same, briefly, in this interpreter (the one the other tests use).
    a = rng.uniform(-1, 1, (130, 257)).astype(np.float32)
    nnkern.set_num_threads(1)
    ref = nnkern.matmul(a, a.T)
    nnkern.set_num_threads(2)

    def work(t):
        for _ in range(20):
            assert np.array_equal(nnkern.matmul(a, a.T).view(np.uint32), ref.view(np.uint32))

    run_concurrently(work, 3)


FORK = """
import os, sys, threading, time, numpy as np, nnkern

def in_child(body):
    # Runs body() in a fork() child; its exit code, or "hang" after 30 s (then it is killed).
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        try:
            os._exit(0 if body() else 3)
        except BaseException:
            os._exit(4)
    deadline = time.monotonic() + 30
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            return "hang"
        time.sleep(0.01)

nnkern.set_num_threads(2)
a = np.random.default_rng(0).uniform(-1, 1, (256, 256)).astype(np.float32)
ref = nnkern.matmul(a, a)

def same_result(set_threads=False):
    if set_threads:
        nnkern.set_num_threads(2)
    c = nnkern.matmul(a, a)
    return nnkern.get_num_threads() == 2 and np.array_equal(c.view(np.uint32), ref.view(np.uint32))

print("plain", in_child(same_result))
print("set_num_threads", in_child(lambda: same_result(True)))
# Fork while another thread keeps the pool busy: its locks may be held at the moment of the fork.
# Not under the sanitizer build: GCC 12's libasan has no fork() interceptor (no lock of its allocator or
# thread registry around the fork), so a child forked while another thread is inside malloc can hang in
# ASan itself, whatever nnkern does.
if os.environ.get("NNKERN_SANITIZED"):
    print("busy skipped")
    sys.exit(0)
stop = False
def busy():
    while not stop:
        nnkern.matmul(a, a)
t = threading.Thread(target=busy)
t.start()
codes = {in_child(same_result) for _ in range(10)}
stop = True
t.join()
print("busy", *sorted(map(str, codes)))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork()")
def test_fork_child_gets_a_fresh_pool():
    proc = run_python_isolated(FORK, env=QUIET_ENV, timeout=240)
    assert proc.returncode == 0, describe_process(proc)
    busy = "busy skipped" if os.environ.get("NNKERN_SANITIZED") else "busy 0"
    assert proc.stdout.split("\n")[:3] == ["plain 0", "set_num_threads 0", busy], describe_process(proc)


def default_threads(env_update, affinity=None):
    env = {k: v for k, v in QUIET_ENV.items() if k not in ("NNKERN_NUM_THREADS", "OMP_NUM_THREADS")}
    env.update(env_update)
    code = "import os, nnkern\n"
    if affinity is not None:  # before the pool exists: it reads the affinity on first use
        code += f"os.sched_setaffinity(0, {affinity!r})\n"
    code += "print(nnkern.get_num_threads())"
    proc = run_python_isolated(code, env=env, timeout=120)
    assert proc.returncode == 0, describe_process(proc)
    return int(proc.stdout)


def test_the_pool_starts_with_the_environment_thread_count():
    assert default_threads({"NNKERN_NUM_THREADS": "3", "OMP_NUM_THREADS": "5"}) == 3
    assert default_threads({"NNKERN_NUM_THREADS": "two", "OMP_NUM_THREADS": "5"}) == 5


CPUS = min(len(os.sched_getaffinity(0)), MAX_NUM_THREADS) if hasattr(os, "sched_getaffinity") else None
BAD = ["", "two", "0", "-2", "1.5", "3x", "3,2", str(MAX_NUM_THREADS + 1)]


@pytest.mark.parametrize("env, expect", [
    ({}, CPUS), ({"NNKERN_NUM_THREADS": "3"}, 3), ({"NNKERN_NUM_THREADS": " 3 "}, 3),
    ({"NNKERN_NUM_THREADS": "3", "OMP_NUM_THREADS": "5"}, 3), ({"OMP_NUM_THREADS": "5"}, 5),
    ({"OMP_NUM_THREADS": "4,2"}, 4),  # OpenMP's per-nesting-level list: the first field counts
    # A bad NNKERN_NUM_THREADS falls back to OMP_NUM_THREADS, a bad OMP_NUM_THREADS to the CPU count.
    *[({"NNKERN_NUM_THREADS": bad, "OMP_NUM_THREADS": "5"}, 5) for bad in BAD],
    *[({"OMP_NUM_THREADS": bad}, CPUS) for bad in BAD if bad != "3,2"],
])
def test_default_thread_count_from_the_environment(monkeypatch, env, expect):
    # _C.default_num_threads reads the variables on each call (the pool reads them once, at its start).
    for var in ("NNKERN_NUM_THREADS", "OMP_NUM_THREADS"):
        monkeypatch.delenv(var, raising=False)
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    assert _C.default_num_threads() == expect


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs two CPUs to restrict to one")
def test_default_thread_count_follows_the_affinity_mask():
    assert default_threads({}, affinity={min(os.sched_getaffinity(0))}) == 1


TPCTL = """
import sys
first, second = sys.argv[1].split(",")
__import__(first)
__import__(second)
import nnkern, threadpoolctl
nnkern.set_num_threads(3)
info = [i for i in threadpoolctl.threadpool_info() if i["user_api"] == "nnkern"]
assert len(info) == 1, info
assert info[0]["internal_api"] == "nnkern" and info[0]["num_threads"] == 3, info
assert info[0]["version"] == nnkern.__version__, info
with threadpoolctl.threadpool_limits(1):
    assert nnkern.get_num_threads() == 1
assert nnkern.get_num_threads() == 3
with threadpoolctl.threadpool_limits(limits=2, user_api="nnkern"):
    assert nnkern.get_num_threads() == 2
assert nnkern.get_num_threads() == 3
print("ok")
"""


@pytest.mark.parametrize("order", ["nnkern,threadpoolctl", "threadpoolctl,nnkern"])
def test_threadpoolctl_sees_and_limits_the_pool(order):
    pytest.importorskip("threadpoolctl", minversion="3.0")
    proc = run_python_isolated(TPCTL, args=(order,), env=QUIET_ENV, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", describe_process(proc)


def test_import_does_not_import_threadpoolctl():
    proc = run_python_isolated("import sys, nnkern; print('threadpoolctl' in sys.modules)", timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "False", describe_process(proc)
