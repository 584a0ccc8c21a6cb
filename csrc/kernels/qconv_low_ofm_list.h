// The low-output-channel convolution kernels (kernels/qconv_low_ofm.h) and their levels (core/kernel_list.h):
// registered as the family "qconv_low_ofm" (ops/qconv/low_ofm_kernels.cc). The scalar kernel is the oracle
// and the fallback (the only one on aarch64).
#pragma once
#include "core/kernel_list.h"
#include "kernels/qconv_low_ofm.h"

#define NNKERN_QCONV_LOW_OFM_LIST(X) \
  X(u8s8_conv_low_ofm_1x4c4__scalar, scalar) \
  NNKERN_AVX2(X(u8s8_conv_low_ofm_16x4c4__avx2, avx2)) \
  NNKERN_AVXVNNI(X(u8s8_conv_low_ofm_16x4c4__avxvnni, avxvnni)) \
  NNKERN_AVX512(X(u8s8_conv_low_ofm_64x4c4__avx512, avx512)) \
  NNKERN_AVX512VNNI(X(u8s8_conv_low_ofm_64x4c4__avx512vnni, avx512vnni))

namespace nnkern {

#define NNKERN_QCONV_LOW_OFM_DECLARE_(name, level) extern const QConvLowOfmKernel name;
NNKERN_QCONV_LOW_OFM_LIST(NNKERN_QCONV_LOW_OFM_DECLARE_)
#undef NNKERN_QCONV_LOW_OFM_DECLARE_

const KernelFamily<QConvLowOfmKernel>& qconv_low_ofm_family();  // ops/qconv/low_ofm_kernels.cc

}  // namespace nnkern
