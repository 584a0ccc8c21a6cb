"""ctypes binding to oneDNN's BLAS-like C API from the PyPI ``onednn`` package.

Only what the benchmark anchors need: ``dnnl_sgemm``, ``dnnl_gemm_u8s8s32``,
``dnnl_version`` and a thread limit.  Everything returns ``None`` / ``False``
instead of raising when the package (or one of its runtime libraries) is absent.

Quirks of the wheel (onednn 2026.1.0 = libdnnl 3.13):
* ``libdnnl.so.3`` is installed into ``<prefix>/lib`` with no RUNPATH, next to
  its dependencies (libtbb, libsycl, libsvml, libimf, libintlc from the
  tbb / intel-* wheels).  ``dlopen`` does not look there, so ``_dlopen`` loads
  each missing dependency by full path (RTLD_GLOBAL) and retries.
* The CPU runtime is SYCL, whose CPU threading layer is TBB.  TBB has no
  environment variable for the thread count, so ``set_num_threads`` creates a
  ``tbb::global_control(max_allowed_parallelism, n)`` through libtbb's exported
  C++ ABI entry points (``tbb::detail::r1::create/destroy``).  Unlike a CPU
  affinity mask it can be changed at any time in the same process.
"""
import ctypes
import functools
import importlib.metadata
import os
import re

import numpy as np

_RUNTIMES = {0: "none", 1: "seq", 2: "omp", 4: "tbb", 8: "threadpool", 256: "ocl", 512: "sycl"}


def _libdnnl_path():
    """Absolute path of libdnnl.so* shipped by the installed ``onednn`` distribution, or None."""
    try:
        dist = importlib.metadata.distribution("onednn")
    except importlib.metadata.PackageNotFoundError:
        return None
    paths = sorted(str(dist.locate_file(f)) for f in (dist.files or [])
                   if re.search(r"libdnnl\.so(\.\d+)*$", str(f)))
    paths = [os.path.realpath(p) for p in paths if os.path.exists(p)]
    return paths[0] if paths else None


def _dlopen(path, depth=0):
    """dlopen ``path`` globally, first loading (from the same folder) any dependency the loader cannot find."""
    folder = os.path.dirname(path)
    for _ in range(32):
        try:
            return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError as e:
            missing = re.search(r"([\w.+-]+\.so[\w.]*): cannot open shared object", str(e))
            dep = missing and os.path.join(folder, missing.group(1))
            if depth > 8 or not dep or not os.path.exists(dep) or dep == path:
                raise
            _dlopen(dep, depth + 1)
    raise OSError(f"could not load {path}")


class _DnnlVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_int), ("minor", ctypes.c_int), ("patch", ctypes.c_int),
                ("hash", ctypes.c_char_p), ("cpu_runtime", ctypes.c_uint), ("gpu_runtime", ctypes.c_uint)]


@functools.lru_cache(maxsize=None)
def load():
    """The loaded libdnnl (ctypes.CDLL with argtypes set), or None when unavailable."""
    path = _libdnnl_path()
    if path is None:
        return None
    try:
        lib = _dlopen(path)
    except OSError:
        return None
    c, i64, f32 = ctypes.c_char, ctypes.c_int64, ctypes.c_float
    vp = ctypes.c_void_p
    lib.dnnl_sgemm.argtypes = [c, c, i64, i64, i64, f32, vp, i64, vp, i64, f32, vp, i64]
    lib.dnnl_sgemm.restype = ctypes.c_int
    lib.dnnl_gemm_u8s8s32.argtypes = [c, c, c, i64, i64, i64, f32, vp, i64, ctypes.c_uint8,
                                      vp, i64, ctypes.c_int8, f32, vp, i64, vp]
    lib.dnnl_gemm_u8s8s32.restype = ctypes.c_int
    lib.dnnl_version.restype = ctypes.POINTER(_DnnlVersion)
    return lib


def version():
    """{'version': 'x.y.z', 'cpu_runtime': 'sycl'|'tbb'|'omp'|...} or None."""
    lib = load()
    if lib is None:
        return None
    v = lib.dnnl_version().contents
    return {"version": f"{v.major}.{v.minor}.{v.patch}",
            "cpu_runtime": _RUNTIMES.get(v.cpu_runtime, str(v.cpu_runtime))}


# --- thread limit through tbb::global_control -------------------------------------------------

class _TbbGlobalControl(ctypes.Structure):
    # Layout of tbb::detail::d1::global_control (oneTBB >= 2021): size_t value; intptr_t reserved; enum param.
    _fields_ = [("value", ctypes.c_size_t), ("reserved", ctypes.c_ssize_t), ("param", ctypes.c_int)]


_MAX_ALLOWED_PARALLELISM = 0
_tbb_control = None  # the live global_control object (only one, so the newest limit is the one in force)


def _tbb():
    """libtbb already loaded as a dependency of libdnnl (same soname -> same instance), or None."""
    if load() is None:
        return None
    try:
        return ctypes.CDLL("libtbb.so.12", mode=ctypes.RTLD_GLOBAL | os.RTLD_NOLOAD)
    except OSError:
        return None


def set_num_threads(n):
    """Limit oneDNN (TBB) to ``n`` threads in total, calling thread included. True on success."""
    global _tbb_control
    tbb = _tbb()
    if tbb is None:
        return False
    create = tbb._ZN3tbb6detail2r16createERNS0_2d114global_controlE
    destroy = tbb._ZN3tbb6detail2r17destroyERNS0_2d114global_controlE
    if _tbb_control is not None:
        destroy(ctypes.byref(_tbb_control))
        _tbb_control = None
    ctl = _TbbGlobalControl(int(n), 0, _MAX_ALLOWED_PARALLELISM)
    create(ctypes.byref(ctl))
    _tbb_control = ctl
    return True


def active_num_threads():
    """tbb::global_control::active_value(max_allowed_parallelism), or None."""
    tbb = _tbb()
    if tbb is None:
        return None
    fn = tbb._ZN3tbb6detail2r127global_control_active_valueEi
    fn.restype, fn.argtypes = ctypes.c_size_t, [ctypes.c_int]
    return int(fn(_MAX_ALLOWED_PARALLELISM))


# --- GEMM calls bound to preallocated numpy arrays ----------------------------------------------

def _bound(fn, args, keep):
    """Callable running fn(*args); ``keep`` holds the arrays behind the raw pointers in ``args`` alive."""
    def call(_keep=keep):
        status = fn(*args)
        if status != 0:
            raise RuntimeError(f"{fn.__name__} failed with dnnl_status {status}")
    return call


def sgemm_call(A, B, C):
    """Zero-argument callable: C = A @ B (row-major float32, C-contiguous) with dnnl_sgemm."""
    lib = load()
    (M, K), N = A.shape, B.shape[1]
    args = (b"N", b"N", M, N, K, 1.0, A.ctypes.data, K, B.ctypes.data, N, 0.0, C.ctypes.data, N)
    return _bound(lib.dnnl_sgemm, args, keep=(A, B, C))


def gemm_u8s8s32_call(A, B, C):
    """Zero-argument callable: C(int32) = A(uint8) @ B(int8), zero offsets, with dnnl_gemm_u8s8s32."""
    lib = load()
    (M, K), N = A.shape, B.shape[1]
    co = np.zeros(1, np.int32)  # offsetc 'F': one fixed C offset (0); kept alive by the closure
    args = (b"N", b"N", b"F", M, N, K, 1.0, A.ctypes.data, K, 0, B.ctypes.data, N, 0,
            0.0, C.ctypes.data, N, co.ctypes.data)
    return _bound(lib.dnnl_gemm_u8s8s32, args, keep=(A, B, C, co))
