// Dispatch on the CPU this runs on (under qemu-user: the QEMU_CPU model): the detected features match
// EXPECT_FEATURES, every cap dispatches f32_gemm to a level the CPU supports within the cap, and
// (aarch64) a cap of neondot on a CPU without the dot product is refused by the dispatcher: the
// table falls back to the neon entry, while the neondot code itself would die of SIGILL there.
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "core/dispatch.h"
#include "core/isa.h"
#include "harness.h"
#include "ops/gemm/gemm.h"
#include "kernels/qgemm_list.h"
#include "ops/qgemm/qgemm.h"
#include "core/kernel_family.h"
#include "kernels/f32_gemm_list.h"

using namespace nnkern;
using nnkern_test::check;

#if defined(__aarch64__)
int32_t probe_neondot(const int8_t* a, const int8_t* b);  // tests/native/probe_neondot.cc (+dotprod)

namespace {
struct ProbeKernel {
  const char* name;
  int32_t (*run)(const int8_t*, const int8_t*);
};
int32_t probe_neon(const int8_t* a, const int8_t* b) {
  int32_t s = 0;
  for (int i = 0; i < 16; ++i) s += int32_t(a[i]) * b[i];
  return s;
}
const ProbeKernel kNeon = {"probe__neon", probe_neon}, kNeonDot = {"probe__neondot", probe_neondot};
const ProbeKernel* probe_for(Isa isa) {
  switch (isa) {
    case Isa::neon: return &kNeon;
    case Isa::neondot: return &kNeonDot;
    default: return nullptr;
  }
}
}  // namespace
#endif

int main() {
  const CpuFeatures& f = cpu_features();
  std::printf("arch %s, supported:", f.arch.c_str());
  for (Isa i : isa_levels())
    if (isa_supported(i)) std::printf(" %s", isa_name(i));
  std::printf("\n");

  // What the emulated CPU advertises, per level name (EXPECT_FEATURES="neon=1,neondot=0,...").
  for (Isa i : isa_levels()) {
    const int want = nnkern_test::expected_feature(isa_name(i));
    if (want >= 0)
      check(int(isa_supported(i)) == want, "level %s: expected supported=%d, detected %d", isa_name(i), want,
            int(isa_supported(i)));
  }

  // Every cap: the f32_gemm kernel comes from a supported level within the cap, never above it.
  for (Isa cap : isa_levels()) {
    set_max_isa(cap);
    const F32GemmKernel& k = f32_gemm_family().dispatched();
    Isa from = Isa::scalar;
    for (Isa i : isa_levels())
      if (f32_gemm_family().at(i) == &k) from = i;
    check(isa_supported(from) && isa_within(from, cap), "cap %s dispatched f32_gemm to %s (%s)", isa_name(cap), k.name,
          isa_name(from));
    std::printf("cap %-10s -> %s\n", isa_name(cap), k.name);
    // The same for the integer GEMM: its 8-bit kernel (or the kernel the 8-bit data is widened to int16 for).
    const QGemmKernel& q = qgemm_kernel(8);
    Isa qfrom = Isa::scalar;
    for (Isa i : isa_levels())
      if (const QGemmKernels* ks = qgemm_kernels_for(i))
        if (ks->i8 == &q || (!ks->i8 && &ks->widened8() == &q)) qfrom = i;
    check(isa_supported(qfrom) && isa_within(qfrom, cap), "cap %s dispatched the int8 GEMM to %s (%s)", isa_name(cap),
          q.name, isa_name(qfrom));
    std::printf("cap %-10s -> %s\n", isa_name(cap), q.name);
  }

  {
    // A family without a scalar kernel (only the best level of this architecture has one): capped below
    // it, dispatch finds nothing and says so instead of dereferencing null.
    struct TopOnly {
      const char* name;
    };
    static const TopOnly only_top{"only_top"};
    static const Isa top = isa_levels().back();
    static const KernelTable<TopOnly> sparse([](Isa i) { return i == top ? &only_top : nullptr; });
    set_max_isa(Isa::scalar);
    bool threw = false;
    try {
      (void)sparse.get();
    } catch (const std::logic_error&) {
      threw = true;
    }
    check(sparse.get_or_null() == nullptr && threw, "a family without a scalar kernel: null, and get() throws");
    set_max_isa(top);
    check(sparse.get_or_null() == (isa_supported(top) ? &only_top : nullptr), "the top-level kernel where supported");
  }

#if defined(__aarch64__)
  // The dot-product proof: cap neondot on a CPU without it must dispatch the neon probe...
  static const KernelTable<ProbeKernel> table(probe_for);
  set_max_isa(Isa::neondot);
  const ProbeKernel& chosen = table.get();
  const bool dot = isa_supported(Isa::neondot);
  check(&chosen == (dot ? &kNeonDot : &kNeon), "cap neondot on a CPU with dot=%d dispatched %s", int(dot), chosen.name);
  int8_t a[16], b[16];
  for (int i = 0; i < 16; ++i) a[i] = int8_t(i * 13 - 100), b[i] = int8_t(127 - i * 17);
  check(chosen.run(a, b) == probe_neon(a, b), "%s computed a wrong dot product", chosen.name);
  // ...because running the neondot code there really traps (SIGILL), and runs where it is supported.
  volatile const int8_t* va = a;  // keep the call from being folded away
  const int sig = nnkern_test::child_signal([&] {
    const int32_t r = probe_neondot(const_cast<const int8_t*>(va), b);
    std::printf("forced %s: %d\n", kNeonDot.name, r);
    std::fflush(stdout);
  });
  check(sig == (dot ? 0 : SIGILL), "forcing %s: signal %d (%s), expected %s", kNeonDot.name, sig, strsignal(sig),
        dot ? "none" : "SIGILL");
  std::printf("dispatcher with cap neondot chose %s; the forced neondot code ended with signal %d (%s)\n", chosen.name,
              sig, sig ? strsignal(sig) : "none");

  // The real integer GEMM kernels: capped at each ARM level, the dispatcher never hands out one the CPU
  // lacks, and running that kernel anyway traps (so the refusal is what keeps the process alive).
  const bool i8mm = isa_supported(Isa::neoni8mm);
  for (Isa cap : {Isa::neondot, Isa::neoni8mm}) {
    set_max_isa(cap);
    const QGemmKernel& q = qgemm_kernel(8);
    const QGemmKernel& want = cap == Isa::neoni8mm && i8mm ? u8s8_gemm_8x8c8__neoni8mm
                              : dot                        ? s8s8_gemm_8x8c4__neondot
                                                           : u8s8_gemm_8x8c1__neon;
    check(&q == &want, "cap %s on a CPU with dot=%d i8mm=%d dispatched %s, want %s", isa_name(cap), int(dot), int(i8mm),
          q.name, want.name);
  }
  for (const QGemmKernel* forced : {&s8s8_gemm_8x8c4__neondot, &u8s8_gemm_8x8c8__neoni8mm}) {
    const bool has = forced == &s8s8_gemm_8x8c4__neondot ? dot : i8mm;
    const int s = nnkern_test::child_signal([&] {
      alignas(16) int8_t w[8 * 16] = {1};
      alignas(16) uint8_t x[16] = {2};
      const void* rows[1] = {x};
      int32_t c[8];
      QEpilogue ep;
      forced->run(8, 1, 16, 1, w, rows, nullptr, 0, c, 8, &ep);
    });
    check(s == (has ? 0 : SIGILL), "forcing %s: signal %d (%s), expected %s", forced->name, s, strsignal(s),
          has ? "none" : "SIGILL");
    std::printf("forced %s: signal %d (%s)\n", forced->name, s, s ? strsignal(s) : "none");
  }
#endif
  return nnkern_test::finish();
}
