// The depthwise kernels of this build (kernels/qdwconv_list.h) as the family "qdwconv". Baseline code.
#include "core/kernel_family.h"
#include "kernels/qdwconv_list.h"

namespace nnkern {

const KernelFamily<QDwconvKernel>& qdwconv_family() {
  static const KernelFamily<QDwconvKernel> family(
      "qdwconv", "u8s8_dwconv", {NNKERN_QDWCONV_LIST(NNKERN_KERNEL_ENTRY)}, [](const QDwconvKernel& k) {
        KernelInfo info;
        info.mr = k.channel_tile;  // channels per block
        return info;
      });
  return family;
}
NNKERN_REGISTER_FAMILY(qdwconv_family)

}  // namespace nnkern
