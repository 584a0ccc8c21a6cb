#include <immintrin.h>

#include "kernels/peak.h"

namespace nnkern {
namespace {

#define VEC __m256
#define SET1 _mm256_set1_ps
#define FMA _mm256_fmadd_ps
#define ADD _mm256_add_ps
#define TO_F32 _mm256_cvtss_f32
#define LANES 8
#include "kernels/inc/peak_loop.inc"

}  // namespace

const PeakLoop f32_fma_peak__avx2 = fma_loop;

}  // namespace nnkern
