// The integer GEMM kernels of this build as data (kernels/qgemm_list.h): the lists, their registration as
// the kernel families "qgemm" and "qgemv", the per-level choice qgemm_kernels_for(Isa) derived from them,
// and the dispatch (core/dispatch.h). Baseline code.
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/dispatch.h"
#include "kernels/qgemm_list.h"
#include "ops/qgemm.h"

namespace nnkern {
namespace {

template <typename Kernel>
KernelInfo info_of(const Kernel& k, const char* name, Isa level) {
  if constexpr (std::is_same_v<Kernel, QGemmKernel>) return {name, level, k.mr, k.nr, k.kgroup};
  else return {name, level};
}

template <typename Kernel>
struct Entry {
  const Kernel* kernel;
  const char* name;
  Isa level;
};

// Never freed: the registry keeps a pointer to its info for the whole process.
template <typename Kernel>
const KernelList<Kernel>* make_list(const char* family, const std::vector<Entry<Kernel>>& entries) {
  auto* list = new KernelList<Kernel>{family, {}, {}};
  for (const Entry<Kernel>& e : entries) {
    list->kernels.push_back(e.kernel);
    list->info.push_back(info_of(*e.kernel, e.name, e.level));
  }
  register_kernel_family(family, &list->info);
  return list;
}

// The kernel of `level` exactly: its first 8-bit one (u8s8 or s8s8), or its s16 one.
const QGemmKernel* at_level(Isa level, bool s16) {
  const KernelList<QGemmKernel>& l = qgemm_kernel_list();
  for (size_t i = 0; i < l.kernels.size(); ++i)
    if (l.info[i].level == level && (l.kernels[i]->kind == QKind::s16) == s16) return l.kernels[i];
  return nullptr;
}

}  // namespace

#define NNKERN_QGEMM_ENTRY_(name, level) {&name, #name, Isa::level},
const KernelList<QGemmKernel>& qgemm_kernel_list() {
  static const KernelList<QGemmKernel>* list = make_list<QGemmKernel>("qgemm", {NNKERN_QGEMM_LIST(NNKERN_QGEMM_ENTRY_)});
  return *list;
}
const KernelList<QGemvKernel>& qgemv_kernel_list() {
  static const KernelList<QGemvKernel>* list = make_list<QGemvKernel>("qgemv", {NNKERN_QGEMV_LIST(NNKERN_QGEMM_ENTRY_)});
  return *list;
}
#undef NNKERN_QGEMM_ENTRY_

const QGemmKernels* qgemm_kernels_for(Isa isa) {
  static const std::vector<QGemmKernels>* table = [] {
    auto* t = new std::vector<QGemmKernels>(kIsaCount, QGemmKernels{nullptr, nullptr});
    for (Isa level : isa_levels()) {
      QGemmKernels& e = (*t)[int(level)];
      e.i8 = at_level(level, false);
      e.s16 = at_level(level, true);
      e.gemv = qgemv_kernel_list().at(level);
      // None of its own (avx512, avxvnni): the one of the highest level it implies, if any. isa_levels()
      // runs lowest first, so the last match is the highest.
      for (Isa lower : isa_levels())
        if (!qgemv_kernel_list().at(level) && isa_within(lower, level) && qgemv_kernel_list().at(lower))
          e.gemv = qgemv_kernel_list().at(lower);
      // A kernel with measured limits: the best 8-bit kernel of the levels it implies for shallow work.
      if (e.i8 && (e.i8->min_depth || e.i8->min_k))
        for (Isa lower : isa_levels())
          if (lower != level && isa_within(lower, level) && at_level(lower, false)) e.shallow = at_level(lower, false);
      // No s16 kernel of its own (neondot, neoni8mm): the best one of the levels it implies.
      for (Isa lower : isa_levels())
        if (!at_level(level, true) && lower != level && isa_within(lower, level) && at_level(lower, true)) e.s16 = at_level(lower, true);
    }
    return t;
  }();
  const QGemmKernels& e = (*table)[int(isa)];
  return e.i8 || at_level(isa, true) ? &e : nullptr;  // levels without a kernel of their own: none
}

const QGemmKernels& qgemm_kernels() {
  static const KernelTable<QGemmKernels> table(qgemm_kernels_for);
  return table.get();
}

const QGemmKernel& qgemm_kernel(int bits, size_t k, size_t ks) {
  const QGemmKernels& e = qgemm_kernels();
  if (bits != 8 || !e.i8) return *e.s16;
  const bool shallow = k < size_t(e.i8->min_k) || (k < SIZE_MAX && k * ks < size_t(e.i8->min_depth));
  return shallow && e.shallow ? *e.shallow : *e.i8;
}

namespace {
// At static initialization: the families for _C.kernel_list, the ops for cpu_info().
[[maybe_unused]] const bool registered = (qgemm_kernel_list(), qgemv_kernel_list(), register_dispatched_op("u8s8_gemm", [] {
  const QGemmKernels& ks = qgemm_kernels();
  return ks.i8 ? std::string(ks.i8->name) : std::string(ks.s16->name) + " (int8 widened to int16)";
}), register_dispatched_op("s16_gemm", [] { return std::string(qgemm_kernel(16).name); }),
   register_dispatched_op("u8s8_gemv", [] {
     const QGemmKernels& ks = qgemm_kernels();
     return ks.gemv ? std::string(ks.gemv->name) : std::string("none (small M runs the packed GEMM)");
   }), true);
}  // namespace

}  // namespace nnkern
