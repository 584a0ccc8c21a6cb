// The direct convolution kernels (kernels/qconv_direct.h) and their levels (core/kernel_list.h): registered
// as the family "qconv_direct" (ops/qconv/direct_kernels.cc). The scalar reference runs the algorithm on every
// CPU (the tests' oracle); auto picks only the VNNI kernels (auto_pick).
#pragma once
#include "core/kernel_list.h"
#include "kernels/qconv_direct.h"

#define NNKERN_QCONV_DIRECT_LIST(X) \
  X(u8s8_conv_direct_1x1c4__scalar, scalar) \
  NNKERN_AVXVNNI(X(u8s8_conv_direct_4x16c4__avxvnni, avxvnni)) \
  NNKERN_AVX512VNNI(X(u8s8_conv_direct_6x64c4__avx512vnni, avx512vnni))

namespace nnkern {

#define NNKERN_QCONV_DIRECT_DECLARE_(name, level) extern const QConvDirectKernel name;
NNKERN_QCONV_DIRECT_LIST(NNKERN_QCONV_DIRECT_DECLARE_)
#undef NNKERN_QCONV_DIRECT_DECLARE_

const KernelFamily<QConvDirectKernel>& qconv_direct_family();  // ops/qconv/direct_kernels.cc

}  // namespace nnkern
