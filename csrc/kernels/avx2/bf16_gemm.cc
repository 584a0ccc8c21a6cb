// bf16 GEMM micro-kernel for AVX2 + FMA, the x86 fallback without bf16 instructions (kernels/bf16_gemm_list.h):
// vdpbf16ps's sums (kernels/bf16_gemm.h) from float32 FMAs, the same bits as the scalar reference, through the
// template's unpacked pairs (kernels/inc/bf16_gemm_tile.inc). 16x5: 10 accumulators + 4 unpacked A + 2 broadcasts
// fill the 16 ymm; per pair 20 FMAs, 4 unpacking ops, 2 A loads and 10 broadcasts.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/bf16_gemm_list.h"

#define NNK_INLINE inline __attribute__((always_inline))

namespace nnkern {
namespace {

#include "kernels/inc/f32_ymm.inc"

struct Avx2Bf16Bits {
  static NNK_INLINE void split(const uint16_t* p, __m256& odd, __m256& even) {
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    odd = _mm256_castsi256_ps(_mm256_and_si256(w, _mm256_set1_epi32(int32_t(0xffff0000u))));
    even = _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  }
};

#include "kernels/inc/bf16_gemm_tile.inc"

using Kernel = Bf16GemmTemplate<Avx2F32, Bf16UnpackedPairs<Avx2F32, Avx2Bf16Bits>, 16, 5>;

}  // namespace

const Bf16GemmKernel bf16_gemm_16x5__avx2 = {"bf16_gemm_16x5__avx2", 16, 5, true, Kernel::run};

}  // namespace nnkern
