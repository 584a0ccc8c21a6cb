// The f32_gemv kernel sets (rows / store / dot tile of the skinny GEMM paths) and their levels
// (core/kernel_list.h). The tile in a name is the dot path's (rows x columns of C per call).
#pragma once
#include "core/kernel_list.h"
#include "kernels/f32_gemv.h"

#define NNKERN_F32_GEMV_LIST(X)                                                               \
  X(f32_gemv__scalar, scalar)                                                                 \
  NNKERN_AVX2(X(f32_gemv_3x4__avx2, avx2)) NNKERN_AVX512(X(f32_gemv_3x8__avx512, avx512)) \
  NNKERN_NEON(X(f32_gemv_3x4__neon, neon))

namespace nnkern {
const KernelFamily<F32GemvKernel>& f32_gemv_family();  // ops/gemm/gemv.cc
}  // namespace nnkern
