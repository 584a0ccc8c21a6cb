"""ISA levels, the dispatch cap and CPU information."""
from __future__ import annotations

import contextlib
import os
import warnings

from . import _C

#: Every ISA level this build knows for its architecture, lowest first.
ISA_LEVELS: tuple[str, ...] = tuple(_C.isa_levels())


def _check_isa_name(name) -> str:
    if not isinstance(name, str) or name not in ISA_LEVELS:
        raise ValueError(f"unknown ISA level {name!r}; valid levels: {', '.join(ISA_LEVELS)}")
    return name


def set_max_isa(name: str) -> None:
    """Cap the kernels nnkern may use at ISA level ``name`` (process-wide).

    A cap above what the CPU has is allowed: the best level the CPU supports below it is used.
    Raises ValueError for an unknown name, listing the valid ones.
    """
    _C.set_max_isa(_check_isa_name(name))


def get_max_isa() -> str:
    """The current cap (by default the best level the CPU supports, or ``NNKERN_MAX_ISA``)."""
    return _C.get_max_isa()


@contextlib.contextmanager
def max_isa(name: str):
    """Context manager: ``with nnkern.max_isa("avx2"): ...`` caps the ISA inside the block.

    The cap is process-wide, so other threads see it while the block runs.
    """
    _check_isa_name(name)
    previous = get_max_isa()
    set_max_isa(name)
    try:
        yield
    finally:
        set_max_isa(previous)


def supported_isas() -> list[str]:
    """The ISA levels this CPU (and OS) can run, lowest first, whatever the cap."""
    return [n for n in ISA_LEVELS if _C.isa_supported(n)]


def cpu_info() -> dict:
    """Everything nnkern knows about this CPU and its choices, as a dict.

    Keys: arch, vendor, model, features (name -> bool), caches (bytes: l1d and l2 per core, l3),
    isa_levels, supported_isas, max_isa (the cap), active_isas (supported and within the cap),
    isa (the best active level), kernels (op -> micro-kernel the dispatcher picked), num_threads.
    """
    info = _C.cpu_info()
    info["isa"] = info["active_isas"][-1]
    return info


def _apply_environment_cap() -> None:
    """NNKERN_MAX_ISA caps the ISA at import. An unknown name is ignored with a warning: a typo in the
    environment must not make ``import nnkern`` fail (set_max_isa still raises for one)."""
    name = os.environ.get("NNKERN_MAX_ISA", "").strip()
    if name:
        try:
            _check_isa_name(name)
        except ValueError as e:
            warnings.warn(f"NNKERN_MAX_ISA ignored: {e}", RuntimeWarning, stacklevel=3)
            return
        _C.set_max_isa(name)
