// Direct INT8 convolution micro-kernel for AVX-VNNI (kernels/qconv_direct.h): 4 output pixels x 2 ymm of 8
// output channels (8 accumulators of the 16 registers), the AVX-512 kernel's template
// (kernels/inc/qconv_direct_tile.inc) on VEX vpdpbusd; a 64-channel block runs in 4 passes.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "kernels/qconv_direct.h"

namespace nnkern {
namespace {

#define NNK_INLINE inline __attribute__((always_inline))
#include "kernels/inc/qgemm_ymm.inc"
#include "kernels/inc/qepilogue_vec.inc"

struct DirectYmmVnni : YmmOps {
  static NNK_INLINE V dot(V acc, V x, V w) { return _mm256_dpbusd_avx_epi32(acc, x, w); }
};

#include "kernels/inc/qconv_direct_tile.inc"

}  // namespace

extern const QConvDirectKernel u8s8_conv_direct_4x16c4__avxvnni = {
    "u8s8_conv_direct_4x16c4__avxvnni", 4, 16, true, QConvDirectTemplate<DirectYmmVnni, 2, 4>::run};

}  // namespace nnkern
