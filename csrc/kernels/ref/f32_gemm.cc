// Scalar reference FP32 GEMM micro-kernel: the oracle for tests and the fallback on any CPU.
// Written for clarity, not speed; accumulates in k order like the SIMD kernels' lanes do.
#include "kernels/f32_gemm.h"

namespace nnkern {
namespace {

constexpr int kMR = 8, kNR = 4;

float apply_epilogue(float acc, float old, size_t i, const F32Epilogue& ep) {
  float v = ep.alpha * acc;
  if (ep.beta != 0.0f) v += ep.beta * old;  // ordered as the SIMD kernels: alpha*acc, +beta*C, +bias
  if (ep.bias) v += ep.bias[i];
  if (ep.clamp) {
    // max/min that keep NaN: NaN compares false, so it passes through unchanged.
    if (v < ep.clamp_min) v = ep.clamp_min;
    if (v > ep.clamp_max) v = ep.clamp_max;
  }
  return v;
}

void f32_gemm_ref_run(size_t m, size_t n, size_t k, const float* a, size_t a_stride, float* a_copy,
                      const float* const* b, size_t b_stride, float* c, size_t ldc, const F32Epilogue* ep) {
  for (size_t p = 0; p < k && a_copy; ++p)
    for (size_t i = 0; i < m; ++i) a_copy[p * kMR + i] = a[p * a_stride + i];
  for (size_t j = 0; j < n; ++j) {
    for (size_t i = 0; i < m; ++i) {
      float acc = 0.0f;
      for (size_t p = 0; p < k; ++p) acc += a[p * a_stride + i] * b[j][p * b_stride];
      float old = ep->beta != 0.0f ? c[j * ldc + i] : 0.0f;  // beta == 0: never read C
      c[j * ldc + i] = apply_epilogue(acc, old, i, *ep);
    }
  }
}

}  // namespace

const F32GemmKernel f32_gemm_ref = {"f32_gemm_8x4__scalar", kMR, kNR, f32_gemm_ref_run};

}  // namespace nnkern
