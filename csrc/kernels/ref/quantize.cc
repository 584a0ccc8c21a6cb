// Scalar reference quantize / dequantize (kernels/quantize.h): the oracle and the fallback.
#include <cmath>

#include "kernels/quantize.h"

namespace nnkern {
namespace {

void quantize_run(const float* x, uint8_t* q, size_t n, const float* scale, const int32_t* zp, size_t stride,
                  bool is_signed) {
  const float lo = is_signed ? -128.0f : 0.0f, hi = is_signed ? 127.0f : 255.0f;
  for (size_t i = 0; i < n; ++i) {
    const float s = scale[i * stride], z = float(zp[i * stride]);
    float t = std::nearbyint(x[i] / s) + z;  // default rounding mode: ties to even
    t = t < lo ? lo : t > hi ? hi : t;
    if (std::isnan(x[i])) t = z;
    q[i] = uint8_t(int32_t(t));
  }
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
                                         lookup_loop};

}  // namespace nnkern
