"""Argument checking shared by the ops: dtypes, shapes, layouts, aliasing."""
from __future__ import annotations

import math
import operator
import numbers
from typing import Any, Protocol, Tuple, Union

import numpy as np
import numpy.typing as npt

from . import _C

F32 = np.dtype(np.float32)


class SupportsDLPack(Protocol):
    """An array exposing DLPack (a torch tensor, a jax or cupy array): read without a copy on the CPU."""

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any: ...

    def __dlpack_device__(self) -> Tuple[int, int]: ...


#: What the ops accept as an array: an ndarray, a DLPack producer, or a buffer-protocol object.
ArrayIn = Union[npt.NDArray[Any], SupportsDLPack, memoryview, bytearray, bytes]
F32Array = npt.NDArray[np.float32]
F32_MAX = float(np.finfo(np.float32).max)


# DLPack device types (dlpack.h DLDeviceType) for the "CPU only" message.
_DL_CPU = 1
_DL_DEVICES = {2: "CUDA", 3: "CUDA host", 4: "OpenCL", 7: "Vulkan", 8: "Metal", 9: "VPI", 10: "ROCm",
               11: "ROCm host", 13: "CUDA managed", 14: "oneAPI", 15: "WebGPU", 16: "Hexagon"}
ARRAY_KINDS = "a numpy.ndarray, or a CPU array exposing DLPack or the buffer protocol (torch.Tensor, memoryview)"


def as_array(x, name: str) -> np.ndarray:
    """``x`` as a NumPy array over the same memory, never a copy: an ndarray itself; a DLPack producer on
    the CPU (a torch tensor, jax/cupy-style arrays) through ``np.from_dlpack``; a buffer-protocol object
    (memoryview, bytearray, array.array) through ``np.asarray``. TypeError for anything else (lists
    included: converting them would be a silent copy and dtype choice), and "CPU only" for a device array."""
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
        try:
            kind, index = x.__dlpack_device__()
        except Exception as e:  # a broken producer: say so rather than crash later
            raise TypeError(f"{name}: {type(x).__name__}.__dlpack_device__() failed: {e}") from None
        if int(kind) != _DL_CPU:
            where = _DL_DEVICES.get(int(kind), f"device type {int(kind)}")
            raise TypeError(f"{name} is a {where} array (device {index}): nnkern is CPU only; copy it to the CPU "
                            f"first (e.g. tensor.cpu())")
        try:
            return np.from_dlpack(x)
        except (BufferError, RuntimeError, TypeError, ValueError) as e:  # e.g. bfloat16, requires_grad
            raise TypeError(f"{name}: {type(x).__name__} cannot be read through DLPack: {e}") from None
    try:
        view = memoryview(x)
    except TypeError:
        pass
    else:
        try:
            return np.asarray(view)
        except (TypeError, ValueError) as e:  # a buffer format numpy does not know
            raise TypeError(f"{name}: {type(x).__name__} buffer cannot be read as an array: {e}") from None
    raise TypeError(f"{name} must be {ARRAY_KINDS}, got {type(x).__name__}")


def as_output(out, name: str) -> np.ndarray:
    """An ``out=`` argument as a NumPy view of its memory (see :func:`as_array`); the op writes through it
    and returns the caller's object."""
    arr = as_array(out, name)
    if not arr.flags.writeable:
        raise ValueError(f"{name} is read-only")
    return arr


def require_array(x, name: str, dtype: np.dtype) -> np.ndarray:
    """``x`` (see :func:`as_array`) must hold ``dtype``: no silent casts (a float64 input would lose
    precision and cost a copy the caller did not ask for). Returns the NumPy view of x."""
    x = as_array(x, name)
    if x.dtype is not dtype and x.dtype != dtype:
        raise TypeError(f"{name} must have dtype {dtype}, got {x.dtype} (convert with {name}.astype(np.{dtype}))")
    return x


def require_ndim(x: np.ndarray, name: str, ndims: tuple[int, ...]) -> None:
    if x.ndim not in ndims:
        want = " or ".join(f"{d}-D" for d in ndims)
        raise ValueError(f"{name} must be {want}, got a {x.ndim}-D array of shape {x.shape}")


def check_no_overlap(out: np.ndarray, out_name: str, **inputs) -> None:
    """An output that shares memory with an input would be read while written: refuse it."""
    for name, arr in inputs.items():
        if not _C.may_overlap(out, arr):  # cheap bounds test first
            continue
        try:
            overlaps = np.shares_memory(out, arr, max_work=10**6)
        except Exception:  # numpy's TooHardError: assume the worst
            overlaps = True
        if overlaps:
            raise ValueError(f"{out_name} overlaps {name}: pass a separate output array")


#: From this size up, new outputs start on a 64-byte line (bindings/common.h new_output: numpy's large arrays
#: start 16 bytes into a page, and the AMX kernels store whole 64-byte tile rows).
ALIGNED_OUTPUT_BYTES = 64 << 10


def new_output(shape: tuple, dtype) -> np.ndarray:
    """A new C-contiguous array, 64-byte aligned from ALIGNED_OUTPUT_BYTES up."""
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize  # exact: numpy raises its own error for impossible sizes
    if nbytes < ALIGNED_OUTPUT_BYTES or nbytes >= 1 << 62:
        return np.empty(shape, dtype)
    buf = np.empty(nbytes + 64, np.uint8)
    off = -buf.ctypes.data % 64
    return buf[off:off + nbytes].view(dtype).reshape(shape)


def checked_output(out, shape: tuple, dtype, **inputs) -> tuple[np.ndarray, object]:
    """A call's ``out=``: a new array when None, else the caller's (any :func:`as_output` kind) checked for
    dtype, shape, C-contiguity and overlap with ``inputs``. Returns (the array to write, the object to
    return: the caller's own when given)."""
    if out is None:
        out = new_output(shape, dtype)
        return out, out
    given = out
    out = as_output(out, "out")
    if out.dtype != dtype:
        raise TypeError(f"out must have dtype {np.dtype(dtype)}, got {out.dtype}")
    if out.shape != tuple(shape):
        raise ValueError(f"out must have shape {tuple(shape)}, got {out.shape}")
    if not out.flags.c_contiguous:
        raise ValueError("out must be a writeable C-contiguous array")
    if inputs:
        check_no_overlap(out, "out", **inputs)
    return out, given


def check_algorithm(v, op: str) -> str:
    """``algorithm=`` of an op with an algorithm table: "auto" or one of ``_C.algorithms(op)``."""
    names = ["auto", *_C.algorithms(op)]
    if not isinstance(v, str):
        raise TypeError(f"algorithm must be a str, one of {names}, got {type(v).__name__}")
    if v not in names:
        raise ValueError(f"algorithm must be one of {names}, got {v!r}")
    return v


def is_real_scalar(v) -> bool:
    """A real number: int, float, numpy integer/floating or a 0-d array of them; never a bool or a str."""
    if isinstance(v, (bool, np.bool_)):
        return False
    if isinstance(v, (numbers.Real, np.integer, np.floating)):
        return True
    return isinstance(v, np.ndarray) and v.ndim == 0 and v.dtype.kind in "iuf"


def as_float_scalar(v, name: str) -> float:
    """A real number as float32 will hold it (the kernels compute in float32): a finite value beyond
    float32's range is an error rather than a silent infinity (inf and nan themselves pass as given)."""
    if not is_real_scalar(v):
        raise TypeError(f"{name} must be a real number, got {type(v).__name__}")
    f = float(v)
    if math.isfinite(f) and abs(f) > F32_MAX:
        raise ValueError(f"{name} = {f} overflows float32 (largest {F32_MAX:.7g})")
    return f


def as_bool(v, name: str) -> bool:
    """A bool or numpy bool: a string such as "False" is an error, not True."""
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    raise TypeError(f"{name} must be a bool, got {type(v).__name__}")


def as_int(v, name: str) -> int:
    """A Python or NumPy integer (anything with __index__); a bool is an error, not 0 or 1."""
    if isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{name} must be an integer, got bool")
    try:
        return operator.index(v)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {type(v).__name__}") from None


def c_aligned(x: np.ndarray) -> np.ndarray:
    """x itself when C-contiguous and aligned for its dtype, else a C-contiguous aligned copy. (NumPy
    makes arrays at any byte offset; np.ascontiguousarray keeps a misaligned one as it is.)"""
    if x.flags.c_contiguous and x.flags.aligned and (x.size or x.ctypes.data % x.itemsize == 0):
        return x  # (numpy calls an empty array aligned at any address; the C++ checks do not)
    return np.array(x, order="C", copy=True)


def aligned_target(out: np.ndarray) -> np.ndarray:
    """Where a kernel writes the C-contiguous ``out``: out itself when aligned, else a temporary that the
    caller copies into out afterwards."""
    return out if out.flags.aligned else np.empty(out.shape, out.dtype)


def read_only_copy(x: np.ndarray) -> np.ndarray:
    """A C-contiguous, aligned copy that cannot be written (a layer's weights exposed as attributes)."""
    c = np.array(x, order="C", copy=True)
    c.flags.writeable = False
    return c
