// Measured peak FMA rate of one core for an ISA level, for "% of peak" in the benchmarks.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstddef>

#include "core/isa.h"

namespace nnkern {

// Flop/s of the ISA's FMA loop over about `seconds` (best of a few runs); 0 if the level has no loop
// or the CPU lacks it.
double f32_peak_flops(Isa isa, double seconds);
// Int8 ops/s (2 per multiply-add) of the level's 8-bit loop (kernels/peak_i8.h), likewise; ops/peak/peak_i8.cc.
double i8_peak_ops(Isa isa, double seconds);

// Best rate (work units per second) of a peak loop `Result loop(size_t iters, double* work_per_iter)`,
// lengthened until one of five runs lasts a fifth of `seconds`. Shared by the f32 and int8 peaks.
template <typename Loop>
double best_loop_rate(Loop loop, size_t iters, double seconds) {
  using clock = std::chrono::steady_clock;
  double per_iter = 0, best = 0;
  volatile double sink = 0;  // keeps the loop's result, so the work cannot be elided
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = clock::now();
    sink = sink + double(loop(iters, &per_iter));
    double dt = std::chrono::duration<double>(clock::now() - t0).count();
    best = std::max(best, per_iter * double(iters) / dt);
    if (dt < seconds / 5) {
      iters = size_t(double(iters) * std::min(16.0, seconds / 5 / std::max(dt, 1e-6)));
      rep = -1;
      best = 0;
      if (iters > (size_t(1) << 40)) break;
    }
  }
  return best;
}

}  // namespace nnkern
