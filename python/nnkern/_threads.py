"""The persistent worker pool."""
from __future__ import annotations

import operator

from . import _C


def set_num_threads(n: int) -> None:
    """Use ``n`` threads (>= 1) for every op. Results are bit-identical for any ``n``."""
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"num_threads must be an integer, got {type(n).__name__}") from None
    if n < 1:
        raise ValueError(f"num_threads must be >= 1, got {n}")
    _C.set_num_threads(n)


def get_num_threads() -> int:
    """The number of threads ops run on (default: the cores this process may use)."""
    return _C.get_num_threads()
