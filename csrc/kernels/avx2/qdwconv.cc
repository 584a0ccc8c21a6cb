// Depthwise INT8 micro-kernel for AVX2 (kernels/qdwconv.h): 8 channels per ymm, 32 per block and 2 pixels (eight
// accumulators), taps in the loop. uint8 inputs zero-extended with vpmovzxbd, int32 weights within int16,
// vpmaddwd + vpaddd: each int32 lane holds x (high half 0) and w (high half its sign), so the pair sum is
// x * w + 0 exactly (VPMADDUBSW's saturating pair sum is never used). It replaced VPMULLD, the same bits through a
// full 32-bit multiply (docs/performance.md: "QConv2d: depthwise").
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/qdwconv.h"

namespace nnkern {
namespace {

#define NNK_INLINE inline __attribute__((always_inline))
#include "kernels/inc/qgemm_ymm.inc"
#include "kernels/inc/qepilogue_vec.inc"

struct DwYmm : YmmOps {
  static NNK_INLINE V load_u8(const uint8_t* p) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  }
  static NNK_INLINE V load_u8_part(const uint8_t* p, int n) {
    long long q = 0;
    __builtin_memcpy(&q, p, size_t(n));  // n < 8 bytes: never past the row's end
    return _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(q));
  }
  static NNK_INLINE V load_w(const int32_t* p) { return load(p); }
  static NNK_INLINE V madd(V acc, V x, V w) { return add(acc, _mm256_madd_epi16(x, w)); }
};

#include "kernels/inc/qdwconv_tile.inc"

}  // namespace

extern const QDwconvKernel u8s8_dwconv_32c__avx2 = {"u8s8_dwconv_32c__avx2", 32,
                                                  QDwconvTemplate<DwYmm, 4, 2, 4>::run};

}  // namespace nnkern
