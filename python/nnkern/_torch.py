"""The one rule every ``from_torch`` follows: the module is checked with isinstance against torch's own class
(a quantized, GRU or other look-alike module is a TypeError naming what it is), and its parameters are copied as
float32 NumPy arrays from float32 tensors only (a float64 or half module is a TypeError: convert it with
``module.float()`` first, as nnkern never converts silently)."""
from __future__ import annotations

from typing import Any

import numpy as np


def require_module(module: Any, cls_name: str, what: str):
    """torch, once ``module`` is a ``torch.nn.<cls_name>``; TypeError otherwise (and without torch)."""
    try:
        import torch
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise TypeError(f"{what} needs torch") from e
    if not isinstance(module, getattr(torch.nn, cls_name)):
        kind = type(module)
        raise TypeError(f"{what} takes a float torch.nn.{cls_name}, got {kind.__module__}.{kind.__qualname__}")
    return torch


def float32_array(tensor: Any, what: str, name: str) -> np.ndarray | None:
    """A float32 tensor (a module's parameter) as a NumPy copy; None stays None; TypeError for another dtype."""
    if tensor is None:
        return None
    if str(tensor.dtype) != "torch.float32":
        raise TypeError(f"{what}: the module's {name} is {tensor.dtype}, not torch.float32 (convert the module with "
                        f"module.float() first)")
    return tensor.detach().cpu().numpy().copy()
