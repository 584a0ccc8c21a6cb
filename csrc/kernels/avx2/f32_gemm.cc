// FP32 GEMM micro-kernel for AVX2 + FMA: oneDNN's 16x6 register tile (seeds O1, O3-O6), plain and
// indirect forms, both instances of the x86 tile template (kernels/inc/f32_gemm_tile.inc).
//
// Column-major terms (see kernels/f32_gemm.h): per k step p, two ymm hold the 16-float column A(:, p),
// each B(p, j) is broadcast (vbroadcastss) and multiplied into 2 of 12 accumulators (vfmadd231ps).
// 12 accumulators + 2 A + 1-2 broadcast registers fit the 16 ymm; 12 independent FMA chains cover
// 2 FMA ports x 4-cycle latency. M tails: m = 16 (two full moves), 9..15 (one full + one masked move),
// 8 (one full move), 1..7 (one masked move); vmaskmovps never faults on masked-out lanes.
//
// Inner loop as built (GCC 12 -O3, tools/x86-loop-stats.py on the object), full 16x6 tile, plain and
// indirect alike: 4 k steps per iteration = 48 vfmadd231ps, 8 A loads, 24 vbroadcastss, no spill.
// The 8-step block is emitted as two 4-step bodies (NNK_F32_GEMM_UNROLL 4): with a full 8x unroll GCC 12's
// register allocator rotates accumulators through vmovaps and spills to the stack.
//
// One-definition rule: this file is compiled with -mavx2 -mfma; the template and traits are included
// inside an anonymous namespace (internal linkage) and no STL is used, so no AVX2 code can be picked by
// the linker for baseline callers.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/f32_gemm_list.h"

#define NNK_INLINE inline __attribute__((always_inline))

namespace nnkern {
namespace {

// Lane i of mask(r) is all-ones iff i < r (1 <= r <= 8).
#include "kernels/inc/f32_ymm.inc"

#define NNK_F32_GEMM_UNROLL 4
// No prefetch for the copying tiles: the AVX2 kernel lost with it (docs/performance.md: "sgemm: prefetch in the
// copying tiles").
#define NNK_F32_GEMM_COPY_PREFETCH 0
#include "kernels/inc/f32_gemm_tile.inc"

using Kernel = F32GemmTemplate<Avx2F32, 16, 6>;

}  // namespace

const F32GemmKernel f32_gemm_16x6__avx2 = {"f32_gemm_16x6__avx2", 16, 6, Kernel::run, Kernel::igemm,
                                          Kernel::run_panels};

}  // namespace nnkern
