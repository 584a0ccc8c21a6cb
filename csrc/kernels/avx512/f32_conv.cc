// FP32 direct and mGEMM convolution kernels for AVX-512 (F), instances of kernels/inc/f32_conv_tile.inc.
//
// Register budget (seed C3: accumulators + channel vectors + inputs within the 32 zmm, leaving one spare):
//   direct 64 x {24, 12, 8, 6}: v channel vectors x nr pixels = 24 accumulators + v weight vectors + the one
//     broadcast in flight (C3's Rx Rm + Rx + Rm with the inputs consumed as loaded: 24 + 4 + 1 = 29 at v = 4).
//     Per channel and tap: v + nr loads feed 24 FMAs (0.42 loads / FMA at v = 4).
//   mGEMM 32 x {14, 8} with wf = 3: v x nr accumulators + the nr + 2 inputs of three kernel columns held in
//     registers + v weight vectors: 1 x 14: 14 + 16 + 1 = 31; 2 x 8: 16 + 10 + 2 = 28. Per channel and three
//     taps: nr + 2 broadcasts + 3 v weight loads feed 3 v nr FMAs (0.33 loads / FMA at v = 2), and each
//     weight vector serves nr pixels, which bounds the weights' traffic from L2 (tools/conv_loads_model.py).
//   depthwise 64 x {24, 12, 8, 5}: v nr accumulators + v weights + v inputs <= 31: 24 + 2 .. 20 + 8.
//   dot 4 x {12, 10, 7, 6}: m nr accumulators + nr inputs + 1 weight vector <= 31: 12 + 12 + 1 (15 + 15 + 1
//     spills), 20 + 10 + 1 .. 24 + 6 + 1.
// One-definition rule: compiled with AVX-512 flags; template and traits have internal linkage.
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/f32_conv_list.h"

#define NNK_INLINE inline __attribute__((always_inline))

namespace nnkern {
namespace {

#include "kernels/inc/f32_zmm.inc"
#include "kernels/inc/f32_conv_tile.inc"

using Direct = F32ConvTemplate<Avx512F32, 64, 1, 24, 12, 8, 6>;
using MGemm = F32ConvTemplate<Avx512F32, 32, 3, 14, 8, 0, 0>;
using MGemmTwin = F32ConvTemplate<Avx512F32, 32, 3, 24, 12, 0, 0, false>;  // its run_any: mgemm's order, direct's budget

using Dwconv = F32DwconvTemplate<Avx512F32, 64, 24, 12, 8, 5, false>;  // column sharing unmeasured on AVX-512
using DotConv = F32DotConvTemplate<Avx512F32, 4, 12, 10, 7, 6>;

}  // namespace

const F32ConvKernel f32_conv_dot_4x6__avx512 = DotConv::kernel("f32_conv_dot_4x6__avx512");
const F32ConvKernel f32_dwconv_64x5__avx512 = Dwconv::kernel("f32_dwconv_64x5__avx512");
const F32ConvKernel f32_conv_direct_64x6__avx512 = Direct::kernel("f32_conv_direct_64x6__avx512");
const F32ConvKernel f32_conv_mgemm_32x8__avx512 = MGemm::kernel_with<MGemmTwin>("f32_conv_mgemm_32x8__avx512");

}  // namespace nnkern
