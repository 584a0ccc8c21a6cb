// The benchmark of one kernel family, generic over its adapter (families.h): for every kernel of the list
// that this CPU runs, a full MR x NR tile in L1, the same tile streaming through memory, and the indirect
// form at ks = 9 against the plain form at K = 9k. Each measurement is one interleaved group over all the
// family's kernels (timing.h). Baseline code.
#pragma once
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/isa.h"
#include "operands.h"
#include "report.h"
#include "timing.h"

namespace nnkern_bench {

struct Options {
  bool smoke = false;
  TimingOptions timing;
  size_t l1_k = 0;                       // 0: derived from the L1 size per kernel
  size_t stream_bytes = size_t(64) << 20;
  std::vector<size_t> indirect_k{32, 64};  // channels per tap at ks = 9
  bool peak = true;                      // measure each level's peak (ops/peak*.cc) for "% peak"
  std::string filter;                    // only kernels whose name contains it
  size_t l1d = 32 << 10;
};

constexpr size_t kTaps = 9;  // a 3x3 convolution

// K so that the A panel and the B sliver take about 3/4 of L1 (the rest for C and the stack), a multiple
// of 16 (every K-group), at most 512.
inline size_t l1_k_for(const Layout& l, size_t l1d) {
  const size_t per_k = l.mr * elem_bytes(l.a) + l.nr * elem_bytes(l.b);
  return std::max<size_t>(16, std::min<size_t>(512, l1d * 3 / 4 / per_k / 16 * 16));
}

// One call of the form `op` holds: the plain kernel for ks = 1, else the indirect one.
template <typename F, typename Op>
void call(const typename F::Kernel& k, const Op& op) {
  if (op.ks() == 1) F::plain(k, op.k(), op.a(), op.b(), op.c());
  else F::indirect(k, op.k(), op.ks(), op.a(), op.b(), op.zero(), op.c());
}

template <typename F>
std::vector<Row> bench_family(const Options& o, bool* all_checked) {
  using Kernel = typename F::Kernel;
  using Ops = Operands<typename F::BPtr>;
  using Stream = StreamOperands<typename F::BPtr>;
  struct Pair {
    std::unique_ptr<Ops> igemm, plain;
  };
  struct Run {
    const Kernel* kernel;
    nnkern::Isa level;
    std::unique_ptr<Ops> l1;
    std::unique_ptr<Stream> stream;
    std::vector<Pair> pairs;  // one per indirect_k
    size_t row;
  };

  std::vector<Row> rows;
  std::vector<Run> runs;
  const auto& list = F::list();
  for (size_t i = 0; i < list.kernels.size(); ++i) {
    const Kernel& k = *list.kernels[i];
    const nnkern::KernelInfo& info = list.info[i];
    if (!o.filter.empty() && std::string(info.name).find(o.filter) == std::string::npos) continue;
    Row r;
    r.family = F::name, r.unit = F::unit, r.kernel = info.name, r.level = nnkern::isa_name(info.level);
    r.mr = k.mr, r.nr = k.nr, r.kgroup = int(F::layout(k).group);
    if (!nnkern::isa_supported(info.level)) {
      r.skipped = std::string("this CPU lacks ") + r.level;
      std::printf("skip %s: %s\n", info.name, r.skipped.c_str());
      rows.push_back(r);
      continue;
    }
    const Layout l = F::layout(k);
    Run run{&k, info.level, nullptr, nullptr, {}, rows.size()};
    r.l1_k = r.stream_k = o.l1_k ? o.l1_k : l1_k_for(l, o.l1d);
    run.l1 = std::make_unique<Ops>(l, r.l1_k, 1, 1);
    run.stream = std::make_unique<Stream>(l, r.l1_k, o.stream_bytes);
    for (size_t kc : o.indirect_k)
      run.pairs.push_back({std::make_unique<Ops>(l, kc, kTaps, 2), std::make_unique<Ops>(l, kTaps * kc, 1, 3)});
    // Every timed form computes the right tile before it is timed.
    r.checked = true;
    std::vector<const Ops*> checked{run.l1.get()};
    for (const Pair& p : run.pairs) checked.push_back(p.igemm.get()), checked.push_back(p.plain.get());
    for (const Ops* op : checked) {
      call<F>(k, *op);
      if (!op->matches_reference()) {
        std::printf("FAIL %s: ks=%zu k=%zu differs from the scalar reference\n", info.name, op->ks(), op->k());
        r.checked = *all_checked = false;
      }
    }
    rows.push_back(r);
    runs.push_back(std::move(run));
  }

  // L1 and streaming: one interleaved group each over all kernels. The L1 group also runs each level's
  // peak loop, with repetitions as long as the kernels' and interleaved with them: a best-of over windows
  // of another length (or another moment) would not compare on a loaded host.
  std::vector<Case> l1, stream;
  std::map<nnkern::Isa, double> peaks;
  for (Run& run : runs) {
    const Kernel* k = run.kernel;
    const Ops* op = run.l1.get();
    Stream* s = run.stream.get();
    l1.push_back(make_case(k->name, 2 * op->macs(), [k, op] { call<F>(*k, *op); }));
    stream.push_back(make_case(k->name, 2 * s->macs(), [k, s] {
      F::plain(*k, s->k(), s->a(), s->b(), s->c());
      s->advance();
    }));
  }
  const size_t n_kernels = l1.size();
  for (const Run& run : runs) {
    if (!o.peak || peaks.count(run.level)) continue;
    double* best = &peaks[run.level];  // std::map: the address stays valid
    const nnkern::Isa level = run.level;
    const double seconds = 5 * std::max(o.timing.min_rep_s, 0.004);  // runs of >= seconds / 5 (ops/peak/peak.h)
    l1.push_back(Case{"peak", 0, [best, level, seconds](size_t iters) {
                        for (size_t i = 0; i < iters; ++i) *best = std::max(*best, F::peak(level, seconds));
                      }});
  }
  const std::vector<Timing> t1 = time_interleaved(l1, o.timing), ts = time_interleaved(stream, o.timing);
  for (size_t i = 0; i < n_kernels; ++i) {
    Row& r = rows[runs[i].row];
    r.peak = peaks.count(runs[i].level) ? peaks[runs[i].level] * 1e-9 : 0;
    r.l1_best = t1[i].best_rate(l1[i].work) * 1e-9, r.l1_median = t1[i].median_rate(l1[i].work) * 1e-9;
    r.stream_best = ts[i].best_rate(stream[i].work) * 1e-9, r.stream_median = ts[i].median_rate(stream[i].work) * 1e-9;
  }

  // Indirect vs plain, per k: one group, each kernel's igemm and plain side by side.
  for (size_t p = 0; p < o.indirect_k.size(); ++p) {
    std::vector<Case> cases;
    for (Run& run : runs) {
      const Kernel* k = run.kernel;
      for (const Ops* op : {run.pairs[p].igemm.get(), run.pairs[p].plain.get()})
        cases.push_back(make_case(k->name, 2 * op->macs(), [k, op] { call<F>(*k, *op); }));
    }
    const std::vector<Timing> t = time_interleaved(cases, o.timing);
    for (size_t i = 0; i < runs.size(); ++i) {
      Row::Indirect ind;
      ind.k = o.indirect_k[p];
      ind.igemm = t[2 * i].best_rate(cases[2 * i].work) * 1e-9;
      ind.plain = t[2 * i + 1].best_rate(cases[2 * i + 1].work) * 1e-9;
      ind.igemm_median = t[2 * i].median_rate(cases[2 * i].work) * 1e-9;
      ind.plain_median = t[2 * i + 1].median_rate(cases[2 * i + 1].work) * 1e-9;
      rows[runs[i].row].indirect.push_back(ind);
    }
  }
  // Skipped rows carry the k values too, so the table has its columns whatever ran.
  for (Row& r : rows)
    if (!r.skipped.empty())
      for (size_t kc : o.indirect_k) r.indirect.push_back({kc, 0, 0, 0, 0});
  return rows;
}

}  // namespace nnkern_bench
