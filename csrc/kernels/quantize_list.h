// The quantize / dequantize kernels and their levels (core/kernel_list.h).
#pragma once
#include "core/kernel_list.h"
#include "kernels/quantize.h"

#define NNKERN_QUANTIZE_LIST(X) \
  X(quantize__scalar, scalar)   \
  NNKERN_AVX2(X(quantize__avx2, avx2)) NNKERN_AVX512(X(quantize__avx512, avx512))

namespace nnkern {
const KernelFamily<QuantizeKernel>& quantize_family();  // ops/quant/quantize.cc
}  // namespace nnkern
