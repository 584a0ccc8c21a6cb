"""The float32 precision setting, in torch's terms (``torch.set_float32_matmul_precision``).

"highest" (the default): float32 products and sums only, every algorithm under the direct bound.
"high": "auto" may also pick Winograd for 3x3 stride-1 convolutions (4x fewer multiplies, a larger documented
bound: :class:`nnkern.Conv2d`). "medium": also bf16 products with float32 accumulation: :func:`nnkern.matmul` and
:class:`nnkern.Linear` round their operands to bf16 (:mod:`nnkern.bf16`); the other ops run as at "high". The
setting only widens what "auto" may choose; an algorithm named explicitly runs at any setting. Layers and sessions
given ``precision=`` keep their own.
"""
from __future__ import annotations

import contextlib
import threading

#: The levels, most accurate first.
PRECISIONS: tuple[str, ...] = ("highest", "high", "medium")

_lock = threading.Lock()
_current = "highest"


def check_precision(precision, *, allow_none: bool = False):
    """precision itself if it is a level (or None where allowed); ValueError / TypeError otherwise."""
    if precision is None and allow_none:
        return None
    if not isinstance(precision, str):
        raise TypeError(f"precision must be a str, one of {list(PRECISIONS)}, got {type(precision).__name__}")
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {list(PRECISIONS)}, got {precision!r}")
    return precision


def set_float32_precision(precision: str) -> None:
    """Set the process-wide float32 precision ("highest", "high" or "medium"; see the module docstring)."""
    global _current
    check_precision(precision)
    with _lock:
        _current = precision


def get_float32_precision() -> str:
    """The process-wide float32 precision ("highest" unless set)."""
    return _current


@contextlib.contextmanager
def float32_precision(precision: str):
    """Context manager: ``with nnkern.float32_precision("high"): ...`` sets the precision inside the block.

    The setting is process-wide, so other threads see it while the block runs (as torch's)."""
    check_precision(precision)
    previous = get_float32_precision()
    set_float32_precision(precision)
    try:
        yield
    finally:
        set_float32_precision(previous)


def resolve(precision: str | None) -> str:
    """A layer's own precision, or the process-wide one where it has none (None)."""
    return _current if precision is None else precision
