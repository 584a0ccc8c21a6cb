// Depthwise INT8 micro-kernel for AVX2 (kernels/qdwconv.h): 8 channels per ymm, 16 per block (two
// accumulators), taps in the loop. uint8 inputs zero-extended with vpmovzxbd, int32 weights, vpmulld +
// vpaddd: exact modulo 2^32 (VPMADDUBSW's saturating pair sum is never used).
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
  static NNK_INLINE V madd(V acc, V x, V w) { return add(acc, mullo(x, w)); }  // vpmulld: any int32 w
};

#include "kernels/inc/qdwconv_tile.inc"

}  // namespace

extern const QDwconvKernel u8s8_dwconv_16c__avx2 = {"u8s8_dwconv_16c__avx2", 16, QDwconvTemplate<DwYmm, 2, 1, 4>::run};

}  // namespace nnkern
