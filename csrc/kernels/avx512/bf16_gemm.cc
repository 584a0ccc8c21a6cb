// bf16 GEMM micro-kernel for AVX-512 without AVX512_BF16 (Skylake-SP, Cascade Lake, Ice Lake): the AVX2 fallback's
// scheme (kernels/avx2/bf16_gemm.cc) on zmm, vdpbf16ps's sums from float32 FMAs, the same bits as the scalar
// reference. Each A vector of 16 pairs is unpacked into its odd members (masked) and even ones (shifted up); B comes
// as float32 values (b_f32), each pair member a broadcast. 32x8: 16 accumulators + 4 unpacked A + 2 broadcasts.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/bf16_gemm_list.h"

#define NNK_INLINE inline __attribute__((always_inline))

namespace nnkern {
namespace {

#include "kernels/inc/f32_zmm.inc"

struct Avx512Bf16Unpacked {
  struct A { __m512 odd, even; };
  using B = A;
  using BElem = float;
  static NNK_INLINE A load_a(const uint16_t* p) {
    const __m512i w = _mm512_loadu_si512(p);
    return {_mm512_castsi512_ps(_mm512_and_si512(w, _mm512_set1_epi32(int32_t(0xffff0000u)))),
            // (the all-lanes mask_ form: the unmasked intrinsic trips GCC 12's false -Wmaybe-uninitialized, PR 105593)
            _mm512_castsi512_ps(_mm512_mask_slli_epi32(w, 0xFFFF, w, 16))};
  }
  static NNK_INLINE B bcast_b(const float* p) { return {_mm512_set1_ps(p[1]), _mm512_set1_ps(p[0])}; }
  static NNK_INLINE __m512 dot(__m512 acc, const A& a, const B& b) {
    return _mm512_fmadd_ps(a.even, b.even, _mm512_fmadd_ps(a.odd, b.odd, acc));
  }
};

#include "kernels/inc/bf16_gemm_tile.inc"

using Kernel = Bf16GemmTemplate<Avx512F32, Avx512Bf16Unpacked, 32, 8>;

}  // namespace

const Bf16GemmKernel bf16_gemm_32x8__avx512 = {"bf16_gemm_32x8__avx512", 32, 8, true, Kernel::run};

}  // namespace nnkern
