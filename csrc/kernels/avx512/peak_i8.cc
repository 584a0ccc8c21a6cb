// The saturating 3-instruction u8 x s8 sequence (vpmaddubsw + vpmaddwd + vpaddd), zmm: the reference
// rate for the exact non-VNNI kernels.
#include <immintrin.h>

#include "kernels/peak_i8.h"

namespace nnkern {
namespace {

#define VEC __m512i
#define SET1 _mm512_set1_epi32
// acc itself is the u8 operand: the three instructions cannot be hoisted out of the loop.
#define DOT(acc, x, y) _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(acc, y), _mm512_set1_epi16(1)))
#define ADD _mm512_add_epi32
#define TO_I32(v) _mm_cvtsi128_si32(_mm512_castsi512_si128(v))
#define OPS_PER_DOT (16 * 4 * 2)
#include "kernels/inc/peak_loop_i8.inc"

}  // namespace

const I8PeakLoop i8_peak__avx512 = i8_loop;

}  // namespace nnkern
