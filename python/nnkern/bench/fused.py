"""``python -m nnkern bench --op fused``: QConv2d's fused output stages (seeds I14, I16) against the unfused
sequences, on the layers they end: a 1x1 convolution before the global average pooling of a ResNet-50 (7x7,
512 -> 2048) and an Inception (8x8, 1536 -> 2048) tail, and the last 3x3 convolution of an ESPCN / SRGAN-style
super-resolution network before its pixel shuffle (64x64 64 -> 48, r = 4; 96x96 32 -> 27, r = 3).

Per case, at batch 1, interleaved (harness.interleaved), with the data of ``nnkern.bench.conv`` (uint8
activations in [0, 127], int8 weights per channel, uint8 output):
  pooling   nnkern fused (pool="global_avg": float32 means; and pool_dtype=uint8) | QConv2d then numpy's
            mean (dequantized, float32) | QConv2d then nnkern.avg_pool2d (uint8) | torch's quantized conv2d
            then adaptive_avg_pool2d on the quantized tensor (x86 engine, channels_last);
  shuffle   nnkern fused (pixel_shuffle=r) | QConv2d then nnkern.pixel_shuffle (NHWC) | torch's quantized
            conv2d then pixel_shuffle on the quantized tensor.
"speed-up" is each sequence's time over the fused call's (> 1: fused is faster). The outputs are compared
once: max |difference| in uint8 steps (float32 means: in real units).
"""
from __future__ import annotations

import dataclasses
import time
import warnings
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import anchors as _anchors
from . import conv as _conv
from . import harness
from . import ops as _ops


@dataclasses.dataclass(frozen=True)
class Case:
    layer: _conv.Layer
    stage: str  # "pool" or "shuffle"
    r: int = 1  # the shuffle's factor

    @property
    def name(self) -> str:
        return self.layer.name

    def describe(self) -> str:
        what = "+ global avg pool" if self.stage == "pool" else f"+ pixel shuffle r={self.r}"
        return f"{self.layer.describe()} {what}"


def _L(name, H, IC, OC, k, stage, r=1):
    return Case(_conv.Layer(name, 1, H, H, IC, OC, k, k, 1, k // 2, 1), stage, r)


CASES: List[Case] = [
    _L("rn50.tail.1x1+gap", 7, 512, 2048, 1, "pool"),
    _L("inception.tail.1x1+gap", 8, 1536, 2048, 1, "pool"),
    _L("espcn.last.3x3+ps4", 64, 64, 48, 3, "shuffle", 4),
    _L("espcn.last.3x3+ps3", 96, 32, 27, 3, "shuffle", 3),
]
QUICK = [CASES[0], CASES[2]]


def select(names: Optional[Sequence[str]], quick: bool = False) -> List[Case]:
    """The cases whose name contains one of ``names`` (all, or QUICK, when none given)."""
    if not names:
        return QUICK if quick else CASES
    out = [c for c in CASES if any(n in c.name for n in names)]
    if not out:
        raise SystemExit(f"--op fused: no case matches {list(names)}; cases: {[c.name for c in CASES]}")
    return out


# --- the calls --------------------------------------------------------------------------------------------

def nnkern_calls(case: Case, d: _conv.ConvData) -> Dict[str, Callable]:
    """{variant: call} of nnkern: the fused layer(s) and the unfused sequences; ``call.out`` the result."""
    import nnkern
    L = case.layer
    conv = _conv.nnkern_layer(L, d, "auto")
    y = np.empty(conv.output_shape(d.x.shape), np.uint8)
    x = d.x
    kw = dict(weight_scale=d.w_scale, stride=L.stride, padding=L.pad, groups=L.groups, input_scale=d.x_scale,
              input_zero_point=d.x_zero_point, output_scale=d.y_scale, output_zero_point=d.y_zero_point,
              output_dtype=np.uint8)
    calls: Dict[str, Callable] = {}

    def make(name, fn, out):
        fn.out = out
        calls[name] = fn

    if case.stage == "pool":
        f32 = nnkern.QConv2d(d.w, d.bias, pool="global_avg", **kw)
        u8 = nnkern.QConv2d(d.w, d.bias, pool="global_avg", pool_dtype=np.uint8, **kw)
        p32, p8, m8 = np.empty((1, L.OC), np.float32), np.empty((1, L.OC), np.uint8), np.empty((1, 1, 1, L.OC), np.uint8)
        zp, s = float(d.y_zero_point), np.float32(d.y_scale)
        OH, OW = y.shape[1:3]
        make("fused", lambda: f32(x, p32), p32)
        make("fused u8", lambda: u8(x, p8), p8)

        def conv_numpy():
            conv(x, y)
            np.multiply(y.mean(axis=(1, 2), dtype=np.float32) - np.float32(zp), s, out=p_np)
        p_np = np.empty((1, L.OC), np.float32)
        make("conv + numpy mean", conv_numpy, p_np)

        def conv_avgpool():
            conv(x, y)
            nnkern.avg_pool2d(y, (OH, OW), out=m8)
        make("conv + avg_pool2d", conv_avgpool, m8.reshape(1, L.OC))
    else:
        fused = nnkern.QConv2d(d.w, d.bias, pixel_shuffle=case.r, **kw)
        z = np.empty(fused.result_shape(x.shape), np.uint8)
        z2 = np.empty_like(z)
        make("fused", lambda: fused(x, z), z)

        def conv_shuffle():
            conv(x, y)
            nnkern.pixel_shuffle(y, case.r, layout="NHWC", out=z2)
        make("conv + pixel_shuffle", conv_shuffle, z2)
    for fn in calls.values():
        fn()
    return calls


def torch_call(case: Case, d: _conv.ConvData, threads: int) -> Callable:
    """torch's quantized conv2d (channels_last) then adaptive_avg_pool2d / pixel_shuffle on the quantized
    result; ``call.out()`` the uint8 result (N, OC) or NHWC."""
    import torch
    conv = _conv.torch_call(case.layer, d, threads)
    F = torch.nn.functional
    last = {}
    if case.stage == "pool":
        def call():
            conv()
            last["y"] = F.adaptive_avg_pool2d(conv.last_q(), 1)
        call.out = lambda: last["y"].int_repr().reshape(1, -1).numpy()
    else:
        def call():
            conv()
            last["y"] = F.pixel_shuffle(conv.last_q(), case.r)
        call.out = lambda: last["y"].int_repr().permute(0, 2, 3, 1).numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        call()
    return call


# --- measuring -----------------------------------------------------------------------------------------------

@dataclasses.dataclass
class FusedResult:
    case: str
    describe: str
    stage: str
    variant: str
    threads: int
    seconds: float
    best_seconds: float
    speedup: Optional[float] = None  # this sequence's time over the fused call's (same dtype of result)
    max_diff: Optional[float] = None

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def _diff(a, b) -> float:
    return float(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)).max())


def measure(case: Case, threads: int, *, isa: str, repeats: int = 7, libraries: Optional[Sequence[str]] = None,
            notes: Optional[Dict[str, str]] = None, min_time: float = 0.02) -> List[FusedResult]:
    d = _conv.make_data(case.layer)
    ctx = harness.nnkern_context(isa, threads)
    with ctx():
        nn = nnkern_calls(case, d)
    libs, why = _conv.try_libraries({"torch": lambda: torch_call(case, d, threads)}, case.name, libraries)
    if notes is not None:
        notes.update({k: v for k, v in why.items()})
    # The agreement: each sequence against the fused call of its result type.
    ref = {np.dtype(np.float32): nn["fused"].out, np.dtype(np.uint8): nn.get("fused u8", nn["fused"]).out}
    diffs = {}
    for name, fn in {**nn, **libs}.items():
        out = fn.out() if callable(fn.out) else fn.out
        diffs[name] = _diff(out, ref[np.dtype(out.dtype)])
    timings = harness.interleaved({**nn, **libs}, repeats=repeats, min_time=min_time,
                                  contexts={k: ctx for k in nn}, pause_after=_ops._pauses(threads))
    _anchors.set_threads(1)
    fused = {np.dtype(np.float32): timings["fused"].median,
             np.dtype(np.uint8): timings.get("fused u8", timings["fused"]).median}
    out = []
    for name, t in timings.items():
        fn = {**nn, **libs}[name]
        o = fn.out() if callable(fn.out) else fn.out
        base = fused[np.dtype(o.dtype)]
        out.append(FusedResult(case.name, case.describe(), case.stage, name, threads, t.median, t.best,
                               None if name.startswith("fused") else t.median / base, diffs[name]))
    return out


def run(cases: Sequence[Case], threads_list: Sequence[int], *, isa: str, repeats: int = 7,
        libraries: Optional[Sequence[str]] = None, progress: Optional[Callable[[str], None]] = print
        ) -> Tuple[List[FusedResult], Dict[str, str]]:
    results, notes = [], {}
    for t in threads_list:
        for case in cases:
            t0 = time.perf_counter()
            res = measure(case, t, isa=isa, repeats=repeats, libraries=libraries, notes=notes)
            results += res
            if progress:
                progress(f"[fused t={t}] {case.name}: " + "  ".join(f"{r.variant} {r.seconds * 1e6:.0f} us"
                                                                    for r in res)
                         + f"  ({time.perf_counter() - t0:.1f} s)")
    return results, notes


def markdown_table(results: Sequence[FusedResult], threads: int, notes: Optional[Dict[str, str]] = None,
                   isa: str = "") -> str:
    rs = [r for r in results if r.threads == threads]
    if not rs:
        return ""
    lines = [f"**fused: QConv2d's fused output stages vs the unfused sequences, batch 1, {threads} thread(s)**"
             + (f", nnkern on {isa}" if isa else ""), "",
             "| case | layer | variant | us (median) | us (best) | sequence / fused | max diff |",
             "|---|---|---|---|---|---|---|"]
    for r in rs:
        lines.append(f"| {r.case} | {r.describe} | {r.variant} | {r.seconds * 1e6:.0f} | {r.best_seconds * 1e6:.0f} | "
                     f"{'-' if r.speedup is None else f'{r.speedup:.2f}x'} | "
                     f"{'-' if r.max_diff is None else f'{r.max_diff:.3g}'} |")
    lines += ["", "sequence / fused: the sequence's median time over the fused call's of the same result type "
              "(float32 means, or uint8); > 1: fused is faster. max diff: against the fused result, uint8 steps "
              "(float32: real units). The host is shared: only ratios within one run mean anything."]
    for name, msg in (notes or {}).items():
        lines.append(f"- {name} skipped: {msg}")
    return "\n".join(lines)
