// Quantize / dequantize driver: per tensor or per channel over an (outer, C, inner) view, threaded.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/isa.h"
#include "kernels/quantize.h"

namespace nnkern {

// x / q viewed as (outer, C, inner), C-contiguous; scale[c], zp[c] for c < C (C == 1: per tensor).
void quantize(const float* x, uint8_t* q, size_t outer, size_t C, size_t inner, const float* scale, const int32_t* zp,
              bool is_signed);
void dequantize(const uint8_t* q, float* x, size_t outer, size_t C, size_t inner, const float* scale,
                const int32_t* zp, bool is_signed);
// x (N, K, HW) float32 planes -> q (N, HW, K), one scale and zero point, 1 <= K <= 4: QuantizeLinear of an NCHW
// input of a few channels written in NHWC order (kernels/quantize.h quantize_planes), threaded by pixel runs.
void quantize_to_nhwc(const float* x, uint8_t* q, size_t N, size_t K, size_t HW, float scale, int32_t zp,
                      bool is_signed);
// The smallest and largest non-NaN x[i], i < n (+inf / -inf if there are none), threaded by chunks.
void minmax(const float* x, size_t n, float* lo, float* hi);

}  // namespace nnkern
