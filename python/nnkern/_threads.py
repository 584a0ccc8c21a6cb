"""The persistent worker pool, and its threadpoolctl controller.

Every multi-threaded op runs on one pool of worker threads (``csrc/core/threadpool.cc``). Results are
bit-identical for any thread count. After an op, workers poll for the next one for about 300 us, so
back-to-back calls skip the wake-up, then sleep: an idle process uses no CPU. An op called while the
pool is busy (from another Python thread) runs on its caller's thread instead of waiting. A child
made by ``os.fork()`` gets a fresh pool of the parent's size.

The default thread count is ``NNKERN_NUM_THREADS``, else ``OMP_NUM_THREADS`` (its first field), else
the CPUs this process may run on (``os.sched_getaffinity``). A variable that is not an integer in
``[1, MAX_NUM_THREADS]`` is ignored.

threadpoolctl (optional) sees the pool as ``user_api="nnkern"``: ``threadpool_info()`` lists it and
``threadpool_limits(1)`` limits it. The controller is registered when threadpoolctl is imported,
before or after nnkern; ``import nnkern`` never imports threadpoolctl itself (a few ms).
"""
from __future__ import annotations

import ctypes
import importlib.util
import sys
import warnings

from . import _C
from ._arrays import as_int

#: set_num_threads rejects more threads than this (far above any core count: a bigger value is a mistake).
MAX_NUM_THREADS: int = _C.MAX_NUM_THREADS


def set_num_threads(n: int) -> None:
    """Use ``n`` threads for every op; results are bit-identical for any ``n``.

    Raises TypeError if ``n`` is not an integer (``bool`` included), ValueError unless
    ``1 <= n <= MAX_NUM_THREADS`` (4096), RuntimeError if the threads cannot be started. The thread
    count is unchanged when it raises. Waits for an op running on the pool to finish.
    """
    n = as_int(n, "num_threads")
    if not 1 <= n <= MAX_NUM_THREADS:
        raise ValueError(f"num_threads must be in [1, {MAX_NUM_THREADS}], got {n}")
    _C.set_num_threads(n)


def get_num_threads() -> int:
    """The number of threads ops run on (the caller's thread included)."""
    return _C.get_num_threads()


def _register_threadpoolctl(threadpoolctl) -> None:
    """Registers nnkern's controller with threadpoolctl (>= 3.0, which has ``register``)."""
    if not (hasattr(threadpoolctl, "LibController") and hasattr(threadpoolctl, "register")):
        return

    class NnkernController(threadpoolctl.LibController):
        """threadpoolctl's view of nnkern's pool, through the C functions _C exports."""

        user_api = "nnkern"
        internal_api = "nnkern"
        # threadpoolctl matches the lower-cased file name: _C.cpython-*.so, or _C.so (cross builds).
        filename_prefixes = ("_c.",)
        # Other packages have a _C module too (torch): only nnkern's exports this.
        check_symbols = ("nnkern_threadpool_get_num_threads",)

        def get_num_threads(self):
            get = getattr(self.dynlib, "nnkern_threadpool_get_num_threads", None)
            return None if get is None else get()

        def set_num_threads(self, num_threads):
            set_ = self.dynlib.nnkern_threadpool_set_num_threads
            set_.argtypes = [ctypes.c_int]
            if set_(num_threads) != 0:
                raise RuntimeError(f"nnkern could not use {num_threads} threads")

        def get_version(self):
            from . import __version__
            return __version__

    threadpoolctl.register(NnkernController)


class _RegisterOnImport:
    """A ``sys.meta_path`` entry that registers the controller right after threadpoolctl is imported.

    It finds nothing itself: it asks the other finders for threadpoolctl's spec and wraps the
    loader's ``exec_module`` for this one import, then removes itself.
    """

    def find_spec(self, name, path=None, target=None):
        if name != "threadpoolctl":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        loader = getattr(spec, "loader", None)
        if loader is None or isinstance(loader, type) or not hasattr(loader, "exec_module"):
            return spec  # patching a class (builtin or frozen importers) would outlive this import
        exec_module = loader.exec_module

        def exec_then_register(module):
            del loader.exec_module  # back to the loader's own method
            exec_module(module)
            try:
                _register_threadpoolctl(module)
            except Exception as e:  # noqa: BLE001 - a threadpoolctl change must not break its import
                warnings.warn(f"nnkern: could not register with threadpoolctl: {e!r}", RuntimeWarning,
                              stacklevel=2)

        loader.exec_module = exec_then_register
        return spec


def _hook_threadpoolctl() -> None:
    if "threadpoolctl" in sys.modules:
        _register_threadpoolctl(sys.modules["threadpoolctl"])
    else:
        sys.meta_path.insert(0, _RegisterOnImport())
