// Exact integer GEMM micro-kernel for AVX-512 (BW) without VNNI: s16 x s16 with vpmaddwd + vpaddd, zmm.
//
// Bit-exactness method (seed I1): VPMADDUBSW's u8 x s8 pair sum saturates at int16 (255 * -128 * 2 =
// -65280), so it is never used. Instead u8 (or s8) activations are widened to int16 once per call by the
// driver (an M x K pass) and the weights are packed as int16 pairs; VPMADDWD then forms exact 32-bit
// pair sums (its only saturating case, both pairs -32768 * -32768, gives 0x80000000 = 2^31 modulo 2^32,
// so it too is exact modulo 2^32) and VPADDD accumulates.
// Cost: 2 uops (vpmaddwd + vpaddd) per 32 multiply-adds, versus 3 uops (vpmaddubsw + vpmaddwd + vpaddd) per
// 64 for the saturating sequence: 75% of its rate on the two vector ports, and twice the weight bytes
// (int16) streamed from the caches. The same kernel is qgemm16's AVX-512 kernel.
// Tile 64 x 6: 24 accumulators + 4 weight vectors + a broadcast + the vpmaddwd temporary <= 32 zmm.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/qgemm.h"

namespace nnkern {
namespace {

#include "kernels/inc/qgemm_tile.inc"
#include "kernels/inc/qgemm_zmm.inc"

struct S16 : ZmmOps {
  static constexpr int G = 2;
  using AElem = int16_t;
  using BElem = int16_t;
  static NNK_INLINE V dot(V acc, V b, V a) { return _mm512_add_epi32(acc, _mm512_madd_epi16(b, a)); }
};

}  // namespace

extern const QGemmKernel s16_gemm_64x6c2__avx512 = qgemm_with_panels(
    {"s16_gemm_64x6c2__avx512", 64, 6, 2, QGemmTemplate<S16, 64, 6>::run, QKind::s16}, QGemmTemplate<S16, 64, 6>::run_panels);

}  // namespace nnkern
