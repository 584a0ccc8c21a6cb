// Scalar reference bf16 GEMM micro-kernel: the oracle for tests and the fallback on any CPU. Each pair's odd
// product, then its even one, is added to the float32 sum (kernels/bf16_gemm.h): the products of bf16 values are
// exact in float32, so this is vdpbf16ps's sum to the bit (denormals aside).
#include <algorithm>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/bf16_gemm_list.h"

namespace nnkern {

void bf16_gemm_reference(size_t m, size_t n, size_t kq, size_t mr, const uint16_t* a, const uint16_t* const* b,
                         float* c, size_t ldc, const F32Epilogue* ep) {
  // The rows' sums side by side, the pairs in the outer loop: GCC 12's -O3 vectorized the sum of one row over q
  // (an in-order reduction with two additions per iteration) into wrong sums.
  std::vector<float> acc(m);
  for (size_t j = 0; j < n; ++j) {
    float* cj = f32_c_col(c, ldc, j, *ep);
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (size_t q = 0; q < kq; ++q) {
      const float b1 = bf16_to_f32(b[j][2 * q + 1]), b0 = bf16_to_f32(b[j][2 * q]);
      const uint16_t* ap = a + q * 2 * mr;
      for (size_t i = 0; i < m; ++i) {
        acc[i] += bf16_to_f32(ap[2 * i + 1]) * b1;
        acc[i] += bf16_to_f32(ap[2 * i]) * b0;
      }
    }
    for (size_t i = 0; i < m; ++i) cj[i] = f32_epilogue_scalar(acc[i], cj + i, i, *ep);  // beta == 0: C never read
  }
}

namespace {

constexpr int kMR = 8, kNR = 4;

void run(size_t m, size_t n, size_t kq, const uint16_t* a, const void* const* b, float* c, size_t ldc,
         const F32Epilogue* ep) {
  bf16_gemm_reference(m, n, kq, kMR, a, reinterpret_cast<const uint16_t* const*>(b), c, ldc, ep);
}

}  // namespace

const Bf16GemmKernel bf16_gemm_8x4__scalar = {"bf16_gemm_8x4__scalar", kMR, kNR, false, run};

}  // namespace nnkern
