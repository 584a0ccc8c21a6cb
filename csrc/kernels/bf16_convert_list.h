// The bf16_convert kernel family (core/kernel_list.h): the conversion loops of kernels/bf16_convert.h compiled per
// ISA, one line per kernel. Every kernel gives the same bits. Baseline header: no intrinsics.
#pragma once
#include "core/kernel_list.h"
#include "kernels/bf16_convert.h"

#define NNKERN_BF16_CONVERT_LIST(X)                   \
  X(bf16_convert__scalar, scalar)                     \
  NNKERN_AVX2(X(bf16_convert__avx2, avx2))            \
  NNKERN_AVX512(X(bf16_convert__avx512, avx512))      \
  NNKERN_NEON(X(bf16_convert__neon, neon))

namespace nnkern {

#define NNKERN_BF16_CONVERT_DECLARE(sym, level) extern const Bf16ConvertKernel sym;
NNKERN_BF16_CONVERT_LIST(NNKERN_BF16_CONVERT_DECLARE)
#undef NNKERN_BF16_CONVERT_DECLARE

const KernelFamily<Bf16ConvertKernel>& bf16_convert_family();  // ops/bf16/convert.cc

}  // namespace nnkern
