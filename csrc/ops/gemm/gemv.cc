// FP32 skinny-GEMM driver (see ops/gemm/gemv.h and kernels/f32_gemv.h).
//
// Routing (row-major C[M, N] = op(A) op(B)), decided by the shape only, never by the thread count:
//   dot  path: N <= dot_threshold (the kernel's dot_auto_n) and K >= kDotMinK, with A rows contiguous (trans_a == false, or M == 1,
//              where the strided x is copied); B^T is packed once per call (N x K, tiny) unless trans_b
//              already stores it so.   Also M == 1 with trans_b, any N (y[j] = x . B^T[j]).
//   rows path: M <= 3 (<= rows_mr with a rows_m kernel), trans_b == false, any other N (y = x B streaming
//              B's rows, once per row of x, or once per group of rows with rows_m); taken for M > 1 only where
//              B's rows are a page or more apart (see kRowsMaxM) or, with rows_m, up to 8 rows where B is
//              larger than L2 (kRowsMultiMaxM), or up to the kernel's rows_m_auto rows whatever B's size.
// Results never depend on the thread count: tasks only split independent output elements, and each
// kernel call sums an element in a fixed order (kernels/f32_gemv.h).
#include "ops/gemm/gemv.h"

#include <algorithm>
#include <cstring>

#include "core/buffer.h"
#include "core/checked.h"
#include "core/kernel_family.h"
#include "core/isa.h"
#include "core/threadpool.h"
#include "core/workspace.h"
#include "kernels/f32_gemv_list.h"

namespace nnkern {
namespace {

// A GEMV is memory bound and short: a thread pays for itself on far less work than a GEMM tile block.
constexpr double kMinFlopsPerThread = 2e5;
// The rows path takes up to this many rows, each streaming B once. With so few rows the register tile runs
// mostly empty (16x6 on 2 rows), and where B's rows are a page or more apart it also walks a new page per
// k: there auto prefers the rows; with shorter rows the tile stays ahead (docs/performance.md: "sgemm: a few
// rows").
constexpr size_t kRowsMaxM = 3;
// With a rows_m kernel (B read once for a group of rows) auto takes the rows path up to this many rows where B
// outgrows L2: streamed from L3 or memory, B's rows beat the tile driver's column strips of them, while an
// L2-resident B favours the register tile (docs/performance.md: "sgemm: a few rows").
constexpr size_t kRowsMultiMaxM = 8;
constexpr size_t kRowsPreferredStride = 4096;  // bytes
constexpr size_t kRowsChunk = 4096;  // columns per rows-path task: a 16 KiB accumulator strip; one row segment
                                     // per K step is then 16 KiB contiguous
constexpr size_t kPanelsPerCall = 4;  // packed panels per rows_panels call (gemv_packed_panels)
constexpr size_t kDotMinK = 16;      // below this, vectors along K are mostly masked: the tile driver wins

size_t round_up(size_t x, size_t m) { return ceil_div(x, m) * m; }

size_t useful_threads(double flops) {
  return std::max<size_t>(1, std::min(size_t(get_num_threads()), size_t(1) + size_t(flops / kMinFlopsPerThread)));
}

F32Epilogue offset_bias(const F32Epilogue& ep, size_t j0) {
  F32Epilogue e = ep;
  if (e.bias) e.bias += j0;
  return e;
}

// C[M, N] = epilogue(A[M, K] Bt[N, K]^T), A and Bt rows contiguous.
void run_dot(const F32GemvKernel& gk, size_t M, size_t N, size_t K, const float* a, size_t lda, const float* bt,
             size_t ldbt, float* c, size_t ldc, const F32Epilogue& ep) {
  const size_t mr = gk.dot_mr, nr = gk.dot_nr;
  const size_t ti = ceil_div(M, mr), tj = ceil_div(N, nr), tiles = ti * tj;
  const size_t threads = useful_threads(2.0 * double(M) * double(N) * double(K));
  const size_t n_tasks = std::min(tiles, threads == 1 ? 1 : threads * 4);
  const size_t per_task = ceil_div(tiles, n_tasks);
  parallel_for(ceil_div(tiles, per_task), [&](size_t t) {
    for (size_t tile = t * per_task; tile < std::min(tiles, (t + 1) * per_task); ++tile) {
      const size_t i = (tile / tj) * mr, j = (tile % tj) * nr;
      const F32Epilogue e = offset_bias(ep, j);
      gk.dot(std::min(mr, M - i), std::min(nr, N - j), K, a + i * lda, lda, bt + j * ldbt, ldbt, c + i * ldc + j, ldc,
             &e);
    }
  });
}

// y[N] = epilogue(x B), x[p] = x[p * incx], B(p, j) = b[p * ldb + j].
// Rows m < M of y = x B: x row m at x + m * x_row (elements incx apart), y row m at y + m * ldy. With rows_m,
// groups of rows share one pass over B, the column chunk narrowed so their accumulators fit kRowsChunk.
void run_rows(const F32GemvKernel& gk, size_t M, size_t N, size_t K, const float* x, size_t x_row, size_t incx,
              const float* b, size_t ldb, float* y, size_t ldy, const F32Epilogue& ep) {
  const size_t threads = useful_threads(2.0 * double(M) * double(N) * double(K));
  const size_t group = gk.rows_m && M > 1 ? std::min(M, size_t(gk.rows_mr)) : 1;
  const size_t width = std::max<size_t>(16, kRowsChunk / group / 16 * 16);
  const size_t chunk = std::min(width, round_up(ceil_div(N, threads), 16));
  parallel_for(ceil_div(N, chunk), [&](size_t t) {
    const size_t j0 = t * chunk, nj = std::min(chunk, N - j0);
    const F32Epilogue e = offset_bias(ep, j0);
    alignas(64) float acc[kRowsChunk];
    for (size_t m0 = 0; m0 < M; m0 += group) {
      const size_t mm = std::min(group, M - m0);
      std::memset(acc, 0, mm * nj * sizeof(float));
      if (group > 1) gk.rows_m(mm, nj, K, x + m0 * x_row, x_row, incx, b + j0, ldb, acc, nj);
      else gk.rows(nj, K, x + m0 * x_row, incx, b + j0, ldb, acc);
      for (size_t i = 0; i < mm; ++i) gk.store(nj, acc + i * nj, y + (m0 + i) * ldy + j0, &e);
    }
  });
}

}  // namespace

const KernelFamily<F32GemvKernel>& f32_gemv_family() {
  static const KernelFamily<F32GemvKernel> family(
      "f32_gemv", "f32_gemv", {NNKERN_F32_GEMV_LIST(NNKERN_KERNEL_ENTRY)},
      [](const F32GemvKernel& k) { return KernelInfo{"", Isa::scalar, k.dot_mr, k.dot_nr, 0}; });
  return family;
}
NNKERN_REGISTER_FAMILY(f32_gemv_family)

// A kernel may set dot_auto_n past its dot width where the register tile keeps that few outputs in mostly empty
// lanes (AVX2's 16-lane tile at 5-8: docs/performance.md, "sgemm: a few outputs").
size_t dot_threshold(const F32GemvKernel& k) { return size_t(k.dot_auto_n ? k.dot_auto_n : k.dot_nr); }

bool sgemm_dot_applies(const SgemmArgs& g) { return !g.trans_a || g.M == 1; }

bool sgemm_dot_preferred(const SgemmArgs& g) {
  const bool small_n = g.N <= dot_threshold(f32_gemv_family().dispatched()) && (g.K >= kDotMinK || g.M == 1) &&
                       (!g.trans_a || g.M == 1);
  return small_n || (g.M == 1 && g.trans_b);
}

size_t sgemm_dot_workspace_bytes(const SgemmArgs& g) {
  // The gathered x (trans_a, M == 1) and B^T packed once (N x K) unless trans_b already stores it so.
  return workspace_align((g.trans_a ? g.K : 0) * sizeof(float)) + (g.trans_b ? 0 : g.N * g.K * sizeof(float));
}

void sgemm_run_dot(const SgemmArgs& g, const Workspace& ws) {
  F32Epilogue ep = g.ep;
  if (g.K == 0) ep.alpha = 0.0f;  // BLAS: C = beta * C, even for an infinite alpha
  const float* a = g.a;
  size_t lda = g.lda;
  float* x_buf = ws.as<float>();
  if (g.trans_a) {  // M == 1: gather the strided x
    for (size_t p = 0; p < g.K; ++p) x_buf[p] = g.a[p * g.lda];
    a = x_buf;
    lda = g.K;
  }
  const float* bt = g.b;
  size_t ldbt = g.ldb;
  if (!g.trans_b) {
    float* dst = ws.as<float>(workspace_align((g.trans_a ? g.K : 0) * sizeof(float)));
    for (size_t p = 0; p < g.K; ++p)
      for (size_t j = 0; j < g.N; ++j) dst[j * g.K + p] = g.b[p * g.ldb + j];
    bt = dst;
    ldbt = g.K;
  }
  run_dot(f32_gemv_family().dispatched(), g.M, g.N, g.K, a, lda, bt, ldbt, g.c, g.ldc, ep);
}

size_t rows_max_m(const F32GemvKernel& gk) { return gk.rows_m ? size_t(gk.rows_mr) : kRowsMaxM; }

bool sgemm_rows_applies(const SgemmArgs& g) { return g.M <= rows_max_m(f32_gemv_family().dispatched()) && !g.trans_b; }

bool sgemm_rows_preferred(const SgemmArgs& g) {
  if (g.M == 1 || (g.M <= kRowsMaxM && g.ldb * sizeof(float) >= kRowsPreferredStride)) return true;
  const F32GemvKernel& gk = f32_gemv_family().dispatched();
  if (!gk.rows_m) return false;
  const size_t l2 = cpu_features().l2 ? cpu_features().l2 : 256 * 1024;
  return g.M <= size_t(gk.rows_m_auto) || (g.M <= kRowsMultiMaxM && g.K * g.N * sizeof(float) > l2);
}

void sgemm_run_rows(const SgemmArgs& g) {
  F32Epilogue ep = g.ep;
  if (g.K == 0) ep.alpha = 0.0f;
  // Row m of op(A): at a + m * lda (elements 1 apart), or, transposed, at a + m (elements lda apart).
  run_rows(f32_gemv_family().dispatched(), g.M, g.N, g.K, g.a, g.trans_a ? 1 : g.lda, g.trans_a ? g.lda : 1, g.b, g.ldb, g.c,
           g.ldc, ep);
}

void rows_panels(const F32GemvKernel& gk, size_t np, size_t pw, size_t k, const float* x, const float* b,
                 size_t panel_stride, float* acc) {
  if (gk.rows_panels) {
    gk.rows_panels(np, pw, k, x, b, panel_stride, acc);
    return;
  }
  for (size_t q = 0; q < np; ++q) gk.rows(pw, k, x, 1, b + q * panel_stride, pw, acc + q * pw);
}

void gemv_packed_panels(const float* packed, size_t mr, size_t kc, size_t m_padded, size_t N, size_t K,
                        const float* x, float* y, const F32Epilogue& ep_in) {
  if (N == 0) return;
  const F32GemvKernel& gk = f32_gemv_family().dispatched();
  F32Epilogue ep = ep_in;
  if (K == 0) ep.alpha = 0.0f;
  const size_t n_panels = m_padded / mr;
  const size_t threads = useful_threads(2.0 * double(N) * double(K));
  const size_t max_panels = std::max<size_t>(1, kRowsChunk / mr);
  const size_t per_task = std::min(max_panels, ceil_div(n_panels, threads));
  parallel_for(ceil_div(n_panels, per_task), [&](size_t t) {
    const size_t ip0 = t * per_task, ip1 = std::min(n_panels, ip0 + per_task);
    alignas(64) float acc[kRowsChunk + 64];  // + 64: the padded last panel (mr <= 64)
    std::memset(acc, 0, (ip1 - ip0) * mr * sizeof(float));
    for (size_t pc = 0; pc < K; pc += kc) {
      const size_t kb = std::min(kc, K - pc);
      // A few panels per call: enough FMA chains to hide their latency, few enough streams (one per panel) for
      // the hardware prefetchers, walked in the packed order (K block, then panel).
      for (size_t ip = ip0; ip < ip1; ip += kPanelsPerCall)
        rows_panels(gk, std::min(kPanelsPerCall, ip1 - ip), mr, kb, x + pc, packed + pc * m_padded + ip * mr * kb,
                    mr * kb, acc + (ip - ip0) * mr);
    }
    const size_t j0 = ip0 * mr, nj = std::min(N, ip1 * mr) - j0;
    const F32Epilogue e = offset_bias(ep, j0);
    gk.store(nj, acc, y + j0, &e);
  });
}

}  // namespace nnkern
