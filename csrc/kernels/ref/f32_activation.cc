// Scalar sigmoid / tanh: the same three schemes as the SIMD kernels, in plain C++ (exact division
// where the SIMD code uses rcp14 / rcp + Newton). Fallback on any CPU; see kernels/f32_activation.h.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/f32_activation.h"
#include "kernels/f32_activation_coeffs.h"
#include "kernels/f32_erf.h"
#include "kernels/f32_exp.h"
#include "kernels/f32_softmax.h"

namespace nnkern {
namespace {

float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
uint32_t to_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

constexpr float kLog2e = 1.44269504f;  // 0x3FB8AA3B
// e^-a underflows to 0 in float32 for a > 103.98; clamping there keeps n small and NaN intact.
constexpr float kExpClamp = 126.0f;

// Scheme A on a = |x| with one of the 16-interval tables: p(t), t = min(tmax, a) (NaN stays NaN).
// tmax is the float just below the table's top (16 or 8), so the index needs no upper clamp.
float minimax_table(float a, uint32_t tmax_bits, uint32_t idx0, const uint32_t* c0s, const uint32_t* c1s,
                    const uint32_t* c2s) {
  const float tmax = from_bits(tmax_bits);
  const float t = a > tmax ? tmax : a;
  uint32_t idx = to_bits(t) >> 22;  // NaN: 511, but p(NaN) is NaN whatever the interval
  idx = idx < idx0 ? idx0 : (idx > idx0 + 15 ? idx0 + 15 : idx);
  const int k = int(idx - idx0);
  const float c0 = from_bits(c0s[k]), c1 = from_bits(c1s[k]), c2 = from_bits(c2s[k]);
  return (c2 * t + c1) * t + c0;
}

// sigmoid(|x|) by scheme A.
float minimax_pos(float a) {
  return minimax_table(a, act_coeffs::kMinimaxTMax, act_coeffs::kMinimaxIdx0, act_coeffs::kMinimaxC0,
                       act_coeffs::kMinimaxC1, act_coeffs::kMinimaxC2);
}

// tanh(|x|) by scheme A with tanh's own table.
float minimax_tanh_pos(float a) {
  return minimax_table(a, act_coeffs::kTanhTMax, act_coeffs::kTanhIdx0, act_coeffs::kTanhC0, act_coeffs::kTanhC1,
                       act_coeffs::kTanhC2);
}

// sigmoid(-a) for a = |x| >= 0 (or NaN) by 2^y polynomial of degree Deg: e = e^-a = p(y) 2^n, e / (1 + e).
template <int Deg>
float exp_neg_sigmoid(float a) {
  const uint32_t* c = Deg == 2 ? act_coeffs::kExp2Deg2 : act_coeffs::kExp2Deg5;
  if (a > kExpClamp) a = kExpClamp;
  const float xp = 0.5f - a * kLog2e;  // e^-a = 2^(xp - 0.5)
  const float n = std::floor(xp);
  const float y = xp - n;
  float p = from_bits(c[Deg]);
  for (int j = Deg - 1; j >= 0; --j) p = p * y + from_bits(c[j]);
  const float e = std::isnan(xp) ? xp : std::ldexp(p, int(n));  // p ~ 2^(y - 0.5)
  return e / (1.0f + e);
}

float sigmoid_one(ActMethod m, float x) {
  const bool neg = std::signbit(x);
  const float a = std::fabs(x);
  if (m == ActMethod::minimax) {
    const float f = minimax_pos(a);
    return neg ? 1.0f - f : f;
  }
  const float f = m == ActMethod::scalef ? exp_neg_sigmoid<2>(a) : exp_neg_sigmoid<5>(a);  // sigmoid(-|x|)
  return neg ? f : 1.0f - f;
}

// tanh(x) = sign(x) p(|x|) (minimax: tanh's own table) or sign(x) (1 - 2 sigmoid(-2|x|)).
float tanh_one(ActMethod m, float x) {
  float t;
  if (m == ActMethod::minimax) {
    t = minimax_tanh_pos(std::fabs(x));
  } else {
    const float a2 = 2.0f * std::fabs(x);
    t = 1.0f - 2.0f * (m == ActMethod::scalef ? exp_neg_sigmoid<2>(a2) : exp_neg_sigmoid<5>(a2));
  }
  return std::isnan(t) ? t : std::copysign(t, x);
}

template <ActMethod M>
void sigmoid_run(size_t n, const float* x, float* y) {
  for (size_t i = 0; i < n; ++i) y[i] = sigmoid_one(M, x[i]);
}
template <ActMethod M>
void tanh_run(size_t n, const float* x, float* y) {
  for (size_t i = 0; i < n; ++i) y[i] = tanh_one(M, x[i]);
}

}  // namespace

void f32_sigmoid__scalar_minimax(size_t n, const float* x, float* y) { sigmoid_run<ActMethod::minimax>(n, x, y); }
void f32_sigmoid__scalar_scalef(size_t n, const float* x, float* y) { sigmoid_run<ActMethod::scalef>(n, x, y); }
void f32_sigmoid__scalar_accurate(size_t n, const float* x, float* y) { sigmoid_run<ActMethod::accurate>(n, x, y); }
void f32_tanh__scalar_minimax(size_t n, const float* x, float* y) { tanh_run<ActMethod::minimax>(n, x, y); }
void f32_tanh__scalar_scalef(size_t n, const float* x, float* y) { tanh_run<ActMethod::scalef>(n, x, y); }
void f32_tanh__scalar_accurate(size_t n, const float* x, float* y) { tanh_run<ActMethod::accurate>(n, x, y); }

NNK_F32_ERF_KERNEL(scalar)
NNK_F32_EXP_NONPOS_KERNEL(scalar)
NNK_F32_GELU_KERNEL(scalar)
NNK_F32_SOFTMAX_KERNEL(scalar)
NNK_F32_POST_OPS_KERNEL(scalar)

const F32ActivationKernels f32_activation__scalar = {
    "scalar",
    {f32_sigmoid__scalar_minimax, f32_sigmoid__scalar_scalef, f32_sigmoid__scalar_accurate},
    {f32_tanh__scalar_minimax, f32_tanh__scalar_scalef, f32_tanh__scalar_accurate},
    {"f32_sigmoid__scalar_minimax", "f32_sigmoid__scalar_scalef", "f32_sigmoid__scalar_accurate"},
    {"f32_tanh__scalar_minimax", "f32_tanh__scalar_scalef", "f32_tanh__scalar_accurate"},
    {nullptr, nullptr, nullptr},  // no streaming variants
    {nullptr, nullptr, nullptr},
    f32_erf__scalar,
    "f32_erf__scalar",
    f32_exp_nonpos__scalar,
    "f32_exp_nonpos__scalar",
    f32_gelu__scalar,
    "f32_gelu__scalar",
    f32_softmax__scalar,
    "f32_softmax__scalar",
    f32_post_ops__scalar,
    "f32_post_ops__scalar",
};

}  // namespace nnkern
