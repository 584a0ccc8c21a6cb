// The integer GEMM kernels of this build as data (kernels/qgemm_list.h): the lists, their registration as
// the kernel families "qgemm" and "qgemv", the per-level choice qgemm_kernels_for(Isa) derived from them,
// and the dispatch (core/dispatch.h). Baseline code.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/kernel_family.h"
#include "kernels/qgemm_list.h"
#include "ops/qgemm/qgemm.h"

namespace nnkern {
namespace {

// The first kernel of `level` exactly (list order) that `pick` accepts, or null.
template <typename Pick>
const QGemmKernel* first_at_level(Isa level, Pick pick) {
  const KernelList<QGemmKernel>& l = qgemm_family().list();
  for (size_t i = 0; i < l.kernels.size(); ++i)
    if (l.info[i].level == level && pick(*l.kernels[i])) return l.kernels[i];
  return nullptr;
}

// The kernel of `level` exactly for any weights: its first 8-bit one (u8s8 or s8s8), or its s16 one.
const QGemmKernel* at_level(Isa level, bool s16) {
  return first_at_level(level, [s16](const QGemmKernel& k) {
    const bool eight_bit = k.kind == QKind::u8s8 || k.kind == QKind::s8s8;
    return (s16 ? k.kind == QKind::s16 : eight_bit) && k.weight_bits == 8;
  });
}

}  // namespace

// The families "qgemm" and "qgemv"; their dispatch is qgemm_kernels() below, which pairs each level's kernels.
const KernelFamily<QGemmKernel>& qgemm_family() {
  static const KernelFamily<QGemmKernel> family(
      "qgemm", nullptr, {NNKERN_QGEMM_LIST(NNKERN_KERNEL_ENTRY)},
      [](const QGemmKernel& k) { return KernelInfo{"", Isa::scalar, k.mr, k.nr, k.kgroup, k.weight_bits}; });
  return family;
}
NNKERN_REGISTER_FAMILY(qgemm_family)

const KernelFamily<QGemvKernel>& qgemv_family() {
  static const KernelFamily<QGemvKernel> family("qgemv", nullptr, {NNKERN_QGEMV_LIST(NNKERN_KERNEL_ENTRY)},
                                                [](const QGemvKernel&) { return KernelInfo{}; });
  return family;
}
NNKERN_REGISTER_FAMILY(qgemv_family)

const QGemmKernels* qgemm_kernels_for(Isa isa) {
  static const std::vector<QGemmKernels>* table = [] {
    auto* t = new std::vector<QGemmKernels>(kIsaCount, QGemmKernels{nullptr, nullptr});
    for (Isa level : isa_levels()) {
      QGemmKernels& e = (*t)[int(level)];
      e.i8 = at_level(level, false);
      e.s16 = at_level(level, true);
      // The level's own int16-product kernel of int8 panels, and its 8-bit kernel for 7-bit weights only.
      e.s16w8 = first_at_level(level, [](const QGemmKernel& k) { return k.kind == QKind::s16w8; });
      e.i8_narrow = e.i8 ? nullptr : first_at_level(level, [](const QGemmKernel& k) { return k.weight_bits < 8; });
      e.gemv = qgemv_family().list().at(level);
      // None of its own (avx512, avxvnni): the one of the highest level it implies, if any. isa_levels()
      // runs lowest first, so the last match is the highest.
      for (Isa lower : isa_levels())
        if (!qgemv_family().list().at(level) && isa_within(lower, level) && qgemv_family().list().at(lower))
          e.gemv = qgemv_family().list().at(lower);
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

const QGemmKernel& qgemm_kernel(int bits, size_t k, size_t ks, bool narrow_weights) {
  const QGemmKernels& e = qgemm_kernels();
  if (bits == 8 && !e.i8 && narrow_weights && e.i8_narrow) return *e.i8_narrow;
  if (bits != 8 || !e.i8) return bits == 8 && e.s16w8 ? *e.s16w8 : *e.s16;
  const bool shallow = k < size_t(e.i8->min_k) || (k < SIZE_MAX && k * ks < size_t(e.i8->min_depth));
  return shallow && e.shallow ? *e.shallow : *e.i8;
}

bool qgemm_narrow_weights(const int8_t* w, size_t n) {
  return std::all_of(w, w + n, [](int8_t v) { return v >= -64 && v <= 64; });
}

void qgemm_check_weights_fit(const QGemmKernel& k, bool narrow_weights) {
  if (k.weight_bits < 8 && !narrow_weights)
    throw std::invalid_argument(std::string("the kernel ") + k.name + " does not apply: it is exact only for weights "
                                "in [-64, 64]");
}

namespace {
// At static initialization: the ops for cpu_info().
[[maybe_unused]] const bool registered = (register_dispatched_op("u8s8_gemm", [] {
  const QGemmKernels& ks = qgemm_kernels();
  return ks.i8 ? std::string(ks.i8->name) : std::string(ks.widened8().name) + " (int8 widened to int16)";
}), register_dispatched_op("u8s8_gemm_7bit_weights", [] {
  const QGemmKernels& ks = qgemm_kernels();
  const QGemmKernel& k = ks.i8_narrow ? *ks.i8_narrow : ks.i8 ? *ks.i8 : ks.widened8();
  return std::string(k.name) + (ks.i8 || ks.i8_narrow ? "" : " (int8 widened to int16)");
}), register_dispatched_op("s16_gemm", [] { return std::string(qgemm_kernel(16).name); }),
   register_dispatched_op("u8s8_gemv", [] {
     const QGemmKernels& ks = qgemm_kernels();
     return ks.gemv ? std::string(ks.gemv->name) : std::string("none (small M runs the packed GEMM)");
   }), true);
}  // namespace

}  // namespace nnkern
