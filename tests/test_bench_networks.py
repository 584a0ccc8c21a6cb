"""``python -m nnkern bench --op networks`` (nnkern.bench.networks, nnkern.bench.models): the selection, the tables
with nnkern alone and against onnxruntime (float and INT8, the outputs' differences and top-1 agreement), the note
for a network nnkern.onnx cannot run, torch's quantized model, the profile and peak-memory reports, and the CLI.
Small test-size networks at tiny inputs, one repetition; no timing or memory comparison asserted."""
import json

import numpy as np
import pytest

pytest.importorskip("torch", reason="the networks are defined in torch")
pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from conftest import exhaustive_only  # noqa: E402
from nnkern.bench import models, networks  # noqa: E402

QUICK = dict(size="test", input_size=32, repeats=1, min_time=0.001, progress=None)


def test_select_and_sizes():
    assert networks.select(None) == (list(networks.NETWORKS), list(networks.PRECISIONS), None)
    assert networks.select(["resnet18", "int8", "112"]) == (["resnet18"], ["int8"], 112)
    assert networks.select(None, "qnet") == (["resnet18", "mobilenet_v2"], ["int8"], None)
    assert networks.select(["float"], "yolo") == (["tiny_yolo"], ["float"], None)
    with pytest.raises(SystemExit):
        networks.select(["resnet101"])
    full = models.spec("resnet18", "bench")
    assert full["kwargs"] == dict(width=64, num_classes=1000) and full["feeds"].size == 224
    assert models.spec("resnet18")["kwargs"] == dict(width=32) and models.feeds("espcn", "bench").channels == 3
    with pytest.raises(ValueError):
        models.spec("resnet18", "huge")


def test_table_nnkern_alone():
    results, notes = networks.run(["resnet18"], [1], precisions=["float"], batches=[1], libraries=[], **QUICK)
    assert [(r.library, r.network, r.precision, r.batch, r.shape) for r in results] == \
        [("nnkern", "resnet18", "float", 1, (1, 3, 32, 32))]
    assert results[0].max_diff is None and results[0].top1 is None and not notes
    table = networks.markdown_table(results, 1, notes)
    assert "**networks, 1 thread(s)**" in table and "| resnet18 | 3x32x32 | float | 1 | nnkern |" in table


def test_table_against_onnxruntime():
    # also: the float network's session also at float32 precision "high" (Winograd) and "medium" (bf16), nnkern's
    # rows with that isa, their own output difference and top-1
    results, notes = networks.run(["resnet18"], [1], batches=[1, 2], libraries=["onnxruntime"],
                                  also=["high", "medium"], **QUICK)
    assert not notes, notes
    assert {(r.precision, r.batch, r.library, r.isa) for r in results} == \
        {(p, b, lib, "") for p in ("float", "int8") for b in (1, 2) for lib in ("nnkern", "onnxruntime")} | \
        {("float", b, "nnkern", lv) for b in (1, 2) for lv in ("high", "medium")}
    for r in results:
        if r.library == "nnkern" and r.isa == "high":
            assert r.max_diff < 1e-3 and r.top1 == (networks.AGREEMENT, networks.AGREEMENT)
        elif r.library == "nnkern" and r.isa == "medium":  # bf16 operands: 2^-8 relative each
            assert 1e-4 < r.max_diff < 5e-2 and r.top1[0] >= 0.75 * networks.AGREEMENT
        elif r.library == "nnkern":
            assert r.top1 is not None and r.top1[1] == networks.AGREEMENT
            if r.precision == "float":
                assert r.max_diff < 1e-4 and r.steps is None and r.top1[0] == networks.AGREEMENT
            else:  # tests/test_onnx_models.py's bound for this model
                assert r.steps is not None and r.steps <= 16 and r.top1[0] >= 0.75 * networks.AGREEMENT
    table = networks.markdown_table(results, 1)
    assert "| resnet18 | 3x32x32 | int8 | 2 | onnxruntime |" in table and " steps)" in table
    assert "| resnet18 | 3x32x32 | float | 1 | nnkern (high) |" in table
    assert "| resnet18 | 3x32x32 | float | 1 | nnkern (medium) |" in table


def test_throughput_mode_rows_at_two_threads_and_a_batch():
    results, _ = networks.run(["resnet18"], [1, 2], precisions=["float"], batches=[1, 2], libraries=[], **QUICK)
    assert sorted((r.threads, r.batch, r.isa) for r in results) == \
        [(1, 1, ""), (1, 2, ""), (2, 1, ""), (2, 2, ""), (2, 2, "throughput")]
    assert all(r.library == "nnkern" and r.max_diff is None for r in results)
    table = networks.markdown_table(results, 2)
    assert "| resnet18 | 3x32x32 | float | 2 | nnkern (throughput) |" in table
    ours = next(r for r in results if r.threads == 2 and r.batch == 2 and not r.isa)
    mode = next(r for r in results if r.isa == "throughput")
    assert f"| {mode.seconds / ours.seconds:.2f}x |" in table.split("nnkern (throughput)")[1].splitlines()[0]


def test_a_network_nnkern_cannot_run_is_skipped(monkeypatch):
    import nnkern.onnx

    def refuse(*args, **kwargs):
        raise NotImplementedError("Foo node 'x': the operator Foo is not supported")
    monkeypatch.setattr(nnkern.onnx, "InferenceSession", refuse)
    results, notes = networks.run(["espcn"], [1], precisions=["float"], batches=[1], libraries=[], **QUICK)
    assert results == [] and "operator Foo" in notes["espcn float"]
    assert "skipped" in networks.markdown_table(results, 1, notes)


def test_torch_quantized_model():
    """torch's eager static quantization of a definition: convolutions fused with their batch norm and ReLU, the
    logits near the float model's."""
    import torch
    module, _ = models.torch_model("squeezenet1_1")
    q = models.torch_quantized(module, models.feeds("squeezenet1_1"))
    assert any(type(m).__name__ == "ConvReLU2d" for m in q.modules())
    x = torch.from_numpy(models.feeds("squeezenet1_1")(batch=2, size=32, seed=3)["image"])
    with torch.inference_mode():
        ref, got = module(x).numpy(), q(x).numpy()
    assert got.shape == ref.shape and np.abs(got - ref).max() < 0.25 * np.abs(ref).max()


def test_cli_alias(tmp_path, capsys):
    """The command line in this process (python -m nnkern's main), so the test does not pay a second torch import."""
    from nnkern.__main__ import main
    out = tmp_path / "networks.json"
    assert main(["bench", "--op", "mobilenet", "--quick", "--shapes", "32", "--batch", "1", "--threads", "1",
                 "--repeats", "1", "--libraries", "none", "--json", str(out), "--profile", "--memory"]) == 0
    printed = capsys.readouterr().out
    assert "| mobilenet_v2 | 3x32x32 | float | 1 | nnkern |" in printed
    assert "**mobilenet_v2 float, batch 1, 1 thread(s)** - nnkern's time by op kind" in printed
    assert "**peak memory**" in printed and "| mobilenet_v2 | float | 1 | 1 |" in printed
    recs = json.loads(out.read_text())
    assert [(r["op"], r["network"], r["precision"], r["library"], r["isa"]) for r in recs] == \
        [("networks", "mobilenet_v2", "float", "nnkern", ""), ("networks-profile", "mobilenet_v2", "float", "nnkern",
         "before"), ("networks-profile", "mobilenet_v2", "float", "nnkern", "after"),
         ("networks-memory", "mobilenet_v2", "float", "nnkern", "")]
    with pytest.raises(SystemExit):
        main(["bench", "--op", "sgemm", "--profile"])


def _rows(table: str) -> list:
    """A markdown table's body rows as lists of cells."""
    return [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()
            if line.startswith("| ") and not line.startswith(("| op |", "| network |"))]


def test_profile_before_and_after_the_optimizations():
    """--profile: a table per network and precision, a row per op kind of either run, each share column summing
    to 100%; the plan as written has at least the optimized plan's steps. The latency table ignores the records."""
    results, notes = networks.run(["espcn"], [1], precisions=["float", "int8"], batches=[1], libraries=[],
                                  profile=True, **QUICK)
    assert not notes, notes
    profiles = {(r.precision, r.isa): r for r in results if r.op == "networks-profile"}
    assert sorted(profiles) == [(p, w) for p in ("float", "int8") for w in ("after", "before")]
    assert networks.markdown_table(results, 1).count("| espcn |") == 2
    tables = networks.profile_tables(results).split("\n\n**")
    assert len(tables) == 2
    for precision, table in zip(("float", "int8"), tables):
        assert table.lstrip("*").startswith(f"espcn {precision}, batch 1, 1 thread(s)**") and "fuse_qdq" in table
        before, after = profiles[precision, "before"], profiles[precision, "after"]
        rows = _rows(table)
        assert [r[0] for r in rows[-2:]] == ["all steps", "whole run"]
        assert {r[0] for r in rows[:-2]} == set(before.by_op) | set(after.by_op)
        for col, run in ((1, before), (4, after)):
            assert sum(int(r[col]) for r in rows[:-2] if r[col] != "-") == run.plan_steps == int(rows[-2][col])
            assert sum(float(r[col + 2].rstrip("%")) for r in rows[:-2] if r[col + 2] != "-") == \
                pytest.approx(100, abs=0.1 * len(rows))
        assert before.plan_steps >= after.plan_steps
    assert "QuantizeLinear" in profiles["int8", "before"].by_op  # each node as written


def test_peak_memory_against_onnxruntime(tmp_path):
    """--memory: nnkern's and onnxruntime's peak memory growth, each from a fresh process, and nnkern's planned
    intermediates; a process that fails gives a note."""
    results, notes = networks.run(["espcn"], [1], precisions=["float"], batches=[1], libraries=["onnxruntime"],
                                  memory=True, **QUICK)
    assert not notes, notes
    memory = {r.library: r for r in results if r.op == "networks-memory"}
    assert sorted(memory) == ["nnkern", "onnxruntime"] and memory["nnkern"].planned.endswith("iB")
    row = next(r for r in _rows(networks.memory_table(results)) if r[0] == "espcn")
    assert row[1:4] == ["float", "1", "1"] and float(row[4]) > 0 and float(row[6]) > 0 and row[7].endswith("x")
    net = networks.Network("espcn", "test", str(tmp_path), 32)
    assert networks.peak_memory(net, "float", 1, 1, libraries=[], timeout=0.001) == \
        ([], {"nnkern": "no memory figure: timed out after 0.001 s"})


@exhaustive_only  # inductor compiles the network first: tens of seconds
def test_torch_compile_rows():
    pytest.importorskip("torch")
    results, notes = networks.run(["resnet18"], [1], batches=[1], libraries=["torch.compile"], **QUICK)
    compiled = [r for r in results if r.library == "torch.compile"]
    if not compiled:  # a machine where inductor cannot build its kernels: a note says why
        assert any("torch.compile" in k for k in notes), notes
        return
    assert [r.precision for r in compiled] == ["float"] and compiled[0].seconds > 0
    assert any("torch.compile (int8" in k and "float only" in v for k, v in notes.items()), notes

