// The f32_gemm kernel family (core/kernel_list.h): one line per kernel, symbol name and ISA level.
// Dispatch (f32_gemm_kernel_for), the registry read by `nnkern._C.kernel_list("f32_gemm")`, the Python
// test fixtures and the native tests all derive from this list. The name is the symbol, the name in
// cpu_info() and the test id: f32_gemm_<MR>x<NR>__<isa>. Baseline header: no intrinsics.
#pragma once
#include "core/kernel_list.h"
#include "kernels/f32_gemm.h"

#define NNKERN_F32_GEMM_LIST(X)                \
  X(f32_gemm_8x4__scalar, scalar)              \
  NNKERN_AVX2(X(f32_gemm_16x6__avx2, avx2))    \
  NNKERN_AVX512(X(f32_gemm_48x8__avx512, avx512)) \
  NNKERN_NEON(X(f32_gemm_8x12__neon, neon))

namespace nnkern {

#define NNKERN_F32_GEMM_DECLARE(sym, level) extern const F32GemmKernel sym;
NNKERN_F32_GEMM_LIST(NNKERN_F32_GEMM_DECLARE)
#undef NNKERN_F32_GEMM_DECLARE

const KernelFamily<F32GemmKernel>& f32_gemm_family();  // ops/gemm/gemm.cc

}  // namespace nnkern
