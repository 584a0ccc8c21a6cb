"""Resident memory stays flat over 10,000 calls of every op and layer construction (tests/leak_check.py, run
in a child process so that its RSS is its own and a crash is reported)."""
from __future__ import annotations

import pathlib
import sys

import pytest

from conftest import exhaustive_only
from helpers import describe_process, run_python_isolated

HERE = pathlib.Path(__file__).resolve().parent


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
@exhaustive_only  # not in the sanitizer and emulated runs: there the RSS is the quarantine or the code cache

def test_memory_is_stable_over_many_calls():
    code = f"import sys; sys.path.insert(0, {str(HERE)!r}); import leak_check; sys.exit(leak_check.main())"
    proc = run_python_isolated(code, timeout=600)
    assert proc.returncode == 0, describe_process(proc)
    growth = dict(line.rsplit(" ", 1) for line in proc.stdout.splitlines())
    assert {"sgemm", "LSTM()", "QLinear.__init__", "dlpack_input"} <= set(growth)  # every case ran
    print(" ".join(f"{k}:{v}KiB" for k, v in growth.items()), file=sys.stderr)
