// FP32 GEMM driver (seeds O2, O6, O7). The micro-kernels work in column-major terms (see
// kernels/f32_gemm.h); a row-major C[M, N] = op(A) op(B) is the column-major C' = op(B)^T op(A)^T,
// so here "m" runs along N (vector lanes, C's contiguous rows) and "n" along M (broadcasts).
#include "ops/gemm/gemm.h"

#include <algorithm>
#include <atomic>
#include <stdexcept>

#include "core/algorithm.h"
#include "core/checked.h"
#include "core/dispatch.h"
#include "core/isa.h"
#include "core/kernel_list.h"
#include "kernels/f32_gemm_list.h"
#include "core/threadpool.h"
#include "core/workspace.h"
#include "ops/gemm/gemv.h"
#include "ops/gemm/tasks.h"
#include "core/kernel_family.h"

namespace nnkern {
namespace {

constexpr size_t kMaxNR = 32;
// Seed O6: below this many broadcast columns a copied A panel would not be reused enough to pay; except
// when the in-place panel steps a page or more per k (every step a new page and TLB entry): then a second
// column group reading it in place costs a whole pass over B again (docs/performance.md: "sgemm: copying A
// panels").
constexpr size_t kCopyPanelMinN = 18;
constexpr size_t kCopyPanelMinStride = 4096;  // bytes
constexpr double kMinFlopsPerThread = 2e6;
constexpr size_t kPackBMinPanels = 16;

std::atomic<int> g_blocking_mode{int(BlockingMode::cache)};

size_t round_up(size_t x, size_t m) { return ceil_div(x, m) * m; }

// The vector-side operand A (MR rows per panel).
enum class PanelKind {
  prepacked,  // panels laid out by PackedF32Gemm: block pc at base + pc * m_padded, panel at + ip * MR * kc
  col_major,  // A(i, p) = base[p * ld + i]: read in place, or copied on first use (seed O6)
  row_major,  // A(i, p) = base[i * ld + p]: transposed into a packed panel first
};

struct Plan {
  const F32GemmKernel* kernel;
  GemmOrder order;
  size_t m, n, k;
  PanelKind a_kind;
  const float* a;
  size_t lda, m_padded;
  const float* b;   // B(p, j) = b[j * b_js + p * b_ps]
  size_t b_js, b_ps;
  bool pack_b;      // broadcast operand packed NR-interleaved per K block
  float* c;
  size_t ldc;
  F32Epilogue ep;
  GemmBlocking blk;
};

// dst[p * MR + i] = A(i0 + i, p0 + p) for a row-major A: one MR x kb panel.
void pack_panel_rows(float* dst, const float* a, size_t ld, size_t i0, size_t mi, size_t p0, size_t kb, size_t mr) {
  for (size_t i = 0; i < mi; ++i) {
    const float* src = a + (i0 + i) * ld + p0;
    for (size_t p = 0; p < kb; ++p) dst[p * mr + i] = src[p];
  }
  for (size_t i = mi; i < mr; ++i)
    for (size_t p = 0; p < kb; ++p) dst[p * mr + i] = 0.0f;
}

// The panels of rows [i0, i0 + mi) of a column-major A for the K block [p0, p0 + kb), one row of A at a
// time: each row is one contiguous run of mi floats, so the reads stream (the in-place reads of
// copy-on-first-use step a whole row per k instead); panel ip at dst + ip * MR * kb, zero-padded.
void pack_block_cols(float* dst, const float* a, size_t ld, size_t i0, size_t mi, size_t p0, size_t kb, size_t mr) {
  for (size_t p = 0; p < kb; ++p) {
    const float* src = a + (p0 + p) * ld + i0;
    for (size_t ip = 0; ip < mi; ip += mr) {
      float* d = dst + ip * kb + p * mr;
      const size_t n = std::min(mr, mi - ip);
      std::copy(src + ip, src + ip + n, d);
      std::fill(d + n, d + mr, 0.0f);
    }
  }
}

// dst[p * NR + j] = B(p0 + p, j0 + j): one kb x NR sliver of the broadcast operand, zero-padded.
void pack_bcast(float* dst, const Plan& P, size_t j0, size_t nj, size_t p0, size_t kb, size_t nr) {
  for (size_t j = 0; j < nr; ++j) {
    if (j < nj) {
      const float* src = P.b + (j0 + j) * P.b_js + p0 * P.b_ps;
      for (size_t p = 0; p < kb; ++p) dst[p * nr + j] = src[p * P.b_ps];
    } else {
      for (size_t p = 0; p < kb; ++p) dst[p * nr + j] = 0.0f;
    }
  }
}

F32Epilogue block_epilogue(const F32Epilogue& ep, bool first, bool last) {
  F32Epilogue e = ep;
  if (!first) e.beta = 1.0f;  // later K blocks accumulate onto the stored partial sums
  if (!last) {
    e.bias = nullptr;
    e.residual = nullptr;
    e.clamp = false;
  }
  return e;
}

// The epilogue of the tile at row i, column j of C: the kernel indexes the bias by its own tile row and
// the residual by its own row and column.
F32Epilogue tile_epilogue(const F32Epilogue& ep, size_t i, size_t j) {
  F32Epilogue e = ep;
  if (e.bias) e.bias += i;
  if (e.residual) e.residual += j * e.ldr + i;
  return e;
}

// The column pointers of the B sliver of columns [j, j + nj) in the K block at pc (packed, or in place)
// into bptr; returns their stride. Packed columns are NR-interleaved in groups of NR: a sliver may take its
// columns from two groups (the balanced widths below), all at stride NR.
size_t sliver_pointers(const Plan& P, size_t pc, size_t kb, const float* b_packed, size_t j, size_t nj,
                       const float** bptr) {
  const size_t nr = P.kernel->nr;
  if (b_packed) {
    const float* group = b_packed + j / nr * nr * kb;
    for (size_t jj = 0, r = j % nr; jj < nj; ++jj, ++r) {
      if (r == nr) r = 0, group += nr * kb;
      bptr[jj] = group + r;
    }
    return nr;
  }
  for (size_t jj = 0; jj < nj; ++jj) bptr[jj] = P.b + (j + jj) * P.b_js + pc * P.b_ps;
  return P.b_ps;
}

// Column groups of balanced widths: a task's 8 columns run as 4 + 4, not 6 + 2, where the narrow tile's few FMA
// chains would wait on their latency (one output's chain is the same whatever group it is in: the same bits).
size_t column_width(size_t j0, size_t j1, size_t nr) { return ceil_div(j1 - j0, ceil_div(j1 - j0, nr)); }

// One task's K block [pc, pc + kb) over rows [i0, i1) x columns [j0, j1) of C, in panel order (seeds
// O6, O7): one A panel (MR x kb, kept in L1) at a time against every column group's B sliver.
// a_block: this K block's A, already in packed panels (panel ip at a_block + ip * MR * kb), or null.
// panel: scratch for one MR x kb A panel (packed from a row-major A, or copied on first use).
void run_panel_order(const Plan& P, size_t pc, size_t kb, const F32Epilogue& ep, const float* a_block,
                     const float* b_packed, size_t i0, size_t i1, size_t j0, size_t j1, float* panel) {
  const size_t mr = P.kernel->mr, nr = P.kernel->nr;
  const float* bptr[kMaxNR];
  // A read in place takes the first column group's time from memory (a row of the caller's matrix per k), the
  // group's FMAs hidden under it: that group stays NR wide (docs/performance.md: "Linear: column groups of
  // balanced widths").
  const bool in_place = !a_block && P.a_kind == PanelKind::col_major;
  const size_t width = in_place ? nr : column_width(j0, j1, nr);
  for (size_t i = i0; i < i1; i += mr) {
    const size_t mi = std::min(mr, P.m - i);
    const float* a;
    size_t a_stride = mr;
    bool copy_first = false;
    switch (a_block ? PanelKind::prepacked : P.a_kind) {
      case PanelKind::prepacked:
        a = a_block + (i / mr) * mr * kb;
        break;
      case PanelKind::col_major:
        a = P.a + pc * P.lda + i;
        a_stride = P.lda;
        copy_first = j1 - j0 > nr && (P.n > kCopyPanelMinN || P.lda * sizeof(float) >= kCopyPanelMinStride);
        break;
      case PanelKind::row_major:
      default:
        pack_panel_rows(panel, P.a, P.lda, i, mi, pc, kb, mr);
        a = panel;
        break;
    }
    for (size_t j = j0; j < j1; j += width) {
      const size_t nj = std::min(width, j1 - j);
      const size_t b_stride = sliver_pointers(P, pc, kb, b_packed, j, nj, bptr);
      float* a_copy = copy_first ? panel : nullptr;
      const F32Epilogue tile_ep = tile_epilogue(ep, i, j);
      P.kernel->run(mi, nj, kb, a, a_stride, a_copy, bptr, b_stride, P.c + j * P.ldc + i, P.ldc, &tile_ep);
      if (copy_first) {  // later column groups read the packed copy
        a = panel;
        a_stride = mr;
        copy_first = false;
      }
    }
  }
}

// The same in block order (BLIS): A is packed mc rows at a time into `block` (MR x kb panels, kept in
// L2), then each column group's B sliver (kb x NR, kept in L1) runs against all of the block's panels.
// Its K blocks are 3x deeper than the panel order's, so a C larger than L2 is read and written 3x less.
void run_block_order(const Plan& P, size_t pc, size_t kb, const F32Epilogue& ep, const float* a_block,
                     const float* b_packed, size_t i0, size_t i1, size_t j0, size_t j1, float* block) {
  const size_t mr = P.kernel->mr, nr = P.kernel->nr;
  const float* bptr[kMaxNR];
  for (size_t ib = i0; ib < i1; ib += P.blk.mc) {
    const size_t ie = std::min(i1, ib + P.blk.mc);
    const float* panels = a_block ? a_block + ib * kb : block;  // ib is a multiple of MR
    if (!a_block) {
      if (P.a_kind == PanelKind::col_major) {
        pack_block_cols(block, P.a, P.lda, ib, ie - ib, pc, kb, mr);
      } else {
        for (size_t i = ib; i < ie; i += mr)
          pack_panel_rows(block + (i - ib) * kb, P.a, P.lda, i, std::min(mr, P.m - i), pc, kb, mr);
      }
    }
    // The block's full panels in one call where the kernel has the form (and no tile hook wants each tile):
    // a short reduction's tile spends as long in its call's set-up as in its FMAs.
    const size_t whole = P.kernel->run_panels && !ep.tile_hook ? (ie - ib) / mr : 0;
    const size_t width = column_width(j0, j1, nr);
    for (size_t j = j0; j < j1; j += width) {
      const size_t nj = std::min(width, j1 - j);
      const size_t b_stride = sliver_pointers(P, pc, kb, b_packed, j, nj, bptr);
      size_t i = ib;
      if (whole > 1) {
        const F32Epilogue tile_ep = tile_epilogue(ep, ib, j);
        P.kernel->run_panels(whole, nj, kb, panels, mr * kb, bptr, b_stride, P.c + j * P.ldc + ib, P.ldc, &tile_ep);
        i += whole * mr;
      }
      for (; i < ie; i += mr) {
        const F32Epilogue tile_ep = tile_epilogue(ep, i, j);
        P.kernel->run(std::min(mr, P.m - i), nj, kb, panels + (i - ib) * kb, mr, nullptr, bptr, b_stride,
                      P.c + j * P.ldc + i, P.ldc, &tile_ep);
      }
    }
  }
}

// Splits m and n into blocks no larger than the cache blocks, with at least one task per thread.
void split_tasks(const Plan& P, size_t* mc, size_t* nc) {
  const double flops = 2.0 * double(P.m) * double(P.n) * double(std::max<size_t>(P.k, 1));
  split_gemm_tasks(P.m, P.n, P.kernel->mr, P.kernel->nr, P.blk.mc, P.blk.nc, flops, kMinFlopsPerThread, mc, nc);
}

void execute(const Plan& P) {
  if (P.m == 0 || P.n == 0) return;
  const size_t nr = P.kernel->nr;
  size_t mc, nc;
  split_tasks(P, &mc, &nc);
  const size_t tm = ceil_div(P.m, mc), tn = ceil_div(P.n, nc);
  const size_t K = P.k, kc = P.blk.kc, n_pad = round_up(P.n, nr);

  // The broadcast operand is packed for every K block before the tiles start (block pc at
  // bp + pc * n_pad), so that a call synchronizes its threads twice, not twice per K block: waking a
  // sleeping worker costs microseconds, and per-block wake-ups made 8x1024x1024 slower on 2 threads
  // than on 1.
  Workspace b_packed(P.pack_b ? n_pad * K * sizeof(float) : 0);
  float* const bp = P.pack_b ? b_packed.as<float>() : nullptr;
  if (P.pack_b) {
    const size_t groups = ceil_div(P.n, nr), blocks = ceil_div(K, kc);
    parallel_for(groups * blocks, [&](size_t t) {
      const size_t g = t % groups, pc = (t / groups) * kc, kb = std::min(kc, K - pc);
      pack_bcast(bp + pc * n_pad + g * nr * kb, P, g * nr, std::min(nr, P.n - g * nr), pc, kb, nr);
    });
  }

  // Each task owns a block of C and runs the K blocks (seed O7's outer loop) over it, then the A panels
  // (M) and the column groups (N) inside each K block, in either order.
  const bool block_order = P.order == GemmOrder::block;
  const size_t a_rows = block_order ? round_up(std::min(mc, P.m), P.kernel->mr) : P.kernel->mr;
  const size_t scratch = P.a_kind == PanelKind::prepacked ? 0 : a_rows * std::min(kc, std::max<size_t>(K, 1)) * sizeof(float);
  parallel_for_scratch(tm * tn, scratch, [&](size_t t, void* panel) {
    const size_t bi = t % tm, bj = t / tm;
    const size_t i0 = bi * mc, i1 = std::min(P.m, i0 + mc), j0 = bj * nc, j1 = std::min(P.n, j0 + nc);
    size_t pc = 0;
    do {  // a K of 0 still runs once, to apply beta and the post-ops
      const size_t kb = std::min(kc, K - pc);
      const F32Epilogue ep = block_epilogue(P.ep, pc == 0, pc + kb >= K);
      const float* a_block = P.a_kind == PanelKind::prepacked ? P.a + pc * P.m_padded : nullptr;
      (block_order ? run_block_order : run_panel_order)(P, pc, kb, ep, a_block, bp ? bp + pc * n_pad : nullptr, i0,
                                                        i1, j0, j1, static_cast<float*>(panel));
      pc += kb;
    } while (pc < K);
  });
}

Plan base_plan(const F32GemmKernel* kernel, size_t M, size_t N, size_t K, const float* x, size_t ldx, bool trans_x,
               float* c, size_t ldc, const F32Epilogue& ep) {
  Plan P{};
  P.kernel = kernel;
  P.m = N;
  P.n = M;
  P.k = K;
  P.b = x;
  P.b_js = trans_x ? 1 : ldx;  // column j of B' is row j of op(X)
  P.b_ps = trans_x ? ldx : 1;
  P.c = c;
  P.ldc = ldc;
  P.ep = ep;
  if (K == 0) P.ep.alpha = 0.0f;  // BLAS: C = beta * C, even for an infinite alpha
  P.order = gemm_order(*kernel, M, N);
  P.blk = gemm_blocking(*kernel, K, P.order);
  // Pack the broadcast operand when it is strided along K. In panel order also when enough A panels
  // reuse it: packing reads and writes all of it once per call, which a few panels do not repay
  // (3136x64x576, 4 AVX2 panels, ran at half the speed packed; 16 panels or more gain or break even).
  // In block order a contiguous sliver is read from L1 after its first panel, so packing only costs.
  P.pack_b = M > 1 && (trans_x || (P.order == GemmOrder::panel && N >= kPackBMinPanels * size_t(kernel->mr)));
  return P;
}

}  // namespace

const KernelFamily<F32GemmKernel>& f32_gemm_family() {
  static const KernelFamily<F32GemmKernel> family(
      "f32_gemm", "f32_gemm", {NNKERN_F32_GEMM_LIST(NNKERN_KERNEL_ENTRY)},
      [](const F32GemmKernel& k) { return KernelInfo{"", Isa::scalar, k.mr, k.nr, 0}; });
  return family;
}
NNKERN_REGISTER_FAMILY(f32_gemm_family)

void set_blocking_mode(BlockingMode mode) { g_blocking_mode.store(int(mode)); }
BlockingMode blocking_mode() { return BlockingMode(g_blocking_mode.load()); }

GemmOrder gemm_order(const F32GemmKernel& k, size_t M, size_t N) {
  (void)k;
  if (blocking_mode() == BlockingMode::fixed) return GemmOrder::panel;
  // The panel order's shallow K blocks cost a pass over C each: cheap while C stays in L2, not beyond
  // (docs/performance.md: "sgemm: loop order").
  const size_t l2 = cpu_features().l2 ? cpu_features().l2 : 256 * 1024;
  return double(M) * double(N) * sizeof(float) > double(l2 / 8) ? GemmOrder::block : GemmOrder::panel;
}

GemmBlocking gemm_blocking(const F32GemmKernel& k, size_t K, GemmOrder order) {
  if (blocking_mode() == BlockingMode::fixed) return {256, 4032, 48};  // seed O7, non-transposed
  const CpuFeatures& f = cpu_features();
  const size_t l1 = f.l1d ? f.l1d : 32 * 1024, l2 = f.l2 ? f.l2 : 256 * 1024;
  // kc, panel order: the A panel (MR x kc), reused by every column group of a task, fills half of L1d
  // and the streamed B slivers the rest (48x8 on a 48 KiB L1d: kc = 128; 16x6: kc = 384).
  // kc, block order: the B sliver (kc x NR) that the A panels stream past fills at most a quarter of
  // L1d, 384 deep at most (48x8 on 48 KiB: 384; on 32 KiB: 256).
  // The K blocks are then balanced, so that K = 500 runs as 2 x 256, not 384 + 116.
  const size_t kc_max = order == GemmOrder::panel
                            ? std::max<size_t>(64, (l1 / 2) / (k.mr * sizeof(float)) / 8 * 8)
                            : std::max<size_t>(64, std::min<size_t>(384, (l1 / 4) / (k.nr * sizeof(float)) / 8 * 8));
  const size_t kc = std::max<size_t>(8, std::min(round_up(ceil_div(K, ceil_div(std::max<size_t>(K, 1), kc_max)), 8), kc_max));
  if (order == GemmOrder::panel) {
    // nc: the block of B (kc x nc) that all A panels stream against stays in half of L2.
    const size_t nc = std::max<size_t>(k.nr, (l2 / 2) / (kc * sizeof(float)) / k.nr * k.nr);
    // mc: C rows per task; the A panels are packed one at a time, so this only sets task granularity.
    return {kc, round_up(4096, k.mr), nc};
  }
  // mc: the packed A block (mc x kc) that every B sliver of a task runs against stays in half of L2.
  const size_t mc = std::max<size_t>(k.mr, (l2 / 2) / (kc * sizeof(float)) / k.mr * k.mr);
  // nc: C columns per task. Each task packs its own A blocks, so fewer, wider tasks pack A less often.
  return {kc, mc, round_up(4096, k.nr)};
}

namespace {

// The register-tile driver for any shape.
void sgemm_run_tiles(const SgemmArgs& g) {
  const F32GemmKernel* kernel = &f32_gemm_family().dispatched();
  Plan P = base_plan(kernel, g.M, g.N, g.K, g.a, g.lda, g.trans_a, g.c, g.ldc, g.ep);
  P.a = g.b;
  P.lda = g.ldb;
  // A'(i, p) = op(B)[p, i]: in place (column-major) for a plain B, transposed panels for B^T.
  P.a_kind = g.trans_b ? PanelKind::row_major : PanelKind::col_major;
  execute(P);
}

// sgemm's paths, in auto's order: the skinny ones where their shape rule holds (ops/gemm/gemv.cc), the
// register tiles for everything else.
const AlgorithmTable<SgemmArgs>& sgemm_algorithms() {
  static const AlgorithmTable<SgemmArgs> table("sgemm", {
      {"dot", sgemm_dot_applies, sgemm_dot_preferred, sgemm_dot_workspace_bytes, sgemm_run_dot},
      {"rows", sgemm_rows_applies, sgemm_rows_preferred, nullptr, [](const SgemmArgs& g, const Workspace&) { sgemm_run_rows(g); }},
      {"tiles", [](const SgemmArgs&) { return true; }, nullptr, nullptr,
       [](const SgemmArgs& g, const Workspace&) { sgemm_run_tiles(g); }},
  });
  return table;
}

[[maybe_unused]] const bool algorithms_registered = (sgemm_algorithms(), true);

// For the paths whose kernels take no residual (the skinny ones' GEMV and dot kernels): run(ep) stores the
// epilogue up to the bias, then one pass adds the residual and clamps, the tiles' order, so the same bits.
template <class Run>
void residual_after(const F32Epilogue& ep, size_t M, size_t N, float* c, size_t ldc, const Run& run) {
  if (!ep.residual) return run(ep);
  F32Epilogue e = ep;
  e.residual = nullptr;
  e.clamp = false;
  run(e);
  F32Epilogue tail;  // the residual and the clamp alone
  tail.clamp = ep.clamp;
  tail.clamp_min = ep.clamp_min;
  tail.clamp_max = ep.clamp_max;
  for (size_t r = 0; r < M; ++r)
    for (size_t n = 0; n < N; ++n)
      c[r * ldc + n] = f32_epilogue_scalar(c[r * ldc + n], nullptr, n, tail, ep.residual + r * ep.ldr + n);
}

}  // namespace

void sgemm(const SgemmArgs& g, const std::string& algorithm) {
  const Algorithm<SgemmArgs>& a = sgemm_algorithms().select(g, algorithm);  // errors before any work
  if (g.M == 0 || g.N == 0) return;
  Workspace ws(a.workspace_bytes ? a.workspace_bytes(g) : 0);
  if (std::string(a.name) == "tiles") return a.run(g, ws);  // the tiles add a residual themselves
  residual_after(g.ep, g.M, g.N, g.c, g.ldc, [&](const F32Epilogue& ep) {
    SgemmArgs h = g;
    h.ep = ep;
    a.run(h, ws);
  });
}

// Output features up to which a packed layer keeps W as it is too, for sgemm's dot path (vectors along K, one
// row of W per output) wherever that is auto's choice for sgemm and K is at least kLinearDotMinK: a panel of MR
// channels is then mostly padding (docs/performance.md: "Linear: few output features").
constexpr size_t kLinearRowsMaxN = 16;
constexpr size_t kLinearDotMinK = 128;

PackedF32Gemm::PackedF32Gemm(const float* weight, size_t N, size_t K, size_t ldw)
    : kernel_(&f32_gemm_family().dispatched()), N_(N), K_(K) {
  if (N <= kLinearRowsMaxN && K >= kLinearDotMinK) {
    rows_.resize(N * K);
    for (size_t i = 0; i < N; ++i) std::copy(weight + i * ldw, weight + i * ldw + K, rows_.data() + i * K);
  }
  const size_t mr = kernel_->mr;
  kc_ = gemm_blocking(*kernel_, K, GemmOrder::block).kc;  // either order runs on these panels
  n_panels_ = ceil_div(N, mr);
  const size_t m_padded = n_panels_ * mr;
  packed_.resize(std::max<size_t>(m_padded * K, 1));
  for (size_t pc = 0; pc < K; pc += kc_) {
    const size_t kb = std::min(kc_, K - pc);
    for (size_t ip = 0; ip < n_panels_; ++ip)
      pack_panel_rows(packed_.data() + pc * m_padded + ip * mr * kb, weight, ldw, ip * mr, std::min(mr, N - ip * mr),
                      pc, kb, mr);
  }
}

void PackedF32Gemm::unpack(float* w) const {
  const size_t mr = kernel_->mr, m_padded = n_panels_ * mr;
  for (size_t pc = 0; pc < K_; pc += kc_) {
    const size_t kb = std::min(kc_, K_ - pc);
    for (size_t i = 0; i < N_; ++i)
      for (size_t p = 0; p < kb; ++p)
        w[i * K_ + pc + p] = packed_.data()[pc * m_padded + (i / mr) * mr * kb + p * mr + i % mr];
  }
}

void PackedF32Gemm::run(size_t M, const float* x, size_t ldx, float* c, size_t ldc, const F32Epilogue& ep) const {
  if (rows_.size()) {
    SgemmArgs g;
    g.M = M; g.N = N_; g.K = K_;
    g.a = x; g.lda = ldx;
    g.b = rows_.data(); g.ldb = K_; g.trans_b = true;
    g.c = c; g.ldc = ldc; g.ep = ep;
    if (sgemm_dot_preferred(g)) {
      sgemm(g, "dot");
      return;
    }
  }
  if (&f32_gemm_family().dispatched() != kernel_) {
    // The cap changed since packing: the packed layout belongs to another kernel. Packed again for this one, the
    // call takes the path (and its K blocks, so its bits) of weights packed under this cap.
    AlignedBuffer<float> w(std::max<size_t>(N_ * K_, 1));
    unpack(w.data());
    PackedF32Gemm(w.data(), N_, K_, K_).run(M, x, ldx, c, ldc, ep);
    return;
  }
  if (M == 1) {  // batch 1: a GEMV streaming the packed panels, each a contiguous mr x kb block
    residual_after(ep, M, N_, c, ldc, [&](const F32Epilogue& e) {
      gemv_packed_panels(packed_.data(), kernel_->mr, kc_, n_panels_ * kernel_->mr, N_, K_, x, c, e);
    });
    return;
  }
  Plan P = base_plan(kernel_, M, N_, K_, x, ldx, false, c, ldc, ep);
  P.a_kind = PanelKind::prepacked;
  P.a = packed_.data();
  P.m_padded = n_panels_ * kernel_->mr;
  P.blk.kc = kc_;
  execute(P);
}

}  // namespace nnkern
