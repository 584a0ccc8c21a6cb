"""``python -m nnkern bench --op conv``: nnkern.Conv2d (FP32, NHWC) per algorithm of its table
(``nnkern._C.algorithms("conv2d")``, whatever it holds, each on the layers it applies to) and "auto",
against torch's conv2d on channels_last and on the default NCHW layout and onnxruntime's Conv (NCHW, one
graph per layer, intra_op_num_threads = the thread count), on the layers of ResNet-50, MobileNet-v2,
YoloV3-Tiny and VGG-16 and a low-OC layer (3x3 128x128 64->3), batch 1 (``--batch 1,8``: each batch). The Winograd
algorithms (float32 precision "high") get a column each against nnkern's best algorithm at the default precision,
which the "nnkern auto / best other" ratio and auto's check keep to.

Every library computes the same layer on the same data: x ~ N(0, 1), weights ~ N(0, 1 / K) (K = KH * KW
* IC / groups, so outputs are O(1)), bias ~ N(0, 0.01), no activation. Once per layer each library's output
and each nnkern algorithm's is compared with nnkern auto's: max |difference| / max |nnkern auto| (float32
sums in different orders: ~1e-7 to 1e-6). An nnkern algorithm beyond ``NNKERN_TOLERANCE`` raises (a wrong
convolution gives ~1).

The measuring, the table and the charts are the INT8 benchmark's (``nnkern.bench.conv``, ``--op qconv``),
through :data:`CONV` (a ``conv.Kind``). Whole networks: ``nnkern.bench.networks``.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Dict, List, Optional

import numpy as np

from . import anchors as _anchors
from . import conv as _conv
from .conv import MOBILENET_V2, RESNET50, Layer, _L

#: YoloV3-Tiny (darknet yolov3-tiny.cfg, 416x416 input): the backbone's 3x3 convolutions, the second head's
#: 3x3 (26x26 384->256, on the upsampled 1x1 output concatenated with the 26x26 stage), and the 1x1s.
YOLOV3_TINY: List[Layer] = [
    _L("yolo.3x3.416x3", 416, 3, 16, 3),
    _L("yolo.3x3.208x16", 208, 16, 32, 3),
    _L("yolo.3x3.104x32", 104, 32, 64, 3),
    _L("yolo.3x3.52x64", 52, 64, 128, 3),
    _L("yolo.3x3.26x128", 26, 128, 256, 3),
    _L("yolo.3x3.13x256", 13, 256, 512, 3),
    _L("yolo.3x3.13x512", 13, 512, 1024, 3),
    _L("yolo.3x3.26x384", 26, 384, 256, 3),
    _L("yolo.1x1.13x1024", 13, 1024, 256, 1),
    _L("yolo.1x1.13x512", 13, 512, 255, 1),
    _L("yolo.1x1.13x256", 13, 256, 128, 1),
    _L("yolo.1x1.26x256", 26, 256, 255, 1),
]

#: VGG-16 (224x224 input): a 3x3 stride-1 layer per stage from the second on (the 224x224 ones are the same
#: shape at 4x the pixels).
VGG16: List[Layer] = [
    _L("vgg.3x3.112x128", 112, 128, 128, 3),
    _L("vgg.3x3.56x256", 56, 256, 256, 3),
    _L("vgg.3x3.28x512", 28, 512, 512, 3),
    _L("vgg.3x3.14x512", 14, 512, 512, 3),
]

#: Few output channels (a prediction / image head): the GEMM's N is 3.
LOW_OC: List[Layer] = [_L("lowoc.3x3.128x64.oc3", 128, 64, 3, 3)]

#: The 3-channel stems of the small networks (224x224, 3x3 stride 2): MobileNet-v2's 32, ShuffleNet-v2's 24 and
#: MobileNet-v3's 16 output channels (ResNet-50's 7x7 and YoloV3-Tiny's 416x416 stems are in their lists).
STEMS: List[Layer] = [
    _L("stem.3x3/2.224x3.oc32", 224, 3, 32, 3, stride=2),
    _L("stem.3x3/2.224x3.oc24", 224, 3, 24, 3, stride=2),
    _L("stem.3x3/2.224x3.oc16", 224, 3, 16, 3, stride=2),
]

SUITE: List[Layer] = RESNET50 + MOBILENET_V2 + YOLOV3_TINY + VGG16 + LOW_OC + STEMS
#: --quick: a 3x3, a 1x1, a depthwise and the low-OC layer.
QUICK: List[Layer] = [l for l in SUITE if l.name in ("rn50.s2.3x3", "rn50.s2.expand", "mbv2.dw.14x384",
                                                      "lowoc.3x3.128x64.oc3")]

#: An nnkern algorithm whose output differs from auto's by more than this (relative to max |output|) fails
#: the check: float32 reorderings stay below ~1e-5 on these layers.
NNKERN_TOLERANCE = 1e-3
#: The "bf16" algorithm's (float32 precision "medium": both operands rounded to bf16, 2^-8 relative each).
BF16_TOLERANCE = 2e-2


# --- the data every library gets ---------------------------------------------------------------------

@dataclasses.dataclass
class F32Data:
    x: np.ndarray  # float32 NHWC
    w: np.ndarray  # float32 (OC, KH, KW, IC / groups)
    b: np.ndarray  # float32 (OC,)


def make_data(layer: Layer) -> F32Data:
    rng = np.random.default_rng(_anchors.SEED)
    x = rng.standard_normal((layer.N, layer.H, layer.W, layer.IC), dtype=np.float32)
    K = layer.KH * layer.KW * layer.IC // layer.groups
    w = rng.standard_normal((layer.OC, layer.KH, layer.KW, layer.IC // layer.groups), dtype=np.float32)
    w *= np.float32(1 / np.sqrt(K))
    b = (0.1 * rng.standard_normal(layer.OC)).astype(np.float32)
    return F32Data(x, w, b)


# --- nnkern --------------------------------------------------------------------------------------------

def algorithms(layer: Optional[Layer] = None) -> List[str]:
    """conv2d's algorithm table (``nnkern._C.algorithms("conv2d")``) and "auto"; for a layer, those that apply
    to it at the current ISA cap (Conv2d.workspace_bytes refuses the others: ValueError)."""
    from .. import _C
    names = list(_C.algorithms("conv2d")) + ["auto"]
    if layer is None:
        return names
    import nnkern
    probe = nnkern.Conv2d(np.zeros((layer.OC, layer.KH, layer.KW, layer.IC // layer.groups), np.float32),
                          stride=layer.stride, padding=layer.pad, groups=layer.groups)
    shape = (layer.N, layer.H, layer.W, layer.IC)
    out = []
    for a in names:
        try:
            probe.workspace_bytes(shape, a)
        except ValueError:
            continue
        out.append(a)
    return out


def nnkern_layer(layer: Layer, d: F32Data, algorithm: str, activation: Optional[str] = None):
    import nnkern
    return nnkern.Conv2d(d.w, d.b, stride=layer.stride, padding=layer.pad, groups=layer.groups,
                         activation=activation, algorithm=algorithm)


def nnkern_call(layer: Layer, d: F32Data, algorithm: str) -> Callable:
    """conv(x, out=y), weights packed at construction; ``call.out`` is y, ``call.ran`` the algorithm that runs
    (auto's choice: Conv2d.algorithm_for), ``call.workspace`` Conv2d.workspace_bytes of the call."""
    conv = nnkern_layer(layer, d, algorithm)
    y = np.empty(conv.output_shape(d.x.shape), np.float32)
    x = d.x

    def call():
        conv(x, out=y)
    call()
    call.out = y
    call.ran = conv.algorithm_for(x.shape) if algorithm == "auto" else algorithm
    call.workspace = int(conv.workspace_bytes(x.shape, algorithm))
    return call


# --- torch (channels_last and NCHW) -----------------------------------------------------------------------

def torch_tensors(x_nhwc: np.ndarray, w_ohwi: np.ndarray, channels_last: bool):
    """torch (x, w) in NCHW / OIHW order, stored channels_last (NHWC / OHWI memory) or contiguous (NCHW)."""
    import torch
    x = torch.from_numpy(x_nhwc).permute(0, 3, 1, 2)  # channels_last strides, sharing x_nhwc's memory
    w = torch.from_numpy(w_ohwi).permute(0, 3, 1, 2)
    if channels_last:
        return x.contiguous(memory_format=torch.channels_last), w.contiguous(memory_format=torch.channels_last)
    return x.contiguous(), w.contiguous()


def torch_call(layer: Layer, d: F32Data, threads: int, channels_last: bool = True) -> Callable:
    """torch.nn.functional.conv2d on a channels_last (or NCHW) input; ``call.out()`` the NHWC result."""
    import torch
    _anchors.set_threads(threads)
    x, w = torch_tensors(d.x, d.w, channels_last)
    b = torch.from_numpy(d.b)
    conv2d = torch.nn.functional.conv2d
    s, p, g = layer.stride, layer.pad, layer.groups
    last = {}

    def call():
        last["y"] = conv2d(x, w, b, s, p, 1, g)
    call.out = lambda: last["y"].permute(0, 2, 3, 1).numpy()
    return call


# --- onnxruntime Conv (NCHW) ------------------------------------------------------------------------------

def onnx_conv(name: str, inp: str, out: str, w_ohwi: np.ndarray, b: Optional[np.ndarray], stride: int,
              pad: int, groups: int = 1):
    """(Conv node, its initializers): weights (OC, KH, KW, IC / groups) as ONNX's OIHW, ``name``_w / _b."""
    from onnx import helper, numpy_helper
    OC, KH, KW, _ = w_ohwi.shape
    inits = [numpy_helper.from_array(np.ascontiguousarray(w_ohwi.transpose(0, 3, 1, 2)), f"{name}_w")]
    if b is not None:
        inits.append(numpy_helper.from_array(b, f"{name}_b"))
    node = helper.make_node("Conv", [inp] + [i.name for i in inits], [out], name=name, kernel_shape=[KH, KW],
                            strides=[stride] * 2, pads=[pad] * 4, group=groups)
    return node, inits


def ort_call(layer: Layer, d: F32Data, threads: int) -> Callable:
    """A one-node Conv model (weights and bias as initializers) run with I/O binding on preallocated NCHW input
    and output; ``call.out()`` the NHWC result."""
    OH, OW = layer.out_hw
    x_nchw = np.ascontiguousarray(d.x.transpose(0, 3, 1, 2))
    y = np.empty((layer.N, layer.OC, OH, OW), np.float32)
    node, inits = onnx_conv("conv", "A", "Y", d.w, d.b, layer.stride, layer.pad, layer.groups)
    return _anchors.ort_nchw_call("conv", [node], inits, x_nchw, y, threads)


LIBRARIES: Dict[str, Callable] = {
    "torch_cl": lambda layer, d, threads: torch_call(layer, d, threads, channels_last=True),
    "torch_nchw": lambda layer, d, threads: torch_call(layer, d, threads, channels_last=False),
    "onnxruntime": ort_call,
}


# --- the check ----------------------------------------------------------------------------------------------

def rel_diff(got: np.ndarray, ref: np.ndarray) -> float:
    """max |got - ref| / max |ref| (in float64; 0 for an all-zero ref compared with itself)."""
    ref = np.asarray(ref, np.float64)
    d = float(np.abs(np.asarray(got, np.float64) - ref).max()) if ref.size else 0.0
    return d / max(float(np.abs(ref).max()) if ref.size else 0.0, 1e-30)


def check(layer: Layer, nn: Dict[str, Callable], libs: Dict[str, Callable]) -> Dict[str, float]:
    """Run every callable once; {"nnkern/<algorithm>" and each library: rel_diff to nnkern auto's output}
    (the first algorithm's without auto). AssertionError if an nnkern algorithm exceeds NNKERN_TOLERANCE."""
    for f in list(nn.values()) + list(libs.values()):
        f()
    ref = (nn.get("auto") or next(iter(nn.values()))).out
    diffs = {f"nnkern/{alg}": rel_diff(f.out, ref) for alg, f in nn.items()}
    bad = {k: v for k, v in diffs.items() if not v <= (BF16_TOLERANCE if k == "nnkern/bf16" else NNKERN_TOLERANCE)}
    if bad:
        raise AssertionError(f"{layer.name}: nnkern algorithms differ from auto by {bad} (relative)")
    diffs.update({name: rel_diff(f.out(), ref) for name, f in libs.items()})
    return diffs


NOTES = ("Notes: batch 1, float32; nnkern on NHWC (weights packed once), torch_cl = torch.nn.functional.conv2d on "
         "channels_last input and weights, torch_nchw = the same on contiguous NCHW, onnxruntime = a one-node Conv "
         "graph on NCHW (its own layout choices inside), intra_op_num_threads = the thread count; the same data for "
         "all, no activation. MFLOP = 2 * N * OH * OW * OC * KH * KW * IC / groups. ws: nnkern's workspace bytes "
         "per call (Conv2d.workspace_bytes). max diff: max |library - nnkern auto| / max |nnkern auto|, once per "
         "layer; nnkern algs: the largest of nnkern's algorithms against auto. nnkern bf16 (float32 precision "
         "'medium') runs at the highest ISA level with the column's FP32 kernels (avx512's reach avx512bf16 and amx, "
         "where vdpbf16ps and the AMX tiles are). The host is shared: only ratios within one run mean anything.")


#: The FP32 convolution benchmark, for conv.select / measure_layer / run / markdown_table (kind=CONV).
CONV = _conv.Kind("conv", "GFLOP/s", "MFLOP", "f32", "f32_gemm", tuple(SUITE), tuple(QUICK), algorithms, make_data,
                  nnkern_call, LIBRARIES, check, NOTES, ratio_of="auto",
                  reduced_precision=("winograd", "winograd_2x2"), top_of_group=("bf16",))
