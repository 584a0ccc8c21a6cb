#include "ops/peak.h"

#include <algorithm>
#include <chrono>

#include "kernels/peak.h"

namespace nnkern {

double f32_peak_flops(Isa isa, double seconds) {
  PeakLoop loop = nullptr;
#ifdef NNKERN_HAVE_AVX2
  if (isa == Isa::avx2) loop = f32_fma_peak__avx2;
#endif
#ifdef NNKERN_HAVE_AVX512
  if (isa == Isa::avx512) loop = f32_fma_peak__avx512;
#endif
  if (!loop || !isa_supported(isa)) return 0.0;
  using clock = std::chrono::steady_clock;
  double per_iter = 0, best = 0;
  size_t iters = 1 << 16;
  volatile float sink = 0;
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
