"""The suite's own selection rule for emulated runs (conftest.py): NNKERN_TEST_SKIP_PORTABLE=1 leaves out exactly
the scalar level's cases."""
import os
import subprocess

from helpers import python_command

TESTS = os.path.dirname(os.path.abspath(__file__))
FILES = ["test_sgemm.py", "test_conv2d.py", "test_qgemm.py", "test_onnx_ops_elementwise.py", "test_dispatch.py"]


def collected(skip_portable):
    env = dict(os.environ, NNKERN_TEST_SKIP_PORTABLE=skip_portable)
    proc = subprocess.run(python_command("-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *FILES),
                          cwd=TESTS, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {line for line in proc.stdout.splitlines() if "::" in line}


def test_skip_portable_deselects_the_scalar_level_only():
    everything, kept = collected("0"), collected("1")
    dropped = everything - kept
    assert kept <= everything and dropped
    # Each dropped case names the scalar level: a kernel "..__scalar" or the level as its ISA parameter.
    assert all("__scalar" in t or "[scalar" in t for t in dropped), sorted(dropped)[:5]
    assert not any("__scalar" in t for t in kept), sorted(t for t in kept if "__scalar" in t)[:5]
    # The level as a parameter (isa, qisa, level) goes too; a "scalar" that is no ISA (a broadcast pattern; that
    # module needs onnx) and the dispatch tests' caps stay.
    broadcasts = {t for t in everything if "test_large_broadcasts[" in t and "scalar" in t}
    assert broadcasts <= kept
    assert any("test_dispatch.py::" in t and "scalar" in t for t in kept)
    scalar_ids = {t for t in kept if "scalar" in t.partition("[")[2].rstrip("]").split("-")}
    assert scalar_ids <= broadcasts | {t for t in kept if "test_dispatch.py::" in t}, sorted(scalar_ids)[:5]
    assert any("test_sgemm.py::" in t and "[" in t for t in kept)
