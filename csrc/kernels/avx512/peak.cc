#include <immintrin.h>

#include "kernels/peak.h"

namespace nnkern {
namespace {

#define VEC __m512
#define SET1 _mm512_set1_ps
#define FMA _mm512_fmadd_ps
#define ADD _mm512_add_ps
#define TO_F32 _mm512_cvtss_f32
#define LANES 16
#include "kernels/inc/peak_loop.inc"

}  // namespace

const PeakLoop f32_fma_peak__avx512 = fma_loop;

}  // namespace nnkern
