// Scalar reference of the skinny-GEMM kernels (kernels/f32_gemv.h): the oracle and the fallback.
#include "kernels/f32_gemv.h"

namespace nnkern {
namespace {

constexpr int kMR = 2, kNR = 4;

void rows_ref(size_t n, size_t k, const float* x, size_t incx, const float* b, size_t ldb, float* acc) {
  for (size_t p = 0; p < k; ++p)
    for (size_t j = 0; j < n; ++j) acc[j] += x[p * incx] * b[p * ldb + j];
}

void store_ref(size_t n, const float* acc, float* c, const F32Epilogue* ep) {
  for (size_t j = 0; j < n; ++j) c[j] = f32_epilogue_scalar(acc[j], c + j, j, *ep);
}

void dot_ref(size_t m, size_t n, size_t k, const float* a, size_t lda, const float* bt, size_t ldbt, float* c,
             size_t ldc, const F32Epilogue* ep) {
  for (size_t i = 0; i < m; ++i)
    for (size_t j = 0; j < n; ++j) {
      float s = 0.0f;
      for (size_t p = 0; p < k; ++p) s += a[i * lda + p] * bt[j * ldbt + p];
      c[i * ldc + j] = f32_epilogue_scalar(s, c + i * ldc + j, j, *ep);
    }
}

}  // namespace

const F32GemvKernel f32_gemv__scalar = {"f32_gemv__scalar", rows_ref, store_ref, kMR, kNR, dot_ref};

}  // namespace nnkern
