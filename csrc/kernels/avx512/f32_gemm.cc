// FP32 GEMM micro-kernel for AVX-512 (F): a 48x8 register tile, the 512-bit analogue of seed O1, plain
// and indirect forms, both instances of the x86 tile template (kernels/inc/f32_gemm_tile.inc).
//
// Why 48 x 8 (MR x NR): 32 zmm registers hold 24 accumulators (3 zmm of A rows x 8 B columns), the
// 3 zmm of the A column and the broadcasts of B. 24 independent FMA chains are 3x the 8 needed to
// cover 2 FMA ports x 4-cycle latency. Per k step: 3 A loads + 8 broadcasts feed 24 FMAs
// (0.46 loads/FMA, each broadcast reused by 3 FMAs), well inside 2 loads/cycle at 2 FMAs/cycle.
// 32x12 (also 24 accumulators) would need fewer bytes per flop (44 vs 56 floats per step), but its
// 12 independent B column pointers plus A, the offsets, strides and the counter exceed the 15 usable
// GPRs, so the hot loop would reload B pointers from the stack; with 8 B pointers everything stays
// in registers. (The B operand is one pointer per column by contract, so columns cannot share one
// base register.)
//
// M tails use opmasks (_mm512_maskz_loadu_ps / _mm512_mask_storeu_ps: masked lanes never fault).
// NNK_F32_GEMM_UNROLL 1: any unroll of the k steps makes GCC 12's register allocator rotate the 24 accumulators
// through vmovaps and spill; rolled, one step is exactly 3 A loads, 8 vbroadcastss, 24 vfmadd231ps,
// 2 pointer adds and a fused sub+jne (tools/x86-loop-stats.py on the object).
//
// One-definition rule: this file is compiled with AVX-512 flags; the template and traits are included
// inside an anonymous namespace (internal linkage) and no STL is used.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/f32_gemm_list.h"

#define NNK_INLINE inline __attribute__((always_inline))

namespace nnkern {
namespace {

#include "kernels/inc/f32_zmm.inc"

#define NNK_F32_GEMM_UNROLL 1
// The copying tiles read A in place a row of W per k step, a stride the prefetchers do not follow: fetch 8
// steps ahead (docs/performance.md: "sgemm: prefetch in the copying tiles").
#define NNK_F32_GEMM_COPY_PREFETCH 8
#include "kernels/inc/f32_gemm_tile.inc"

using Kernel = F32GemmTemplate<Avx512F32, 48, 8>;

}  // namespace

const F32GemmKernel f32_gemm_48x8__avx512 = {"f32_gemm_48x8__avx512", 48, 8, Kernel::run, Kernel::igemm,
                                            Kernel::run_panels};

}  // namespace nnkern
