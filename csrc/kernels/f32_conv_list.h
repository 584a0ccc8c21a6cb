// The FP32 direct, mGEMM and depthwise convolution kernels (kernels/f32_conv.h) and their levels
// (core/kernel_list.h), three families: "f32_conv_direct" (wf = 1, seeds C3-C4; a scalar kernel, so "direct"
// runs everywhere), "f32_conv_mgemm" (wf > 1, seeds G1-G3; SIMD levels only, so "mgemm" applies only where one
// runs), "f32_dwconv" (depthwise, channels in lanes) and "f32_conv_dot" (few output channels, input channels
// in lanes).
// Names: f32_conv_<family>_<MR>x<nr at MR>__<isa>. Baseline header: no intrinsics.
#pragma once
#include "core/kernel_list.h"
#include "kernels/f32_conv.h"

#define NNKERN_F32_CONV_DIRECT_LIST(X)                        \
  X(f32_conv_direct_8x4__scalar, scalar)                      \
  NNKERN_AVX2(X(f32_conv_direct_24x4__avx2, avx2))            \
  NNKERN_AVX512(X(f32_conv_direct_64x6__avx512, avx512))     \
  NNKERN_NEON(X(f32_conv_direct_8x9__neon, neon))

#define NNKERN_F32_CONV_MGEMM_LIST(X)                         \
  NNKERN_AVX2(X(f32_conv_mgemm_16x2__avx2, avx2))             \
  NNKERN_AVX512(X(f32_conv_mgemm_32x8__avx512, avx512))      \
  NNKERN_NEON(X(f32_conv_mgemm_8x8__neon, neon))

#define NNKERN_F32_DWCONV_LIST(X)                       \
  X(f32_dwconv_8x4__scalar, scalar)                     \
  NNKERN_AVX2(X(f32_dwconv_32x3__avx2, avx2))           \
  NNKERN_AVX512(X(f32_dwconv_64x5__avx512, avx512))     \
  NNKERN_NEON(X(f32_dwconv_16x5__neon, neon))

#define NNKERN_F32_CONV_DOT_LIST(X)                     \
  X(f32_conv_dot_4x4__scalar, scalar)                   \
  NNKERN_AVX2(X(f32_conv_dot_4x3__avx2, avx2))          \
  NNKERN_AVX512(X(f32_conv_dot_4x6__avx512, avx512))    \
  NNKERN_NEON(X(f32_conv_dot_4x6__neon, neon))

namespace nnkern {

#define NNKERN_F32_CONV_DECLARE_(name, level) extern const F32ConvKernel name;
NNKERN_F32_CONV_DIRECT_LIST(NNKERN_F32_CONV_DECLARE_)
NNKERN_F32_CONV_MGEMM_LIST(NNKERN_F32_CONV_DECLARE_)
NNKERN_F32_DWCONV_LIST(NNKERN_F32_CONV_DECLARE_)
NNKERN_F32_CONV_DOT_LIST(NNKERN_F32_CONV_DECLARE_)
#undef NNKERN_F32_CONV_DECLARE_

// ops/conv/kernels.cc. mgemm has no scalar kernel: none at or below an ISA cap without SIMD.
const KernelFamily<F32ConvKernel>& f32_conv_direct_family();
const KernelFamily<F32ConvKernel>& f32_conv_mgemm_family();
const KernelFamily<F32ConvKernel>& f32_dwconv_family();
const KernelFamily<F32ConvKernel>& f32_conv_dot_family();

}  // namespace nnkern
