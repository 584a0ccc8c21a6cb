// The bf16_gemm kernel family (core/kernel_list.h): one line per kernel, symbol name and ISA level. The AVX2 and
// AVX-512 kernels are the fallbacks of the x86 CPUs without bf16 instructions: they unpack the bf16 pairs to float32
// and compute vdpbf16ps's sums with FMAs. Where a level has two (neonbf16: BFMMLA, BFDOT), the first is dispatched
// and the others are tested by name. Baseline header: no intrinsics.
#pragma once
#include "core/kernel_list.h"
#include "kernels/bf16_gemm.h"

#define NNKERN_BF16_GEMM_LIST(X)                          \
  X(bf16_gemm_8x4__scalar, scalar)                        \
  NNKERN_AVX2(X(bf16_gemm_16x5__avx2, avx2))              \
  NNKERN_AVX512(X(bf16_gemm_32x8__avx512, avx512))        \
  NNKERN_AVX512BF16(X(bf16_gemm_48x8__avx512bf16, avx512bf16)) \
  NNKERN_AMX(X(bf16_gemm_32x32__amx, amx))                \
  NNKERN_NEONBF16(X(bf16_gemm_8x8c4__neonbf16, neonbf16)) \
  NNKERN_NEONBF16(X(bf16_gemm_8x8__neonbf16, neonbf16))

namespace nnkern {

#define NNKERN_BF16_GEMM_DECLARE(sym, level) extern const Bf16GemmKernel sym;
NNKERN_BF16_GEMM_LIST(NNKERN_BF16_GEMM_DECLARE)
#undef NNKERN_BF16_GEMM_DECLARE

const KernelFamily<Bf16GemmKernel>& bf16_gemm_family();  // ops/bf16/gemm.cc

}  // namespace nnkern
