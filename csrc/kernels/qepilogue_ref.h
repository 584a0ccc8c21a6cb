// The scalar output stage of QEpilogue (kernels/qgemm.h) for one int32 value: shared by the reference GEMM
// and depthwise kernels so both round exactly as the SIMD kernels do (single-rounding fma, clamp, ties to
// even). Baseline header: no intrinsics.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/qgemm.h"

namespace nnkern {

// v: the compensated accumulator of row / channel i; dst: element 0 of the output column.
inline void qepilogue_store_ref(const QEpilogue* ep, int32_t v, size_t i, void* dst) {
  switch (ep->out) {
    case QOut::i32:
      static_cast<int32_t*>(dst)[i] = ep->relu && v < 0 ? 0 : v;
      break;
    case QOut::f32: {
      float y = std::fma(float(v), ep->scale[i], ep->bias ? ep->bias[i] : 0.0f);
      if (ep->relu && !(y >= 0.0f)) y = 0.0f;
      static_cast<float*>(dst)[i] = y;
      break;
    }
    default: {
      float y = std::fma(float(v), ep->scale[i], ep->bias ? ep->bias[i] : 0.0f);
      y = std::fmin(std::fmax(y, ep->lo), ep->hi);
      static_cast<uint8_t*>(dst)[i] = uint8_t(int32_t(std::nearbyint(y)));  // default rounding: ties to even
      break;
    }
  }
}

}  // namespace nnkern
