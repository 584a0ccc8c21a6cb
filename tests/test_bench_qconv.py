"""``python -m nnkern bench --op qconv``: the layer suite's data, the operation count, the check that every
library computes the same convolution, and the CLI's table (quick, one repetition, in this process)."""

import numpy as np

from nnkern.bench import conv


def test_suite_is_the_networks_layers():
    names = [l.name for l in conv.SUITE]
    assert len(names) == len(set(names))
    assert all(l.N == 1 and l.pad == l.KH // 2 and l.KH == l.KW and l.H == l.W for l in conv.SUITE)
    stem = conv.SUITE[0]
    assert (stem.H, stem.IC, stem.OC, stem.KH, stem.stride, stem.pad) == (224, 3, 64, 7, 2, 3)
    assert stem.out_hw == (112, 112)
    s2 = next(l for l in conv.RESNET50 if l.name == "rn50.s3.3x3/2")
    assert (s2.H, s2.IC, s2.OC, s2.stride, s2.out_hw) == (56, 128, 128, 2, (28, 28))
    dws = [l for l in conv.MOBILENET_V2 if l.groups > 1]
    assert [(l.H, l.IC, l.stride) for l in dws] == [(112, 32, 1), (112, 96, 2), (14, 384, 1)]
    assert all(l.groups == l.IC == l.OC for l in dws)
    assert len(conv.QUICK) == 3 and {l.groups > 1 for l in conv.QUICK} == {True, False}
    assert conv.select(["dw"]) == dws and conv.select(None, quick=True) == conv.QUICK
    low = conv.select(["lowoc"])  # the low_ofm layers: 1x1 and 3x3 64 -> 3 at 128x128, 3x3 at 256x256
    assert [(l.H, l.IC, l.OC, l.KH) for l in low] == [(128, 64, 3, 1), (128, 64, 3, 3), (256, 64, 3, 3)]
    assert all("low_ofm" in conv.algorithms(l) for l in low)
    assert not any("low_ofm" in conv.algorithms(l) for l in conv.RESNET50 + conv.MOBILENET_V2)


def test_ops_count():
    # 2 * N * OH * OW * OC * KH * KW * IC / groups
    stem = conv.SUITE[0]
    assert conv.conv_ops(stem) == 2 * 112 * 112 * 64 * 7 * 7 * 3
    dw = conv.Layer("dw", 2, 9, 9, 8, 16, 3, 3, 2, 1, 8)  # out 5x5, channel multiplier 2
    assert dw.out_hw == (5, 5) and conv.conv_ops(dw) == 2 * 2 * 5 * 5 * 16 * 3 * 3 * 1
    assert dw.describe() == "9x9 8->16 3x3/2 p1 dw N2"
    assert conv.Layer("g", 1, 9, 9, 8, 8, 1, 1, 1, 0, 2).describe() == "9x9 8->8 1x1/1 p0 g2"


def test_every_library_computes_the_same_layer():
    """nnkern's algorithms agree bit for bit and with a numpy reference; torch / onnxruntime within one step."""
    layer = conv.Layer("small", 1, 9, 9, 6, 4, 3, 3, 2, 1, 2)
    d = conv.make_data(layer)
    nn = {a: conv.nnkern_call(layer, d, a) for a in conv.algorithms(layer)}
    assert "depthwise" not in nn  # a grouped, not depthwise, layer
    libs, _ = conv.library_calls(layer, d, 1)
    diffs = conv.check(layer, nn, libs)
    assert all(v <= 1 for v in diffs.values()), diffs
    # numpy reference of the requantized output (float64; nnkern rounds in float32: within one step)
    OH, OW = layer.out_hw
    xp = np.pad(d.x.astype(np.int64) - d.x_zero_point, ((0, 0), (1, 1), (1, 1), (0, 0)))
    ref = np.empty((1, OH, OW, layer.OC))
    cg, og = layer.IC // layer.groups, layer.OC // layer.groups
    for o in range(layer.OC):
        g = o // og
        for i in range(OH):
            for j in range(OW):
                win = xp[0, 2 * i:2 * i + 3, 2 * j:2 * j + 3, g * cg:(g + 1) * cg]
                acc = int((win * d.w[o].astype(np.int64)).sum())
                ref[0, i, j, o] = (acc + d.bias_q[o]) * d.x_scale * d.w_scale[o] / d.y_scale + d.y_zero_point
    ref = np.clip(np.rint(ref), 0, 255)
    assert np.abs(nn["auto"].out - ref).max() <= 1


def test_cli_quick_table(tmp_path, capsys):
    """python -m nnkern's main in this process (tests/test_onnx_session.py runs the command itself)."""
    from nnkern.__main__ import main
    out = tmp_path / "qconv.json"
    assert main(["bench", "--op", "qconv", "--quick", "--shapes", "s2.expand", "dw.14", "--threads", "1",
                 "--repeats", "1", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "**qconv GOP/s, 1 thread(s)**" in text
    rows = [l for l in text.splitlines() if l.startswith("| rn50.s2.expand") or l.startswith("| mbv2.dw.14x384")]
    assert len(rows) == 2, text
    assert "56x56 64->256 1x1/1 p0" in rows[0] and "14x14 384->384 3x3/1 p1 dw" in rows[1]
    assert "nnkern im2col" in text and "nnkern indirect" in text and "ws im2col" in text
    assert "onnxruntime (QLinearConv) on NCHW" in text and "channels_last" in text
    import json
    recs = json.loads(out.read_text())
    ran = {r["layer"] for r in recs}
    assert {r["algorithm"] for r in recs if r["library"] == "nnkern"} == set().union(
        *(conv.algorithms(l) for l in conv.SUITE if l.name in ran))
    assert all(r["rate"] > 0 for r in recs)
    assert all(r["max_diff"] <= 1 for r in recs if r["library"] != "nnkern")


def test_charts_and_scaling_name_the_layers():
    layer = conv.QUICK[0]
    rs = [conv.ConvResult("qconv", layer.shape, lib, "avx2" if lib == "nnkern" else "", t, 1e-3, 1e-3, rate * t,
                          "GOP/s", layer=layer.name, algorithm=alg)
          for t in (1, 2) for lib, alg, rate in [("nnkern", "im2col", 50.0), ("nnkern", "indirect", 60.0),
                                                 ("torch", "", 40.0)]]
    charts = conv.charts(rs, [1, 2])
    assert [c.categories for c in charts] == [[layer.name]] * 2
    assert charts[1].series == {"nnkern/im2col": [100.0], "nnkern/indirect": [120.0], "torch": [80.0]}
    table = conv.scaling_table(rs, 2, 1)
    assert "| layer |" in table and f"| {layer.name} | 2.00x | 2.00x | 2.00x |" in table
