// The FP32 direct, mGEMM and depthwise convolution kernels of this build as data (kernels/f32_conv_list.h): the families
// for `_C.kernel_list`, and their dispatch (core/dispatch.h). Baseline code.
#include <string>

#include "core/dispatch.h"
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

const KernelList<F32ConvKernel>& f32_conv_direct_list() {
  static const auto& list =
      make_kernel_list<F32ConvKernel>("f32_conv_direct", {NNKERN_F32_CONV_DIRECT_LIST(NNKERN_KERNEL_ENTRY)}, conv_info);
  return list;
}

const KernelList<F32ConvKernel>& f32_conv_mgemm_list() {
  static const auto& list =
      make_kernel_list<F32ConvKernel>("f32_conv_mgemm", {NNKERN_F32_CONV_MGEMM_LIST(NNKERN_KERNEL_ENTRY)}, conv_info);
  return list;
}

const KernelList<F32ConvKernel>& f32_dwconv_list() {
  static const auto& list =
      make_kernel_list<F32ConvKernel>("f32_dwconv", {NNKERN_F32_DWCONV_LIST(NNKERN_KERNEL_ENTRY)}, conv_info);
  return list;
}

const KernelList<F32ConvKernel>& f32_conv_dot_list() {
  static const auto& list =
      make_kernel_list<F32ConvKernel>("f32_conv_dot", {NNKERN_F32_CONV_DOT_LIST(NNKERN_KERNEL_ENTRY)}, conv_info);
  return list;
}

namespace {
const F32ConvKernel* dot_for(Isa isa) { return f32_conv_dot_list().at(isa); }
const F32ConvKernel* dwconv_for(Isa isa) { return f32_dwconv_list().at(isa); }
const F32ConvKernel* direct_for(Isa isa) { return f32_conv_direct_list().at(isa); }
const F32ConvKernel* mgemm_for(Isa isa) { return f32_conv_mgemm_list().at(isa); }
}  // namespace

const F32ConvKernel& f32_conv_direct_kernel() {
  static const KernelTable<F32ConvKernel> table(direct_for);
  return table.get();
}

const F32ConvKernel* f32_conv_mgemm_kernel() {
  static const KernelTable<F32ConvKernel> table(mgemm_for);
  return table.get_or_null();
}

const F32ConvKernel& f32_dwconv_kernel() {
  static const KernelTable<F32ConvKernel> table(dwconv_for);
  return table.get();
}

const F32ConvKernel& f32_conv_dot_kernel() {
  static const KernelTable<F32ConvKernel> table(dot_for);
  return table.get();
}

namespace {
[[maybe_unused]] const bool registered =
    (f32_conv_direct_list(), f32_conv_mgemm_list(), f32_dwconv_list(), f32_conv_dot_list(),
     register_dispatched_op("f32_conv_dot", [] { return std::string(f32_conv_dot_kernel().name); }),
     register_dispatched_op("f32_dwconv", [] { return std::string(f32_dwconv_kernel().name); }),
     register_dispatched_op("f32_conv_direct", [] { return std::string(f32_conv_direct_kernel().name); }),
     register_dispatched_op("f32_conv_mgemm", [] {
       const F32ConvKernel* k = f32_conv_mgemm_kernel();
       return std::string(k ? k->name : "none");
     }),
     true);
}  // namespace

}  // namespace nnkern
