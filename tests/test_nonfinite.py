"""NaN and Inf through the FP32 convolutions, as torch and numpy give them: a NaN or Inf at any position of the
input or the weights, every algorithm on every kernel this CPU runs (ISAs it lacks skip, naming the ISA), every
fused activation. Zero padding is a real zero: 0 x Inf is NaN at the border for every algorithm (the ones that
skip padding taps then do not apply to such a layer). The result's NaN / +Inf / -Inf pattern must equal the
float64 reference's exactly; the finite values lie within the usual bound."""
from __future__ import annotations

import numpy as np
import pytest

import nnkern
from nnkern import _C

from conftest import at_kernel_level, conv_kernel_paths

ALGORITHMS = _C.algorithms("conv2d")
ACTIVATIONS = [None, "relu", "relu6", "sigmoid", "silu"]
# A layer each algorithm applies to: (OC, IC, groups); 3x3 windows, padding 1 (so border taps are padding).
LAYER = {"depthwise": (8, 8, 8), "dot": (3, 16, 1)}
H, W = 4, 5


def activation64(y, act):
    with np.errstate(invalid="ignore", over="ignore"):
        if act == "relu":
            return np.where(np.isnan(y), y, np.maximum(y, 0.0))
        if act == "relu6":
            return np.where(np.isnan(y), y, np.minimum(np.maximum(y, 0.0), 6.0))
        if act in ("sigmoid", "silu"):
            s = 1.0 / (1.0 + np.exp(-y))
            return s if act == "sigmoid" else y * s
    return y


def ref_conv(x, w, b, groups, act):
    """float64, padding 1 of real zeros, products summed elementwise (no BLAS, whose zero skipping would lose NaN)."""
    N, _, _, IC = x.shape
    OC, KH, KW, ICg = w.shape
    xp = np.zeros((N, H + 2, W + 2, IC))
    xp[:, 1:H + 1, 1:W + 1] = x
    out = np.zeros((N, H, W, OC))
    OCg = OC // groups
    with np.errstate(invalid="ignore", over="ignore"):
        for o in range(OC):
            g = o // OCg
            for kh in range(KH):
                for kw in range(KW):
                    prod = xp[:, kh:kh + H, kw:kw + W, g * ICg:(g + 1) * ICg] * w[o, kh, kw].astype(np.float64)
                    out[..., o] += prod.sum(-1)
        out += b.astype(np.float64)
    return activation64(out, act)


def cases(rng, OC, IC, groups):
    """(description, x, w): finite data with one NaN / +Inf / -Inf at each input pixel (channel 0) or each weight
    tap (output channel 0, input channel 0)."""
    x0 = rng.uniform(-1, 1, (1, H, W, IC)).astype(np.float32)
    w0 = rng.uniform(-1, 1, (OC, 3, 3, IC // groups)).astype(np.float32)
    yield "finite", x0, w0
    for v in (np.nan, np.inf, -np.inf):
        for i in range(H):
            for j in range(W):
                x = x0.copy()
                x[0, i, j, 0] = v
                yield f"x[{i},{j}]={v}", x, w0
        for kh in range(3):
            for kw in range(3):
                w = w0.copy()
                w[0, kh, kw, 0] = v
                yield f"w[{kh},{kw}]={v}", x0, w


def same_pattern(got, want, tol=1e-4):
    for test in (np.isnan, np.isposinf, np.isneginf):
        if not np.array_equal(test(got), test(want)):
            return False
    fin = np.isfinite(want)
    return np.allclose(got[fin], want[fin], rtol=tol, atol=tol)


@pytest.fixture(params=conv_kernel_paths(ALGORITHMS))
def path(request):
    yield from at_kernel_level(request.param)


def test_nan_and_inf_everywhere(path, rng):
    algorithm, kernel = path
    OC, IC, groups = LAYER.get(algorithm, (9, 5, 1))
    b = rng.uniform(-1, 1, OC).astype(np.float32)
    ran = skipped = 0
    for desc, x, w in cases(rng, OC, IC, groups):
        for act in ACTIVATIONS:
            layer = nnkern.Conv2d(w, b, padding=1, groups=groups, activation=act)
            applies = algorithm in layer._packed.applicable_algorithms(1, H, W)
            if not applies:  # a padded layer with a non-finite weight loses the padding-skipping algorithms, and any
                # layer with one loses Winograd's (whose transformed weights would mix Inf into NaN)
                assert algorithm in ("direct", "mgemm", "dot", "depthwise", "winograd", "winograd_2x2") and \
                    not np.isfinite(w).all(), desc
                with pytest.raises(ValueError, match="does not apply"):
                    layer._run(x, None, algorithm, kernel)
                skipped += 1
                continue
            got = layer._run(x, None, algorithm, kernel)
            want = ref_conv(x, w, b, groups, act)
            tol = 5e-2 if algorithm == "bf16" else 1e-4  # bf16: the operands' rounding (test_bf16.py has the bound)
            assert same_pattern(got, want, tol), f"{algorithm} {kernel} {act} {desc}"
            auto = layer(x)
            assert same_pattern(auto, want), f"auto {act} {desc}"
            ran += 1
    assert ran > skipped


def test_auto_gives_the_same_nan_on_every_cap(rng):
    """The issue's case: a NaN input under ReLU through the depthwise layer auto picks, on every ISA cap."""
    x = rng.random((1, 20, 20, 16)).astype(np.float32)
    x[0, 5, 5] = np.nan
    w = rng.random((16, 3, 3, 1)).astype(np.float32)
    for isa in nnkern.supported_isas():
        with nnkern.max_isa(isa):
            for act in ("relu", "relu6"):
                y = nnkern.conv2d(x, w, padding=1, groups=16, activation=act)
                assert np.isnan(y[0, 5, 5]).all() and np.isnan(y[0, 4:7, 4:7]).all(), (isa, act)


def test_inf_weight_next_to_padding_is_nan_for_every_algorithm():
    """0 x Inf at the border: every algorithm that applies gives NaN there, as zero padding and torch do."""
    w = np.ones((4, 3, 3, 4), np.float32)
    w[:, 0, 0, :] = np.inf
    x = np.ones((1, 5, 5, 4), np.float32)
    layer = nnkern.Conv2d(w, padding=1)
    applicable = layer._packed.applicable_algorithms(1, 5, 5)
    assert not {"direct", "mgemm", "dot"} & set(applicable) and applicable  # the padding-skipping ones step aside
    for alg in applicable:
        y = layer._run(x, None, alg, "")
        assert np.isnan(y[0, 0, :]).all() and np.isnan(y[0, :, 0]).all() and np.isposinf(y[0, 1:, 1:]).all(), alg
    # without padding nothing is skipped: every algorithm applies
    assert set(nnkern.Conv2d(w)._packed.applicable_algorithms(1, 5, 5)) >= {"direct", "im2col", "indirect"}


def test_inverted_residual_propagates_nan(rng):
    e = nnkern.Conv2d(rng.standard_normal((16, 1, 1, 8)).astype(np.float32), activation="relu6")
    d = nnkern.Conv2d(rng.standard_normal((16, 3, 3, 1)).astype(np.float32), groups=16, padding=1, activation="relu6")
    p = nnkern.Conv2d(rng.standard_normal((8, 1, 1, 16)).astype(np.float32))
    x = rng.standard_normal((1, 9, 9, 8)).astype(np.float32)
    x[0, 4, 4, 3] = np.nan
    for isa in nnkern.supported_isas():
        with nnkern.max_isa(isa):
            y = nnkern.InvertedResidual(e, d, p, residual=True)(x)
            assert np.array_equal(np.isnan(y), np.isnan(p(d(e(x))) + x)) and np.isnan(y[0, 3:6, 3:6]).all(), isa
