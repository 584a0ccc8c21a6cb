// The low-output-channel convolution kernels of this build (kernels/qconv_low_ofm_list.h) as the family
// "qconv_low_ofm". Baseline code.
#include "core/kernel_family.h"
#include "kernels/qconv_low_ofm_list.h"

namespace nnkern {

const KernelFamily<QConvLowOfmKernel>& qconv_low_ofm_family() {
  static const KernelFamily<QConvLowOfmKernel> family(
      "qconv_low_ofm", "u8s8_conv_low_ofm", {NNKERN_QCONV_LOW_OFM_LIST(NNKERN_KERNEL_ENTRY)},
      [](const QConvLowOfmKernel& k) {
        KernelInfo info;
        info.mr = int(kQConvLowOfmMaxOc);  // output channels
        info.nr = k.pixels;                // output pixels per register block
        info.kgroup = 4;
        return info;
      });
  return family;
}
NNKERN_REGISTER_FAMILY(qconv_low_ofm_family)

}  // namespace nnkern
