// Low-output-channel INT8 convolution micro-kernel for AVX2 (kernels/qconv_low_ofm.h): 2 vectors of 8
// output pixels x up to 4 output channels, each pixel's 4 input bytes per lane (transposed, or gathered for
// leftover groups: kernels/inc/qconv_low_ofm_tile.inc), the exact widening dot
// product (kernels/inc/low_ofm_widen.inc: vpmaddwd on zero- / sign-extended byte pairs, no saturating vpmaddubsw).
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
#include "kernels/inc/low_ofm_widen.inc"
#include "kernels/inc/qconv_low_ofm_tile.inc"

using Kernel = QConvLowOfmTemplate<LowOfmWiden<LowOfmYmm>, 2, 2>;

}  // namespace

extern const QConvLowOfmKernel u8s8_conv_low_ofm_16x4c4__avx2 = {
    "u8s8_conv_low_ofm_16x4c4__avx2", 16, Kernel::run, 8, Kernel::relayout_fn};

}  // namespace nnkern
