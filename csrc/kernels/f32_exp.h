// e^x for x <= 0 in float32 (softmax's and log-sum-exp's shifted inputs; the result is wrong above 0), branch-free
// so that a plain loop over it vectorizes under each ISA's flags: the f32_activation kernels' exp_nonpos, which
// the ONNX plan's Softmax runs. x = k ln 2 + r with |r| <= ln 2 / 2 (ln 2 in two parts), e^r by Cephes' degree-6
// polynomial, 2^k built in the exponent field. Within 1 ulp wherever e^x is a normal float32 (tested on every
// 97th float32 of [-88, 0]); where e^x is subnormal (x below about -87.34) within 2^-126 of it, and 0 below about
// -87.68, where 2^k would be 2^-127 (an exponent field of 0; the arguments are clamped at -88); NaN for NaN. The
// same formula on every ISA (no FMA contraction): the same bits.
// Baseline header: no intrinsics; static, so each kernel file compiles its own copy with its own flags.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace nnkern {

static inline __attribute__((always_inline)) float exp_nonpos_f32(float x) {
  // The clamp works on the bits with an integer min: g++ turns a float select into a branch around the
  // computation that follows (a constant in the clamped arm), and the loops calling this would not vectorize.
  uint32_t xb;
  std::memcpy(&xb, &x, 4);
  const uint32_t mag = xb & 0x7FFFFFFFu;
  const uint32_t cb = mag > 0x7F800000u ? xb : (0x80000000u | std::min(mag, 0x42B00000u));  // NaN, or -min(|x|, 88)
  float xc;
  std::memcpy(&xc, &cb, 4);
  const float magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer, held in the low mantissa bits
  const float t = xc * 1.44269504088896341f + magic;
  uint32_t tb;
  std::memcpy(&tb, &t, 4);
  const float k = t - magic;
  float r = xc - k * 0.693359375f;
  r = r - k * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = p * (r * r) + r + 1.0f;
  const uint32_t sb = (tb - 0x4B400000u + 127u) << 23;  // k + 127 in the exponent field, k in [-127, 0]
  float scale;
  std::memcpy(&scale, &sb, 4);
  return e * scale;
}

// Defines f32_exp_nonpos__<isa>: the plain loop, vectorized by the compiler under the including file's flags. At
// namespace nnkern scope.
#define NNK_F32_EXP_NONPOS_KERNEL(isa)                                \
  void f32_exp_nonpos__##isa(size_t n, const float* x, float* y) {    \
    for (size_t i = 0; i < n; ++i) y[i] = exp_nonpos_f32(x[i]);       \
  }

}  // namespace nnkern
