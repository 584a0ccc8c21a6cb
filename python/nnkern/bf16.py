"""bfloat16: conversions, and the arrays the bf16 products (float32 precision "medium") take and give.

A bf16 value is the upper half of a float32: the same exponent range, 8 significant bits (a relative rounding
error of at most 2^-8 per value, 2^-7 + 2^-16 for a product of two rounded operands). Arrays of it come as
``ml_dtypes.bfloat16`` NumPy arrays (the optional dependency JAX and TensorFlow use: ``pip install nnkern[bf16]``)
or torch ``bfloat16`` tensors (read and written in place, without ml_dtypes). :func:`to_bf16` rounds to nearest
even, keeps NaN a NaN and +-Inf, rounds values past the largest bf16 to Inf, and rounds denormals like any other
value; :func:`from_bf16` is exact.
"""
from __future__ import annotations

import numpy as np

from . import _C
from ._arrays import ArrayIn, F32Array, as_array, check_no_overlap, c_aligned

F32 = np.dtype(np.float32)
U16 = np.dtype(np.uint16)

_BF16_KINDS = "an ml_dtypes.bfloat16 array or a torch.bfloat16 tensor"


def ml_dtypes_bfloat16() -> np.dtype:
    """The ml_dtypes bfloat16 dtype; ImportError naming the extra where ml_dtypes is missing."""
    try:
        import ml_dtypes
    except ImportError:
        raise ImportError("bf16 NumPy arrays need ml_dtypes: pip install 'nnkern[bf16]' (or ml_dtypes); torch "
                          "bfloat16 tensors work without it") from None
    return np.dtype(ml_dtypes.bfloat16)


def _torch_bf16_bits(x) -> np.ndarray | None:
    """A CPU torch.bfloat16 tensor's bits as a uint16 NumPy view (no copy), or None for anything else."""
    mod = type(x).__module__
    if not mod.startswith("torch") or str(getattr(x, "dtype", "")) != "torch.bfloat16":
        return None
    import torch
    if x.device.type != "cpu":
        raise TypeError(f"a {x.device.type} tensor: nnkern is CPU only; copy it to the CPU first (tensor.cpu())")
    return x.detach().view(torch.int16).numpy().view(U16)


def bf16_bits(x) -> np.ndarray | None:
    """x's bf16 values as a uint16 view of the same memory if x is a bf16 array (_BF16_KINDS), else None."""
    if isinstance(x, np.ndarray):
        dt = x.dtype  # kind first: dtype.name is computed on each access, slow next to a small product
        return x.view(U16) if dt.kind == "V" and dt.itemsize == 2 and dt.name == "bfloat16" else None
    bits = _torch_bf16_bits(x)
    if bits is not None:
        return bits
    return None


def _bits_view(x, name: str) -> np.ndarray:
    """The bits of a bf16 input (or a uint16 array holding bf16 bits); TypeError for any other dtype."""
    bits = bf16_bits(x)
    if bits is not None:
        return bits
    arr = as_array(x, name)
    if arr.dtype == U16:
        return arr
    raise TypeError(f"{name} must be {_BF16_KINDS}, or uint16 bf16 bits, got dtype {arr.dtype}")


def _checked_out(target: np.ndarray, x: np.ndarray) -> np.ndarray:
    """A conversion's out (its NumPy view, of the right dtype): x's shape, writeable, aligned, C-contiguous, apart
    from x."""
    if target.shape != x.shape:
        raise ValueError(f"out must have shape {x.shape}, got {target.shape}")
    if not target.flags.writeable or not target.flags.c_contiguous or not target.flags.aligned:
        raise ValueError("out must be a writeable, aligned, C-contiguous array")
    check_no_overlap(target, "out", x=x)
    return target


def to_bf16(x: ArrayIn, out=None):
    """float32 -> bf16, round to nearest even (NaN stays NaN, Inf stays Inf), vectorized and threaded.

    x: a float32 array (NumPy, or any CPU array exposing DLPack or the buffer protocol). Returns an ``ml_dtypes.bfloat16`` array of x's shape, or writes
    ``out``: an ml_dtypes.bfloat16 array, a torch.bfloat16 tensor, or a uint16 array to hold the bits, of x's shape
    and C-contiguous (returned)."""
    xa = as_array(x, "x")
    if xa.dtype != F32:
        raise TypeError(f"x must have dtype float32, got {xa.dtype} (convert with x.astype(np.float32))")
    if out is None:
        result = np.empty(xa.shape, ml_dtypes_bfloat16())
        target = result.view(U16)
    else:
        result = out
        target = _checked_out(_bits_view(out, "out"), xa)
    if xa.size:
        _C.to_bf16(c_aligned(xa).reshape(-1), target.reshape(-1))
    return result


def from_bf16(x, out=None) -> F32Array:
    """bf16 -> float32, exact. x: an ml_dtypes.bfloat16 array, a torch.bfloat16 tensor, or a uint16 array of bf16
    bits. Returns a new float32 array of x's shape, or writes ``out`` (float32, x's shape, C-contiguous)."""
    bits = _bits_view(x, "x")
    if out is None:
        result = target = np.empty(bits.shape, F32)
    else:
        result = out
        target = as_array(out, "out")
        if target.dtype != F32:
            raise TypeError(f"out must have dtype float32, got {target.dtype}")
        target = _checked_out(target, bits)
    if bits.size:
        _C.from_bf16(c_aligned(bits).reshape(-1), target.reshape(-1))
    return result
