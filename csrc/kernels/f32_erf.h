// erf(x) in float32, branch-free so that a plain loop over it vectorizes under each ISA's flags (std::erf does
// not): the f32_activation kernels' erf, which the ONNX plan's Erf and GELU run for float32. The same formula on
// every ISA (no FMA contraction), so every ISA gives the same bits. Baseline header: no intrinsics; static, so each
// kernel file compiles its own copy with its own flags. Its selects are integer masks on the bits (|x|'s bits
// order as the floats do): with a plain select under -ftrapping-math GCC moves each side's float arithmetic into a
// branch (it may trap) and then vectorizes nothing (docs/performance.md, "Erf"). tools/fit_erf.py fits the
// polynomials and checks the formula over a dense sweep of float32: at most 2.7 ulp (1.6e-7 absolute) from the
// exact erf; erf(+-0) = +-0, erf(+-inf) = +-1, NaN -> the same NaN, odd by construction.
//   |x| < 1:  x P(x^2), P of degree 6;
//   |x| >= 1: 1 - e^(-a^2) Q(a) with a = min(|x|, 4) (erf(4) rounds to 1), Q ~ erfc(a) e^(a^2) of degree 11 in
//            a - 2.5, e^y = 2^n e^r (n = round(y / ln 2), r by a two-part ln 2, e^r of degree 7), sign of x;
//            Q and e^r by Estrin's scheme (erf_estrin below).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace nnkern {

static constexpr float kErfSmall[] = {
    1.12837923f, -0.376126289f, 0.112836123f, -0.0268548094f,
    0.00519005349f, -0.000802435388f, 7.89820988e-05f};
static constexpr float kErfLarge[] = {
    0.210806355f, -0.0743473619f, 0.0249381736f, -0.00800147466f,
    0.00246609282f, -0.000733712979f, 0.000212832048f, -5.89427073e-05f,
    1.44257774e-05f, -4.00934323e-06f, 1.65884182e-06f, -3.83579874e-07f};

// e^r's Taylor coefficients 1 / k!.
static constexpr float kErfExp[] = {1.0f, 1.0f, 0.5f, 1.0f / 6.0f, 1.0f / 24.0f, 1.0f / 120.0f, 1.0f / 720.0f,
                                    1.0f / 5040.0f};

// c[0] + c[1] t + ... + c[N-1] t^(N-1) by Estrin's scheme: pairs c[2i] + c[2i+1] t, then pairs of those in t^2,
// in t^4, ... (an odd count's last term carried up). Its chain of dependent operations is about 2 log2 N long
// where Horner's is 2 N, so a vector loop keeps more iterations in flight. The large arm's two polynomials take
// it; the small arm keeps Horner's, which rounds better there.
template <int N>
static inline __attribute__((always_inline)) float erf_estrin(const float (&c)[N], float t) {
  if constexpr (N == 1) {
    return c[0];
  } else {
    constexpr int kHalf = (N + 1) / 2;
    float pairs[kHalf];
    for (int i = 0; i < N / 2; ++i) pairs[i] = c[2 * i] + c[2 * i + 1] * t;
    if constexpr (N % 2 == 1) pairs[kHalf - 1] = c[N - 1];
    return erf_estrin(pairs, t * t);
  }
}

static inline uint32_t erf_bits(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}
static inline float erf_float(uint32_t b) {
  float v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

static inline __attribute__((always_inline)) float erf_f32(float x) {
  const uint32_t xb = erf_bits(x), ab = xb & 0x7fffffffu;  // |x|: its bits order as the floats do
  const float a = erf_float(ab);
  // small: a P(a^2) (Inf or NaN where a is large: not selected)
  const float s = a * a;
  float p = kErfSmall[6];
  for (int k = 5; k >= 0; --k) p = p * s + kErfSmall[k];
  const float small = a * p;
  // large: 1 - e^(-b^2) Q(b), b = min(a, 4) (NaN and Inf: 4, so the conversion to an integer below is defined)
  const float b = erf_float(ab < 0x40800000u ? ab : 0x40800000u);  // 4.0f
  const float q = erf_estrin(kErfLarge, b - 2.5f);
  const float y = -(b * b);  // in [-16, 0]: 2^n stays normal
  const float shifted = y * 1.44269504f + 12582912.0f;  // 1.5 * 2^23: rounds y / ln 2 to an integer n
  const float n = shifted - 12582912.0f;
  const float r = (y - n * 0.693145751953125f) - n * 1.42860677e-06f;
  const float e = erf_estrin(kErfExp, r);
  const float scale = erf_float(uint32_t(static_cast<int32_t>(n) + 127) << 23);
  const float large = 1.0f - e * scale * q;  // in [erf(1), 1]: positive
  // Blends by masks: both sides are used whatever |x|, so GCC cannot sink either into a branch.
  const uint32_t use_small = 0u - uint32_t(ab < 0x3f800000u), is_nan = 0u - uint32_t(ab > 0x7f800000u);  // 1.0f, Inf
  const uint32_t v = (erf_bits(small) & use_small) | (erf_bits(large) & ~use_small);
  return erf_float((xb & is_nan) | ((v | (xb & 0x80000000u)) & ~is_nan));  // NaN as it came; the sign of x
}

// Defines f32_erf__<isa>, the f32_activation kernels' erf: the plain loop, vectorized by the compiler under the
// including file's flags. At namespace nnkern scope.
#define NNK_F32_ERF_KERNEL(isa)                                   \
  void f32_erf__##isa(size_t n, const float* x, float* y) {       \
    for (size_t i = 0; i < n; ++i) y[i] = erf_f32(x[i]);          \
  }

// Defines f32_gelu__<isa>: GELU's exact form 0.5 x (1 + erf(x / sqrt 2)) in one loop (the ONNX plan's Gelu and the
// Div-Erf-Add-Mul pattern torch exports), y = x allowed. At namespace nnkern scope.
#define NNK_F32_GELU_KERNEL(isa)                                                      \
  void f32_gelu__##isa(size_t n, const float* x, float* y) {                          \
    for (size_t i = 0; i < n; ++i) {                                                  \
      const float v = x[i];                                                           \
      y[i] = 0.5f * v * (1.0f + erf_f32(v * 0.707106781186547524f));                  \
    }                                                                                 \
  }

}  // namespace nnkern
