// FP32 direct and mGEMM convolution kernels for AVX-512 (F), instances of kernels/f32_conv_tile.inc.
//
// Register budget (seed C3: accumulators + channel vectors + inputs within the 32 zmm, leaving one spare):
//   direct 64 x {15, 9, 7, 5}: v channel vectors x nr pixels of accumulators + v weight vectors + nr
//     broadcast inputs (each feeds v FMAs, so it is kept in a register rather than re-broadcast as an
//     embedded {1to16} operand per FMA): C3's nr v + nr + v <= 31, i.e. 15 + 15 + 1, 18 + 9 + 2, 21 + 7 + 3,
//     20 + 5 + 4. Per channel and tap: v + nr loads feed v nr FMAs (0.45 loads / FMA at v = 4).
//   mGEMM 32 x {14, 8} with wf = 3: v x nr accumulators + the nr + 2 inputs of three kernel columns held in
//     registers + v weight vectors: 1 x 14: 14 + 16 + 1 = 31; 2 x 8: 16 + 10 + 2 = 28. Per channel and three
//     taps: nr + 2 broadcasts + 3 v weight loads feed 3 v nr FMAs (0.33 loads / FMA at v = 2), and each
//     weight vector serves nr pixels, which bounds the weights' traffic from L2 (tools/conv_loads_model.py).
//   depthwise 64 x {24, 12, 8, 5}: v nr accumulators + v weights + v inputs <= 31: 24 + 2 .. 20 + 8.
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

#include "kernels/avx512/f32_traits.inc"
#include "kernels/f32_conv_tile.inc"

using Direct = F32ConvTemplate<Avx512F32, 64, 1, 15, 9, 7, 5>;
using MGemm = F32ConvTemplate<Avx512F32, 32, 3, 14, 8, 0, 0>;
using MGemmTwin = F32ConvTemplate<Avx512F32, 32, 1, 15, 9, 0, 0>;  // its run_any: direct's budget at 32

using Dwconv = F32DwconvTemplate<Avx512F32, 64, 24, 12, 8, 5>;

}  // namespace

const F32ConvKernel f32_dwconv_64x5__avx512 = Dwconv::kernel("f32_dwconv_64x5__avx512");
const F32ConvKernel f32_conv_direct_64x5__avx512 = Direct::kernel("f32_conv_direct_64x5__avx512");
const F32ConvKernel f32_conv_mgemm_32x8__avx512 = MGemm::kernel_with<MGemmTwin>("f32_conv_mgemm_32x8__avx512");

}  // namespace nnkern
