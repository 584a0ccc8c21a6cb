#include "report.h"

#include <string>

namespace nnkern_bench {
namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string rate(double best, double median) {
  return best > 0 ? fmt("%.1f", best) + " (" + fmt("%.1f", median) + ")" : "-";
}

std::string json_string(const std::string& s) {
  std::string o = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') o += '\\';
    if (static_cast<unsigned char>(ch) >= 0x20) o += ch;
  }
  return o + "\"";
}

}  // namespace

void print_header(std::FILE* out, const Header& h) {
  std::fprintf(out, "# nnkern micro-kernel benchmarks\n\n");
  std::fprintf(out, "CPU: %s (%s), L1d %zu KiB, L2 %zu KiB, L3 %zu KiB; one thread\n", h.cpu.c_str(),
               h.arch.c_str(), h.l1d >> 10, h.l2 >> 10, h.l3 >> 10);
  std::fprintf(out, "Load average (1/5/15 min) at start %.2f %.2f %.2f, at end %.2f %.2f %.2f\n", h.load_start[0],
               h.load_start[1], h.load_start[2], h.load_end[0], h.load_end[1], h.load_end[2]);
  std::fprintf(out, "Best (median) of %d interleaved repetitions of >= %.0f ms; streaming over %.3g MiB\n\n",
               h.reps, h.min_rep_ms, h.stream_mib);
}

void print_table(std::FILE* out, const std::vector<Row>& rows) {
  if (rows.empty()) return;
  const Row& r0 = rows.front();
  const char* u = r0.unit.c_str();
  std::fprintf(out, "## %s\n\n| kernel | level | tile | K-group | L1 K | L1 %s | %% peak | streaming %s |", r0.family.c_str(),
               u, u);
  for (const Row::Indirect& ind : r0.indirect) std::fprintf(out, " igemm ks=9 / plain, k=%zu |", ind.k);
  std::fprintf(out, "\n|---|---|---|---|---|---|---|---|");
  for (size_t i = 0; i < r0.indirect.size(); ++i) std::fprintf(out, "---|");
  std::fprintf(out, "\n");
  for (const Row& r : rows) {
    std::fprintf(out, "| %s | %s | %dx%d | %d |", r.kernel.c_str(), r.level.c_str(), r.mr, r.nr, r.kgroup);
    if (!r.skipped.empty()) {
      std::fprintf(out, " - | skipped: %s | - | - |", r.skipped.c_str());
      for (size_t i = 0; i < r0.indirect.size(); ++i) std::fprintf(out, " - |");
      std::fprintf(out, "\n");
      continue;
    }
    const std::string pct = r.peak > 0 ? fmt("%.0f%%", 100 * r.l1_best / r.peak) : "-";
    std::fprintf(out, " %zu | %s | %s | %s |", r.l1_k, rate(r.l1_best, r.l1_median).c_str(), pct.c_str(),
                 rate(r.stream_best, r.stream_median).c_str());
    for (const Row::Indirect& ind : r.indirect)
      std::fprintf(out, " %s |", ind.plain > 0 ? (fmt("%.2f", ind.ratio()) + fmt(" (%.2f)", ind.ratio_median())).c_str() : "-");
    std::fprintf(out, "\n");
  }
  std::fprintf(out, "\n");
}

bool write_json(const char* path, const Header& h, const std::vector<Row>& rows) {
  std::FILE* f = std::fopen(path, "w");
  if (!f) return false;
  std::fprintf(f, "{\n  \"cpu\": %s, \"arch\": %s, \"l1d\": %zu, \"l2\": %zu, \"l3\": %zu,\n", json_string(h.cpu).c_str(),
               json_string(h.arch).c_str(), h.l1d, h.l2, h.l3);
  std::fprintf(f, "  \"load_start\": [%.2f, %.2f, %.2f], \"load_end\": [%.2f, %.2f, %.2f],\n", h.load_start[0],
               h.load_start[1], h.load_start[2], h.load_end[0], h.load_end[1], h.load_end[2]);
  std::fprintf(f, "  \"reps\": %d, \"min_rep_ms\": %g, \"stream_mib\": %g,\n  \"kernels\": [", h.reps, h.min_rep_ms,
               h.stream_mib);
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::fprintf(f, "%s\n    {\"family\": %s, \"kernel\": %s, \"level\": %s, \"unit\": %s, \"mr\": %d, \"nr\": %d, "
                 "\"kgroup\": %d, \"skipped\": %s",
                 i ? "," : "", json_string(r.family).c_str(), json_string(r.kernel).c_str(),
                 json_string(r.level).c_str(), json_string(r.unit).c_str(), r.mr, r.nr, r.kgroup,
                 r.skipped.empty() ? "null" : json_string(r.skipped).c_str());
    if (r.skipped.empty()) {
      std::fprintf(f, ",\n     \"checked\": %s, \"l1_k\": %zu, \"l1_best\": %.4g, \"l1_median\": %.4g, \"peak\": %.4g, "
                   "\"pct_peak\": %.4g,\n     \"stream_k\": %zu, \"stream_best\": %.4g, \"stream_median\": %.4g, "
                   "\"indirect_ks9\": [",
                   r.checked ? "true" : "false", r.l1_k, r.l1_best, r.l1_median, r.peak,
                   r.peak > 0 ? 100 * r.l1_best / r.peak : 0.0, r.stream_k, r.stream_best, r.stream_median);
      for (size_t j = 0; j < r.indirect.size(); ++j) {
        const Row::Indirect& ind = r.indirect[j];
        std::fprintf(f, "%s{\"k\": %zu, \"igemm_best\": %.4g, \"plain_best\": %.4g, \"ratio\": %.4f, "
                     "\"igemm_median\": %.4g, \"plain_median\": %.4g, \"ratio_median\": %.4f}", j ? ", " : "",
                     ind.k, ind.igemm, ind.plain, ind.ratio(), ind.igemm_median, ind.plain_median, ind.ratio_median());
      }
      std::fprintf(f, "]");
    }
    std::fprintf(f, "}");
  }
  std::fprintf(f, "\n  ]\n}\n");
  return std::fclose(f) == 0;
}

}  // namespace nnkern_bench
