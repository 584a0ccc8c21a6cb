#include <immintrin.h>

#include "kernels/peak_i8.h"

namespace nnkern {
namespace {

#define VEC __m256i
#define SET1 _mm256_set1_epi32
#define DOT(acc, x, y) _mm256_dpbusd_avx_epi32(acc, x, y)
#define ADD _mm256_add_epi32
#define TO_I32(v) _mm_cvtsi128_si32(_mm256_castsi256_si128(v))
#define OPS_PER_DOT (8 * 4 * 2)
#include "kernels/inc/peak_loop_i8.inc"

}  // namespace

const I8PeakLoop i8_peak__avxvnni = i8_loop;

}  // namespace nnkern
