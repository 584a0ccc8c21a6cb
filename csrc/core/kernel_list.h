// One kernel list per family: a single X-macro naming each kernel and its ISA level, from which the
// dispatch (KernelList::at), the registry that tests and benchmarks read (`nnkern._C.kernel_list(family)`),
// the native tests and the micro-kernel benchmarks are all derived. Adding a kernel is one line in its
// family's list (csrc/kernels/<family>_list.h) plus its file. Baseline header: no intrinsics.
//
//   #define NNKERN_F32_GEMM_LIST(X) (one entry per line, each line ending in a backslash)
//     X(f32_gemm_8x4__scalar, scalar)
//     NNKERN_AVX2(X(f32_gemm_16x6__avx2, avx2))
//
// NNKERN_<ISA>(...) keeps its argument only in builds that compile that ISA's sources, so a list names
// exactly the kernels of this build. A family may lack a kernel at any level (scalar included): at()
// then returns nullptr and the dispatcher uses the best level below that has one.
#pragma once
#include <cstddef>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "core/isa.h"

#if defined(NNKERN_HAVE_AVX2)
#define NNKERN_AVX2(...) __VA_ARGS__
#else
#define NNKERN_AVX2(...)
#endif
#if defined(NNKERN_HAVE_AVXVNNI)
#define NNKERN_AVXVNNI(...) __VA_ARGS__
#else
#define NNKERN_AVXVNNI(...)
#endif
#if defined(NNKERN_HAVE_AVX512)
#define NNKERN_AVX512(...) __VA_ARGS__
#else
#define NNKERN_AVX512(...)
#endif
#if defined(NNKERN_HAVE_AVX512VNNI)
#define NNKERN_AVX512VNNI(...) __VA_ARGS__
#else
#define NNKERN_AVX512VNNI(...)
#endif
#if defined(NNKERN_HAVE_AVX512BF16)
#define NNKERN_AVX512BF16(...) __VA_ARGS__
#else
#define NNKERN_AVX512BF16(...)
#endif
#if defined(NNKERN_HAVE_AMX)
#define NNKERN_AMX(...) __VA_ARGS__
#else
#define NNKERN_AMX(...)
#endif
#if defined(NNKERN_HAVE_NEON)
#define NNKERN_NEON(...) __VA_ARGS__
#else
#define NNKERN_NEON(...)
#endif
#if defined(NNKERN_HAVE_NEONDOT)
#define NNKERN_NEONDOT(...) __VA_ARGS__
#else
#define NNKERN_NEONDOT(...)
#endif
#if defined(NNKERN_HAVE_NEONBF16)
#define NNKERN_NEONBF16(...) __VA_ARGS__
#else
#define NNKERN_NEONBF16(...)
#endif
#if defined(NNKERN_HAVE_NEONI8MM)
#define NNKERN_NEONI8MM(...) __VA_ARGS__
#else
#define NNKERN_NEONI8MM(...)
#endif

namespace nnkern {

template <typename Kernel>
class KernelFamily;  // core/kernel_family.h: a family's list, its dispatch and its cpu_info() line

// What tests, benchmarks and cpu_info need to know of a kernel without knowing its family's type.
struct KernelInfo {
  const char* name = "";  // the symbol's name, also the name in cpu_info() and in test ids
  Isa level = Isa::scalar;
  int mr = 0, nr = 0;  // tile (0 where the family has none)
  int kgroup = 0;      // k values per packed group (XNNPACK's c4/c8), 0 where none
  int weight_bits = 8;  // the integer kernels exact only for narrower weights (kernels/qgemm.h): 7
};

// A family's list as data: kernels[i] has info[i]. Built from the X-macro by NNKERN_KERNEL_LIST below.
template <typename Kernel>
struct KernelList {
  const char* family;
  std::vector<const Kernel*> kernels;
  std::vector<KernelInfo> info;

  // The kernel of exactly `level`, or nullptr (the first one listed if a level has several).
  const Kernel* at(Isa level) const {
    for (size_t i = 0; i < kernels.size(); ++i)
      if (info[i].level == level) return kernels[i];
    return nullptr;
  }
};

// Registry of every family's list (baseline code, filled at static initialization): read by the binding
// `_C.kernel_list(family)` and the native tests.
void register_kernel_family(const char* family, const std::vector<KernelInfo>* info);
const std::vector<KernelInfo>* kernel_family(const std::string& family);  // nullptr if unknown
std::vector<std::string> kernel_families();

// One entry of a list as the X-macro expands it: NNKERN_KERNEL_ENTRY(sym, level) gives
// {&sym, Isa::level, "sym"}, so the registered name is the symbol's.
template <typename Kernel>
struct KernelEntry {
  const Kernel* kernel;
  Isa level;
  const char* name;
};
#define NNKERN_KERNEL_ENTRY(sym, level) {&sym, ::nnkern::Isa::level, #sym},

// Builds and registers a family's list (kept for the life of the process); KernelFamily (core/kernel_family.h)
// calls it. `describe` fills the tile and K-group of a kernel; the name and level come from the list.
template <typename Kernel, typename Describe>
const KernelList<Kernel>& make_kernel_list(const char* family, std::initializer_list<KernelEntry<Kernel>> entries,
                                           Describe describe) {
  auto* list = new KernelList<Kernel>{family, {}, {}};  // never destroyed: the registry points into it
  for (const KernelEntry<Kernel>& e : entries) {
    KernelInfo info = describe(*e.kernel);
    info.name = e.name;
    info.level = e.level;
    list->kernels.push_back(e.kernel);
    list->info.push_back(info);
  }
  register_kernel_family(family, &list->info);
  return *list;
}

}  // namespace nnkern
