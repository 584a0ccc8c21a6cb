// A kernel family: the kernels of one micro-kernel contract, one per ISA level at most, from the family's X-macro
// list (core/kernel_list.h). It registers its list for `_C.kernel_list(name)`, dispatches the kernel of the best
// level the CPU has within the ISA cap, and reports that kernel in cpu_info(). Each family is one function-local
// static in its ops file, touched once at static initialization so the registries know it from import on:
//
//   const KernelFamily<QDwconvKernel>& qdwconv_family() {
//     static const KernelFamily<QDwconvKernel> family("qdwconv", "u8s8_dwconv",
//         {NNKERN_QDWCONV_LIST(NNKERN_KERNEL_ENTRY)}, [](const QDwconvKernel& k) { ... return KernelInfo; });
//     return family;
//   }
//   NNKERN_REGISTER_FAMILY(qdwconv_family);
//
// Baseline header: no intrinsics.
#pragma once
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "core/dispatch.h"
#include "core/kernel_list.h"

namespace nnkern {

template <typename Kernel>
class KernelFamily {
 public:
  // name: the family (`_C.kernel_list`, test ids); op: the name of its line in cpu_info()["kernels"], or nullptr
  // where the op layer reports it itself; describe(kernel) -> KernelInfo: its tile and K group.
  template <typename Describe>
  KernelFamily(const char* name, const char* op, std::initializer_list<KernelEntry<Kernel>> entries,
               Describe describe)
      : list_(make_kernel_list<Kernel>(name, entries, describe)),
        table_([this](Isa level) { return list_.at(level); }) {
    if (op) register_dispatched_op(op, [this] { return std::string(dispatched_name()); });
  }
  KernelFamily(const KernelFamily&) = delete;

  const KernelList<Kernel>& list() const { return list_; }
  const Kernel* at(Isa level) const { return list_.at(level); }
  // The kernel of the best level within the cap: a family without a kernel at any allowed level has none (a
  // VNNI-only family under an AVX2 cap), where dispatched() throws instead of crashing.
  const Kernel* dispatched_or_null() const { return table_.get_or_null(); }
  const Kernel& dispatched() const { return table_.get(); }
  Isa dispatched_level() const { return table_.isa(); }
  // The kernel of this family called `name`, or nullptr: the tests' choice of a kernel by name.
  const Kernel* named(const std::string& name) const {
    for (size_t i = 0; i < list_.kernels.size(); ++i)
      if (name == list_.info[i].name) return list_.kernels[i];
    return nullptr;
  }
  // The kernel a test names (`kernel=`): one of this family by name, else this family's kernel of the ISA level
  // named, else (an empty or foreign name) the dispatched one.
  const Kernel& named_or_dispatched(const std::string& name) const {
    if (!name.empty()) {
      if (const Kernel* k = named(name)) return *k;
      Isa level;
      if (isa_from_name(name, &level) && at(level)) return *at(level);
    }
    return dispatched();
  }
  const char* dispatched_name() const {  // its name in the list, or "none"
    const Kernel* k = dispatched_or_null();
    for (size_t i = 0; k && i < list_.kernels.size(); ++i)
      if (list_.kernels[i] == k) return list_.info[i].name;
    return "none";
  }

 private:
  const KernelList<Kernel>& list_;
  KernelTable<Kernel> table_;
};

// In the family's ops file, after its accessor: builds and registers it at static initialization.
#define NNKERN_REGISTER_FAMILY(accessor) \
  namespace { [[maybe_unused]] const bool accessor##_registered = (accessor(), true); }

}  // namespace nnkern
