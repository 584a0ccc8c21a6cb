"""The benchmark harness: nnkern alone across thread counts, the scaling table, pauses and warm-up."""
from __future__ import annotations

import nnkern
from nnkern.bench import harness, ops


def test_nnkern_alone_interleaves_the_thread_counts():
    before = nnkern.get_num_threads()
    res = harness.run(ops.sgemm_op(numpy_unset=False), [(16, 16, 16), (32, 8, 24)], [1, 2], isas=["scalar"],
                      repeats=2, min_time=0.001, libraries=[], progress=None)
    assert {(r.shape, r.threads) for r in res} == {(s, t) for s in [(16, 16, 16), (32, 8, 24)] for t in (1, 2)}
    assert all(r.library == "nnkern" and r.isa == "scalar" and r.rate > 0 for r in res)
    table = harness.scaling_table(res, 2, 1)
    lines = table.splitlines()
    assert lines[0].startswith("**sgemm: 2 threads / 1 thread(s)**")
    assert lines[2] == "| M,N,K | nnkern/scalar |"
    rate = {(r.shape, r.threads): r.rate for r in res}
    assert lines[4] == f"| 16,16,16 | {rate[((16, 16, 16), 2)] / rate[((16, 16, 16), 1)]:.2f}x |"
    assert nnkern.get_num_threads() == before  # each measurement's thread count is restored


def test_scaling_table_needs_both_counts():
    r = harness.Result("sgemm", (8, 8, 8), "nnkern", "avx2", 1, 1e-3, 1e-3, 1.0, "GFLOP/s")
    assert harness.scaling_table([r], 2, 1) == ""


def test_pauses_apply_to_every_library_and_warm_up_first(monkeypatch):
    calls, sleeps = [], []
    monkeypatch.setattr(harness.time, "sleep", lambda s: sleeps.append(s))
    fns = {"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}
    harness.interleaved(fns, repeats=2, min_time=0.0, pause_after={"a": 0.3, "*": 0.05})
    assert sleeps.count(0.3) == 3 and sleeps.count(0.05) == 3  # calibration + 2 repetitions each
    # every timed repetition after a pause is preceded by an untimed warm-up: twice the calls per repetition
    assert calls.count("a") == calls.count("b") and calls.count("a") >= 5


def test_slow_anchor_left_out(monkeypatch, capsys):
    from nnkern.bench import anchors
    monkeypatch.setattr(anchors, "MAX_CALL_SECONDS", 0.0)
    assert anchors._try_make(lambda: (lambda: None), "slowlib") is None
    assert "slowlib left out of this shape" in capsys.readouterr().out
    monkeypatch.setattr(anchors, "MAX_CALL_SECONDS", 10.0)
    assert anchors._try_make(lambda: (lambda: None), "fast") is not None


def test_bf16_bench_has_a_column_per_bf16_kernel(monkeypatch, capsys):
    """--op bf16 measures each distinct bf16 kernel (vdpbf16ps and the AMX tiles are levels of their own, which
    the FP32 GEMM's list would leave out), in the order of the ISA levels."""
    from nnkern.__main__ import main
    asked, ran = [], []
    real_run = harness.run
    monkeypatch.setattr(harness, "bench_isas", lambda key="f32_gemm": asked.append(key) or ["scalar"])

    def run(op, shapes, threads, *, isas=None, **kw):
        ran.append(isas)
        return real_run(op, shapes, threads, isas=isas, **kw)
    monkeypatch.setattr(harness, "run", run)
    assert main(["bench", "--op", "bf16", "--shapes", "8,8,8", "--threads", "1", "--repeats", "1",
                 "--libraries", "none"]) == 0
    assert "bf16_gemm" in asked and ran == [["scalar"]]
    assert "| 8,8,8 | " in capsys.readouterr().out


def test_top_of_kernel_group(monkeypatch):
    """The highest level whose FP32 kernel is still the given level's: where the bf16 convolution runs in the conv
    benchmark (a CPU with AMX: avx512's FP32 kernels, the AMX-BF16 tiles)."""
    import contextlib
    levels = ["scalar", "avx2", "avxvnni", "avx512", "avx512vnni", "avx512bf16", "amx"]
    kernel = {"scalar": "s", "avx2": "a", "avxvnni": "a", "avx512": "z", "avx512vnni": "z", "avx512bf16": "z",
              "amx": "z"}
    cap = ["amx"]

    @contextlib.contextmanager
    def max_isa(level):
        old, cap[0] = cap[0], level
        yield
        cap[0] = old
    monkeypatch.setattr(nnkern, "supported_isas", lambda: levels)
    monkeypatch.setattr(nnkern, "max_isa", max_isa)
    monkeypatch.setattr(nnkern, "cpu_info", lambda: {"kernels": {"f32_gemm": kernel[cap[0]]}})
    assert [harness.top_of_kernel_group(level) for level in levels] == [
        "scalar", "avxvnni", "avxvnni", "amx", "amx", "amx", "amx"]
    assert harness.top_of_kernel_group("neon") == "neon"  # not this CPU's: as given
