"""FP32 convolution benchmarks: nnkern.Conv2d per algorithm of its table (``nnkern._C.algorithms("conv2d")``,
each on the layers it applies to) and auto, and each comparison library (torch conv2d channels_last and NCHW,
onnxruntime Conv on NCHW) on the ResNet-50, MobileNet-v2, YoloV3-Tiny and low-OC layers of
``nnkern.bench.fconv`` at batch 1, 1 and 2 threads. Whole networks: ``python -m nnkern bench --op networks``.

    python -m pytest bench/test_conv.py -k "rn50.s2.3x3"          # one layer, every column
    python -m pytest bench/test_conv.py -k "indirect and t1"       # one algorithm, 1 thread
    python -m nnkern bench --op conv                               # the layers as a table

extra_info: gflops, anchor_<library> (GFLOP/s of each library in this run, interleaved), best_anchor(_rate),
ratio, pct_peak (of the f32 peak of nnkern's highest ISA x threads), workspace_bytes (nnkern), max_diff (max
|output - nnkern auto's| / max |nnkern auto's|: the libraries' and each nnkern algorithm's). Nothing here asserts a
timing.
"""
import pytest

from nnkern.bench import conv, fconv, harness

from .conftest import run_benchmark

KIND = fconv.CONV
ISA = KIND.default_isa()


def _others(other_libraries, layer, threads):
    """The libraries' results of a (layer, threads), measured once per run by conv.measure_layer."""
    return other_libraries.get(("conv", layer.name, threads),
                               lambda: conv.measure_layer(layer, threads, isa=ISA, kind=KIND))


def pytest_generate_tests(metafunc):
    if "layer" in metafunc.fixturenames:
        layers = fconv.QUICK if metafunc.config.getoption("--bench-quick") else fconv.SUITE
        metafunc.parametrize("layer", layers, ids=[l.name for l in layers])


@pytest.mark.parametrize("algorithm", fconv.algorithms())
def test_conv_nnkern(benchmark, layer, threads, algorithm, other_libraries):
    d = fconv.make_data(layer)
    ctx = harness.nnkern_context(ISA, threads)
    with ctx():
        if algorithm not in fconv.algorithms(layer):
            pytest.skip(f"{algorithm} does not apply to {layer.name}")
        fn = fconv.nnkern_call(layer, d, algorithm)
        ref = fn if algorithm == "auto" else fconv.nnkern_call(layer, d, "auto")
    run_benchmark(benchmark, fn, work=conv.conv_ops(layer), unit="GFLOP/s", context=ctx,
                  peak_ops=harness.peak("f32", ISA) * threads, anchors=_others(other_libraries, layer, threads),
                  op="conv", layer=layer.name, shape=list(layer.shape), library="nnkern", isa=ISA,
                  algorithm=algorithm, ran=fn.ran, threads=threads, workspace_bytes=fn.workspace,
                  max_diff=fconv.rel_diff(fn.out, ref.out))


@pytest.mark.parametrize("library", list(fconv.LIBRARIES))
def test_conv_anchor(benchmark, layer, threads, library, other_libraries):
    d = fconv.make_data(layer)
    fns, notes = conv.library_calls(layer, d, threads, [library], KIND)
    if library not in fns:
        pytest.skip(f"{library}: {notes.get(library, 'not available')}")
    with harness.nnkern_context(ISA, 1)():
        ref = fconv.nnkern_call(layer, d, "auto")
    diff = fconv.check(layer, {"auto": ref}, fns)[library]
    run_benchmark(benchmark, fns[library], work=conv.conv_ops(layer), unit="GFLOP/s",
                  anchors=_others(other_libraries, layer, threads), op="conv", layer=layer.name,
                  shape=list(layer.shape), library=library, isa="", threads=threads, max_diff=diff)
    conv._anchors.set_threads(1)
