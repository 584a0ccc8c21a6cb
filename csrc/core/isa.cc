// ISA names, the partial order of levels and the process-wide cap.
#include <atomic>
#include <cstdlib>

#include "core/isa.h"

namespace nnkern {
namespace {

struct IsaName { Isa isa; const char* name; };
constexpr IsaName kNames[] = {
    {Isa::scalar, "scalar"},   {Isa::avx2, "avx2"},       {Isa::avxvnni, "avxvnni"},
    {Isa::avx512, "avx512"},   {Isa::avx512vnni, "avx512vnni"},
    {Isa::avx512bf16, "avx512bf16"}, {Isa::amx, "amx"},
    {Isa::neon, "neon"},
    {Isa::neondot, "neondot"}, {Isa::neoni8mm, "neoni8mm"}, {Isa::neonbf16, "neonbf16"},
};

// The best level the CPU has (ops without a kernel at that level use the best one below it).
Isa best_supported() {
  Isa best = Isa::scalar;
  for (Isa i : isa_levels())
    if (isa_supported(i)) best = i;
  return best;
}

Isa initial_cap() {
  const char* env = std::getenv("NNKERN_MAX_ISA");
  Isa cap;
  // An unknown name in the environment cannot raise at import; the Python layer validates it.
  if (env && *env && isa_from_name(env, &cap)) return cap;
  return best_supported();
}

std::atomic<int>& cap_storage() {
  static std::atomic<int> cap{int(initial_cap())};
  return cap;
}

}  // namespace

const char* isa_name(Isa isa) {
  for (const auto& n : kNames)
    if (n.isa == isa) return n.name;
  return "unknown";
}

bool isa_from_name(const std::string& name, Isa* out) {
  for (Isa i : isa_levels())
    if (name == isa_name(i)) { *out = i; return true; }
  return false;
}

std::vector<Isa> isa_levels() {
#if defined(__aarch64__)
  return {Isa::scalar, Isa::neon, Isa::neondot, Isa::neoni8mm, Isa::neonbf16};
#elif defined(__x86_64__) || defined(_M_X64)
  return {Isa::scalar, Isa::avx2, Isa::avxvnni, Isa::avx512, Isa::avx512vnni, Isa::avx512bf16, Isa::amx};
#else
  return {Isa::scalar};
#endif
}

bool isa_supported(Isa isa) {
  const CpuFeatures& f = cpu_features();
  const bool avx2 = f.avx && f.avx2 && f.fma && f.f16c && f.os_ymm;
  const bool avx512 = avx2 && f.avx512f && f.avx512bw && f.avx512dq && f.avx512vl && f.os_zmm;
  switch (isa) {
    case Isa::scalar: return true;
    case Isa::avx2: return avx2;
    case Isa::avxvnni: return avx2 && f.avxvnni;
    case Isa::avx512: return avx512;
    case Isa::avx512vnni: return avx512 && f.avx512vnni;
    case Isa::avx512bf16: return avx512 && f.avx512vnni && f.avx512bf16;
    // Every AMX CPU has AVX512_BF16 and AMX-BF16 too: requiring them keeps the x86 levels above avx512 one chain
    // and gives both AMX kernel families (u8s8 tdpbusd, bf16 tdpbf16ps) one level.
    case Isa::amx:
      return avx512 && f.avx512vnni && f.avx512bf16 && f.amx_tile && f.amx_int8 && f.amx_bf16 && f.os_amx &&
             amx_permitted();
    case Isa::neon: return f.asimd;
    case Isa::neondot: return f.asimd && f.asimddp;
    case Isa::neoni8mm: return f.asimd && f.asimddp && f.i8mm;
    case Isa::neonbf16: return f.asimd && f.asimddp && f.i8mm && f.bf16;
  }
  return false;
}

bool isa_within(Isa isa, Isa cap) {
  if (isa == cap || isa == Isa::scalar) return true;
  switch (cap) {
    case Isa::avx2: return false;
    case Isa::avxvnni: return isa == Isa::avx2;
    case Isa::avx512: return isa == Isa::avx2;
    case Isa::avx512vnni: return isa == Isa::avx2 || isa == Isa::avxvnni || isa == Isa::avx512;
    case Isa::avx512bf16:
      return isa == Isa::avx2 || isa == Isa::avxvnni || isa == Isa::avx512 || isa == Isa::avx512vnni;
    case Isa::amx:
      return isa == Isa::avx2 || isa == Isa::avxvnni || isa == Isa::avx512 || isa == Isa::avx512vnni ||
             isa == Isa::avx512bf16;
    case Isa::neon: return false;
    case Isa::neondot: return isa == Isa::neon;
    case Isa::neoni8mm: return isa == Isa::neon || isa == Isa::neondot;
    case Isa::neonbf16: return isa == Isa::neon || isa == Isa::neondot || isa == Isa::neoni8mm;
    default: return false;
  }
}

namespace {
thread_local int t_isa_cap = -1;
}  // namespace

Isa max_isa() {
  const Isa global = Isa(cap_storage().load());
  if (t_isa_cap < 0) return global;
  const Isa own = Isa(t_isa_cap);
  Isa best = Isa::scalar;  // the best level within both caps (they may be incomparable: avxvnni and avx512)
  for (Isa level : isa_levels())
    if (isa_within(level, own) && isa_within(level, global)) best = level;
  return best;
}

ScopedIsaCap::ScopedIsaCap(Isa cap) : previous_(t_isa_cap) { t_isa_cap = int(cap); }
ScopedIsaCap::~ScopedIsaCap() { t_isa_cap = previous_; }
int thread_isa_cap() { return t_isa_cap; }
void set_thread_isa_cap(int cap) { t_isa_cap = cap; }
void set_max_isa(Isa cap) { cap_storage().store(int(cap)); }

bool isa_active(Isa isa) { return isa_supported(isa) && isa_within(isa, max_isa()); }

std::vector<Isa> active_isas() {
  std::vector<Isa> out;
  for (Isa i : isa_levels())
    if (isa_active(i)) out.push_back(i);
  return out;
}

}  // namespace nnkern
