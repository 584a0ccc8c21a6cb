"""``python -m nnkern bench --op conv`` (nnkern.bench.fconv): the layer suites, that the algorithms come from the
conv2d table, that every library computes the same convolution as a float64 reference, and that the tables and the CLI have their columns (tiny layers, one repetition, no
timing asserted). The tests that run torch or onnxruntime skip, naming it, where it is missing."""
import dataclasses
import json

import numpy as np
import pytest

import nnkern
from nnkern.bench import conv, fconv, harness

KIND = fconv.CONV
TINY = conv.Layer("tiny", 1, 9, 9, 6, 4, 3, 3, 2, 1, 2)  # grouped, strided, padded: out 5x5
TINY_DW = conv.Layer("tiny.dw", 1, 8, 8, 5, 5, 3, 3, 1, 1, 5)


def require_libraries():
    for name in ("torch", "onnx", "onnxruntime"):
        pytest.importorskip(name, reason=f"{name} is not installed: the comparison columns need it")


def ref_conv(x, w, b, stride, pad, groups):
    """float64 convolution of NHWC x with (OC, KH, KW, IC / groups) weights."""
    N, H, W, _ = x.shape
    OC, KH, KW, cg = w.shape
    OH, OW = (H + 2 * pad - KH) // stride + 1, (W + 2 * pad - KW) // stride + 1
    xp = np.pad(x.astype(np.float64), ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    out = np.zeros((N, OH, OW, OC)) + b.astype(np.float64)
    og = OC // groups
    for kh in range(KH):
        for kw in range(KW):
            patch = xp[:, kh:kh + stride * (OH - 1) + 1:stride, kw:kw + stride * (OW - 1) + 1:stride]
            for g in range(groups):
                out[..., g * og:(g + 1) * og] += (patch[..., g * cg:(g + 1) * cg]
                                                  @ w[g * og:(g + 1) * og, kh, kw].astype(np.float64).T)
    return out


def test_suites_are_the_networks_layers():
    names = [l.name for l in fconv.SUITE]
    assert len(names) == len(set(names))
    assert all(l.N == 1 and l.pad == l.KH // 2 and l.KH == l.KW and l.H == l.W for l in fconv.SUITE)
    assert conv.RESNET50[0] in fconv.SUITE and set(conv.MOBILENET_V2) <= set(fconv.SUITE)
    yolo3 = [(l.H, l.IC, l.OC) for l in fconv.YOLOV3_TINY if l.KH == 3]
    assert yolo3[:7] == [(416, 3, 16), (208, 16, 32), (104, 32, 64), (52, 64, 128), (26, 128, 256), (13, 256, 512),
                         (13, 512, 1024)]
    yolo1 = {(l.H, l.IC, l.OC) for l in fconv.YOLOV3_TINY if l.KH == 1}
    assert yolo1 == {(13, 1024, 256), (13, 512, 255), (13, 256, 128), (26, 256, 255)}
    low = fconv.LOW_OC[0]
    assert (low.H, low.IC, low.OC, low.KH, low.stride, low.out_hw) == (128, 64, 3, 3, 1, (128, 128))
    stems = conv.select(["stem."], kind=KIND)
    assert [(l.IC, l.OC, l.KH, l.stride, l.out_hw) for l in stems] == [
        (3, 32, 3, 2, (112, 112)), (3, 24, 3, 2, (112, 112)), (3, 16, 3, 2, (112, 112))]
    assert conv.select(["yolo.1x1"], kind=KIND) == [l for l in fconv.YOLOV3_TINY if l.KH == 1]
    assert conv.select(None, quick=True, kind=KIND) == fconv.QUICK and len(fconv.QUICK) == 4
    assert conv.select(["dw"], kind=KIND) == conv.select(["dw"])  # the same MobileNet-v2 depthwise layers
    with pytest.raises(SystemExit, match="no conv layer matches"):
        conv.select(["nothing"], kind=KIND)


def test_algorithms_come_from_the_table(monkeypatch):
    table = list(nnkern._C.algorithms("conv2d"))
    assert fconv.algorithms() == table + ["auto"]
    assert set(fconv.algorithms(TINY)) <= set(table + ["auto"]) and "auto" in fconv.algorithms(TINY)
    # an entry added to the table is listed; one that does not apply (here: unknown to the C++ side) is not
    monkeypatch.setattr(nnkern._C, "algorithms", lambda op: table + ["new"] if op == "conv2d" else [])
    assert fconv.algorithms() == table + ["new", "auto"]
    assert "new" not in fconv.algorithms(TINY)


@pytest.mark.parametrize("layer", [TINY, TINY_DW], ids=lambda l: l.name)
def test_nnkern_algorithms_compute_the_layer(layer):
    d = fconv.make_data(layer)
    ref = ref_conv(d.x, d.w, d.b, layer.stride, layer.pad, layer.groups)
    nn = {a: fconv.nnkern_call(layer, d, a) for a in fconv.algorithms(layer)}
    assert nn["auto"].ran in nn and all(isinstance(f.workspace, int) for f in nn.values())
    for a, f in nn.items():
        tol = fconv.BF16_TOLERANCE if a == "bf16" else 1e-5  # the operands' rounding (tests/test_bf16.py: the bound)
        assert f.out.shape == ref.shape and fconv.rel_diff(f.out, ref) < tol, a
    diffs = fconv.check(layer, nn, {})
    assert set(diffs) == {f"nnkern/{a}" for a in nn} and diffs["nnkern/auto"] == 0


def test_check_refuses_a_wrong_algorithm():
    d = fconv.make_data(TINY)
    good = fconv.nnkern_call(TINY, d, "auto")

    def bad():
        pass
    bad.out = good.out + 1.0
    with pytest.raises(AssertionError, match="differ from auto"):
        fconv.check(TINY, {"auto": good, "bad": bad}, {})


@pytest.mark.parametrize("layer", [TINY, TINY_DW], ids=lambda l: l.name)
def test_every_library_computes_the_same_layer(layer):
    require_libraries()
    d = fconv.make_data(layer)
    nn = {a: fconv.nnkern_call(layer, d, a) for a in fconv.algorithms(layer)}
    libs, notes = conv.library_calls(layer, d, 1, kind=KIND)
    assert set(libs) == set(fconv.LIBRARIES), notes
    diffs = fconv.check(layer, nn, libs)
    assert all(v < (fconv.BF16_TOLERANCE if k == "nnkern/bf16" else 1e-5) for k, v in diffs.items()), diffs
    ref = ref_conv(d.x, d.w, d.b, layer.stride, layer.pad, layer.groups)
    assert all(fconv.rel_diff(f.out(), ref) < 1e-5 for f in libs.values())


def _measured(libraries):
    isa = KIND.default_isa()
    return conv.measure_layer(TINY, 1, isa=isa, repeats=1, min_time=0.001, libraries=libraries, kind=KIND)


def _header(table):
    return next(l for l in table.splitlines() if l.startswith("| layer |"))


def test_table_columns_nnkern_alone():
    rs = _measured([])
    algs = fconv.algorithms(TINY)
    assert {r.label for r in rs} == {f"nnkern/{a}" for a in algs}
    has_peak = harness.peak("f32", KIND.default_isa()) > 0  # no peak loop on NEON: no % of peak there
    assert all(r.op == "conv" and r.unit == "GFLOP/s" and r.rate > 0 and (r.pct_peak is not None) == has_peak
               for r in rs)
    table = conv.markdown_table(rs, 1, kind=KIND)
    assert table.startswith("**conv GFLOP/s, 1 thread(s)**") and "f32 peak" in table
    head = _header(table)
    for a in algs:
        assert f"| nnkern {a} |" in head
        assert a == "auto" or f"| ws {a} |" in head
    assert "| MFLOP |" in head and "max diff nnkern algs" in head
    cols = [c.strip()[len("nnkern "):] for c in head.split("|")
            if c.strip().startswith("nnkern ") and c.strip()[len("nnkern "):] in fconv.algorithms()]
    assert cols == [a for a in fconv.algorithms() if a in algs]  # the table's order, auto last
    row = next(l for l in table.splitlines() if l.startswith("| tiny |"))
    assert "9x9 6->4 3x3/2 p1 g2" in row and f"-> {next(r.ran for r in rs if r.algorithm == 'auto')})" in row
    # auto's rule checked against the fastest explicit algorithm: a column and a summary line
    assert "| auto / fastest nnkern |" in head
    auto = next(r for r in rs if r.algorithm == "auto")
    fastest = max((r for r in rs if r.algorithm != "auto"), key=lambda r: r.rate)
    assert f"{auto.rate / fastest.rate:.2f}x ({fastest.algorithm})" in row
    summary = next(l for l in table.splitlines() if l.startswith("auto within 10%"))
    assert summary.startswith("auto within 10% of nnkern's fastest algorithm on ") and "of 1 layers" in summary
    assert ("not on: tiny" in summary) == (auto.rate < 0.9 * fastest.rate)


def test_table_columns_with_the_libraries():
    require_libraries()
    rs = _measured(None)
    assert {r.library for r in rs} == {"nnkern", *fconv.LIBRARIES}
    assert all(r.max_diff is not None and r.max_diff < (fconv.BF16_TOLERANCE if r.algorithm == "bf16" else 1e-5)
               for r in rs)
    auto = next(r for r in rs if r.algorithm == "auto")
    best = max((r for r in rs if r.library != "nnkern"), key=lambda r: r.rate)
    assert auto.ratio == pytest.approx(auto.rate / best.rate)
    head = _header(conv.markdown_table(rs, 1, kind=KIND))
    for lib in fconv.LIBRARIES:
        assert f"| {lib} |" in head and f"| max diff {lib} |" in head
    assert "| best other | nnkern auto / best other |" in head


def test_cli_quick_table(tmp_path, capsys):
    """python -m nnkern's main in this process (tests/test_onnx_session.py runs the command itself)."""
    require_libraries()
    from nnkern.__main__ import main
    out = tmp_path / "conv.json"
    assert main(["bench", "--op", "conv", "--quick", "--shapes", "lowoc", "dw.14", "--threads", "1",
                 "--repeats", "1", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "**conv GFLOP/s, 1 thread(s)**" in text and "measured f32 peak per core" in text
    rows = [l for l in text.splitlines() if l.startswith("| lowoc.") or l.startswith("| mbv2.dw.14x384")]
    assert len(rows) == 2, text
    assert "14x14 384->384 3x3/1 p1 dw" in rows[0] and "128x128 64->3 3x3/1 p1" in rows[1]
    assert "torch_cl" in text and "torch_nchw" in text and "channels_last" in text and "one-node Conv" in text
    recs = json.loads(out.read_text())
    assert {r["library"] for r in recs} == {"nnkern", *fconv.LIBRARIES}
    ran = [l for l in fconv.SUITE if l.name in {r["layer"] for r in recs}]
    algs = set().union(*(fconv.algorithms(l) for l in ran))
    assert {r["algorithm"] for r in recs if r["library"] == "nnkern"} == algs
    assert all(f"nnkern {a}" in text for a in algs)
    assert all(r["rate"] > 0 and r["op"] == "conv" for r in recs)
    assert all(r["max_diff"] < (fconv.BF16_TOLERANCE if r["algorithm"] == "bf16" else 1e-5) for r in recs)


def test_bf16_column_packs_checks_and_runs_at_the_top_of_its_group(monkeypatch):
    """The bf16 convolution is packed, checked and timed under the cap of harness.top_of_kernel_group (on an AMX
    CPU: amx, where the tiles are; made "scalar" here so this CPU shows it), the other algorithms under the
    benchmark's level."""
    caps = {}
    real_call = fconv.CONV.nnkern_call

    def recording_call(layer, d, algorithm):
        caps.setdefault(algorithm, set()).add(nnkern.get_max_isa())
        f = real_call(layer, d, algorithm)

        def call():
            caps[algorithm].add(nnkern.get_max_isa())
            f()
        call.__dict__.update(f.__dict__)
        return call
    kind = dataclasses.replace(fconv.CONV, nnkern_call=recording_call)
    monkeypatch.setattr(harness, "top_of_kernel_group", lambda isa, key="f32_gemm": "scalar")
    layer = next(l for l in fconv.SUITE if l.name == "lowoc.3x3.128x64.oc3")
    level = harness.bench_isas()[-1]
    res = conv.measure_layer(layer, 1, isa=level, repeats=1, libraries=[], min_time=0.0, kind=kind)
    assert caps["bf16"] == {"scalar"}
    assert all(c == {level} for alg, c in caps.items() if alg != "bf16") and len(caps) > 2
    assert {r.algorithm for r in res} == set(caps)
