// Scalar reference quantize / dequantize (kernels/quantize.h): the oracle and the fallback.
#include <cmath>

#include "kernels/quantize.h"

namespace nnkern {
namespace {

uint8_t quantize_one(float x, float s, float z, float lo, float hi) {
  float t = std::nearbyint(x / s) + z;  // default rounding mode: ties to even
  t = t < lo ? lo : t > hi ? hi : t;
  if (std::isnan(x)) t = z;
  return uint8_t(int32_t(t));
}

void quantize_run(const float* x, uint8_t* q, size_t n, const float* scale, const int32_t* zp, size_t stride,
                  bool is_signed) {
  const float lo = is_signed ? -128.0f : 0.0f, hi = is_signed ? 127.0f : 255.0f;
  for (size_t i = 0; i < n; ++i) q[i] = quantize_one(x[i], scale[i * stride], float(zp[i * stride]), lo, hi);
}

void quantize_planes_run(const float* const* planes, size_t K, size_t n, float scale, int32_t zp, bool is_signed,
                         uint8_t* q) {
  const float lo = is_signed ? -128.0f : 0.0f, hi = is_signed ? 127.0f : 255.0f;
  for (size_t i = 0; i < n; ++i)
    for (size_t k = 0; k < K; ++k) q[i * K + k] = quantize_one(planes[k][i], scale, float(zp), lo, hi);
}

void dequantize_run(const uint8_t* q, float* x, size_t n, const float* scale, const int32_t* zp, size_t stride,
                    bool is_signed) {
  for (size_t i = 0; i < n; ++i) {
    const float v = is_signed ? float(int8_t(q[i])) : float(q[i]);
    x[i] = (v - float(zp[i * stride])) * scale[i * stride];
  }
}

void minmax_run(const float* x, size_t n, float* lo, float* hi) {
  float mn = INFINITY, mx = -INFINITY;
  for (size_t i = 0; i < n; ++i) {  // comparisons with NaN are false: NaN is skipped
    if (x[i] < mn) mn = x[i];
    if (x[i] > mx) mx = x[i];
  }
  *lo = mn;
  *hi = mx;
}

}  // namespace

NNK_QBINARY_KERNEL(scalar)

const QuantizeKernel quantize__scalar = {"quantize__scalar", quantize_run, dequantize_run, minmax_run, qbinary__scalar,
                                         lookup_loop, quantize_planes_run};

}  // namespace nnkern
