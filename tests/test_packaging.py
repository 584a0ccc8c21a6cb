"""The package as installed: one version, --version, the typing files, the stubs in step with the extension,
the license. Runs against whichever nnkern is imported (CI runs it on the installed wheel)."""
from __future__ import annotations

import importlib.metadata
import pathlib
import re

import pytest

import nnkern
from nnkern import _C
from helpers import describe_process, python_command

import subprocess

PKG = pathlib.Path(nnkern.__file__).parent
PYPROJECT = pathlib.Path(__file__).resolve().parent.parent / "pyproject.toml"


def installed_distribution():
    """nnkern's distribution metadata, or skip: the aarch64 run imports a bare copy of the package from
    PYTHONPATH, which has none (its __version__ is then the documented fallback)."""
    try:
        return importlib.metadata.distribution("nnkern")
    except importlib.metadata.PackageNotFoundError:
        assert nnkern.__version__ == "0+unknown"
        pytest.skip("nnkern is not installed as a distribution here (no metadata to check)")


def test_version_is_defined_once():
    assert nnkern.__version__ == installed_distribution().version
    if PYPROJECT.exists():  # in a checkout: the one definition
        m = re.search(r'^version = "([^"]+)"', PYPROJECT.read_text(), re.M)
        assert m and m.group(1) == nnkern.__version__
    for path in PKG.rglob("*.py"):
        assert not re.search(r'__version__\s*=\s*"\d+\.\d+', path.read_text()), f"{path} hard-codes a version"


def test_version_command():
    proc = subprocess.run(python_command("-m", "nnkern", "--version"), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, describe_process(proc)
    assert proc.stdout.strip() == f"nnkern {nnkern.__version__}"


def test_typing_files_are_installed():
    assert (PKG / "py.typed").is_file()
    assert (PKG / "_C.pyi").is_file()


def test_stub_lists_every_extension_name():
    text = (PKG / "_C.pyi").read_text()
    m = re.search(r"__all__: list\[str\] = \[(.*?)\]", text, re.S)
    assert m, "the stub has no __all__"
    stub = set(re.findall(r"'([^']+)'", m.group(1)))
    public = {n for n in dir(_C) if not n.startswith("_")}
    assert stub == public, f"regenerate python/nnkern/_C.pyi: missing {public - stub}, stale {stub - public}"
    for name in public:
        assert re.search(rf"^(def|class) {name}\b|^{name}: ", text, re.M), f"{name} has no stub entry"


def test_license_ships_with_the_package():
    dist = installed_distribution()
    assert "Apache-2.0" in (dist.metadata.get("License") or "") + " ".join(dist.metadata.get_all("License-Expression") or [])
    files = [str(f) for f in dist.files or []]
    assert any(f.endswith("LICENSE") for f in files), files[:20]
