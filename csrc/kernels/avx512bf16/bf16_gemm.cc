// bf16 GEMM micro-kernel for AVX512_BF16 (kernels/bf16_gemm.h): vdpbf16ps adds a pair of bf16 products into each
// float32 lane, 32 multiply-adds per instruction against an FP32 FMA's 16. 48x8, the FP32 AVX-512 tile: per pair,
// 3 A vectors of 16 pairs and 8 broadcast B pairs (vpbroadcastd) into 24 accumulators, 24 independent chains.
// (32x12 spilled its 12 B pointers to the stack: a reload per broadcast.)
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/bf16_gemm_list.h"

#define NNK_INLINE inline __attribute__((always_inline))

namespace nnkern {
namespace {

#include "kernels/inc/f32_zmm.inc"

struct Avx512Bf16Pairs {
  using A = __m512i;
  using B = __m512i;
  using BElem = uint16_t;
  static NNK_INLINE A load_a(const uint16_t* p) { return _mm512_loadu_si512(p); }
  static NNK_INLINE B bcast_b(const uint16_t* p) {
    int32_t pair;
    __builtin_memcpy(&pair, p, 4);
    return _mm512_set1_epi32(pair);
  }
  static NNK_INLINE __m512 dot(__m512 acc, A a, B b) { return _mm512_dpbf16_ps(acc, (__m512bh)a, (__m512bh)b); }
};

#include "kernels/inc/bf16_gemm_tile.inc"

using Kernel = Bf16GemmTemplate<Avx512F32, Avx512Bf16Pairs, 48, 8>;

}  // namespace

const Bf16GemmKernel bf16_gemm_48x8__avx512bf16 = {"bf16_gemm_48x8__avx512bf16", 48, 8, false, Kernel::run};

}  // namespace nnkern
