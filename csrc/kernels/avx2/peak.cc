#include <immintrin.h>

#include "kernels/peak.h"

namespace nnkern {
namespace {

float fma_loop(size_t iters, double* flops_per_iter) {
  __m256 acc[12];
  for (int r = 0; r < 12; ++r) acc[r] = _mm256_set1_ps(float(r));
  const __m256 x = _mm256_set1_ps(0.999f), y = _mm256_set1_ps(1e-7f);
  for (size_t i = 0; i < iters; ++i) {
    for (int r = 0; r < 12; ++r) acc[r] = _mm256_fmadd_ps(acc[r], x, y);
    __asm__ volatile("" : "+x"(acc[0]), "+x"(acc[1]), "+x"(acc[2]), "+x"(acc[3]), "+x"(acc[4]), "+x"(acc[5]),
                     "+x"(acc[6]), "+x"(acc[7]), "+x"(acc[8]), "+x"(acc[9]), "+x"(acc[10]), "+x"(acc[11]));
  }
  __m256 s = acc[0];
  for (int r = 1; r < 12; ++r) s = _mm256_add_ps(s, acc[r]);
  *flops_per_iter = 12.0 * 8 * 2;
  return _mm256_cvtss_f32(s);
}

}  // namespace

const PeakLoop f32_fma_peak__avx2 = fma_loop;

}  // namespace nnkern
