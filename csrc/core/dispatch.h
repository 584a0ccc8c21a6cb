// Runtime dispatch: for each op, the kernel of the best ISA level that the CPU has and the cap allows.
// Each op family owns one KernelTable (in its ops/ file) built from a `kernel_for(Isa)` function that
// names its kernels per level; ops read it at each call and never test CPU features themselves.
#pragma once
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/isa.h"

namespace nnkern {

// Registry of op names and the kernel each currently dispatches to, for cpu_info().
void register_dispatched_op(const char* op, std::function<std::string()> chosen_kernel_name);
std::vector<std::pair<std::string, std::string>> chosen_kernels();

constexpr int kIsaCount = int(Isa::neonbf16) + 1;

// One immutable entry per possible cap, built on first use: changing the cap only changes which
// entry is read, so a call running on another thread never sees a half-built table.
template <typename Kernel>
class KernelTable {
 public:
  using KernelFor = std::function<const Kernel*(Isa)>;  // nullptr where a level has no kernel of this op

  explicit KernelTable(KernelFor kernel_for) : kernel_for_(std::move(kernel_for)) {}

  // The dispatched kernel. A family may lack a kernel at every level the cap allows (no scalar kernel,
  // e.g. a VNNI-only family): get_or_null() then returns nullptr and get() throws instead of crashing.
  const Kernel* get_or_null() const { return entry().kernel; }
  const Kernel& get() const {
    if (!entry().kernel) throw std::logic_error("no kernel of this family at the current ISA cap");
    return *entry().kernel;
  }
  Isa isa() const { return entry().isa; }  // the level whose kernel get() returns

 private:
  struct Entry {
    const Kernel* kernel;
    Isa isa;
  };
  const Entry& entry() const {
    std::call_once(once_, [this] {
      for (int cap = 0; cap < kIsaCount; ++cap) {
        Entry e{kernel_for_(Isa::scalar), Isa::scalar};
        for (Isa level : isa_levels()) {  // lowest first: better levels override
          if (!isa_supported(level) || !isa_within(level, Isa(cap))) continue;
          if (const Kernel* k = kernel_for_(level)) e = {k, level};
        }
        entries_[cap] = e;
      }
    });
    return entries_[int(max_isa())];
  }

  KernelFor kernel_for_;
  mutable std::once_flag once_;
  mutable Entry entries_[kIsaCount];
};

}  // namespace nnkern
