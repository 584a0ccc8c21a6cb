// The FP32 direct, mGEMM, depthwise and dot convolution kernels of this build (kernels/f32_conv_list.h) as their
// families. Baseline code.
#include "core/kernel_family.h"
#include "kernels/f32_conv_list.h"

namespace nnkern {
namespace {

KernelInfo conv_info(const F32ConvKernel& k) {
  KernelInfo info;
  info.mr = k.mr;  // output channels per register block
  info.nr = k.nr_for(size_t(k.mr));  // output pixels per register block at mr channels
  return info;
}

}  // namespace

const KernelFamily<F32ConvKernel>& f32_conv_direct_family() {
  static const KernelFamily<F32ConvKernel> family("f32_conv_direct", "f32_conv_direct",
                                                  {NNKERN_F32_CONV_DIRECT_LIST(NNKERN_KERNEL_ENTRY)}, conv_info);
  return family;
}
NNKERN_REGISTER_FAMILY(f32_conv_direct_family)

const KernelFamily<F32ConvKernel>& f32_conv_mgemm_family() {
  static const KernelFamily<F32ConvKernel> family("f32_conv_mgemm", "f32_conv_mgemm",
                                                  {NNKERN_F32_CONV_MGEMM_LIST(NNKERN_KERNEL_ENTRY)}, conv_info);
  return family;
}
NNKERN_REGISTER_FAMILY(f32_conv_mgemm_family)

const KernelFamily<F32ConvKernel>& f32_dwconv_family() {
  static const KernelFamily<F32ConvKernel> family("f32_dwconv", "f32_dwconv",
                                                  {NNKERN_F32_DWCONV_LIST(NNKERN_KERNEL_ENTRY)}, conv_info);
  return family;
}
NNKERN_REGISTER_FAMILY(f32_dwconv_family)

const KernelFamily<F32ConvKernel>& f32_conv_dot_family() {
  static const KernelFamily<F32ConvKernel> family("f32_conv_dot", "f32_conv_dot",
                                                  {NNKERN_F32_CONV_DOT_LIST(NNKERN_KERNEL_ENTRY)}, conv_info);
  return family;
}
NNKERN_REGISTER_FAMILY(f32_conv_dot_family)

}  // namespace nnkern
