"""The fused-stage and ESPCN benchmarks (nnkern.bench.fused, nnkern.bench.espcn): the ESPCN network's nnkern
output equals its layer-by-layer numpy reference (int64 convolutions, the layers' requantization, numpy's pixel
shuffle) bit for bit, fused and unfused; the libraries run the same network; the cases and tables; the CLI."""
import subprocess

import numpy as np
import pytest

from helpers import describe_process, python_command, torch_int8_conv_is_exact
from nnkern.bench import espcn, fused
from test_qconv2d import ref_conv, unfused


def numpy_pixel_shuffle(y, r):
    """NHWC (N, H, W, C*r*r) -> (N, H*r, W*r, C), torch's channel order c*r*r + i*r + j."""
    N, H, W, Crr = y.shape
    C = Crr // (r * r)
    return y.reshape(N, H, W, C, r, r).transpose(0, 1, 4, 2, 5, 3).reshape(N, H * r, W * r, C)


def test_espcn_matches_its_layer_by_layer_reference():
    net = espcn.make_net(size=13, r=3)
    y = net.x
    for q in net.layers:
        layer = q.nnkern()
        y = unfused(layer, ref_conv(y, layer.weight, layer.input_zero_point, layer.stride, layer.padding,
                                    layer.dilation, layer.groups))
    want = numpy_pixel_shuffle(y, net.r)
    assert want.shape == net.out_shape == (1, 39, 39, 3)
    assert np.array_equal(espcn.nnkern_call(net, fused=True).out, want)
    assert np.array_equal(espcn.nnkern_call(net, fused=False).out, want)
    assert 0 < int((want > 0).sum()) and want.std() > 5  # calibrated: the output uses the uint8 range


def test_espcn_libraries_run_the_same_network():
    """torch / onnxruntime (where installed) within a few steps of nnkern (one rounding per layer may differ); torch
    only where its int8 convolution is exact (not on CPUs without VNNI, where its vpmaddubsw saturates)."""
    net = espcn.make_net(size=11, r=3)
    ref = espcn.nnkern_call(net)
    libs, notes = espcn.library_calls(net, 1)
    for name, f in libs.items():
        if name == "torch" and not torch_int8_conv_is_exact():
            continue
        f()
        worst, share = espcn.agreement(f.out(), ref.out)
        assert worst <= 3 and share < 0.05, (name, worst, share)
    assert net.ops() == sum(2 * 11 * 11 * q.w.size for q in net.layers)


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


def test_cli_espcn_and_fused():
    for op, shapes in (("espcn", ["16"]), ("fused", ["rn50"])):
        proc = subprocess.run(python_command("-m", "nnkern", "bench", "--op", op, "--threads", "1", "--repeats", "1",
                                             "--libraries", "none", "--shapes", *shapes),
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, describe_process(proc)
        assert ("nnkern/fused" if op == "espcn" else "conv + avg_pool2d") in proc.stdout
