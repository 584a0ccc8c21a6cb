// The low-output-channel convolution kernels of this build as data (kernels/qconv_low_ofm_list.h): the family
// "qconv_low_ofm" for `_C.kernel_list`, and the dispatch (core/dispatch.h). Baseline code.
#include <string>

#include "core/dispatch.h"
#include "kernels/qconv_low_ofm_list.h"
#include "ops/qconv2d_low_ofm.h"

namespace nnkern {

const KernelList<QConvLowOfmKernel>& qconv_low_ofm_kernel_list() {
  static const auto& list = make_kernel_list<QConvLowOfmKernel>(
      "qconv_low_ofm", {NNKERN_QCONV_LOW_OFM_LIST(NNKERN_KERNEL_ENTRY)}, [](const QConvLowOfmKernel& k) {
        KernelInfo info;
        info.mr = int(kQConvLowOfmMaxOc);  // output channels
        info.nr = k.pixels;                // output pixels per register block
        info.kgroup = 4;
        return info;
      });
  return list;
}

namespace {
const QConvLowOfmKernel* qconv_low_ofm_kernel_for(Isa isa) { return qconv_low_ofm_kernel_list().at(isa); }
const KernelTable<QConvLowOfmKernel>& table() {
  static const KernelTable<QConvLowOfmKernel> t(qconv_low_ofm_kernel_for);
  return t;
}
}  // namespace

const QConvLowOfmKernel& qconv_low_ofm_kernel() { return table().get(); }
bool qconv_low_ofm_vectorized() { return table().isa() != Isa::scalar; }

namespace {
[[maybe_unused]] const bool registered = (qconv_low_ofm_kernel_list(),
    register_dispatched_op("u8s8_conv_low_ofm", [] { return std::string(qconv_low_ofm_kernel().name); }), true);
}  // namespace

}  // namespace nnkern
