"""Runs the property-based suite (tests/properties_check.py) in a child process: a crash there (a signal, an
abort) fails this test with the child's output and the signal's name instead of killing the test run.
NNKERN_HYPOTHESIS_EXAMPLES sets the examples per property (default 150, derandomized)."""
from __future__ import annotations

import os
import pathlib
import sys

import pytest

from helpers import describe_process, python_command

import subprocess

HERE = pathlib.Path(__file__).resolve().parent


def test_property_suite_in_a_child_process():
    pytest.importorskip("hypothesis", reason="hypothesis is not installed (pip install '.[test]')")
    env = dict(os.environ, PYTHONFAULTHANDLER="1")  # a crash prints the Python stack of every thread
    cmd = python_command("-m", "pytest", str(HERE / "properties_check.py"), "-q", "-p", "no:cacheprovider",
                         "-o", "addopts=", "--rootdir", str(HERE))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env, cwd=str(HERE))
    tail = proc.stdout.strip().splitlines()[-1:] if proc.stdout.strip() else []
    print("\n".join(tail), file=sys.stderr)
    assert proc.returncode == 0, describe_process(proc)
    assert " passed" in proc.stdout and " failed" not in proc.stdout
