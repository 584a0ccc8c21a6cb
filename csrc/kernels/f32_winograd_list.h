// The FP32 Winograd transform kernels (kernels/f32_winograd.h) and their levels (core/kernel_list.h): one template
// (kernels/inc/f32_winograd.inc) on each ISA's vector traits. Names: f32_winograd_<lanes>__<isa>. Baseline header.
#pragma once
#include "core/kernel_list.h"
#include "kernels/f32_winograd.h"

#define NNKERN_F32_WINOGRAD_LIST(X)                   \
  X(f32_winograd_1__scalar, scalar)                   \
  NNKERN_AVX2(X(f32_winograd_8__avx2, avx2))          \
  NNKERN_AVX512(X(f32_winograd_16__avx512, avx512))  \
  NNKERN_NEON(X(f32_winograd_4__neon, neon))

namespace nnkern {

#define NNKERN_F32_WINOGRAD_DECLARE_(name, level) extern const F32WinogradKernel name;
NNKERN_F32_WINOGRAD_LIST(NNKERN_F32_WINOGRAD_DECLARE_)
#undef NNKERN_F32_WINOGRAD_DECLARE_

// ops/conv/winograd.cc.
const KernelFamily<F32WinogradKernel>& f32_winograd_family();

}  // namespace nnkern
