#include "core/dispatch.h"


namespace nnkern {
namespace {

DispatchTable build_table(Isa cap) {
  DispatchTable t{Isa::scalar, &f32_gemm_ref};
  // Walk the levels from the lowest; later (better) levels within the cap override.
  for (Isa isa : isa_levels()) {
    if (!isa_supported(isa) || !isa_within(isa, cap)) continue;
    if (const F32GemmKernel* k = f32_gemm_kernel_for(isa)) {
      t.f32_gemm = k;
      t.f32_gemm_isa = isa;
    }
  }
  return t;
}

constexpr int kLevels = int(Isa::neoni8mm) + 1;

// One immutable table per possible cap, built once: changing the cap only changes which one is read,
// so a call running on another thread never sees a half-written table.
const DispatchTable* all_tables() {
  static const auto* tables = [] {
    auto* t = new DispatchTable[kLevels];
    for (int i = 0; i < kLevels; ++i) t[i] = build_table(Isa(i));
    return t;
  }();
  return tables;
}

}  // namespace

const F32GemmKernel* f32_gemm_kernel_for(Isa isa) {
  switch (isa) {
    case Isa::scalar: return &f32_gemm_ref;
#ifdef NNKERN_HAVE_AVX2
    case Isa::avx2: return &f32_gemm_16x6__avx2;
#endif
#ifdef NNKERN_HAVE_AVX512
    case Isa::avx512: return &f32_gemm_avx512;
#endif
    default: return nullptr;
  }
}

const DispatchTable& dispatch() { return all_tables()[int(max_isa())]; }

std::vector<std::pair<std::string, std::string>> chosen_kernels() {
  const DispatchTable& t = dispatch();
  return {{"f32_gemm", t.f32_gemm->name}};
}

}  // namespace nnkern
