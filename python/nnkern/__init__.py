"""nnkern: hand-written SIMD kernels for deep-learning inference on CPUs.

Every op picks its kernels at run time from the CPU's features (cpuid / getauxval), capped by
``NNKERN_MAX_ISA`` or :func:`set_max_isa`. Arrays are NumPy arrays or any CPU array exposing DLPack or
the buffer protocol (torch tensors are read without a copy); results are NumPy arrays. See each
function's docstring for its dtype, layout and error-bound contract.
"""
from . import _C  # noqa: F401  (the native core; importing it fails clearly if the build is missing)
from ._isa import ISA_LEVELS, cpu_info, get_max_isa, max_isa, set_max_isa, supported_isas
from ._isa import _apply_environment_cap
from ._threads import get_num_threads, set_num_threads
from ._precision import PRECISIONS, float32_precision, get_float32_precision, set_float32_precision
from ._threads import _hook_threadpoolctl
from .activations import sigmoid, tanh
from .gemm import Linear, matmul, sgemm
from .bf16 import from_bf16, to_bf16
from .lstm import LSTM, LSTMOutput
from .topk import topk
from .shuffle import pixel_shuffle, pixel_unshuffle
from .pool import avg_pool2d, max_pool2d
from .qgemm import QLinear, qgemm, qgemm16, qgemm_max_k
from .qconv import QConv2d
from .conv import Conv2d, InvertedResidual, conv2d
from .quantize import dequantize, dynamic_quantization_params, quantize, quantize_dynamic, quantize_weights
from . import _verbose

# The version is defined once, in pyproject.toml; the installed metadata carries it.
try:
    from importlib.metadata import PackageNotFoundError, version as _version
    __version__: str = _version("nnkern")
except PackageNotFoundError:  # imported from a build tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "ISA_LEVELS", "cpu_info", "get_max_isa", "max_isa", "set_max_isa", "supported_isas",
    "get_num_threads", "set_num_threads",
    "PRECISIONS", "float32_precision", "get_float32_precision", "set_float32_precision",
    "sgemm", "matmul", "Linear", "LSTM", "LSTMOutput", "to_bf16", "from_bf16",
    "sigmoid", "tanh", "topk", "pixel_shuffle", "pixel_unshuffle", "max_pool2d", "avg_pool2d",
    "conv2d", "Conv2d", "InvertedResidual",
    "qgemm", "qgemm16", "qgemm_max_k", "QLinear", "QConv2d", "quantize", "dequantize", "quantize_weights",
    "quantize_dynamic", "dynamic_quantization_params",
]

_apply_environment_cap()
_hook_threadpoolctl()  # threadpoolctl sees the pool once it is imported
if _verbose.ENABLED:  # NNKERN_VERBOSE: decided once, here; when off nothing is wrapped
    _verbose.install(globals())
del _apply_environment_cap, _hook_threadpoolctl
