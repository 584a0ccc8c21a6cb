"""
nnkern native core (internal: use the nnkern package)
"""
from __future__ import annotations
import collections.abc
import numpy
import numpy.typing
import typing
__all__: list[str] = ['GraphConstant', 'GraphLayers', 'GraphNeedsConstant', 'GraphPlan', 'GuardedBuffer', 'InvertedResidual', 'Lstm', 'MAX_NUM_THREADS', 'PackedConv2d', 'PackedLinear', 'PackedLinearBf16', 'PackedQConv2d', 'PackedQLinear', 'activation', 'activation_kernel_name', 'activation_sweep', 'activation_ukernel', 'algorithm_ops', 'algorithms', 'bf16_gemm', 'bf16_gemm_ukernel', 'bf16_matmul_fast', 'conv2d_algorithm_families', 'cpu_info', 'default_num_threads', 'dequantize', 'elementwise_parallel_min', 'exp_nonpos_ukernel', 'f32_gemm_has_panels', 'f32_gemm_tile', 'f32_gemm_ukernel', 'f32_gemv_dot', 'f32_gemv_dot_auto_n', 'f32_gemv_info', 'f32_gemv_rows', 'f32_gemv_rows_m', 'f32_gemv_rows_m_info', 'f32_gemv_rows_panels', 'f32_gemv_store', 'f32_igemm_ukernel', 'f32_peak_flops', 'from_bf16', 'gemm_blocking', 'gemm_order', 'get_blocking_mode', 'get_max_isa', 'get_num_threads', 'graph_evaluate', 'graph_infer', 'graph_ops', 'i8_peak_ops', 'isa_levels', 'isa_supported', 'kernel_families', 'kernel_list', 'last_algorithm', 'may_overlap', 'minmax', 'pixel_shuffle', 'pixel_unshuffle', 'pool2d', 'pool2d_output_size', 'qgemm', 'qgemm_fast', 'qgemm_kernel_for', 'qgemm_kernel_traits', 'qgemm_padded_n', 'qgemm_ukernel', 'quantize', 'quantize_to_nhwc', 'set_blocking_mode', 'set_elementwise_parallel_min', 'set_max_isa', 'set_num_threads', 'set_qgemm_kc', 'set_qgemm_rows_outer', 'set_workspace_guards', 'sgemm', 'sgemm_fast', 'to_bf16', 'topk', 'topk_kernel_name', 'workspace_guard_violations', 'workspace_last_bytes', 'workspace_overrun_probe', 'workspace_retained_bytes']
class GuardedBuffer:
    def __init__(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
class PackedLinear:
    def __init__(self, arg0: numpy.ndarray, arg1: typing.Any, arg2: bool) -> None:
        ...
    def run(self, arg0: numpy.ndarray, arg1: numpy.ndarray) -> None:
        ...
    def run_fast(self, x: typing.Any, out: typing.Any = None) -> typing.Any:
        ...
    @property
    def bias(self) -> typing.Any:
        ...
    @property
    def in_features(self) -> int:
        ...
    @property
    def kernel_name(self) -> str:
        ...
    @property
    def out_features(self) -> int:
        ...
    @property
    def relu(self) -> bool:
        ...
class Lstm:
    def __init__(self, arg0: numpy.ndarray, arg1: numpy.ndarray, arg2: typing.Any) -> None:
        ...
    def run(self, x: numpy.ndarray, tokens: bool, batch_first: bool, h0: typing.Any, c0: typing.Any, lengths: typing.Any, out: numpy.ndarray, h_n: numpy.ndarray, c_n: numpy.ndarray, method: str, bf16_input: bool = False) -> int:
        ...
    def set_table(self, arg0: numpy.ndarray) -> numpy.ndarray:
        ...
    @property
    def hidden_size(self) -> int:
        ...
    @property
    def input_size(self) -> int:
        ...
    @property
    def kernel_name(self) -> str:
        ...
    @property
    def table(self) -> typing.Any:
        ...
class PackedQLinear:
    def __init__(self, arg0: numpy.ndarray, arg1: typing.SupportsInt | typing.SupportsIndex, arg2: typing.Any, arg3: typing.Any, arg4: bool, arg5: typing.SupportsFloat | typing.SupportsIndex, arg6: typing.SupportsFloat | typing.SupportsIndex, arg7: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    def run(self, arg0: numpy.ndarray, arg1: numpy.ndarray) -> None:
        ...
    def run_dynamic(self, arg0: numpy.ndarray, arg1: numpy.ndarray, arg2: typing.SupportsInt | typing.SupportsIndex, arg3: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    def run_fast(self, x: typing.Any, out: typing.Any = None) -> typing.Any:
        ...
    @property
    def in_features(self) -> int:
        ...
    @property
    def kernel_name(self) -> str:
        ...
    @property
    def out_features(self) -> int:
        ...
class PackedQConv2d:
    def __init__(self, arg0: numpy.ndarray, arg1: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], arg2: typing.SupportsInt | typing.SupportsIndex, arg3: typing.Any, arg4: typing.Any, arg5: bool, arg6: typing.SupportsFloat | typing.SupportsIndex, arg7: typing.SupportsFloat | typing.SupportsIndex, arg8: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    def applicable_algorithms(self, n: typing.SupportsInt | typing.SupportsIndex, h: typing.SupportsInt | typing.SupportsIndex, w: typing.SupportsInt | typing.SupportsIndex) -> list[str]:
        """
        The algorithms of the table that apply to an input of this shape (the rule, from C++).
        """
    def auto_algorithm(self, arg0: typing.SupportsInt | typing.SupportsIndex, arg1: typing.SupportsInt | typing.SupportsIndex, arg2: typing.SupportsInt | typing.SupportsIndex) -> str:
        ...
    def run(self, x: numpy.ndarray, out: numpy.ndarray, algorithm: str = 'auto', kernel: str = '', residual: typing.Any = None, residual_zero: typing.SupportsInt | typing.SupportsIndex = 0, residual_factor: typing.SupportsFloat | typing.SupportsIndex = 0.0, planar: bool = False) -> str:
        ...
    def run_pooled(self, x: numpy.ndarray, out: numpy.ndarray, algorithm: str, kernel: str, zero: typing.SupportsFloat | typing.SupportsIndex, scale: typing.SupportsFloat | typing.SupportsIndex, out_scale: typing.SupportsFloat | typing.SupportsIndex, out_zero: typing.SupportsFloat | typing.SupportsIndex, lo: typing.SupportsFloat | typing.SupportsIndex, hi: typing.SupportsFloat | typing.SupportsIndex) -> str:
        ...
    def run_shuffled(self, x: numpy.ndarray, out: numpy.ndarray, algorithm: str, kernel: str, r: typing.SupportsInt | typing.SupportsIndex, runs: bool) -> str:
        ...
    @property
    def indirection_builds(self) -> int:
        ...
    @property
    def indirection_bytes(self) -> int:
        """
        Bytes of the indirection buffers the layer keeps (ops/conv/indirection_cache.h)
        """
    @property
    def kernel_name(self) -> str:
        ...
class PackedConv2d:
    def __init__(self, w: numpy.ndarray, geometry: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], bias: typing.Any, activation: typing.SupportsInt | typing.SupportsIndex, method: str, alpha: typing.SupportsFloat | typing.SupportsIndex = 0.0, beta: typing.SupportsFloat | typing.SupportsIndex = 0.0) -> None:
        ...
    def applicable_algorithms(self, n: typing.SupportsInt | typing.SupportsIndex, h: typing.SupportsInt | typing.SupportsIndex, w: typing.SupportsInt | typing.SupportsIndex) -> list[str]:
        """
        The algorithms of the table that apply to an input of this shape (the rule, from C++).
        """
    def auto_algorithm(self, n: typing.SupportsInt | typing.SupportsIndex, h: typing.SupportsInt | typing.SupportsIndex, w: typing.SupportsInt | typing.SupportsIndex, precision: str = 'highest') -> str:
        ...
    def run(self, x: numpy.ndarray, out: numpy.ndarray, algorithm: str = 'auto', kernel: str = '', precision: str = 'highest', residual: typing.Any = None) -> str:
        ...
    def workspace_bytes(self, n: typing.SupportsInt | typing.SupportsIndex, h: typing.SupportsInt | typing.SupportsIndex, w: typing.SupportsInt | typing.SupportsIndex, algorithm: str = 'auto', precision: str = 'highest') -> int:
        ...
    @property
    def indirection_builds(self) -> int:
        ...
    @property
    def indirection_bytes(self) -> int:
        """
        Bytes of the indirection buffers the layer keeps (ops/conv/indirection_cache.h)
        """
class InvertedResidual:
    def __init__(self, expand: PackedConv2d, dw: PackedConv2d, project: PackedConv2d, residual: bool, algorithms: typing.Annotated[collections.abc.Sequence[str], "FixedSize(3)"]) -> None:
        ...
    def rows_per_band(self, h: typing.SupportsInt | typing.SupportsIndex, w: typing.SupportsInt | typing.SupportsIndex) -> int:
        ...
    def run(self, x: numpy.ndarray, out: numpy.ndarray) -> None:
        ...
class GraphNeedsConstant(NotImplementedError):
    pass
class GraphConstant:
    """
    A constant tensor of a graph plan (a copy of an array)
    """
    def __init__(self, array: numpy.ndarray) -> None:
        ...
    def numpy(self) -> numpy.ndarray:
        """
        A read-only view of the constant's data
        """
    @property
    def dtype(self) -> int:
        ...
    @property
    def nbytes(self) -> int:
        ...
    @property
    def shape(self) -> list[int]:
        ...
class GraphLayers:
    """
    Layers packed once and shared by the plans of a session
    """
    def __init__(self) -> None:
        ...
    @property
    def count(self) -> int:
        ...
class GraphPlan:
    """
    A compiled graph for one set of input shapes (ops/graph/plan.h)
    """
    def __init__(self, layers: GraphLayers, num_threads: typing.SupportsInt | typing.SupportsIndex = 0, max_isa: str = '') -> None:
        """
        num_threads: at most this many threads for its runs (0: the pool's); max_isa: a cap of its own
        """
    def add_constant(self, constant: GraphConstant, name: str) -> int:
        ...
    def add_input(self, dtype: typing.SupportsInt | typing.SupportsIndex, shape: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], index: typing.SupportsInt | typing.SupportsIndex, name: str) -> int:
        ...
    def add_step(self, op: str, name: str, attrs: dict, inputs: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], num_outputs: typing.SupportsInt | typing.SupportsIndex, nodes: str, output_names: collections.abc.Sequence[str]) -> list[int]:
        ...
    def desc(self, tensor: typing.SupportsInt | typing.SupportsIndex) -> tuple:
        ...
    def finalize(self, join_in_place: bool = True) -> None:
        """
        join_in_place: Concat inputs written in place by their producers where they can
        """
    def input_tensor(self, index: typing.SupportsInt | typing.SupportsIndex) -> int:
        ...
    def mark_output(self, tensor: typing.SupportsInt | typing.SupportsIndex, index: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    def output_tensor(self, index: typing.SupportsInt | typing.SupportsIndex) -> int:
        ...
    def run(self, inputs: list, verbose: bool = False, profile: bool = False) -> typing.Any:
        """
        Runs the plan on the graph's inputs (arrays of the planned dtypes and shapes, C-contiguous); returns the outputs, with per-step (step, seconds) if profile
        """
    def shares_memory(self, a: typing.SupportsInt | typing.SupportsIndex, b: typing.SupportsInt | typing.SupportsIndex) -> bool:
        ...
    def steps(self) -> list:
        """
        Each step: op, name, the source nodes, the algorithm / kernel chosen, input and output tensor ids
        """
    @property
    def arena_bytes(self) -> int:
        ...
    @property
    def num_inputs(self) -> int:
        ...
    @property
    def num_outputs(self) -> int:
        ...
    @property
    def unplanned_bytes(self) -> int:
        ...
class PackedLinearBf16:
    def __init__(self, arg0: numpy.ndarray, arg1: typing.Any, arg2: bool) -> None:
        ...
    def run(self, arg0: numpy.ndarray, arg1: numpy.ndarray) -> None:
        ...
    def run_fast(self, x: typing.Any, out: typing.Any = None) -> typing.Any:
        ...
    @property
    def kernel_name(self) -> str:
        ...
def activation(function: str, method: str, x: numpy.ndarray, out: numpy.ndarray) -> bool:
    """
    Computes function(x) into out if both are float32 of one shape, C-contiguous, out writeable and out is x or disjoint from it; returns whether it did.
    """
def activation_kernel_name(arg0: str, arg1: str, arg2: str) -> str:
    """
    Test hook: the name of isa's kernel (ValueError if the CPU or the build lacks it).
    """
def activation_sweep(isa: str, function: str, method: str, hi: typing.SupportsFloat | typing.SupportsIndex = 20.0, stride: typing.SupportsInt | typing.SupportsIndex = 1) -> dict:
    """
    Test hook: max abs error of isa's kernel over every stride-th float32 bit pattern in [-hi, hi].
    """
def activation_ukernel(isa: str, function: str, method: str, x: numpy.ndarray, x_offset: typing.SupportsInt | typing.SupportsIndex, y: numpy.ndarray, y_offset: typing.SupportsInt | typing.SupportsIndex, n: typing.SupportsInt | typing.SupportsIndex, stream: bool = False, y_shift_bytes: typing.SupportsInt | typing.SupportsIndex = 0) -> None:
    """
    Test hook: run one ISA's kernel (stream: its streaming-store variant, y disjoint from x) on n elements at the given offsets (buffers may be guarded); y_shift_bytes shifts y by that many bytes.
    """
def algorithm_ops() -> list[str]:
    ...
def algorithms(arg0: str) -> list[str]:
    """
    The entries of an op's algorithm table, in the order algorithm='auto' tries them.
    """
def bf16_gemm(a: numpy.ndarray, trans_a: bool, b: numpy.ndarray, trans_b: bool, c: numpy.ndarray, alpha: typing.SupportsFloat | typing.SupportsIndex = 1.0, beta: typing.SupportsFloat | typing.SupportsIndex = 0.0, bias: typing.Any = None, relu: bool = False) -> None:
    ...
def bf16_gemm_ukernel(kernel: str, m: typing.SupportsInt | typing.SupportsIndex, n: typing.SupportsInt | typing.SupportsIndex, kq: typing.SupportsInt | typing.SupportsIndex, a: numpy.ndarray, b: numpy.ndarray, b_offsets: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], c: numpy.ndarray, c_offset: typing.SupportsInt | typing.SupportsIndex, ldc: typing.SupportsInt | typing.SupportsIndex, alpha: typing.SupportsFloat | typing.SupportsIndex = 1.0, beta: typing.SupportsFloat | typing.SupportsIndex = 0.0, bias: typing.Any = None, relu: bool = False) -> None:
    ...
def bf16_matmul_fast(a: typing.Any, b: typing.Any, c: typing.Any = None) -> typing.Any:
    ...
def conv2d_algorithm_families() -> list[tuple[str, str]]:
    """
    (algorithm, the kernel family it runs) for each entry of the conv2d table, in its order
    """
def cpu_info() -> dict:
    ...
def default_num_threads() -> int:
    ...
def dequantize(arg0: numpy.ndarray, arg1: numpy.ndarray, arg2: typing.SupportsInt | typing.SupportsIndex, arg3: typing.SupportsInt | typing.SupportsIndex, arg4: typing.SupportsInt | typing.SupportsIndex, arg5: numpy.ndarray, arg6: numpy.ndarray, arg7: bool) -> None:
    ...
def elementwise_parallel_min() -> int:
    ...
def exp_nonpos_ukernel(isa: str, x: typing.Annotated[numpy.typing.ArrayLike, numpy.float32]) -> numpy.typing.NDArray[numpy.float32]:
    """
    Test hook: isa's exp_nonpos kernel (Softmax's exps, kernels/f32_exp.h) on x's elements, flattened.
    """
def f32_gemm_tile(arg0: str) -> tuple[str, int, int]:
    ...
def f32_gemm_ukernel(kernel: str, m: typing.SupportsInt | typing.SupportsIndex, n: typing.SupportsInt | typing.SupportsIndex, k: typing.SupportsInt | typing.SupportsIndex, a: numpy.ndarray, a_offset: typing.SupportsInt | typing.SupportsIndex, a_stride: typing.SupportsInt | typing.SupportsIndex, a_copy: typing.Any, b: numpy.ndarray, b_offsets: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], b_stride: typing.SupportsInt | typing.SupportsIndex, c: numpy.ndarray, c_offset: typing.SupportsInt | typing.SupportsIndex, ldc: typing.SupportsInt | typing.SupportsIndex, alpha: typing.SupportsFloat | typing.SupportsIndex, beta: typing.SupportsFloat | typing.SupportsIndex, bias: typing.Any, relu: bool, c_rows: typing.Any = None, hook: bool = False, tile_i: typing.SupportsInt | typing.SupportsIndex = 0, tile_j: typing.SupportsInt | typing.SupportsIndex = 0, residual: typing.Any = None, r_offset: typing.SupportsInt | typing.SupportsIndex = 0, ldr: typing.SupportsInt | typing.SupportsIndex = 0, panels: typing.SupportsInt | typing.SupportsIndex = 0, a_panel_stride: typing.SupportsInt | typing.SupportsIndex = 0) -> typing.Any:
    """
    panels > 0: that many whole panels (m = panels * MR, packed, each a_panel_stride floats of a) in one run_panels call.
    """
def f32_gemm_has_panels(kernel: str) -> bool:
    """
    Whether a kernel (a name or an ISA level) has the whole-panel form.
    """
def f32_gemv_dot(arg0: str, arg1: typing.SupportsInt | typing.SupportsIndex, arg2: typing.SupportsInt | typing.SupportsIndex, arg3: typing.SupportsInt | typing.SupportsIndex, arg4: numpy.ndarray, arg5: typing.SupportsInt | typing.SupportsIndex, arg6: typing.SupportsInt | typing.SupportsIndex, arg7: numpy.ndarray, arg8: typing.SupportsInt | typing.SupportsIndex, arg9: typing.SupportsInt | typing.SupportsIndex, arg10: numpy.ndarray, arg11: typing.SupportsInt | typing.SupportsIndex, arg12: typing.SupportsInt | typing.SupportsIndex, arg13: typing.SupportsFloat | typing.SupportsIndex, arg14: typing.SupportsFloat | typing.SupportsIndex, arg15: typing.Any, arg16: bool) -> None:
    ...
def f32_gemv_dot_auto_n(isa: str) -> int:
    """
    Up to how many outputs sgemm's auto takes the dot path on that level's kernel.
    """
def f32_gemv_info(arg0: str) -> tuple[str, int, int]:
    ...
def f32_gemv_rows(arg0: str, arg1: typing.SupportsInt | typing.SupportsIndex, arg2: typing.SupportsInt | typing.SupportsIndex, arg3: numpy.ndarray, arg4: typing.SupportsInt | typing.SupportsIndex, arg5: typing.SupportsInt | typing.SupportsIndex, arg6: numpy.ndarray, arg7: typing.SupportsInt | typing.SupportsIndex, arg8: typing.SupportsInt | typing.SupportsIndex, arg9: numpy.ndarray, arg10: typing.SupportsInt | typing.SupportsIndex) -> None:
    ...
def f32_gemv_rows_m(arg0: str, arg1: typing.SupportsInt | typing.SupportsIndex, arg2: typing.SupportsInt | typing.SupportsIndex, arg3: typing.SupportsInt | typing.SupportsIndex, arg4: numpy.ndarray, arg5: typing.SupportsInt | typing.SupportsIndex, arg6: typing.SupportsInt | typing.SupportsIndex, arg7: typing.SupportsInt | typing.SupportsIndex, arg8: numpy.ndarray, arg9: typing.SupportsInt | typing.SupportsIndex, arg10: typing.SupportsInt | typing.SupportsIndex, arg11: numpy.ndarray, arg12: typing.SupportsInt | typing.SupportsIndex, arg13: typing.SupportsInt | typing.SupportsIndex) -> None:
    ...
def f32_gemv_rows_m_info(arg0: str) -> tuple[int, int]:
    ...
def f32_gemv_rows_panels(arg0: str, arg1: typing.SupportsInt | typing.SupportsIndex, arg2: typing.SupportsInt | typing.SupportsIndex, arg3: typing.SupportsInt | typing.SupportsIndex, arg4: numpy.ndarray, arg5: typing.SupportsInt | typing.SupportsIndex, arg6: numpy.ndarray, arg7: typing.SupportsInt | typing.SupportsIndex, arg8: typing.SupportsInt | typing.SupportsIndex, arg9: numpy.ndarray, arg10: typing.SupportsInt | typing.SupportsIndex) -> bool:
    ...
def f32_gemv_store(arg0: str, arg1: typing.SupportsInt | typing.SupportsIndex, arg2: numpy.ndarray, arg3: typing.SupportsInt | typing.SupportsIndex, arg4: numpy.ndarray, arg5: typing.SupportsInt | typing.SupportsIndex, arg6: typing.SupportsFloat | typing.SupportsIndex, arg7: typing.SupportsFloat | typing.SupportsIndex, arg8: typing.Any, arg9: bool) -> None:
    ...
def f32_igemm_ukernel(kernel: str, m: typing.SupportsInt | typing.SupportsIndex, n: typing.SupportsInt | typing.SupportsIndex, k: typing.SupportsInt | typing.SupportsIndex, ks: typing.SupportsInt | typing.SupportsIndex, a: numpy.ndarray, a_offset: typing.SupportsInt | typing.SupportsIndex, x: numpy.ndarray, b_offsets: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], zero: numpy.ndarray, zero_offset: typing.SupportsInt | typing.SupportsIndex, b_offset_bytes: typing.SupportsInt | typing.SupportsIndex, c: numpy.ndarray, c_offset: typing.SupportsInt | typing.SupportsIndex, ldc: typing.SupportsInt | typing.SupportsIndex, alpha: typing.SupportsFloat | typing.SupportsIndex = 1.0, beta: typing.SupportsFloat | typing.SupportsIndex = 0.0, bias: typing.Any = None, relu: bool = False, c_rows: typing.Any = None, hook: bool = False, tile_i: typing.SupportsInt | typing.SupportsIndex = 0, tile_j: typing.SupportsInt | typing.SupportsIndex = 0, residual: typing.Any = None, r_offset: typing.SupportsInt | typing.SupportsIndex = 0, ldr: typing.SupportsInt | typing.SupportsIndex = 0) -> typing.Any:
    ...
def f32_peak_flops(arg0: str, arg1: typing.SupportsFloat | typing.SupportsIndex) -> float:
    ...
def from_bf16(x: numpy.ndarray, out: numpy.ndarray) -> None:
    """
    bf16 bits -> float32 (C-contiguous arrays of one size), exact
    """
def gemm_blocking(K: typing.SupportsInt | typing.SupportsIndex, order: str = 'block') -> tuple[int, int, int]:
    ...
def gemm_order(M: typing.SupportsInt | typing.SupportsIndex, N: typing.SupportsInt | typing.SupportsIndex) -> str:
    ...
def get_blocking_mode() -> str:
    ...
def get_max_isa() -> str:
    ...
def get_num_threads() -> int:
    ...
def graph_evaluate(op: str, name: str, attrs: dict, inputs: list, num_outputs: typing.SupportsInt | typing.SupportsIndex) -> list:
    """
    A node run on constant inputs (constant folding): its outputs as GraphConstants
    """
def graph_infer(op: str, name: str, attrs: dict, inputs: list, num_outputs: typing.SupportsInt | typing.SupportsIndex) -> list:
    """
    The (dtype code, shape) of a node's outputs; inputs: None, a GraphConstant or (dtype code, shape)
    """
def graph_ops() -> list[str]:
    """
    The ops a graph plan can run
    """
def i8_peak_ops(arg0: str, arg1: typing.SupportsFloat | typing.SupportsIndex) -> float:
    ...
def isa_levels() -> list[str]:
    ...
def isa_supported(arg0: str) -> bool:
    ...
def kernel_families() -> list[str]:
    ...
def kernel_list(arg0: str) -> list:
    """
    Every kernel of a family in this build (its list, csrc/kernels/<family>_list.h): name, ISA level, tile, K-group, the weight bits it is exact for (8, or 7 for the integer kernels exact only on [-64, 64]) and whether this CPU can run it.
    """
def last_algorithm(op: str) -> str:
    """
    The entry of op's algorithm table that this thread's last call selected, then forgotten: '' if no call since the last read (NNKERN_VERBOSE reports it).
    """
def may_overlap(arg0: numpy.ndarray, arg1: numpy.ndarray) -> bool:
    ...
def minmax(arg0: numpy.ndarray) -> tuple[float, float]:
    ...
def pixel_shuffle(x: numpy.ndarray, out: numpy.ndarray, r: typing.SupportsInt | typing.SupportsIndex, nhwc: bool) -> None:
    """
    x (N, C*r*r, H, W) -> out (N, C, H*r, W*r), or NHWC (N, H, W, C*r*r) -> (N, H*r, W*r, C). Internal: use nnkern.pixel_shuffle.
    """
def pixel_unshuffle(x: numpy.ndarray, out: numpy.ndarray, r: typing.SupportsInt | typing.SupportsIndex, nhwc: bool) -> None:
    """
    The inverse of pixel_shuffle. Internal: use nnkern.pixel_unshuffle.
    """
def pool2d(x: numpy.ndarray, out: numpy.ndarray, average: bool, kernel: typing.Annotated[collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], "FixedSize(2)"], stride: typing.Annotated[collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], "FixedSize(2)"], padding: typing.Annotated[collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], "FixedSize(4)"], ceil_mode: bool, count_include_pad: bool, divisor: typing.SupportsInt | typing.SupportsIndex, scale_ratio: typing.SupportsFloat | typing.SupportsIndex, input_zero_point: typing.SupportsInt | typing.SupportsIndex, output_zero_point: typing.SupportsInt | typing.SupportsIndex) -> None:
    """
    x (N, H, W, C) uint8/int8/float32 -> out (N, OH, OW, C): max or average pooling; padding (top, bottom, left, right). Internal: use nnkern.max_pool2d / nnkern.avg_pool2d.
    """
def pool2d_output_size(size: typing.SupportsInt | typing.SupportsIndex, kernel: typing.SupportsInt | typing.SupportsIndex, stride: typing.SupportsInt | typing.SupportsIndex, pad0: typing.SupportsInt | typing.SupportsIndex, pad1: typing.SupportsInt | typing.SupportsIndex, ceil_mode: bool) -> int:
    """
    One dimension's output length (torch's pooling_output_shape with padding pad0 before, pad1 after).
    """
def qgemm(a: numpy.ndarray, a_type: typing.SupportsInt | typing.SupportsIndex, a_zero: typing.SupportsInt | typing.SupportsIndex, b: numpy.ndarray, b_type: typing.SupportsInt | typing.SupportsIndex, b_zero: typing.Any, b_zero_scalar: typing.SupportsInt | typing.SupportsIndex, c: numpy.ndarray, algorithm: str = 'auto') -> None:
    ...
def qgemm_fast(a: typing.Any, b: typing.Any, a_zero: typing.SupportsInt | typing.SupportsIndex = 0, b_zero: typing.SupportsInt | typing.SupportsIndex = 0, out: typing.Any = None) -> typing.Any:
    ...
def qgemm_kernel_for(k: typing.SupportsInt | typing.SupportsIndex, ks: typing.SupportsInt | typing.SupportsIndex = 1) -> str:
    """
    The 8-bit kernel the dispatch runs now for a reduction of ks taps of k (below the level kernel's min_depth / min_k: the best one of the levels below).
    """
def qgemm_kernel_traits(arg0: str) -> tuple[str, int, bool, bool]:
    """
    (kind, k step of the inner loop, zero points subtracted in the kernel, has the whole-panel form) of a qgemm kernel.
    """
def qgemm_padded_n(arg0: typing.SupportsInt | typing.SupportsIndex) -> int:
    ...
def qgemm_ukernel(name: str, m: typing.SupportsInt | typing.SupportsIndex, n: typing.SupportsInt | typing.SupportsIndex, k: typing.SupportsInt | typing.SupportsIndex, a: numpy.ndarray, a_offset_bytes: typing.SupportsInt | typing.SupportsIndex, b: numpy.ndarray, b_offsets_bytes: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex | None], c: numpy.ndarray, c_offset_bytes: typing.SupportsInt | typing.SupportsIndex, ldc: typing.SupportsInt | typing.SupportsIndex, out: typing.SupportsInt | typing.SupportsIndex, col_comp: typing.Any, b_zero: typing.Any, row_sum: typing.Any, scale: typing.Any, bias: typing.Any, relu: bool, lo: typing.SupportsFloat | typing.SupportsIndex, hi: typing.SupportsFloat | typing.SupportsIndex, c_in: typing.Any = None, x_zero: typing.SupportsInt | typing.SupportsIndex = 0, w_zero: typing.Any = None, ks: typing.SupportsInt | typing.SupportsIndex = 1, zero: typing.Any = None, zero_offset_bytes: typing.SupportsInt | typing.SupportsIndex = 0, b_offset: typing.SupportsInt | typing.SupportsIndex = 0, c_rows: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex] | None = None, hook: bool = False, tile_i: typing.SupportsInt | typing.SupportsIndex = 0, tile_j: typing.SupportsInt | typing.SupportsIndex = 0, panels: typing.SupportsInt | typing.SupportsIndex = 0, a_panel_bytes: typing.SupportsInt | typing.SupportsIndex = 0) -> list:
    """
    One micro-kernel tile, direct or indirect (kernels/qgemm.h), for the tests; returns the tile hook's calls. panels > 0: that many whole panels (m = panels * MR, each a_panel_bytes of a) in one run_panels call.
    """
def quantize(arg0: numpy.ndarray, arg1: numpy.ndarray, arg2: typing.SupportsInt | typing.SupportsIndex, arg3: typing.SupportsInt | typing.SupportsIndex, arg4: typing.SupportsInt | typing.SupportsIndex, arg5: numpy.ndarray, arg6: numpy.ndarray, arg7: bool) -> None:
    ...
def quantize_to_nhwc(arg0: numpy.ndarray, arg1: numpy.ndarray, arg2: typing.SupportsFloat | typing.SupportsIndex, arg3: typing.SupportsInt | typing.SupportsIndex, arg4: bool) -> None:
    ...
def set_blocking_mode(arg0: str) -> None:
    ...
def set_elementwise_parallel_min(elements: typing.SupportsInt | typing.SupportsIndex) -> None:
    """
    Measurements: the elements from which the graph ops' loops split across the pool (0: the default)
    """
def set_max_isa(arg0: str) -> None:
    ...
def set_num_threads(arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
    ...
def set_qgemm_kc(arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
    ...
def set_qgemm_rows_outer(v: typing.SupportsInt | typing.SupportsIndex, block: typing.SupportsInt | typing.SupportsIndex = 0) -> None:
    ...
def set_workspace_guards(on: bool) -> None:
    """
    Test hook: a guard pattern after every workspace and thread scratch slice, checked when it ends.
    """
def sgemm(a: numpy.ndarray, trans_a: bool, b: numpy.ndarray, trans_b: bool, c: numpy.ndarray, alpha: typing.SupportsFloat | typing.SupportsIndex, beta: typing.SupportsFloat | typing.SupportsIndex, bias: typing.Any, relu: bool, algorithm: str = 'auto') -> None:
    ...
def sgemm_fast(a: typing.Any, b: typing.Any, trans_a: bool = False, trans_b: bool = False, c: typing.Any = None) -> typing.Any:
    ...
def to_bf16(x: numpy.ndarray, out: numpy.ndarray) -> None:
    """
    float32 -> bf16 bits (C-contiguous arrays of one size), round to nearest even
    """
def topk(arg0: numpy.ndarray, arg1: typing.SupportsInt | typing.SupportsIndex, arg2: numpy.ndarray, arg3: numpy.ndarray) -> None:
    ...
def topk_kernel_name(arg0: str) -> str:
    """
    Test hook: the name of isa's top-k register kernel (ValueError if the CPU or the build lacks it).
    """
def workspace_guard_violations(reset: bool = False) -> int:
    """
    How many guards were found overwritten (all threads) since the last reset.
    """
def workspace_last_bytes() -> int:
    """
    Scratch bytes of the last op call that ended on this thread (its workspace).
    """
def workspace_overrun_probe(scratch: bool, bytes: typing.SupportsInt | typing.SupportsIndex, overrun: typing.SupportsInt | typing.SupportsIndex, tasks: typing.SupportsInt | typing.SupportsIndex = 8) -> None:
    """
    Test hook: writes `overrun` bytes past a workspace (or each thread's scratch slice) of `bytes`.
    """
def workspace_retained_bytes() -> int:
    """
    Scratch bytes this thread keeps allocated between calls.
    """
MAX_NUM_THREADS: int = 4096
