// bf16 GEMM micro-kernel for AVX-512 without AVX512_BF16 (Skylake-SP, Cascade Lake, Ice Lake): the fallback of the
// AVX2 kernel on zmm (the template's unpacked pairs, kernels/inc/bf16_gemm_tile.inc), vdpbf16ps's sums from float32
// FMAs, the same bits as the scalar reference. 32x8: 16 accumulators + 4 unpacked A + 2 broadcasts.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/bf16_gemm_list.h"

#define NNK_INLINE inline __attribute__((always_inline))

namespace nnkern {
namespace {

#include "kernels/inc/f32_zmm.inc"

struct Avx512Bf16Bits {
  static NNK_INLINE void split(const uint16_t* p, __m512& odd, __m512& even) {
    const __m512i w = _mm512_loadu_si512(p);
    odd = _mm512_castsi512_ps(_mm512_and_si512(w, _mm512_set1_epi32(int32_t(0xffff0000u))));
    // (the all-lanes mask_ form: the unmasked intrinsic trips GCC 12's false -Wmaybe-uninitialized, PR 105593)
    even = _mm512_castsi512_ps(_mm512_mask_slli_epi32(w, 0xFFFF, w, 16));
  }
};

#include "kernels/inc/bf16_gemm_tile.inc"

using Kernel = Bf16GemmTemplate<Avx512F32, Bf16UnpackedPairs<Avx512F32, Avx512Bf16Bits>, 32, 8>;

}  // namespace

const Bf16GemmKernel bf16_gemm_32x8__avx512 = {"bf16_gemm_32x8__avx512", 32, 8, true, Kernel::run};

}  // namespace nnkern
