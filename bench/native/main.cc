// nnkern_ubench: the micro-kernel benchmark (bench/README.md, "Micro-kernel benchmarks"). For every kernel
// of the f32_gemm and qgemm lists that this CPU runs: a full tile in L1 (rate and % of the level's peak),
// the same tile streaming through memory, and the indirect form at ks = 9 vs the plain one at K = 9k.
// --smoke runs each form once at a tiny size and checks it (ctest: ubench_smoke). Baseline code.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/isa.h"
#include "families.h"
#include "family_bench.h"
#include "report.h"

using namespace nnkern_bench;

namespace {

const char kUsage[] =
    "usage: nnkern_ubench [--smoke] [--json FILE] [--family f32_gemm|qgemm] [--filter SUBSTRING]\n"
    "                     [--reps N] [--min-ms MS] [--k K] [--stream-mib MIB]\n"
    "  --smoke       each kernel once at a tiny size, tiles checked against the scalar reference\n"
    "  --k K         L1 tile depth (default: the A panel and B sliver fill ~3/4 of L1d, <= 512)\n";

void load_average(double (&out)[3]) {
  if (getloadavg(out, 3) != 3) out[0] = out[1] = out[2] = -1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::string json, family;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--smoke") o.smoke = true;
    else if (a == "--json" && has_value) json = argv[++i];
    else if (a == "--family" && has_value) family = argv[++i];
    else if (a == "--filter" && has_value) o.filter = argv[++i];
    else if (a == "--reps" && has_value) o.timing.reps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--min-ms" && has_value) o.timing.min_rep_s = std::atof(argv[++i]) * 1e-3;
    else if (a == "--k" && has_value) o.l1_k = size_t(std::atol(argv[++i]));
    else if (a == "--stream-mib" && has_value) o.stream_bytes = size_t(std::atof(argv[++i]) * (1 << 20));
    else {
      std::fputs(kUsage, a == "--help" || a == "-h" ? stdout : stderr);
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  if (o.smoke) {
    // Odd sizes reach the kernels' remainder paths and the per-tap group padding; no timing to speak of.
    o.timing = {1, 0.0};
    o.l1_k = 19;
    o.stream_bytes = 256 << 10;
    o.indirect_k = {5, 8};
    o.peak = false;
  }

  const nnkern::CpuFeatures& cpu = nnkern::cpu_features();
  if (cpu.l1d) o.l1d = cpu.l1d;
  Header h;
  h.cpu = cpu.model.empty() ? cpu.vendor : cpu.model;
  h.arch = cpu.arch, h.l1d = cpu.l1d, h.l2 = cpu.l2, h.l3 = cpu.l3;
  h.reps = o.timing.reps, h.min_rep_ms = o.timing.min_rep_s * 1e3, h.stream_mib = double(o.stream_bytes) / (1 << 20);
  load_average(h.load_start);

  bool checked = true;
  std::vector<std::vector<Row>> tables;
  if (family.empty() || family == F32GemmFamily::name) tables.push_back(bench_family<F32GemmFamily>(o, &checked));
  if (family.empty() || family == QGemmFamily::name) tables.push_back(bench_family<QGemmFamily>(o, &checked));
  if (tables.empty()) {
    std::fprintf(stderr, "unknown family %s\n%s", family.c_str(), kUsage);
    return 2;
  }

  load_average(h.load_end);
  std::printf("\n");
  print_header(stdout, h);
  std::vector<Row> all;
  for (const std::vector<Row>& t : tables) {
    print_table(stdout, t);
    all.insert(all.end(), t.begin(), t.end());
  }
  std::printf("Rates: 2 x multiply-adds per second of one full tile; %% peak: best L1 rate over the level's peak loop\n"
              "(ops/peak*.cc); igemm / plain: per-MAC rate ratio, best (median) (1.00: the same speed).\n");
  if (o.smoke) std::printf("Smoke run: sizes too small for the rates to mean anything.\n");
  if (!json.empty() && !write_json(json.c_str(), h, all)) {
    std::fprintf(stderr, "cannot write %s\n", json.c_str());
    return 1;
  }
  if (!checked) std::printf("FAILED: some tile differs from the scalar reference\n");
  else if (o.smoke) std::printf("smoke: every kernel ran and matched the scalar reference\n");
  return checked ? 0 : 1;
}
