// FP32 skinny-GEMM kernels for AVX-512 (F) (kernels/f32_gemv.h): the x86 template (kernels/f32_gemv_tile.inc) on
// zmm vectors. dot: a 3 x 8 tile of accumulators (24 zmm + 3 A rows + 1 B^T row = 28 of 32: FMA bound, not load
// bound). rows_m (kernels/inc/f32_gemv_rows_m.inc): 4 rows of x at a time.
//
// One-definition rule: compiled with this ISA's flags only; everything in an anonymous namespace, no STL.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/f32_gemv.h"

#define NNK_INLINE inline __attribute__((always_inline))

namespace nnkern {
namespace {

constexpr int kDotMR = 3, kDotNR = 8;

#include "kernels/inc/f32_zmm.inc"
#include "kernels/inc/f32_gemv_rows_m.inc"  // rows_m<T>
using GemvTraits = Avx512F32;
#include "kernels/inc/f32_gemv_tile.inc"    // gemv_rows, gemv_store, dot_tile<m, n>

#include "kernels/inc/f32_gemv_dot.inc"  // dot_tiles: (m, n) -> dot_tile<m, n>

}  // namespace

const F32GemvKernel f32_gemv_3x8__avx512 = {"f32_gemv_3x8__avx512", gemv_rows, gemv_store, kDotMR, kDotNR,
                                    dot_tiles, rows_m<Avx512F32>, 16, 0, gemv_rows_panels};

}  // namespace nnkern
