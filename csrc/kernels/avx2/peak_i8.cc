// The saturating 3-instruction u8 x s8 sequence (vpmaddubsw + vpmaddwd + vpaddd), ymm: the reference
// rate for the exact AVX2 kernel.
#include <immintrin.h>

#include "kernels/peak_i8.h"

namespace nnkern {
namespace {

#define VEC __m256i
#define SET1 _mm256_set1_epi32
// acc itself is the u8 operand: the three instructions cannot be hoisted out of the loop.
#define DOT(acc, x, y) _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(acc, y), _mm256_set1_epi16(1)))
#define ADD _mm256_add_epi32
#define TO_I32(v) _mm_cvtsi128_si32(_mm256_castsi256_si128(v))
#define OPS_PER_DOT (8 * 4 * 2)
#include "kernels/inc/peak_loop_i8.inc"

}  // namespace

const I8PeakLoop i8_peak__avx2 = i8_loop;

}  // namespace nnkern
