// The direct convolution kernels of this build as data (kernels/qconv_direct_list.h): the family
// "qconv_direct" for `_C.kernel_list`, and the dispatch (core/dispatch.h). Baseline code.
#include <string>

#include "core/dispatch.h"
#include "kernels/qconv_direct_list.h"

namespace nnkern {

const KernelList<QConvDirectKernel>& qconv_direct_kernel_list() {
  static const auto& list = make_kernel_list<QConvDirectKernel>(
      "qconv_direct", {NNKERN_QCONV_DIRECT_LIST(NNKERN_KERNEL_ENTRY)}, [](const QConvDirectKernel& k) {
        KernelInfo info;
        info.mr = k.channels;  // output channels per register block
        info.nr = k.pixels;    // output pixels per register block
        info.kgroup = 4;
        return info;
      });
  return list;
}

namespace {
const QConvDirectKernel* qconv_direct_kernel_for(Isa isa) { return qconv_direct_kernel_list().at(isa); }
}  // namespace

const QConvDirectKernel& qconv_direct_kernel() {
  static const KernelTable<QConvDirectKernel> table(qconv_direct_kernel_for);
  return table.get();
}

namespace {
[[maybe_unused]] const bool registered = (qconv_direct_kernel_list(), register_dispatched_op("u8s8_conv_direct", [] {
  return std::string(qconv_direct_kernel().name);
}), true);
}  // namespace

}  // namespace nnkern
