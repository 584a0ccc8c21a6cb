"""``python -m nnkern bench --plot FILE.png``: one chart per table, nnkern next to each library per shape."""
from __future__ import annotations

import pytest

from nnkern.bench import harness, plot
from helpers import describe_process, python_command

import subprocess


def results():
    rs = []
    for shape in [(64, 64, 64), (8, 1024, 1024)]:
        for lib, isa, rate in [("nnkern", "avx2", 30.0), ("nnkern", "scalar", 2.0), ("numpy", "", 28.0),
                               ("torch", "", 25.0)]:
            for t in (1, 2):
                rs.append(harness.Result("sgemm", shape, lib, isa, t, 1e-3, 1e-3, rate * t, "GFLOP/s"))
    return rs


def test_charts_follow_the_tables():
    charts = plot.from_results(results(), [1, 2], ["sgemm"])
    assert [c.title.split(",")[1].strip() for c in charts] == ["1 thread(s) (M x N x K)", "2 thread(s) (M x N x K)"]
    c = charts[0]
    assert c.categories == ["64x64x64", "8x1024x1024"] and c.higher_is_better
    assert list(c.series)[:2] == ["nnkern/avx2", "nnkern/scalar"]  # nnkern first, then each library
    assert c.series["numpy"] == [28.0, 28.0] and charts[1].series["torch"] == [50.0, 50.0]
    recs = [{"rows": 16, "n": 32000, "k": 5, "nnkern": 100.0, "torch.topk": 250.0}]
    (t,) = plot.from_records("topk", recs)
    assert not t.higher_is_better and t.series == {"nnkern": [100.0], "torch.topk": [250.0]}
    lstm = plot.from_records("lstm", [{"hidden": 256, "batch": 1, "seq": 50, "threads": 1, "flops": 1.0,
                                       "nnkern-accurate ms": 2.0, "torch ms": 3.0, "torch / nnkern-accurate": 1.5}])
    assert lstm[0].series == {"nnkern-accurate": [2.0], "torch": [3.0]}  # ratios are not bars


def test_png_renders(tmp_path):
    image = pytest.importorskip("matplotlib.image", reason="matplotlib is not installed (pip install 'nnkern[plot]')")
    path = tmp_path / "bench.png"
    plot.save(plot.from_results(results(), [1, 2], ["sgemm"]), str(path))
    pixels = image.imread(str(path))
    h, w = pixels.shape[:2]
    assert h > 400 and w > 400  # two charts stacked
    assert pixels[..., :3].std() > 0.05  # not a blank canvas
    with pytest.raises(ValueError, match="nothing to plot"):
        plot.save([], str(tmp_path / "empty.png"))


def test_bench_cli_writes_the_plot(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib is not installed (pip install 'nnkern[plot]')")
    path = tmp_path / "cli.png"
    cmd = python_command("-m", "nnkern", "bench", "--shapes", "16,16,16", "--threads", "1", "--repeats", "1",
                         "--isa", "scalar", "--no-subprocess", "--plot", path)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, describe_process(proc)
    assert f"charts written to {path}" in proc.stdout
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
