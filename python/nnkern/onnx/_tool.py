"""What the command line does with a model: inputs made up from its declared shapes, and outputs summarized
(``python -m nnkern run`` and ``python -m nnkern bench --model``)."""
from __future__ import annotations

import numpy as np

from ._graph import DTYPES


def parse_assignments(items, what: str) -> dict:
    """["name=value", ...] -> {name: value}; ValueError naming the bad item."""
    out = {}
    for item in items or []:
        if "=" not in item:
            raise ValueError(f"{what} must look like NAME=VALUE, got {item!r}")
        name, value = item.split("=", 1)
        out[name] = value
    return out


def random_feeds(session, dims: dict, seed: int = 0, batch: int | None = None) -> dict:
    """An input of each declared shape: symbolic dimensions from `dims` (by name), else `batch` for the first
    dimension, else 1; float inputs standard normal, integer ones in [0, 10) (token ids, indices), bool random."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for i, arg in enumerate(session.get_inputs()):
        info = session._model.inputs[i]
        shape = []
        for k, d in enumerate(arg.shape or []):
            if isinstance(d, int) and d > 0:
                shape.append(d)
            elif isinstance(d, str) and d in dims:
                shape.append(int(dims[d]))
            elif k == 0 and batch is not None:
                shape.append(batch)
            else:
                shape.append(1)
        dtype = np.dtype(DTYPES[info.dtype])
        if dtype.kind == "f":
            feeds[arg.name] = rng.standard_normal(shape).astype(dtype)
        elif dtype.kind == "b":
            feeds[arg.name] = rng.random(shape) < 0.5
        else:
            feeds[arg.name] = rng.integers(0, 10, shape).astype(dtype)
    return feeds


def defaulted_dims(session, dims: dict, batch: int | None) -> list:
    """The symbolic dimensions random_feeds sets to 1 (neither given nor the batch)."""
    out = []
    for arg in session.get_inputs():
        for k, d in enumerate(arg.shape or []):
            if isinstance(d, str) and d not in dims and not (k == 0 and batch is not None) and d not in out:
                out.append(d)
    return out


def load_feeds(session, files: dict, dims: dict, seed: int = 0, batch: int | None = None) -> dict:
    """random_feeds, with the inputs named in `files` ({name: path.npy}) read from .npy files."""
    feeds = random_feeds(session, dims, seed, batch)
    names = {a.name for a in session.get_inputs()}
    for name, path in files.items():
        if name not in names:
            raise ValueError(f"--input {name}: the model has no input {name!r} (inputs: {sorted(names)})")
        feeds[name] = np.load(path)
    return feeds


def summary(name: str, a: np.ndarray) -> str:
    if a.size == 0:
        return f"{name}: {a.dtype}{list(a.shape)} (empty)"
    f = a.astype(np.float64)
    finite = np.isfinite(f)
    stats = f"min {f[finite].min():.6g} max {f[finite].max():.6g} mean {f[finite].mean():.6g}" if finite.any() else "no finite values"
    extra = f", {int((~finite).sum())} not finite" if not finite.all() else ""
    return f"{name}: {a.dtype}{list(a.shape)} {stats}{extra}"


def differences(ours: list, theirs: list, names: list) -> list:
    """Per output: (name, max |a - b|, max |a - b| / max |b|) over the elements; integer outputs compare exactly."""
    rows = []
    for name, a, b in zip(names, ours, theirs):
        if a.shape != b.shape:
            rows.append((name, float("inf"), float("inf")))
            continue
        d = np.abs(a.astype(np.float64) - b.astype(np.float64))
        scale = float(np.abs(b.astype(np.float64)).max()) if b.size else 0.0
        m = float(d.max()) if d.size else 0.0
        rows.append((name, m, m / scale if scale else (0.0 if m == 0 else float("inf"))))
    return rows
