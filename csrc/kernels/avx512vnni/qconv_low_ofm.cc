// Low-output-channel INT8 convolution micro-kernel for AVX-512 VNNI (kernels/qconv_low_ofm.h, seed I11):
// 2 vectors of 16 output pixels x up to 4 output channels (8 accumulators), each pixel's 4 input bytes per
// lane (transposed, or gathered for leftover groups), vpdpbusd against one channel's 4 weights broadcast
// (kernels/inc/qconv_low_ofm_tile.inc).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "kernels/qconv_low_ofm.h"

namespace nnkern {
namespace {

#define NNK_INLINE inline __attribute__((always_inline))
#include "kernels/inc/qgemm_zmm.inc"
#include "kernels/inc/qepilogue_vec.inc"
#include "kernels/inc/low_ofm_zmm.inc"

struct LowOfmZmmVnni : LowOfmZmm {
  using XP = V;
  using WP = V;
  static NNK_INLINE V prep_x(V x) { return x; }
  static NNK_INLINE V prep_w(V w) { return w; }
  static NNK_INLINE V dot(V acc, V x, V w) { return _mm512_dpbusd_epi32(acc, x, w); }
};

#include "kernels/inc/qconv_low_ofm_tile.inc"

using Kernel = QConvLowOfmTemplate<LowOfmZmmVnni, 2, 4>;

}  // namespace

extern const QConvLowOfmKernel u8s8_conv_low_ofm_64x4c4__avx512vnni = {
    "u8s8_conv_low_ofm_64x4c4__avx512vnni", 64, Kernel::run, 16, Kernel::relayout_fn};

}  // namespace nnkern
