// Results of the micro-kernel benchmark: one Row per kernel, printed as a markdown table per family and
// written as JSON (--json). Baseline code.
#pragma once
#include <cstdio>
#include <string>
#include <vector>

namespace nnkern_bench {

// Rates are in the family's unit (GFLOP/s or GOP/s); 0 where not measured.
struct Row {
  std::string family, unit, kernel, level, skipped;  // skipped: why the kernel did not run ("" if it did)
  int mr = 0, nr = 0, kgroup = 0;
  size_t l1_k = 0;
  double l1_best = 0, l1_median = 0;
  double peak = 0;  // the level's peak loop (0: none for this level)
  size_t stream_k = 0;
  double stream_best = 0, stream_median = 0;
  // Indirect ks = 9 taps of k vs the plain kernel at K = 9k: rates (best, median) and the per-MAC ratio.
  struct Indirect {
    size_t k = 0;
    double igemm = 0, plain = 0, igemm_median = 0, plain_median = 0;
    double ratio() const { return plain > 0 ? igemm / plain : 0; }
    double ratio_median() const { return plain_median > 0 ? igemm_median / plain_median : 0; }
  };
  std::vector<Indirect> indirect;
  bool checked = false;  // the plain and indirect tiles matched the scalar reference
};

struct Header {
  std::string cpu, arch;
  size_t l1d = 0, l2 = 0, l3 = 0;
  double load_start[3] = {0, 0, 0}, load_end[3] = {0, 0, 0};
  int reps = 0;
  double min_rep_ms = 0, stream_mib = 0;
};

void print_header(std::FILE* out, const Header& h);
void print_table(std::FILE* out, const std::vector<Row>& rows);  // rows of one family
bool write_json(const char* path, const Header& h, const std::vector<Row>& rows);

}  // namespace nnkern_bench
