// The two kernel families as the generic benchmark (family_bench.h) sees them: the list, a kernel's
// layout, one call of the plain and of the indirect form, the ISA peak and the unit. Everything else is
// shared. Baseline code.
#pragma once
#include <cstddef>

#include "core/isa.h"
#include "core/kernel_list.h"
#include "kernels/f32_gemm.h"
#include "kernels/qgemm_list.h"
#include "ops/gemm/gemm.h"
#include "ops/peak/peak.h"
#include "operands.h"
#include "core/kernel_family.h"
#include "kernels/f32_gemm_list.h"

namespace nnkern_bench {

struct F32GemmFamily {
  using Kernel = nnkern::F32GemmKernel;
  using BPtr = const float*;
  static constexpr const char* name = "f32_gemm";
  static constexpr const char* unit = "GFLOP/s";
  static const nnkern::KernelList<Kernel>& list() { return nnkern::f32_gemm_family().list(); }
  // The driver feeds the plain form an NR-interleaved packed sliver (b_stride = NR); kernels/f32_gemm.h.
  static Layout layout(const Kernel& k) {
    return {size_t(k.mr), size_t(k.nr), 1, Elem::f32, Elem::f32, Elem::f32, true};
  }
  static void plain(const Kernel& k, size_t K, const void* a, const BPtr* b, void* c) {
    static const nnkern::F32Epilogue ep;
    k.run(k.mr, k.nr, K, static_cast<const float*>(a), k.mr, nullptr, b, k.nr, static_cast<float*>(c), k.mr, &ep);
  }
  static void indirect(const Kernel& k, size_t kc, size_t ks, const void* a, const BPtr* b, const void* zero,
                       void* c) {
    static const nnkern::F32Epilogue ep;
    k.igemm(k.mr, k.nr, kc, ks, static_cast<const float*>(a), b, static_cast<const float*>(zero), 0,
            static_cast<float*>(c), k.mr, &ep);
  }
  static double peak(nnkern::Isa isa, double seconds) { return nnkern::f32_peak_flops(isa, seconds); }
};

struct QGemmFamily {
  using Kernel = nnkern::QGemmKernel;
  using BPtr = const void*;
  static constexpr const char* name = "qgemm";
  static constexpr const char* unit = "GOP/s";  // 2 int ops per multiply-add, as the int8 peak counts
  static const nnkern::KernelList<Kernel>& list() { return nnkern::qgemm_family().list(); }
  static Layout layout(const Kernel& k) {
    using nnkern::QKind;
    const bool widened = k.kind == QKind::s16 || k.kind == QKind::s16w8;  // int16 activations (s16w8: int8 panels)
    const Elem a = k.kind == QKind::s16 ? Elem::s16 : Elem::s8;
    const Elem b = widened ? Elem::s16 : k.kind == QKind::s8s8 ? Elem::s8 : Elem::u8;
    return {size_t(k.mr), size_t(k.nr), size_t(k.kgroup), a, b, Elem::s32, false, k.weight_bits == 7 ? 64 : 0};
  }
  // One run() serves both forms: ks = 1 without a zero row is the plain GEMM tile (kernels/qgemm.h).
  static void plain(const Kernel& k, size_t K, const void* a, const BPtr* b, void* c) {
    static const nnkern::QEpilogue ep;
    k.run(k.mr, k.nr, K, 1, a, b, nullptr, 0, c, k.mr, &ep);
  }
  static void indirect(const Kernel& k, size_t kc, size_t ks, const void* a, const BPtr* b, const void* zero,
                       void* c) {
    static const nnkern::QEpilogue ep;
    k.run(k.mr, k.nr, kc, ks, a, b, zero, 0, c, k.mr, &ep);
  }
  static double peak(nnkern::Isa isa, double seconds) { return nnkern::i8_peak_ops(isa, seconds); }
};

}  // namespace nnkern_bench
