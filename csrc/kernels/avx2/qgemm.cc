// Exact integer GEMM micro-kernels for AVX2, ymm, tile 16 x 6 (12 accumulators + 2 weight vectors + a broadcast
// + a temporary = 16 ymm):
// - s16 x s16 with vpmaddwd + vpaddd, for any int8 weights (seed I1): VPMADDUBSW's int16 pair sum saturates for
//   u8 x s8, so u8/s8 activations are widened to int16 by the driver, weights packed as int16 pairs, and
//   VPMADDWD + VPADDD accumulate exactly (modulo 2^32). 2 uops per 16 multiply-adds, twice the weight bytes.
//   s16w8 keeps the weights as int8 pairs and sign-extends each vector as it loads it (VPMOVSXBW, one more
//   instruction per weight vector): the same products from half the panel bytes, for 8-bit weights; s16
//   stays for int16 weights (qgemm's s16 x s16).
// - u8 x s8 with vpmaddubsw + vpmaddwd (by ones) + vpaddd, for weights in [-64, 64] only (weight_bits 7): a pair
//   sum is then at most 255 * 64 * 2 = 32640 and at least -32640, inside int16, so nothing
//   saturates. 3 uops per 32 multiply-adds, the activations read as bytes: the models quantized with 7-bit
//   weights (onnxruntime's reduce_range) run on it.
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
struct S16W8 : S16 {  // the panel holds int8 pairs: 16 bytes sign-extended per vector
  using AElem = int8_t;
  static NNK_INLINE V load_a(const int8_t* p) {
    return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
};
struct U8S8Narrow : YmmOps {  // vpdpbusd's sum of four products, for 7-bit weights a
  static constexpr int G = 4;
  using AElem = int8_t;
  using BElem = uint8_t;
  static NNK_INLINE V dot(V acc, V b, V a) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(b, a), _mm256_set1_epi16(1)));
  }
};

constexpr QGemmKernel narrow_weights(QGemmKernel k) {  // constexpr: constant-initialized, before any list reads it
  k.weight_bits = 7;
  return k;
}

}  // namespace

extern const QGemmKernel s16w8_gemm_16x6c2__avx2 = qgemm_with_panels(
    {"s16w8_gemm_16x6c2__avx2", 16, 6, 2, QGemmTemplate<S16W8, 16, 6>::run, QKind::s16w8},
    QGemmTemplate<S16W8, 16, 6>::run_panels);
extern const QGemmKernel s16_gemm_16x6c2__avx2 = qgemm_with_panels(
    {"s16_gemm_16x6c2__avx2", 16, 6, 2, QGemmTemplate<S16, 16, 6>::run, QKind::s16}, QGemmTemplate<S16, 16, 6>::run_panels);
extern const QGemmKernel u8s8_gemm_16x6c4__avx2 = qgemm_with_panels(
    narrow_weights({"u8s8_gemm_16x6c4__avx2", 16, 6, 4, QGemmTemplate<U8S8Narrow, 16, 6>::run}),
    QGemmTemplate<U8S8Narrow, 16, 6>::run_panels);

}  // namespace nnkern
