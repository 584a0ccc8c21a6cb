// The direct convolution kernels of this build (kernels/qconv_direct_list.h) as the family "qconv_direct".
// Baseline code.
#include "core/kernel_family.h"
#include "kernels/qconv_direct_list.h"

namespace nnkern {

const KernelFamily<QConvDirectKernel>& qconv_direct_family() {
  static const KernelFamily<QConvDirectKernel> family(
      "qconv_direct", "u8s8_conv_direct", {NNKERN_QCONV_DIRECT_LIST(NNKERN_KERNEL_ENTRY)}, [](const QConvDirectKernel& k) {
        KernelInfo info;
        info.mr = k.channels;  // output channels per register block
        info.nr = k.pixels;    // output pixels per register block
        info.kgroup = 4;
        return info;
      });
  return family;
}
NNKERN_REGISTER_FAMILY(qconv_direct_family)

}  // namespace nnkern
