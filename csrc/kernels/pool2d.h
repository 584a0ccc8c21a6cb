// 2-D max / average pooling of NHWC tensors (uint8, int8, float32). Baseline header: no intrinsics.
//
// Geometry (torch.nn.functional.max_pool2d / avg_pool2d, with per-side padding): output row oh covers input
// rows [oh*sh - pt, oh*sh - pt + kh) clipped to [0, H) (the taps), and to [-pt, H + pb) for the padded
// count; likewise columns. The caller guarantees every window holds at least one input element
// (padding <= kernel / 2 and ceil_mode's rule that the last window starts before H + pt).
//
//   max:          y = the largest tap; float32: a NaN tap gives NaN (the last NaN tap's bits, as torch).
//   avg float32:  y = (((0 + t0) + t1) + ...) / float(d), the taps summed in row-major window order.
//   avg integer:  acc = sum of (t - zi) over the taps (exact, int32), m = float32(scale_ratio / float(d)),
//                 y = clamp(rne(float32(acc) * m) + zo) to the dtype's range: torch's quantized
//                 avg_pool2d, whose vector path multiplies by a float32 multiplier and rounds with
//                 cvtps2dq (round half to even) -- not always the exactly rounded acc / d.
//   d = divisor if nonzero, else the padded window count (count_include_pad) or the taps' count.
#pragma once
#include <cstddef>
#include <cstdint>

namespace nnkern {

enum class PoolDtype : uint8_t { u8, s8, f32 };

struct Pool2dParams {
  bool average;            // false: max
  PoolDtype dtype;
  size_t n, h, w, c;       // input (N, H, W, C), C-contiguous
  size_t oh, ow;           // output (N, OH, OW, C), C-contiguous
  size_t kh, kw, sh, sw;   // all >= 1
  size_t pt, pb, pl, pr;   // padding: top, bottom, left, right
  bool count_include_pad;  // average only
  int32_t divisor;         // average only: nonzero overrides the window count
  float scale_ratio;       // average integer only: float32(input_scale) / float32(output_scale)
  int32_t zi, zo;          // average integer only: input and output zero points
};

// Output rows [row_begin, row_end) of the n * oh rows (row = image * oh + oh_index), every channel.
using Pool2dRowsUkernel = void (*)(const Pool2dParams& p, const void* x, void* y, size_t row_begin, size_t row_end);

struct Pool2dKernel {
  const char* name;
  Pool2dRowsUkernel rows;
};

// The same loops (kernels/inc/pool2d_loop.inc) compiled per ISA: channels in vector lanes, auto-vectorized.
extern const Pool2dKernel pool2d__scalar;  // baseline (SSE2 on x86-64, NEON on aarch64)
extern const Pool2dKernel pool2d__avx2;
extern const Pool2dKernel pool2d__avx512;

}  // namespace nnkern
