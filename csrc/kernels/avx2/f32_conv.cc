// FP32 direct and mGEMM convolution kernels for AVX2 + FMA, instances of kernels/inc/f32_conv_tile.inc.
//
// Register budget (seed C3, 16 ymm; AVX2 has no embedded broadcast, so an input takes a register):
//   direct 24 x {12, 6, 4}: nr v = 12 accumulators + v weight vectors + the one broadcast in flight (seed O1's
//     16x6 budget, and 3 x 4 with all 16 registers; no spills per tools/x86-loop-stats.py). 24 channels: the
//     3-channel stems direct serves have 24 (ShuffleNet) as often as 16 or 32 output channels, which 16 x 6 ran
//     as a 16- and a half-empty 8-channel block.
//   mGEMM 16 x {5, 2} with wf = 3: v x nr accumulators + nr + 2 held inputs + v weight vectors: 5 + 7 + 1 and
//     4 + 4 + 2 (6 + 8 + 1 and 6 + 5 + 2 spill).
//   depthwise 32 x {12, 6, 4, 3}: v nr = 12 accumulators + 3 weights + 1 input where the tile shares columns
//     (3x3 at stride 1 or 2), + v weights (inputs as memory operands) in the plain tile. 32 channels rather than 16:
//     fewer pixels a tile, which a batch read from memory runs faster with (bench/decisions.md "Conv2d: depthwise
//     tiles share columns").
//   dot 4 x {7, 4, 3, 3}: m nr accumulators + nr inputs + 1 weight vector <= 15: 7 + 7 + 1 .. 12 + 3 + 1.
// One-definition rule: compiled with -mavx2 -mfma; template and traits have internal linkage.
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/f32_conv_list.h"

#define NNK_INLINE inline __attribute__((always_inline))

namespace nnkern {
namespace {

#include "kernels/inc/f32_ymm.inc"
#include "kernels/inc/f32_conv_tile.inc"

using Direct = F32ConvTemplate<Avx2F32, 24, 1, 12, 6, 4, 0>;
using MGemm = F32ConvTemplate<Avx2F32, 16, 3, 5, 2, 0, 0>;
using MGemmTwin = F32ConvTemplate<Avx2F32, 16, 3, 12, 6, 0, 0, false>;  // its run_any: mgemm's order, direct's budget

using Dwconv = F32DwconvTemplate<Avx2F32, 32, 12, 6, 4, 3, true>;
using DotConv = F32DotConvTemplate<Avx2F32, 4, 7, 4, 3, 3>;

}  // namespace

const F32ConvKernel f32_conv_dot_4x3__avx2 = DotConv::kernel("f32_conv_dot_4x3__avx2");
const F32ConvKernel f32_dwconv_32x3__avx2 = Dwconv::kernel("f32_dwconv_32x3__avx2");
// Not auto's choice: on AVX2 the indirect GEMM kernel (16x6, K unrolled by 4) is ahead of both, as the loads/MAC
// model predicts for mGEMM with 16 registers (docs/performance.md: "Conv2d: AVX2 direct and mGEMM"). Both stay
// selectable and tested. Except direct on the stems (at most 4 input channels: "Conv2d: AVX2 direct on the stems"),
// whose reductions are too short for the GEMM's tiles.
const F32ConvKernel f32_conv_direct_24x4__avx2 = [] {
  F32ConvKernel k = Direct::kernel("f32_conv_direct_24x4__avx2", false);
  k.auto_pick_stems = true;
  return k;
}();
const F32ConvKernel f32_conv_mgemm_16x2__avx2 = MGemm::kernel_with<MGemmTwin>("f32_conv_mgemm_16x2__avx2", false);

}  // namespace nnkern
