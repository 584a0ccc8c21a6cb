// Low-output-channel INT8 convolution micro-kernel for AVX-VNNI (kernels/qconv_low_ofm.h): the AVX2 kernel's
// block (2 vectors of 8 output pixels x up to 4 output channels) on VEX vpdpbusd.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "kernels/qconv_low_ofm.h"

namespace nnkern {
namespace {

#define NNK_INLINE inline __attribute__((always_inline))
#include "kernels/inc/qgemm_ymm.inc"
#include "kernels/inc/qepilogue_vec.inc"
#include "kernels/inc/low_ofm_ymm.inc"

struct LowOfmYmmVnni : LowOfmYmm {
  using XP = V;
  using WP = V;
  static NNK_INLINE V prep_x(V x) { return x; }
  static NNK_INLINE V prep_w(V w) { return w; }
  static NNK_INLINE V dot(V acc, V x, V w) { return _mm256_dpbusd_avx_epi32(acc, x, w); }
};

#include "kernels/inc/qconv_low_ofm_tile.inc"

using Kernel = QConvLowOfmTemplate<LowOfmYmmVnni, 2, 2>;

}  // namespace

extern const QConvLowOfmKernel u8s8_conv_low_ofm_16x4c4__avxvnni = {
    "u8s8_conv_low_ofm_16x4c4__avxvnni", 16, Kernel::run, 8, Kernel::relayout_fn};

}  // namespace nnkern
