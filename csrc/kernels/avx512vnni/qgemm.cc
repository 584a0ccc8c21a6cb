// Integer GEMM micro-kernels for AVX-512 VNNI: u8 x s8 with vpdpbusd and s16 x s16 with vpdpwssd, zmm.
//
// Tile 64 x 6 (MR x NR), in the spirit of seed example 7-1 (broadcast 4 activation bytes, load 64 bytes of
// packed weights, many independent accumulators): per group of 4 k, 4 zmm loads of packed weights (64
// channels x 4 bytes), 6 vpbroadcastd of 4 activation bytes, 24 vpdpbusd into 24 accumulators. Register
// budget: 24 accumulators + 4 weight vectors + 1-2 broadcasts <= 32 zmm. 24 independent chains cover
// 2 ports x 5-cycle latency more than twice; loads are 10 per 24 vpdpbusd, within 2-3 loads/cycle.
// 6 B-column pointers + A + offset + counter fit the GPRs (see the FP32 kernel's note on 12 columns).
// The weight operand is s8 and the activation u8 (vpdpbusd's unsigned operand is the broadcast one).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/qgemm.h"

namespace nnkern {
namespace {

#include "kernels/qgemm_tile.inc"
#include "kernels/qgemm_zmm.inc"

struct U8S8 : ZmmOps {
  static constexpr int G = 4;
  using AElem = int8_t;
  using BElem = uint8_t;
  static NNK_INLINE V dot(V acc, V b, V a) { return _mm512_dpbusd_epi32(acc, b, a); }
};
struct S16 : ZmmOps {
  static constexpr int G = 2;
  using AElem = int16_t;
  using BElem = int16_t;
  static NNK_INLINE V dot(V acc, V b, V a) { return _mm512_dpwssd_epi32(acc, b, a); }
};

}  // namespace

const QGemmKernel u8s8_gemm_64x6__avx512vnni = {"u8s8_gemm_64x6__avx512vnni", 64, 6, 4, QGemmTemplate<U8S8, 64, 6>::run};
const QGemmKernel s16_gemm_64x6__avx512vnni = {"s16_gemm_64x6__avx512vnni", 64, 6, 2, QGemmTemplate<S16, 64, 6>::run};

}  // namespace nnkern
