// Interleaved timing of a set of calls, shared by every family of the micro-kernel benchmark. Each case is
// calibrated to a repetition of >= min_rep_s, then the repetitions run round-robin over all cases (rep 1 of
// every case, rep 2 of every case, ...), so a change of host load during the run hits them alike.
// Baseline code.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace nnkern_bench {

struct Case {
  std::string name;
  double work = 0;                        // flops / ops of one call
  std::function<void(size_t iters)> run;  // `iters` calls, the loop inside so the kernel call stays direct
};

// Wraps a callable into a Case whose loop calls it directly.
template <typename F>
Case make_case(std::string name, double work, F f) {
  return Case{std::move(name), work, [f](size_t iters) mutable {
                for (size_t i = 0; i < iters; ++i) f();
              }};
}

struct Timing {
  double best_s = 0, median_s = 0;  // seconds per call
  double best_rate(double work) const { return best_s > 0 ? work / best_s : 0; }
  double median_rate(double work) const { return median_s > 0 ? work / median_s : 0; }
};

struct TimingOptions {
  int reps = 7;              // repetitions per case
  double min_rep_s = 0.02;   // each repetition lasts at least this long (0: one call per repetition)
};

inline double seconds_of(const std::function<void(size_t)>& run, size_t iters) {
  const auto t0 = std::chrono::steady_clock::now();
  run(iters);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// One Timing per case, in the order given.
inline std::vector<Timing> time_interleaved(const std::vector<Case>& cases, const TimingOptions& opt) {
  std::vector<size_t> iters(cases.size(), 1);
  for (size_t c = 0; c < cases.size(); ++c) {
    cases[c].run(1);  // warm-up: page faults, caches, clocks
    if (opt.min_rep_s <= 0) continue;
    // Grow the batch until it lasts min_rep_s (from the last batch's rate, at most x16 per step).
    for (double s = seconds_of(cases[c].run, iters[c]); s < opt.min_rep_s; s = seconds_of(cases[c].run, iters[c]))
      iters[c] = size_t(double(iters[c]) * std::min(16.0, 1.2 * opt.min_rep_s / std::max(s, 1e-7))) + 1;
  }
  std::vector<std::vector<double>> per_call(cases.size());
  for (int rep = 0; rep < opt.reps; ++rep)
    for (size_t c = 0; c < cases.size(); ++c) {
      cases[c].run(1);  // untimed: refills the caches the previous case (e.g. a streaming one) evicted
      per_call[c].push_back(seconds_of(cases[c].run, iters[c]) / double(iters[c]));
    }
  std::vector<Timing> out(cases.size());
  for (size_t c = 0; c < cases.size(); ++c) {
    std::vector<double>& v = per_call[c];
    std::sort(v.begin(), v.end());
    if (v.empty()) continue;
    out[c].best_s = v.front();
    out[c].median_s = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  }
  return out;
}

}  // namespace nnkern_bench
