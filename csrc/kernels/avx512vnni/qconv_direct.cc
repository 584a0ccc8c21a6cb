// Direct INT8 convolution micro-kernel for AVX-512 VNNI (kernels/qconv_direct.h): 6 output pixels x 4 zmm of
// 16 output channels (24 accumulators), vpbroadcastd of each pixel's 4 input bytes, vpdpbusd against the c4
// packed weights (kernels/inc/qconv_direct_tile.inc).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "kernels/qconv_direct.h"

namespace nnkern {
namespace {

#define NNK_INLINE inline __attribute__((always_inline))
#include "kernels/inc/qgemm_zmm.inc"
#include "kernels/inc/qepilogue_vec.inc"

struct DirectZmmVnni : ZmmOps {
  static NNK_INLINE V dot(V acc, V x, V w) { return _mm512_dpbusd_epi32(acc, x, w); }
};

#include "kernels/inc/qconv_direct_tile.inc"

}  // namespace

extern const QConvDirectKernel u8s8_conv_direct_6x64c4__avx512vnni = {
    "u8s8_conv_direct_6x64c4__avx512vnni", 6, 64, true, QConvDirectTemplate<DirectZmmVnni, 4, 6>::run};

}  // namespace nnkern
