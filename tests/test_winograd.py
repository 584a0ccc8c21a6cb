"""Winograd FP32 convolutions ("winograd" F(4x4, 3x3), "winograd_2x2" F(2x2, 3x3)) and the float32 precision setting.

Every transform kernel of the f32_winograd family this CPU runs (ISAs it lacks skip, naming the ISA), through both
algorithms, against a float64 convolution under Winograd's bound (nnkern.Conv2d's docstring):
  |y - exact| <= (2 K + 24) eps |A^T| [ sum_c (|G| |g_c| |G^T|) (.) (|B^T| |d_c| |B|) ] |A| + 2 eps |bias|,
computed per output from the matrices in float64 (nnkern.bench.selfcheck.winograd_reference, which the main
job's self-check runs too). Tails: channels past every vector and GEMM tile,
images whose last tiles hang over the edge, asymmetric padding, groups, batches. Also: threads bit for bit, the
fused activations, where it applies, NaN / Inf / huge inputs recomputed directly, and what "auto" picks at each
precision."""
from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

import nnkern
from nnkern import _C

from nnkern.bench.selfcheck import winograd_reference as winograd_ref

from conftest import at_kernel_level, conv_kernel_paths
from helpers import (EPS, QUICK, check_within_bound, describe_process, rand, run_concurrently, run_script_isolated,
                     same_for_thread_counts)

ALGORITHMS = {"winograd": 4, "winograd_2x2": 2}  # name -> output tile size m
KERNELS = _C.kernel_list("f32_winograd")

@pytest.fixture(params=conv_kernel_paths(ALGORITHMS))
def path(request):
    """(algorithm, transform kernel) with the ISA cap at the kernel's level (the GEMM kernel follows the cap)."""
    yield from at_kernel_level(request.param)


def make(rng, N, H, W, IC, OC, padding, groups=1, bias=True, **kw):
    x = rand(rng, N, H, W, IC)
    w = rand(rng, OC, 3, 3, IC // groups)
    b = rand(rng, OC) if bias else None
    return x, w, b, nnkern.Conv2d(w, b, padding=padding, groups=groups, **kw)


def check(layer, x, w, b, padding, groups, algorithm, kernel, what):
    y = layer._run(x, None, algorithm, kernel)
    check_within_bound(y, *winograd_ref(x, w, b, padding, groups, ALGORITHMS[algorithm]), what)


def test_bound_reference_is_exact_and_tight_enough(rng):
    """The reference itself: its exact part is the convolution (the indirect algorithm's, within 1e-5), and its bound
    stays far below the values (F(2x2): 1e-3, F(4x4): 1e-2 relative here): a wrong coefficient in a transform
    would be caught."""
    x, w, b, layer = make(rng, 2, 9, 7, 6, 5, (1, 2, 0, 1))
    y = layer._run(x, None, "indirect", "")
    for m in (2, 4):
        want, bound = winograd_ref(x, w, b, (1, 2, 0, 1), 1, m)
        assert np.abs(y - want).max() < 1e-5
        assert bound.max() < {2: 1e-3, 4: 1e-2}[m] * np.abs(want).max()


def test_channel_tails(path, rng):
    """Every channel count of a vector and a GEMM tile and one past (1 .. 2 L + 1 in, 1 .. 33 out)."""
    algorithm, kernel = path
    lanes = next(k["mr"] for k in KERNELS if k["name"] == kernel)
    ins = range(1, 2 * lanes + 2) if not QUICK else sorted({1, 2, lanes - 1 or 1, lanes, lanes + 1, 2 * lanes + 1})
    outs = range(1, 34) if not QUICK else (1, 5, 8, 15, 16, 17, 24, 33)
    for i, IC in enumerate(ins):
        for OC in outs[i % 3::3] if QUICK else outs:
            x, w, b, layer = make(rng, 1, 6 + i % 3, 7, IC, OC, (1, 1, 1, 1), bias=bool((IC + OC) % 2))
            check(layer, x, w, b, (1, 1, 1, 1), 1, algorithm, kernel, f"{algorithm} {kernel} IC={IC} OC={OC}")


def test_image_edges_padding_groups_batches(path, rng):
    """Images of 1 .. 13 pixels a side (last tiles over the edge), padding 0 .. 2 on each side, groups, batch."""
    algorithm, kernel = path
    for i in range(10 if QUICK else 40):
        pad = tuple(int(v) for v in rng.integers(0, 3, 4))
        H = int(rng.integers(max(1, 3 - pad[0] - pad[1]), 14))
        W = int(rng.integers(max(1, 3 - pad[2] - pad[3]), 14))
        groups = int(rng.choice([1, 1, 2, 3]))
        IC, OC = groups * int(rng.integers(1, 12)), groups * int(rng.integers(1, 12))
        N = int(rng.choice([1, 2, 3]))
        x, w, b, layer = make(rng, N, H, W, IC, OC, pad, groups, bias=bool(i % 2))
        check(layer, x, w, b, pad, groups, algorithm, kernel, f"{algorithm} {kernel} {N}x{H}x{W} {pad} g{groups}")


def test_deep_and_wide_layer(path, rng):
    """K = 9 x 300 and blocks of tiles split over threads: a network-sized layer under the bound."""
    algorithm, kernel = path
    x, w, b, layer = make(rng, 2, 17, 15, 300, 70, (1, 1, 1, 1))
    check(layer, x, w, b, (1, 1, 1, 1), 1, algorithm, kernel, f"{algorithm} {kernel} deep")


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_weights_past_a_third_of_l3(rng, algorithm):
    """420 -> 420 channels: transformed weights of 11 MiB (F(2x2)) and 25 MiB (F(4x4)), past a third of a 32 MiB
    L3, take the blocks of many tiles that read them less often: under the bound, the same bits on any thread
    count, alone and in a batch."""
    x, w, b, layer = make(rng, 2, 7, 9, 420, 420, (1, 1, 1, 1))
    whole = same_for_thread_counts(lambda: layer._run(x, None, algorithm, ""))
    check_within_bound(whole, *winograd_ref(x, w, b, (1, 1, 1, 1), 1, ALGORITHMS[algorithm]), algorithm)
    np.testing.assert_array_equal(layer._run(np.ascontiguousarray(x[1:]), None, algorithm, ""), whole[1:])


def test_no_access_past_guard_page(path):
    """Input, weights and output ending at an unmapped page (tests/conv_guard_check.py, isolated)."""
    algorithm, kernel = path
    proc = run_script_isolated(os.path.join(os.path.dirname(os.path.abspath(__file__)), "conv_guard_check.py"),
                               algorithm, kernel)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("OK"), describe_process(proc)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_threads_and_batch_bit_identical(rng, algorithm):
    """Any thread count, and an image alone or inside a batch (other block sizes): the same bits."""
    x, w, b, layer = make(rng, 3, 23, 19, 24, 40, (1, 1, 1, 1), activation="silu")
    whole = same_for_thread_counts(lambda: layer._run(x, None, algorithm, ""))
    np.testing.assert_array_equal(layer._run(np.ascontiguousarray(x[1:2]), None, algorithm, ""), whole[1:2])
    # a small image: fewer blocks than threads, so the output channels split (70 = 4 panels of 16 and 6 left)
    x, w, b, layer = make(rng, 1, 8, 7, 20, 70, (1, 1, 1, 1), activation="relu")
    same_for_thread_counts(lambda: layer._run(x, None, algorithm, ""), (1, 2, 3, 4, 7))
    nnkern.set_num_threads(1)
    y = nnkern.Conv2d(w, b, padding=1)._run(x, None, algorithm, "")
    check_within_bound(y, *winograd_ref(x, w, b, (1, 1, 1, 1), 1, ALGORITHMS[algorithm]), "split")


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("activation", ["relu", "relu6", "sigmoid", "silu", "hardswish", "leaky_relu"])
@pytest.mark.parametrize("residual", [False, True])
def test_fused_activation_equals_unfused(rng, algorithm, activation, residual):
    """As for the other algorithms (tests/test_conv2d.py): the separate ops' bits, after the residual's add."""
    x, w, b, plain = make(rng, 2, 9, 13, 5, 37, (1, 1, 1, 1))
    x *= 4
    fused = nnkern.Conv2d(w, b, padding=1, activation=activation, algorithm=algorithm)
    t = plain._run(x, None, algorithm, "")
    r = rand(rng, *t.shape) * 4 if residual else None
    if residual:
        t = t + r
    f32 = np.float32
    want = {"relu": lambda: np.maximum(t, 0), "relu6": lambda: np.minimum(np.maximum(t, 0), 6),
            "sigmoid": lambda: nnkern.sigmoid(t), "silu": lambda: (t * nnkern.sigmoid(t)).astype(f32),
            "hardswish": lambda: t * np.clip(f32(1) / f32(6) * t + f32(0.5), f32(0), f32(1)),
            "leaky_relu": lambda: np.where(t < 0, t * f32(0.01), t)}[activation]()
    np.testing.assert_array_equal(fused(x, residual=r), want)


def test_applies_to_3x3_stride_1_undilated_finite_weights_only(rng):
    x = rand(rng, 1, 9, 9, 4)
    for kw in (dict(weight=rand(rng, 8, 3, 3, 4), stride=2), dict(weight=rand(rng, 8, 3, 3, 4), dilation=2),
               dict(weight=rand(rng, 8, 5, 5, 4)), dict(weight=rand(rng, 8, 1, 3, 4)),
               dict(weight=np.full((8, 3, 3, 4), np.inf, np.float32))):
        layer = nnkern.Conv2d(kw.pop("weight"), padding=1, **kw)
        for algorithm in ALGORITHMS:
            assert algorithm not in layer._packed.applicable_algorithms(1, 9, 9)
            with pytest.raises(ValueError, match="does not apply"):
                layer._run(x, None, algorithm, "")
    depthwise = nnkern.Conv2d(rand(rng, 4, 3, 3, 1), padding=1, groups=4)  # applies (K = 9), never auto's pick
    check(depthwise, x, depthwise.weight, None, (1, 1, 1, 1), 4, "winograd", "", "depthwise")


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_nonfinite_and_huge_inputs_are_computed_directly(rng, algorithm):
    """An Inf, NaN or 3e38 input gives the direct algorithm's NaN / Inf pattern (not NaN over its whole tile), and
    the tiles around it keep their values; also next to wide padding (outputs whose window is all padding: the bias
    alone) and with groups (the direct sum per group)."""
    cases = [(make(rng, 1, 12, 12, 8, 16, (1, 1, 1, 1)), (5, 6, 3)),
             (make(rng, 2, 5, 6, 6, 9, (3, 2, 4, 0), groups=3), (0, 0, 4))]
    for v, ((x, w, b, layer), (i, j, ch)) in [(v, c) for v in (np.inf, -np.inf, np.nan, 3e38) for c in cases]:
        xb = x.copy()
        xb[-1, i, j, ch] = v
        got = layer._run(xb, None, algorithm, "")
        want = layer._run(xb, None, "indirect", "")
        for test in (np.isnan, np.isposinf, np.isneginf):
            np.testing.assert_array_equal(test(got), test(want), err_msg=f"{algorithm} {v}")
        fin = np.isfinite(want)
        np.testing.assert_allclose(got[fin], want[fin], rtol=1e-4, atol=1e-4 * max(1.0, np.abs(want[fin]).max()))


def test_auto_picks_winograd_only_below_highest(rng):
    layer = nnkern.Conv2d(rand(rng, 64, 3, 3, 64), padding=1)
    big, small = (1, 28, 28, 64), (1, 6, 6, 64)
    assert nnkern.get_float32_precision() == "highest"
    assert not layer.algorithm_for(big).startswith("winograd")
    with nnkern.float32_precision("medium"):  # bf16 products come first there (tests/test_bf16.py)
        assert layer.algorithm_for(big) == "bf16"
    for level in ("high",):
        with nnkern.float32_precision(level):
            assert nnkern.get_float32_precision() == level
            assert layer.algorithm_for(big) == "winograd"
            assert layer.algorithm_for(small) == "winograd_2x2"  # F(4x4)'s 8x8 of tiles: as many products
            assert layer.algorithm_for((8, 7, 7, 64)) == "winograd"  # 4 tiles of 36 against 16 of 16
            # 512 channels: F(4x4)'s 38 MB of weights for 4 or 16 tiles are a stream from L3 or memory, F(2x2)'s
            # less than half; 256 channels (9.4 MB) too where that is more than 8x L2; 128 channels (2.4 MB) not
            deep = nnkern.Conv2d(np.zeros((512, 3, 3, 512), np.float32), padding=1)
            l2 = nnkern.cpu_info()["caches"]["l2"] or 512 << 10  # the rule's default where the CPU says none
            streamed = 36 * 512 * 512 * 4 > 8 * l2  # every CPU seen: L2 of 2 MiB or less
            for hw in (7, 14):
                assert deep.algorithm_for((1, hw, hw, 512)) == ("winograd_2x2" if streamed else "winograd")
            assert deep.algorithm_for((8, 7, 7, 512)) == "winograd"  # 32 tiles
            mid = nnkern.Conv2d(np.zeros((256, 3, 3, 256), np.float32), padding=1)
            assert mid.algorithm_for((1, 14, 14, 256)) == ("winograd_2x2" if 36 * 256 * 256 * 4 > 8 * l2 else
                                                           "winograd")
            if 36 * 128 * 128 * 4 <= 8 * l2:
                assert nnkern.Conv2d(np.zeros((128, 3, 3, 128), np.float32), padding=1).algorithm_for(
                    (1, 14, 14, 128)) == "winograd"
            assert not layer.algorithm_for((1, 3, 3, 64)).startswith("winograd")  # mostly edge
            # few channels, stride 2, 1x1: never
            assert not nnkern.Conv2d(rand(rng, 8, 3, 3, 8), padding=1).algorithm_for((1, 28, 28, 8)).startswith("w")
            assert not nnkern.Conv2d(rand(rng, 64, 3, 3, 64), padding=1, stride=2).algorithm_for(big).startswith("w")
    assert nnkern.get_float32_precision() == "highest"
    # a layer's own precision wins over the process-wide one
    own = nnkern.Conv2d(layer.weight, padding=1, precision="high")
    assert own.algorithm_for(big) == "winograd" and own.precision == "high"
    with nnkern.float32_precision("high"):
        assert nnkern.Conv2d(layer.weight, padding=1, precision="highest").algorithm_for(big) != "winograd"
    # the call runs what algorithm_for says, and equals the explicit algorithm bit for bit
    x = rand(rng, *big)
    np.testing.assert_array_equal(own(x), layer._run(x, None, "winograd", ""))
    np.testing.assert_array_equal(nnkern.conv2d(x, layer.weight, padding=1, precision="high"), own(x))
    assert own.workspace_bytes(big) == own.workspace_bytes(big, "winograd") > 0


def test_precision_setting_is_checked_and_restored(rng):
    for bad in ("low", "HIGH", "", 1, None):
        with pytest.raises((ValueError, TypeError)):
            nnkern.set_float32_precision(bad)
    with pytest.raises(ValueError, match="precision"):
        nnkern.Conv2d(rand(rng, 4, 3, 3, 4), precision="fast")
    with pytest.raises(RuntimeError):
        with nnkern.float32_precision("high"):
            raise RuntimeError("inside")
    assert nnkern.get_float32_precision() == "highest"
    assert nnkern.PRECISIONS == ("highest", "high", "medium")


def test_pickle_and_repr_keep_the_precision(rng):
    layer = nnkern.Conv2d(rand(rng, 16, 3, 3, 16), rand(rng, 16), padding=1, precision="high")
    again = pickle.loads(pickle.dumps(layer))
    assert again.precision == "high" and "precision='high'" in repr(again)
    x = rand(rng, 1, 16, 16, 16)
    np.testing.assert_array_equal(again(x), layer(x))
    assert nnkern.Conv2d(layer.weight).precision is None and "precision" not in repr(nnkern.Conv2d(layer.weight))


@pytest.mark.parametrize("algorithm, limit", [("winograd", 0.25), ("winograd_2x2", 0.03)])
def test_typical_error_against_the_direct_bound(rng, algorithm, limit):
    """On uniform data the error measured against the direct algorithms' scale K eps sum |x w| (which they meet
    at about 0.002-0.02): F(4x4) about 5-12x theirs, F(2x2) at or below (its sums are 9x shorter); the limits
    have 3x margin, so a transform that lost precision (weights transformed in float32, a reordered sum) fails."""
    for H, C in ((14, 16), (10, 96)):
        x = rng.uniform(-1, 1, (1, H, H, C)).astype(np.float32)
        w = rng.uniform(-1, 1, (C, 3, 3, C)).astype(np.float32)
        y = nnkern.Conv2d(w, padding=1)._run(x, None, algorithm, "")
        xp = np.zeros((1, H + 2, H + 2, C))
        xp[:, 1:H + 1, 1:H + 1] = x
        ref, mag = np.zeros((1, H, H, C)), np.zeros((1, H, H, C))
        for kh in range(3):
            for kw in range(3):
                p, wk = xp[:, kh:kh + H, kw:kw + H], w[:, kh, kw].T.astype(np.float64)
                ref += p @ wk
                mag += np.abs(p) @ np.abs(wk)
        ratio = (np.abs(y - ref) / (9 * C * EPS * mag)).max()
        assert ratio < limit, (algorithm, H, C, ratio)


def test_onnx_session_precision(rng):
    """InferenceSession(precision="high") runs the 3x3 convolutions through Winograd (its plan says so), within the
    float bound's scale of "highest"; None takes the process-wide setting at load; bad values are refused."""
    onnx = pytest.importorskip("onnx")
    from onnx import helper, numpy_helper
    import nnkern.onnx
    w1, w2 = rand(rng, 32, 16, 3, 3), rand(rng, 32, 32, 3, 3)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["h"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Conv", ["r", "w2"], ["y"], pads=[1, 1, 1, 1])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 16, 20, 20])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()
    x = {"x": rand(rng, 1, 16, 20, 20)}
    highest = nnkern.onnx.InferenceSession(model)
    high = nnkern.onnx.InferenceSession(model, precision="high")
    assert "winograd" not in highest.describe() and high.describe().count("winograd") == 2
    a, b = highest.run(None, x)[0], high.run(None, x)[0]
    assert 0 < np.abs(a - b).max() < 1e-4 * np.abs(a).max()
    with nnkern.float32_precision("high"):
        assert nnkern.onnx.InferenceSession(model).describe().count("winograd") == 2
    again = pickle.loads(pickle.dumps(high))
    np.testing.assert_array_equal(again.run(None, x)[0], b)
    with pytest.raises(ValueError, match="precision"):
        nnkern.onnx.InferenceSession(model, precision="bf16")


def test_linear_and_matmul_take_the_precision(rng):
    """Linear and matmul accept precision= as Conv2d does (checked, kept through pickling); neither has a Winograd
    algorithm, so "highest" and "high" give the same bits ("medium": tests/test_bf16.py)."""
    w, x = rand(rng, 24, 40), rand(rng, 5, 40)
    want = nnkern.Linear(w)(x)
    for level in ("highest", "high"):
        layer = nnkern.Linear(w, precision=level)
        assert layer.precision == level
        np.testing.assert_array_equal(layer(x), want)
        np.testing.assert_array_equal(pickle.loads(pickle.dumps(layer))(x), want)
        np.testing.assert_array_equal(nnkern.matmul(x, w.T, precision=level), nnkern.matmul(x, w.T))
    for bad in ("fast", 3):
        with pytest.raises((ValueError, TypeError)):
            nnkern.Linear(w, precision=bad)
        with pytest.raises((ValueError, TypeError)):
            nnkern.matmul(x, w.T, precision=bad)


def test_concurrent_first_calls_share_one_layer(rng):
    """Python threads racing to pack a fresh layer's transformed weights (both variants) get the same results as
    one thread."""
    w, b = rand(rng, 40, 3, 3, 24), rand(rng, 40)
    xs = [rand(rng, 1 + t % 2, 9 + t, 11, 24) for t in range(6)]
    ref = nnkern.Conv2d(w, b, padding=1, activation="relu")
    want = [[ref._run(x, None, a, "") for a in ALGORITHMS] for x in xs]
    fresh = nnkern.Conv2d(w, b, padding=1, activation="relu")
    got = [None] * len(xs)

    def work(t):
        got[t] = [fresh._run(xs[t], None, a, "") for a in ALGORITHMS]

    run_concurrently(work, len(xs))
    for g, wt in zip(got, want):
        for a, bb in zip(g, wt):
            np.testing.assert_array_equal(a, bb)


def test_main_job_self_check_covers_winograd(rng, monkeypatch):
    """`python -m nnkern`'s self-check runs both Winograd algorithms under their bound, and fails on a wrong result."""
    from nnkern.bench import selfcheck
    ok, detail = selfcheck.check_winograd(rng)
    assert ok, detail
    real = nnkern.Conv2d.__call__
    monkeypatch.setattr(nnkern.Conv2d, "__call__", lambda self, x, out=None, **kw: real(self, x) * np.float32(1.05))
    assert not selfcheck.check_winograd(rng)[0]
