#include <immintrin.h>

#include "kernels/peak_i8.h"

namespace nnkern {
namespace {

#define VEC __m512i
#define SET1 _mm512_set1_epi32
#define DOT(acc, x, y) _mm512_dpbusd_epi32(acc, x, y)
#define ADD _mm512_add_epi32
#define TO_I32(v) _mm_cvtsi128_si32(_mm512_castsi512_si128(v))
#define OPS_PER_DOT (16 * 4 * 2)
#include "kernels/inc/peak_loop_i8.inc"

}  // namespace

const I8PeakLoop i8_peak__avx512vnni = i8_loop;

}  // namespace nnkern
