// bf16 GEMM micro-kernel for AVX2 + FMA, the x86 fallback without bf16 instructions (kernels/bf16_gemm_list.h):
// vdpbf16ps's sums (kernels/bf16_gemm.h) from float32 FMAs, the same bits as the scalar reference. Each A vector of
// 8 pairs is unpacked into its odd members (the pairs' upper 16 bits, masked) and even ones (shifted up): a bf16 is
// the upper half of a float32, so each half is already the exact float. B comes as float32 values (b_f32: the
// driver widens the rounded rows), so each of a pair's two members is a plain vbroadcastss from memory.
// 16x5: 10 accumulators + 4 unpacked A + 2 broadcasts fill the 16 ymm; per pair 20 FMAs, 4 unpacking ops, 2 A
// loads and 10 broadcasts.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/bf16_gemm_list.h"

#define NNK_INLINE inline __attribute__((always_inline))

namespace nnkern {
namespace {

#include "kernels/inc/f32_ymm.inc"

struct Avx2Bf16Pairs {
  struct A { __m256 odd, even; };
  using B = A;
  using BElem = float;
  static NNK_INLINE A load_a(const uint16_t* p) {
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return {_mm256_castsi256_ps(_mm256_and_si256(w, _mm256_set1_epi32(int32_t(0xffff0000u)))),
            _mm256_castsi256_ps(_mm256_slli_epi32(w, 16))};
  }
  static NNK_INLINE B bcast_b(const float* p) { return {_mm256_broadcast_ss(p + 1), _mm256_broadcast_ss(p)}; }
  static NNK_INLINE __m256 dot(__m256 acc, const A& a, const B& b) {
    return _mm256_fmadd_ps(a.even, b.even, _mm256_fmadd_ps(a.odd, b.odd, acc));
  }
};

#include "kernels/inc/bf16_gemm_tile.inc"

using Kernel = Bf16GemmTemplate<Avx2F32, Avx2Bf16Pairs, 16, 5>;

}  // namespace

const Bf16GemmKernel bf16_gemm_16x5__avx2 = {"bf16_gemm_16x5__avx2", 16, 5, true, Kernel::run};

}  // namespace nnkern
