// L1-resident timing of one full f32_gemm tile (m = MR, n = NR), plain and indirect: the quick
// before/after check for kernel changes. Not part of the build; compile against the native library:
//   g++ -O2 -std=c++17 -Icsrc tools/bench_f32_tile.cc build/native/libnnkern_core.a -lpthread -o /tmp/bench
//   /tmp/bench [kernel name] [k]
// Prints GFLOP/s (2 flops per MAC) as the best of several repetitions, for the plain kernel at K = k and,
// with the indirect form, for ks = 9 taps of k / 9 channels each (the same MACs per tile).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/kernel_list.h"
#include "kernels/f32_gemm.h"
#include "ops/f32_gemm.h"

using namespace nnkern;

template <typename F>
double best_gflops(size_t macs, F f) {
  double best = 0.0;
  for (int rep = 0; rep < 7; ++rep) {
    const int iters = 20000;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) f();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double g = 2.0 * double(macs) * iters / s * 1e-9;
    if (g > best) best = g;
  }
  return best;
}

int main(int argc, char** argv) {
  const char* want = argc > 1 ? argv[1] : "f32_gemm_16x6__avx2";
  const size_t K = argc > 2 ? size_t(std::atoi(argv[2])) : 288;
  const F32GemmKernel* kernel = nullptr;
  for (Isa isa : isa_levels()) {
    const F32GemmKernel* k = f32_gemm_kernel_for(isa);
    if (k && std::strcmp(k->name, want) == 0 && isa_supported(isa)) kernel = k;
  }
  if (!kernel) {
    std::printf("no runnable kernel %s\n", want);
    return 1;
  }
  const size_t MR = kernel->mr, NR = kernel->nr;
  std::vector<float> a(MR * K + MR, 0.5f), b(NR * K + NR, 0.25f), c(MR * NR, 0.0f);
  std::vector<const float*> bp(NR);
  for (size_t j = 0; j < NR; ++j) bp[j] = b.data() + j;  // the driver's NR-interleaved packed sliver
  F32Epilogue ep;
  const double plain = best_gflops(MR * NR * K, [&] {
    kernel->run(MR, NR, K, a.data(), MR, nullptr, bp.data(), NR, c.data(), MR, &ep);
  });
  std::printf("%s plain  K=%zu: %.2f GFLOP/s\n", kernel->name, K, plain);
#ifdef NNKERN_BENCH_IGEMM
  const size_t ks = 9, kc = K / ks;
  std::vector<float> x(ks * NR * (kc + 16), 0.25f), zero(kc, 0.0f);
  std::vector<const float*> ind(ks * NR);
  for (size_t t = 0; t < ks; ++t)
    for (size_t j = 0; j < NR; ++j) ind[t * NR + j] = x.data() + (t * NR + j) * (kc + 16);
  const double igemm = best_gflops(MR * NR * ks * kc, [&] {
    kernel->igemm(MR, NR, kc, ks, a.data(), ind.data(), zero.data(), 0, c.data(), MR, &ep);
  });
  std::printf("%s igemm  ks=%zu k=%zu: %.2f GFLOP/s (%.0f%% of plain)\n", kernel->name, ks, kc, igemm,
              100.0 * igemm / plain);
#endif
  return 0;
}
