// The depthwise kernels of this build as data (kernels/qdwconv_list.h): the family "qdwconv" for
// `_C.kernel_list`, and the dispatch (core/dispatch.h). Baseline code.
#include <string>

#include "core/dispatch.h"
#include "kernels/qdwconv_list.h"

namespace nnkern {

const KernelList<QDwconvKernel>& qdwconv_kernel_list() {
  static const auto& list = make_kernel_list<QDwconvKernel>(
      "qdwconv", {NNKERN_QDWCONV_LIST(NNKERN_KERNEL_ENTRY)}, [](const QDwconvKernel& k) {
        KernelInfo info;
        info.mr = k.channel_tile;  // channels per block
        return info;
      });
  return list;
}

namespace {
const QDwconvKernel* qdwconv_kernel_for(Isa isa) { return qdwconv_kernel_list().at(isa); }
}  // namespace

const QDwconvKernel& qdwconv_kernel() {
  static const KernelTable<QDwconvKernel> table(qdwconv_kernel_for);
  return table.get();
}

namespace {
[[maybe_unused]] const bool registered = (qdwconv_kernel_list(),
    register_dispatched_op("u8s8_dwconv", [] { return std::string(qdwconv_kernel().name); }), true);
}  // namespace

}  // namespace nnkern
