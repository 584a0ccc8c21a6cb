// Integer GEMM micro-kernels for AVX-VNNI (VEX-encoded vpdpbusd / vpdpwssd on ymm, no AVX-512 needed):
// u8 x s8 and s16 x s16. Tile 16 x 6 as the FP32 AVX2 kernel (seed O1): 12 accumulators + 2 weight
// vectors + a broadcast in the 16 ymm registers. Selected where AVX-512 VNNI is absent (or capped off);
// on a CPU with both, the zmm kernel does twice the work per instruction at the same port count.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/qgemm.h"

namespace nnkern {
namespace {

#include "kernels/inc/qgemm_tile.inc"
#include "kernels/inc/qgemm_ymm.inc"

struct U8S8 : YmmOps {
  static constexpr int G = 4;
  using AElem = int8_t;
  using BElem = uint8_t;
  static NNK_INLINE V dot(V acc, V b, V a) { return _mm256_dpbusd_avx_epi32(acc, b, a); }
};
struct S16 : YmmOps {
  static constexpr int G = 2;
  using AElem = int16_t;
  using BElem = int16_t;
  static NNK_INLINE V dot(V acc, V b, V a) { return _mm256_dpwssd_avx_epi32(acc, b, a); }
};

}  // namespace

extern const QGemmKernel u8s8_gemm_16x6c4__avxvnni = qgemm_with_panels(
    {"u8s8_gemm_16x6c4__avxvnni", 16, 6, 4, QGemmTemplate<U8S8, 16, 6>::run}, QGemmTemplate<U8S8, 16, 6>::run_panels);
extern const QGemmKernel s16_gemm_16x6c2__avxvnni = qgemm_with_panels(
    {"s16_gemm_16x6c2__avxvnni", 16, 6, 2, QGemmTemplate<S16, 16, 6>::run, QKind::s16}, QGemmTemplate<S16, 16, 6>::run_panels);

}  // namespace nnkern
