// FP32 skinny-GEMM kernels for AVX2 + FMA (kernels/f32_gemv.h): the x86 template (kernels/f32_gemv_tile.inc) on
// ymm vectors. dot: a 3 x 4 tile of accumulators (12 ymm + 3 A rows + 1 B^T row = 16). rows_m
// (kernels/inc/f32_gemv_rows_m.inc): 2 rows of x at a time; auto takes it for up to 8 rows whatever B's size (the
// 16x6 tile runs 8 rows as 6 + 2 and packs B's column strips).
//
// One-definition rule: compiled with this ISA's flags only; everything in an anonymous namespace, no STL.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/f32_gemv.h"

#define NNK_INLINE inline __attribute__((always_inline))

namespace nnkern {
namespace {

constexpr int kDotMR = 3, kDotNR = 4;

#include "kernels/inc/f32_ymm.inc"
#include "kernels/inc/f32_gemv_rows_m.inc"  // rows_m<T>
using GemvTraits = Avx2F32;
#include "kernels/inc/f32_gemv_tile.inc"    // gemv_rows, gemv_store, dot_tile<m, n>

#include "kernels/inc/f32_gemv_dot.inc"  // dot_tiles: (m, n) -> dot_tile<m, n>

}  // namespace

const F32GemvKernel f32_gemv_3x4__avx2 = {"f32_gemv_3x4__avx2", gemv_rows, gemv_store, kDotMR, kDotNR,
                                    dot_tiles, rows_m<Avx2F32>, 16, 8, gemv_rows_panels, 8};

}  // namespace nnkern
