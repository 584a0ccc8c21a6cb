// The residual stage of QConv2d (ops/qconv/layer.h QConvOutput): a second pass over the float32 pre-activation
// that adds the dequantized residual, then ReLU / requantizes. Plain float32 operations, one rounding each
// (no contraction: -ffp-contract=off), so numpy reproduces them bit for bit.
#include <algorithm>
#include <cstdint>

#include "core/threadpool.h"
#include "ops/qconv/layer.h"

namespace nnkern {
namespace {

constexpr size_t kChunk = 1 << 14;  // elements per task

// Round half to even of |v| <= 2^22 in plain float arithmetic (the default rounding mode does it on the add):
// the same result as std::nearbyint, which is a library call per element the compiler cannot vectorize.
inline float round_even(float v) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  return (v + kMagic) - kMagic;
}

template <typename R, typename C>
void residual_chunk(const float* __restrict t, const R* __restrict r, C* __restrict c, size_t n,
                    const QConvOutput& o) {
  const float zr = float(o.residual_zero), f = o.residual_factor, lo = o.lo, hi = o.hi;
  const bool relu = o.relu;
  for (size_t i = 0; i < n; ++i) {
    const float p = (float(r[i]) - zr) * f;  // float(r) - zr is exact (|.| < 2^9)
    const float y = t[i] + p;
    if constexpr (sizeof(C) == 4) {
      c[i] = relu ? (y < 0.0f ? 0.0f : y) : y;
    } else {  // the clamp keeps |y| <= 255 (NaN cannot occur: t and p are finite)
      const float v = y < lo ? lo : (y > hi ? hi : y);
      c[i] = C(int32_t(round_even(v)));
    }
  }
}

template <typename R>
void residual_typed(const float* t, const R* r, size_t i0, size_t n, const QConvOutput& o) {
  switch (o.out) {
    case QOut::f32: residual_chunk(t + i0, r + i0, static_cast<float*>(o.c) + i0, n, o); break;
    case QOut::u8: residual_chunk(t + i0, r + i0, static_cast<uint8_t*>(o.c) + i0, n, o); break;
    case QOut::s8: residual_chunk(t + i0, r + i0, static_cast<int8_t*>(o.c) + i0, n, o); break;
    default: break;  // int32 output takes no residual (checked by the caller)
  }
}

}  // namespace

void qconv_add_residual(const float* t, size_t count, const QConvOutput& o) {
  parallel_for((count + kChunk - 1) / kChunk, [&](size_t task) {
    const size_t i0 = task * kChunk, n = std::min(kChunk, count - i0);
    if (o.residual_type == QType::s8)
      residual_typed(t, static_cast<const int8_t*>(o.residual), i0, n, o);
    else
      residual_typed(t, static_cast<const uint8_t*>(o.residual), i0, n, o);
  });
}

}  // namespace nnkern
