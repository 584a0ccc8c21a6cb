// bfloat16: the upper half of a float32 (sign, 8 exponent bits, 7 mantissa bits), stored as uint16_t bits.
// Conversions in plain C++ for any code (baseline and ISA files alike: static, so each file keeps its own copy).
// Baseline header: no intrinsics.
#pragma once
#include <cstdint>
#include <cstring>

namespace nnkern {

// float32 -> bf16, round to nearest even; a NaN stays a NaN (quieted, sign kept), +-Inf stays +-Inf, and values
// that round past the largest bf16 become Inf (as IEEE rounding does). Denormals round like any other value.
// Branch-free, so that loops of it vectorize (a select, compared as int32: SSE2 has only the signed compare).
static inline uint16_t f32_to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;  // round to nearest, ties to even
  const uint32_t quiet = (u >> 16) | 0x0040u;                         // a NaN stays one, quiet
  return uint16_t(int32_t(u & 0x7fffffffu) > int32_t(0x7f800000u) ? quiet : rounded);
}

// bf16 -> float32, exact.
static inline float bf16_to_f32(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// float32 rounded to the nearest bf16 value, as a float32.
static inline float f32_round_bf16(float x) { return bf16_to_f32(f32_to_bf16(x)); }

}  // namespace nnkern
