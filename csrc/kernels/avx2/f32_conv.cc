// FP32 direct and mGEMM convolution kernels for AVX2 + FMA, instances of kernels/f32_conv_tile.inc.
//
// Register budget (seed C3, 16 ymm; AVX2 has no embedded broadcast, so an input takes a register):
//   direct 16 x {12, 6}: v x nr = 12 accumulators + v weight vectors + 1 broadcast (15 at v = 2).
//   mGEMM 16 x {6, 4} with wf = 3: v x nr accumulators + nr + 2 held inputs + v weight vectors:
//     1 x 6: 6 + 8 + 1 = 15; 2 x 4: 8 + 6 + 2 = 16, every register.
// One-definition rule: compiled with -mavx2 -mfma; template and traits have internal linkage.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/f32_conv_list.h"

#define NNK_INLINE inline __attribute__((always_inline))

namespace nnkern {
namespace {

#include "kernels/avx2/f32_traits.inc"
#include "kernels/f32_conv_tile.inc"

using Direct = F32ConvTemplate<Avx2F32, 16, 1, 12, 6, 0, 0>;
using MGemm = F32ConvTemplate<Avx2F32, 16, 3, 6, 4, 0, 0>;

}  // namespace

const F32ConvKernel f32_conv_direct_16x6__avx2 = Direct::kernel("f32_conv_direct_16x6__avx2");
const F32ConvKernel f32_conv_mgemm_16x4__avx2 = MGemm::kernel("f32_conv_mgemm_16x4__avx2");

}  // namespace nnkern
