// The pool2d kernels and their levels (core/kernel_list.h): one loop source, compiled per ISA.
#pragma once
#include "core/kernel_list.h"
#include "kernels/pool2d.h"

#define NNKERN_POOL2D_LIST(X) \
  X(pool2d__scalar, scalar)   \
  NNKERN_AVX2(X(pool2d__avx2, avx2)) \
  NNKERN_AVX512(X(pool2d__avx512, avx512))

namespace nnkern {
const KernelFamily<Pool2dKernel>& pool2d_family();  // ops/pool/pool2d.cc
}  // namespace nnkern
