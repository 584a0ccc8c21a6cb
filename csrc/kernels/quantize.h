// Quantize / dequantize kernels (seeds I5, Q1), shared contract. Baseline header: no intrinsics.
//
//   quantize:   q[i] = NaN(x[i]) ? zp : (int) clamp(rint(x[i] / scale) + zp, lo, hi)     (float32 arithmetic,
//               rint = round half to even, so +-Inf saturate to lo / hi; [lo, hi] = [0, 255] or [-128, 127])
//   dequantize: x[i] = (float(q[i]) - float(zp)) * scale
// with (scale, zp) = (scale[0], zp[0]) for every i (stride 0, per tensor or one channel's run) or
// (scale[i], zp[i]) (stride 1, a run across channels). Every ISA computes exactly these float32
// operations (a correctly rounded division, no fused operations), so results are bit-identical to the
// numpy formulation np.clip(np.rint(x / scale) + zp, lo, hi).
//
//   quantize_planes: q[i * K + k] = quantize(planes[k][i]) for i < n, k < K (1 <= K <= 4), one scale and zero
//               point: K channel planes quantized and interleaved in one pass (an NCHW network input of a few
//               channels into the NHWC bytes its first convolution reads).
//
//   minmax:     *lo = min(x[i]), *hi = max(x[i]) over the non-NaN x[i] (+inf / -inf when there are none):
//               the range dynamic quantization (onnxruntime's DynamicQuantizeLinear) derives its scale from.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/lookup.h"
#include "kernels/qbinary.h"

namespace nnkern {

using QuantizeFn = void (*)(const float* x, uint8_t* q, size_t n, const float* scale, const int32_t* zp, size_t stride,
                            bool is_signed);
using DequantizeFn = void (*)(const uint8_t* q, float* x, size_t n, const float* scale, const int32_t* zp,
                              size_t stride, bool is_signed);

using QuantizePlanesFn = void (*)(const float* const* planes, size_t K, size_t n, float scale, int32_t zp,
                                  bool is_signed, uint8_t* q);
constexpr size_t kQuantizeMaxPlanes = 4;

using MinMaxFn = void (*)(const float* x, size_t n, float* lo, float* hi);

struct QuantizeKernel {
  const char* name;
  QuantizeFn quantize;
  DequantizeFn dequantize;
  MinMaxFn minmax;
  QBinaryFn qbinary;  // QLinearAdd / QLinearMul on contiguous operands (kernels/qbinary.h)
  LookupFn lookup;    // nnkern.Lookup's byte table (kernels/lookup.h)
  QuantizePlanesFn quantize_planes;
};

extern const QuantizeKernel quantize__scalar;
extern const QuantizeKernel quantize__avx2;
extern const QuantizeKernel quantize__avx512;

}  // namespace nnkern
