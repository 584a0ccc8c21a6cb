// Scalar reference FP32 GEMM micro-kernel: the oracle for tests and the fallback on any CPU.
// Written for clarity, not speed; accumulates in (tap, k) order like the SIMD kernels' lanes do.
// Both forms are one function: the plain form is the indirect one with one tap (see kernels/f32_gemm.h).
#include <vector>

#include "kernels/f32_gemm_list.h"

namespace nnkern {

void f32_gemm_reference(size_t m, size_t n, size_t k, size_t ks, const float* a, size_t a_stride,
                        const float* const* b, size_t b_tap_stride, size_t b_stride, const float* zero,
                        size_t b_offset, float* c, size_t ldc, const F32Epilogue* ep) {
  std::vector<float> values(ep->tile_hook ? m * n : 0);
  for (size_t j = 0; j < n; ++j) {
    float* cj = f32_c_col(c, ldc, j, *ep);
    for (size_t i = 0; i < m; ++i) {
      float acc = 0.0f;
      for (size_t t = 0; t < ks; ++t) {
        const float* bj = b[t * b_tap_stride + j];
        if (bj != zero) bj = reinterpret_cast<const float*>(reinterpret_cast<const char*>(bj) + b_offset);
        for (size_t p = 0; p < k; ++p) acc += a[(t * k + p) * a_stride + i] * bj[p * b_stride];
      }
      const float* r = ep->residual ? ep->residual + j * ep->ldr + i : nullptr;
      cj[i] = f32_epilogue_scalar(acc, cj + i, i, *ep, r);  // beta == 0: C never read
      if (ep->tile_hook) values[j * m + i] = cj[i];
    }
  }
  if (ep->tile_hook) ep->tile_hook(ep->tile_ctx, F32Tile{ep->tile_i, ep->tile_j, m, n, values.data(), m});
}

namespace {

constexpr int kMR = 8, kNR = 4;

void run(size_t m, size_t n, size_t k, const float* a, size_t a_stride, float* a_copy, const float* const* b,
         size_t b_stride, float* c, size_t ldc, const F32Epilogue* ep) {
  for (size_t p = 0; p < k && a_copy; ++p)
    for (size_t i = 0; i < m; ++i) a_copy[p * kMR + i] = a[p * a_stride + i];
  if (m == 0 || n == 0) return;
  // One tap (b holds n pointers); no pointer is the (null) zero row.
  f32_gemm_reference(m, n, k, 1, a, a_stride, b, 0, b_stride, nullptr, 0, c, ldc, ep);
}

void igemm(size_t m, size_t n, size_t k, size_t ks, const float* a, const float* const* b, const float* zero,
           size_t b_offset, float* c, size_t ldc, const F32Epilogue* ep) {
  if (m == 0 || n == 0) return;
  f32_gemm_reference(m, n, k, ks, a, kMR, b, kNR, 1, zero, b_offset, c, ldc, ep);
}

}  // namespace

const F32GemmKernel f32_gemm_8x4__scalar = {"f32_gemm_8x4__scalar", kMR, kNR, run, igemm};

}  // namespace nnkern
