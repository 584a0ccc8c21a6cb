// The f32_topk kernels and their levels (core/kernel_list.h). AVX2 and NEON take the scalar general path.
#pragma once
#include "core/kernel_list.h"
#include "kernels/f32_topk.h"

#define NNKERN_F32_TOPK_LIST(X) \
  X(f32_topk__scalar, scalar)   \
  NNKERN_AVX512(X(f32_topk_16__avx512, avx512))

namespace nnkern {
const KernelFamily<F32TopkKernel>& f32_topk_family();  // ops/topk/topk.cc
}  // namespace nnkern
