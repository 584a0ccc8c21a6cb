"""INT8 convolution benchmarks: nnkern.QConv2d per algorithm (im2col, indirect, depthwise, direct, low_ofm where
they apply, auto) and each comparison library (torch quantized conv2d, x86 engine, channels_last; onnxruntime
QLinearConv, NCHW) on the ResNet-50, MobileNet-v2 and low-output-channel (RGB output) layers of
``nnkern.bench.conv`` at batch 1, 1 and 2 threads.

    python -m pytest bench/test_qconv.py -k "rn50.s2.3x3"          # one layer, every column
    python -m pytest bench/test_qconv.py -k "lowoc"                 # the low_ofm layers (1x1, 3x3 to 3 channels)
    python -m pytest bench/test_qconv.py -k "indirect and t1"       # one algorithm, 1 thread
    python -m nnkern bench --op qconv                               # the same as a table
    python -m nnkern bench --op qnet                                # quantized ResNet-18 / MobileNet-v2 end to end

extra_info: gops, anchor_<library> (GOP/s of each library in this run, interleaved), best_anchor(_rate),
ratio, pct_peak (of the int8 peak of nnkern's highest ISA x threads), workspace_bytes (nnkern),
max_diff (the library's max |output - nnkern's| in uint8 steps). Nothing here asserts a timing.
"""
import pytest

from nnkern.bench import conv, harness

from .conftest import run_benchmark

ISA = harness.bench_isas("u8s8_gemm")[-1]


def _others(other_libraries, layer, threads):
    """The libraries' results of a (layer, threads), measured once per run by conv.measure_layer."""
    return other_libraries.get(("qconv", layer.name, threads), lambda: conv.measure_layer(layer, threads, isa=ISA))


def pytest_generate_tests(metafunc):
    if "layer" in metafunc.fixturenames:
        layers = conv.QUICK if metafunc.config.getoption("--bench-quick") else conv.SUITE
        metafunc.parametrize("layer", layers, ids=[l.name for l in layers])


@pytest.mark.parametrize("algorithm", conv.algorithms())
def test_qconv_nnkern(benchmark, layer, threads, algorithm, other_libraries):
    if algorithm not in conv.algorithms(layer):
        pytest.skip(f"{algorithm} does not apply to {layer.name}")
    d = conv.make_data(layer)
    ctx = harness.nnkern_context(ISA, threads)
    with ctx():
        fn = conv.nnkern_call(layer, d, algorithm)
    run_benchmark(benchmark, fn, work=conv.conv_ops(layer), unit="GOP/s", context=ctx,
                  peak_ops=harness.peak("int8", ISA) * threads, anchors=_others(other_libraries, layer, threads),
                  op="qconv", layer=layer.name, shape=list(layer.shape), library="nnkern", isa=ISA,
                  algorithm=algorithm, ran=fn.ran, threads=threads, workspace_bytes=fn.workspace)


@pytest.mark.parametrize("library", list(conv.LIBRARIES))
def test_qconv_anchor(benchmark, layer, threads, library, other_libraries):
    d = conv.make_data(layer)
    fns, notes = conv.library_calls(layer, d, threads, [library])
    if library not in fns:
        pytest.skip(f"{library}: {notes.get(library, 'not available')}")
    with harness.nnkern_context(ISA, 1)():
        ref = conv.nnkern_call(layer, d, "auto")
    diff = conv.check(layer, {"auto": ref}, fns)[library]
    run_benchmark(benchmark, fns[library], work=conv.conv_ops(layer), unit="GOP/s",
                  anchors=_others(other_libraries, layer, threads), op="qconv", layer=layer.name,
                  shape=list(layer.shape), library=library, isa="", threads=threads, max_diff=diff)
    conv._anchors.set_threads(1)
