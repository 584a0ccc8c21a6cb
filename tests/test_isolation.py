"""The child-process runner of the guard-page checks (helpers.run_script_isolated): a fault, an exception or a
hang in the script fails the test that ran it, with the script's output, and leaves pytest running."""
import os
import signal
import subprocess

import pytest

from helpers import run_script_isolated


def _script(tmp_path, body):
    path = tmp_path / "check.py"
    path.write_text("import sys\nprint('started', sys.argv[1:])\n" + body)
    return path


def test_success_and_output(tmp_path):
    proc = run_script_isolated(_script(tmp_path, "print('OK')\n"), "a", 2)
    assert proc.returncode == 0 and proc.stdout.split() == ["started", "['a',", "'2']", "OK"]


def test_fault_is_a_signal(tmp_path):
    proc = run_script_isolated(_script(tmp_path, "import ctypes\nsys.stdout.flush()\nctypes.string_at(0)\n"))
    # (the sanitizer build's AddressSanitizer reports the fault and aborts)
    fault = -signal.SIGABRT if os.environ.get("NNKERN_SANITIZED") else -signal.SIGSEGV
    assert proc.returncode == fault and "started" in proc.stdout


def test_exception_and_exit_code(tmp_path):
    proc = run_script_isolated(_script(tmp_path, "raise RuntimeError('boom')\n"))
    assert proc.returncode == 1 and "RuntimeError: boom" in proc.stdout + proc.stderr
    assert run_script_isolated(_script(tmp_path, "sys.exit(3)\n")).returncode == 3


def test_hang_is_killed(tmp_path):
    with pytest.raises(subprocess.TimeoutExpired):
        run_script_isolated(_script(tmp_path, "import time\ntime.sleep(60)\n"), timeout=0.5)
