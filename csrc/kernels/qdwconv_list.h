// The depthwise convolution kernels (kernels/qdwconv.h) and their levels (core/kernel_list.h): registered as
// the family "qdwconv" (ops/qconv/depthwise_kernels.cc). The scalar kernel is the oracle and the fallback.
#pragma once
#include "core/kernel_list.h"
#include "kernels/qdwconv.h"

#define NNKERN_QDWCONV_LIST(X)   \
  X(u8s8_dwconv_1c__scalar, scalar) \
  NNKERN_AVX2(X(u8s8_dwconv_32c__avx2, avx2)) \
  NNKERN_AVX512(X(u8s8_dwconv_64c__avx512, avx512)) \
  NNKERN_AVX512VNNI(X(u8s8_dwconv_64c__avx512vnni, avx512vnni)) \
  NNKERN_NEON(X(u8s8_dwconv_32c__neon, neon))

namespace nnkern {

#define NNKERN_QDWCONV_DECLARE_(name, level) extern const QDwconvKernel name;
NNKERN_QDWCONV_LIST(NNKERN_QDWCONV_DECLARE_)
#undef NNKERN_QDWCONV_DECLARE_

const KernelFamily<QDwconvKernel>& qdwconv_family();  // ops/qconv/depthwise_kernels.cc

}  // namespace nnkern
