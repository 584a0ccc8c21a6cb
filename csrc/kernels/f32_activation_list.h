// The sigmoid / tanh kernel sets (one F32ActivationKernels per level: three methods, plain and streaming
// stores) and their levels (core/kernel_list.h).
#pragma once
#include "core/kernel_list.h"
#include "kernels/f32_activation.h"

#define NNKERN_F32_ACTIVATION_LIST(X)                                                   \
  X(f32_activation__scalar, scalar)                                                     \
  NNKERN_AVX2(X(f32_activation__avx2, avx2)) NNKERN_AVX512(X(f32_activation__avx512, avx512)) \
  NNKERN_NEON(X(f32_activation__neon, neon))

namespace nnkern {
const KernelFamily<F32ActivationKernels>& f32_activation_family();  // ops/activation/activation.cc
}  // namespace nnkern
