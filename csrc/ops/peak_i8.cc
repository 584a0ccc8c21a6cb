// Measured 8-bit multiply-add peak of one core per ISA level (see kernels/peak_i8.h), for the benchmarks.
#include <algorithm>
#include <chrono>

#include "core/isa.h"
#include "kernels/peak_i8.h"

namespace nnkern {

// Int8 ops/s (2 per multiply-add) of the level's loop over about `seconds`; 0 if none or unsupported.
double i8_peak_ops(Isa isa, double seconds) {
  I8PeakLoop loop = nullptr;
#ifdef NNKERN_HAVE_AVX2
  if (isa == Isa::avx2) loop = i8_peak__avx2;
#endif
#ifdef NNKERN_HAVE_AVXVNNI
  if (isa == Isa::avxvnni) loop = i8_peak__avxvnni;
#endif
#ifdef NNKERN_HAVE_AVX512
  if (isa == Isa::avx512) loop = i8_peak__avx512;
#endif
#ifdef NNKERN_HAVE_AVX512VNNI
  if (isa == Isa::avx512vnni) loop = i8_peak__avx512vnni;
#endif
  if (!loop || !isa_supported(isa)) return 0.0;
  using clock = std::chrono::steady_clock;
  double per_iter = 0, best = 0;
  size_t iters = 1 << 14;
  volatile int sink = 0;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = clock::now();
    sink = sink + loop(iters, &per_iter);
    double dt = std::chrono::duration<double>(clock::now() - t0).count();
    best = std::max(best, per_iter * double(iters) / dt);
    if (dt < seconds / 5) {  // lengthen until one run lasts a fifth of the budget
      iters = size_t(double(iters) * std::min(16.0, seconds / 5 / std::max(dt, 1e-6)));
      rep = -1;
      best = 0;
      if (iters > (size_t(1) << 40)) break;
    }
  }
  return best;
}

}  // namespace nnkern
