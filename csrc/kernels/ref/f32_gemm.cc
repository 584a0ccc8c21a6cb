// Scalar reference FP32 GEMM micro-kernel: the oracle for tests and the fallback on any CPU.
// Written for clarity, not speed; accumulates in k order like the SIMD kernels' lanes do.
#include "kernels/f32_gemm.h"

namespace nnkern {
namespace {

constexpr int kMR = 8, kNR = 4;

void f32_gemm_ref_run(size_t m, size_t n, size_t k, const float* a, size_t a_stride, float* a_copy,
                      const float* const* b, size_t b_stride, float* c, size_t ldc, const F32Epilogue* ep) {
  for (size_t p = 0; p < k && a_copy; ++p)
    for (size_t i = 0; i < m; ++i) a_copy[p * kMR + i] = a[p * a_stride + i];
  for (size_t j = 0; j < n; ++j) {
    for (size_t i = 0; i < m; ++i) {
      float acc = 0.0f;
      for (size_t p = 0; p < k; ++p) acc += a[p * a_stride + i] * b[j][p * b_stride];
      c[j * ldc + i] = f32_epilogue_scalar(acc, c + j * ldc + i, i, *ep);  // beta == 0: C never read
    }
  }
}

}  // namespace

const F32GemmKernel f32_gemm_ref = {"f32_gemm_8x4__scalar", kMR, kNR, f32_gemm_ref_run};

}  // namespace nnkern
