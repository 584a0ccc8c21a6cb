#include <immintrin.h>

#include "kernels/peak.h"

namespace nnkern {
namespace {

float fma_loop(size_t iters, double* flops_per_iter) {
  __m512 acc[12];
  for (int r = 0; r < 12; ++r) acc[r] = _mm512_set1_ps(float(r));
  const __m512 x = _mm512_set1_ps(0.999f), y = _mm512_set1_ps(1e-7f);
  for (size_t i = 0; i < iters; ++i) {
    for (int r = 0; r < 12; ++r) acc[r] = _mm512_fmadd_ps(acc[r], x, y);
    __asm__ volatile("" : "+v"(acc[0]), "+v"(acc[1]), "+v"(acc[2]), "+v"(acc[3]), "+v"(acc[4]), "+v"(acc[5]),
                     "+v"(acc[6]), "+v"(acc[7]), "+v"(acc[8]), "+v"(acc[9]), "+v"(acc[10]), "+v"(acc[11]));
  }
  __m512 s = acc[0];
  for (int r = 1; r < 12; ++r) s = _mm512_add_ps(s, acc[r]);
  *flops_per_iter = 12.0 * 16 * 2;
  return _mm512_cvtss_f32(s);
}

}  // namespace

const PeakLoop f32_fma_peak__avx512 = fma_loop;

}  // namespace nnkern
