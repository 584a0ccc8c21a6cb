"""The persistent worker pool.

Every multi-threaded op runs on one pool of worker threads (``csrc/core/threadpool.cc``). Results are
bit-identical for any thread count. After an op, workers poll for the next one for about 300 us, so
back-to-back calls skip the wake-up, then sleep: an idle process uses no CPU. An op called while the
pool is busy (from another Python thread) runs on its caller's thread instead of waiting. A child
made by ``os.fork()`` gets a fresh pool of the parent's size.

The default thread count is ``NNKERN_NUM_THREADS``, else ``OMP_NUM_THREADS`` (its first field), else
the CPUs this process may run on (``os.sched_getaffinity``). A variable that is not an integer in
``[1, MAX_NUM_THREADS]`` is ignored.
"""
from __future__ import annotations

import operator

from . import _C

#: set_num_threads rejects more threads than this (far above any core count: a bigger value is a mistake).
MAX_NUM_THREADS: int = _C.MAX_NUM_THREADS


def set_num_threads(n: int) -> None:
    """Use ``n`` threads for every op; results are bit-identical for any ``n``.

    Raises TypeError if ``n`` is not an integer (``bool`` included), ValueError unless
    ``1 <= n <= MAX_NUM_THREADS`` (4096), RuntimeError if the threads cannot be started. The thread
    count is unchanged when it raises. Waits for an op running on the pool to finish.
    """
    if isinstance(n, bool):
        raise TypeError("num_threads must be an integer, got bool")
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"num_threads must be an integer, got {type(n).__name__}") from None
    if not 1 <= n <= MAX_NUM_THREADS:
        raise ValueError(f"num_threads must be in [1, {MAX_NUM_THREADS}], got {n}")
    _C.set_num_threads(n)


def get_num_threads() -> int:
    """The number of threads ops run on (the caller's thread included)."""
    return _C.get_num_threads()

