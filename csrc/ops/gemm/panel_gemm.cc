// Full-K panel GEMM with a post-op hook (see ops/gemm/panel_gemm.h). The micro-kernels work in
// column-major terms (kernels/f32_gemm.h): A = a W panel (vectors along W's rows = C's columns),
// B = the X rows (one broadcast per row of C), so a tile is MR outputs x up to NR rows of C.
#include "ops/gemm/panel_gemm.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "core/checked.h"
#include "core/isa.h"
#include "core/kernel_family.h"
#include "core/threadpool.h"
#include "kernels/f32_gemv_list.h"
#include "ops/gemm/gemv.h"

namespace nnkern {
namespace {

constexpr size_t kMaxNR = 32;
constexpr size_t kMaxRowFloats = 1024;  // a one-row group's outputs, on the stack (4 KiB)
// A recurrent step at batch 1 is a memory-bound GEMV: a thread pays for itself on far less work
// than a compute-bound tile block (the GEMV driver's figure).
constexpr double kMinFlopsPerThread = 2e5;


// Rows of X per task: the block of X rows that every panel streams against stays in half of L2.
size_t row_block(size_t M, size_t K, size_t nr) {
  const size_t l2 = cpu_features().l2 ? cpu_features().l2 : 256 * 1024;
  const size_t cap = std::max(nr, (l2 / 2) / std::max<size_t>(K * sizeof(float), 1) / nr * nr);
  const size_t blocks = ceil_div(M, cap);
  return ceil_div(ceil_div(M, blocks), nr) * nr;  // balanced
}

// A one-row column group: the group's panels as one GEMV (the gemv kernel's rows_panels), their FMA chains
// interleaved, where the tile would run MR / L latency-bound chains per panel. Each output is the tile's FMA
// chain in K order and the same epilogue: the same bits. False if the group's outputs outgrow the scratch.
bool run_group_row(const F32FullKPanels& w, const PanelGemmArgs& a, size_t g, size_t j) {
  const size_t mr = size_t(w.kernel().mr), q0 = g * w.group();
  alignas(64) float acc[kMaxRowFloats];
  if (w.group() * mr > kMaxRowFloats) return false;
  std::memset(acc, 0, w.group() * mr * sizeof(float));
  const F32GemvKernel& gk = f32_gemv_family().dispatched();
  rows_panels(gk, w.group(), mr, w.K(), a.x[j], w.panel(q0), mr * w.K(), acc);
  for (size_t q = q0; q < q0 + w.group(); ++q) {
    const PanelRows& s = w.span(q);
    F32Epilogue ep = a.ep;
    if (ep.bias) ep.bias += s.row0;
    gk.store(s.rows, acc + (q - q0) * mr, a.c + j * a.ldc + s.row0, &ep);
  }
  return true;
}

// One group's panels against rows [r0, r1) of X, a column group (up to NR rows) at a time: its tiles for every
// panel of the group, then the post-op on them while they are in L1. The B rows of a column group stay
// in L1 across the group's panels; each A panel is read once per column group (from L2 if it was
// read before, whatever the loop order, when it is larger than L1).
void run_group(const F32FullKPanels& w, const PanelGemmArgs& a, size_t g, size_t r0, size_t r1) {
  const F32GemmKernel& k = w.kernel();
  const size_t nr = size_t(k.nr);
  const float* bptr[kMaxNR];
  // Column groups of balanced widths (8 rows with NR = 6: 4 + 4, not 6 + 2): a narrow tile has too few FMA
  // chains to cover the latency, and the panels are read once per group either way.
  const size_t width = ceil_div(r1 - r0, ceil_div(r1 - r0, nr));
  for (size_t j = r0; j < r1; j += width) {
    const size_t nj = std::min(width, r1 - j);
    if (nj == 1 && run_group_row(w, a, g, j)) {
      if (a.post) a.post(a.post_ctx, g, j, 1);
      continue;
    }
    for (size_t jj = 0; jj < nj; ++jj) bptr[jj] = a.x[j + jj];
    for (size_t q = g * w.group(); q < (g + 1) * w.group(); ++q) {
      const PanelRows& s = w.span(q);
      if (s.rows == 0) continue;
      F32Epilogue ep = a.ep;
      if (ep.bias) ep.bias += s.row0;  // the kernel indexes the bias by its own tile row
      k.run(s.rows, nj, w.K(), w.panel(q), size_t(k.mr), nullptr, bptr, 1, a.c + j * a.ldc + s.row0, a.ldc, &ep);
    }
    if (a.post) a.post(a.post_ctx, g, j, nj);
  }
}

}  // namespace

std::vector<PanelRows> contiguous_panels(size_t N, size_t mr) {
  std::vector<PanelRows> spans;
  for (size_t r = 0; r < N; r += mr) spans.push_back({r, std::min(mr, N - r)});
  return spans;
}

F32FullKPanels::F32FullKPanels(const F32GemmKernel& kernel, const float* w, size_t ldw, size_t N, size_t K,
                               std::vector<PanelRows> panels, size_t group)
    : kernel_(&kernel), N_(N), K_(K), group_(group), spans_(std::move(panels)) {
  const size_t mr = size_t(kernel.mr);
  if (size_t(kernel.nr) > kMaxNR) throw std::logic_error("panel_gemm: kernel NR above kMaxNR");
  if (group_ == 0 || spans_.size() % group_ != 0) throw std::logic_error("panel_gemm: panels not a multiple of group");
  for (const PanelRows& s : spans_)
    if (s.rows > mr || s.row0 + s.rows > N) throw std::logic_error("panel_gemm: panel rows out of range");
  data_.resize(std::max<size_t>(spans_.size() * mr * K, 1));
  for (size_t q = 0; q < spans_.size(); ++q) {
    float* dst = data_.data() + q * mr * K;
    for (size_t i = 0; i < mr; ++i) {
      const float* src = i < spans_[q].rows ? w + (spans_[q].row0 + i) * ldw : nullptr;
      for (size_t p = 0; p < K; ++p) dst[p * mr + i] = src ? src[p] : 0.0f;
    }
  }
}

void F32FullKPanels::unpack(float* w, size_t ldw) const {
  const size_t mr = size_t(kernel_->mr);
  for (size_t q = 0; q < spans_.size(); ++q)
    for (size_t i = 0; i < spans_[q].rows; ++i)
      for (size_t p = 0; p < K_; ++p) w[(spans_[q].row0 + i) * ldw + p] = panel(q)[p * mr + i];
}

void panel_gemm(const F32FullKPanels& w, const PanelGemmArgs& a) {
  const size_t G = w.groups();
  if (a.M == 0 || G == 0) return;
  const size_t mc = row_block(a.M, w.K(), size_t(w.kernel().nr));
  const size_t row_blocks = ceil_div(a.M, mc);
  const double flops = 2.0 * double(a.M) * double(w.N()) * double(std::max<size_t>(w.K(), 1));
  const size_t threads =
      std::min(size_t(get_num_threads()), size_t(1) + size_t(flops / kMinFlopsPerThread));
  // Split the groups only when the row blocks alone leave threads idle: each range of groups is one
  // contiguous stretch of the packed weights (one prefetch stream, one thread's cache).
  size_t per_chunk = G;
  if (threads > row_blocks) per_chunk = ceil_div(G, std::min(G, ceil_div(threads, row_blocks)));
  const size_t chunks = ceil_div(G, per_chunk);
  parallel_for(row_blocks * chunks, [&](size_t t) {
    // The chunk of a task does not alternate with `reverse` (only its groups' order does): the caller claims
    // task 0 first, so each thread keeps its own stretch of the weights, in its L2, from call to call.
    const size_t rb = t / chunks, ch = t % chunks;
    const size_t r0 = rb * mc, r1 = std::min(a.M, r0 + mc);
    const size_t g0 = ch * per_chunk, g1 = std::min(G, g0 + per_chunk);
    for (size_t i = 0; i < g1 - g0; ++i) run_group(w, a, a.reverse ? g1 - 1 - i : g0 + i, r0, r1);
  });
}

}  // namespace nnkern
