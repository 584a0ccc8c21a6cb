// Low-output-channel INT8 convolution micro-kernel for AVX-512 without VNNI (kernels/qconv_low_ofm.h): the
// AVX-512 VNNI kernel's template and block (2 vectors of 16 pixels x 4 channels) on the exact widening dot
// product (kernels/inc/low_ofm_widen.inc: vpmaddwd on zero- / sign-extended byte pairs).
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
#include "kernels/inc/low_ofm_widen.inc"
#include "kernels/inc/qconv_low_ofm_tile.inc"

using Kernel = QConvLowOfmTemplate<LowOfmWiden<LowOfmZmm>, 2, 4>;

}  // namespace

extern const QConvLowOfmKernel u8s8_conv_low_ofm_64x4c4__avx512 = {
    "u8s8_conv_low_ofm_64x4c4__avx512", 64, Kernel::run, 16, Kernel::relayout_fn};

}  // namespace nnkern
