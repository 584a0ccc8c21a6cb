// Exact integer GEMM micro-kernel for AVX2: s16 x s16 with vpmaddwd + vpaddd, ymm.
//
// Bit-exactness method (seed I1): as the AVX-512 (BW) kernel, VPMADDUBSW (whose int16 pair sum saturates
// for u8 x s8) is never used. u8/s8 activations are widened to int16 by the driver, weights packed as
// int16 pairs, and VPMADDWD + VPADDD accumulate exactly (modulo 2^32). Cost: 2 uops per 16
// multiply-adds versus 3 per 32 for the saturating sequence (75% of its rate), twice the weight bytes.
// Tile 16 x 6: 12 accumulators + 2 weight vectors + a broadcast + the vpmaddwd temporary = 16 ymm.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/qgemm.h"

namespace nnkern {
namespace {

#include "kernels/inc/qgemm_tile.inc"
#include "kernels/inc/qgemm_ymm.inc"

struct S16 : YmmOps {
  static constexpr int G = 2;
  using AElem = int16_t;
  using BElem = int16_t;
  static NNK_INLINE V dot(V acc, V b, V a) { return _mm256_add_epi32(acc, _mm256_madd_epi16(b, a)); }
};

}  // namespace

extern const QGemmKernel s16_gemm_16x6c2__avx2 = {"s16_gemm_16x6c2__avx2", 16, 6, 2, QGemmTemplate<S16, 16, 6>::run, QKind::s16};

}  // namespace nnkern
