"""The fused-stage benchmark (nnkern.bench.fused): the cases and tables; the CLI."""

import pytest

from nnkern.bench import fused


def test_fused_cases_and_table():
    assert {c.stage for c in fused.CASES} == {"pool", "shuffle"}
    assert fused.select(["ps4"]) == [c for c in fused.CASES if c.name.endswith("ps4")]
    with pytest.raises(SystemExit):
        fused.select(["nothing"])
    small = fused._L("small.gap", 5, 16, 24, 1, "pool")
    res = fused.measure(small, 1, isa="scalar", repeats=1, libraries=[], min_time=0.001)
    assert {r.variant for r in res} == {"fused", "fused u8", "conv + numpy mean", "conv + avg_pool2d"}
    assert all(r.max_diff is not None and r.max_diff < 1e-4 for r in res)  # every sequence computes the same
    table = fused.markdown_table(res, 1)
    assert "small.gap" in table and "conv + avg_pool2d" in table


def test_cli_fused(capsys):
    """python -m nnkern's main in this process (tests/test_onnx_session.py runs the command itself)."""
    from nnkern.__main__ import main
    assert main(["bench", "--op", "fused", "--threads", "1", "--repeats", "1", "--libraries", "none",
                 "--shapes", "rn50"]) == 0
    assert "conv + avg_pool2d" in capsys.readouterr().out
