// The integer GEMM driver (ops/qgemm/driver.h). Zero points never enter the inner loop. With a' = a + s and
// za' = za + s (s = 128 when int8 activations are shifted to uint8 for vpdpbusd, seed I6; else 0):
//   sum_k (a - za)(b - zb) = sum_k a' b  +  [K za' zb[n] - za' colsum_b[n]]  -  zb[n] rowsum_a'[m]
// The bracket (col_comp) comes from B's column sums (computed when B is packed); the last term needs the
// row sums of A, computed in the pass that prepares A, only when some zb != 0. All int32 arithmetic is
// modulo 2^32, so the result is exact whenever the true value fits int32 (checked by the Python layer).
//
// Blocking: whole-K micro-kernels (seed Q3: no partial sums in memory, the epilogue runs on registers).
// Tasks are blocks of (channels x rows); within a task, each MR-channel panel of B (packed per task when
// B is not prepacked) is swept over the task's rows, which are sized to stay in L2, or, for a kernel that
// asks for it, each NR rows over the prepacked panels (Order below).
#include "ops/qgemm/driver.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>

#include "core/isa.h"
#include "core/threadpool.h"
#include "core/workspace.h"
#include "ops/gemm/tasks.h"
#include "ops/qgemm/pack.h"

namespace nnkern {
namespace {

constexpr size_t kMaxNR = 32;
constexpr size_t kStreamRows = 16;  // up to this many rows of A, a GEMM streams B (2 M ops per byte of B)

size_t round_up(size_t x, size_t m) { return qgemm_round_up(x, m); }

// The packed weights of the panels a kernel's whole-panel form (QGemmKernel::run_panels) runs in one call: all of
// them are read for every NR rows, so they must stay in L1.
constexpr size_t kPanelsCallBytes = 16 << 10;

// Panels per call of the whole-panel form (at most 64), or 1 without it.
size_t panels_per_call(const QGemmKernel& k, size_t panel_bytes) {
  return k.run_panels ? std::min<size_t>(64, kPanelsCallBytes / std::max<size_t>(panel_bytes, 1)) : 1;
}

std::atomic<int> g_rows_outer_override{-1};
std::atomic<size_t> g_rows_outer_block{0};

// The loop order inside a task. Panels outer (the default): each MR-channel panel stays in L1 while the task's
// rows stream past it, in K blocks of P.kc. Rows outer (QGemmKernel::rows_outer: prepacked B, whole K, no hook,
// NR rows of A within two thirds of L1d): each NR rows stay in L1 while the panels of a channel block that
// fits half of L2 stream past them. With K blocks instead, rows outer lost (docs/performance.md: "qgemm: loop
// order and K blocks").
// Rows outer with the whole-panel form (one_call): each NR rows over a block of panels in one kernel call, where the
// per-tile call and set-up cost as much as a short reduction's products (K = 16-64: MobileNet's pointwise layers).
struct Order {
  bool rows_outer = false;
  bool one_call = false;
  size_t block = 0;  // rows outer: channels per block
};

Order choose_order(const QPlan& P) {
  const QGemmKernel& k = *P.kern;
  const int ov = g_rows_outer_override.load();
  const size_t l2 = cpu_features().l2 ? cpu_features().l2 : 256 * 1024, MR = size_t(k.mr);
  Order o;
  if (!P.packed || P.hook || P.kc < P.K || ov == 0) return o;
  const size_t per_call = panels_per_call(k, qgemm_panel_bytes(k, P.K));
  if (ov < 0 && per_call > 1) {
    o.rows_outer = o.one_call = true;
    o.block = std::min(per_call, ceil_div(P.N, MR)) * MR;
    return o;
  }
  if (ov < 0 && !qgemm_rows_outer_fits(k, P.K)) return o;
  o.rows_outer = true;
  o.block = g_rows_outer_block.load() ? round_up(g_rows_outer_block.load(), MR)
                                      : std::max(MR, (l2 / 2) / std::max<size_t>(qgemm_panel_bytes(k, P.K), 1) * MR);
  return o;
}

// Per-task scratch: the partial sums of the K blocks (rows x MR int32), the panel packed on first use, the
// hook's tiles and the task's rows of A on aligned rows.
struct TaskScratch {
  size_t work_off, panel_off, tile_off, a_off, comp_off, bytes;
};

TaskScratch task_scratch(const QPlan& P, const Order& o, size_t rows) {
  const QGemmKernel& k = *P.kern;
  WorkspaceLayout l;
  const size_t comp_off = l.add(o.one_call ? o.block * sizeof(int32_t) : 0);
  const size_t kc = P.kc < P.K ? P.kc : P.K;
  const size_t work_off = l.add(kc < P.K ? size_t(k.mr) * rows * sizeof(int32_t) : 0);
  const size_t panel_off = l.add(P.packed ? 0 : qgemm_panel_bytes(k, P.K) + qgemm_panel_slack(k));
  // The task's final tiles (rows x MR) when they go to the hook, + 64 bytes of slack for its reads.
  const size_t tile_off = l.add(P.hook ? round_up(rows, size_t(k.nr)) * size_t(k.mr) * P.c_elem + 64 : 0);
  const size_t a_off = l.add(rows * P.a_copy_row_bytes);
  return {work_off, panel_off, tile_off, a_off, comp_off, l.bytes};
}

void run_task(const QPlan& P, const Order& o, size_t i0, size_t i1, size_t j0, size_t j1, const TaskScratch& ts,
              void* scratch) {
  const QGemmKernel& k = *P.kern;
  const size_t MR = size_t(k.mr), NR = size_t(k.nr), G = size_t(k.kgroup), esz = qgemm_x_elem_size(k);
  const size_t panel_bytes = qgemm_panel_bytes(k, P.K);
  const size_t kc = P.kc < P.K ? P.kc : P.K;
  // Zero points: folded into column/row sums, or (QNNPACK-style kernels) subtracted by the kernel itself.
  const bool compensate = P.za != 0 && !k.zero_points_in_kernel;
  int32_t* work = reinterpret_cast<int32_t*>(static_cast<char*>(scratch) + ts.work_off);  // rows j0..j1 x MR
  uint8_t* panel_buf = reinterpret_cast<uint8_t*>(static_cast<char*>(scratch) + ts.panel_off);
  uint8_t* tiles = reinterpret_cast<uint8_t*>(static_cast<char*>(scratch) + ts.tile_off);  // P.hook only
  // Row j of A at a_rows + (j - a_row0) * a_stride: A itself, or the task's aligned copy of its rows j0 .. j1.
  const uint8_t* a_rows = P.a;
  size_t a_stride = P.a_row_bytes, a_row0 = 0;
  if (P.a_copy_row_bytes) {
    uint8_t* copy = reinterpret_cast<uint8_t*>(static_cast<char*>(scratch) + ts.a_off);
    for (size_t j = j0; j < j1; ++j) {
      uint8_t* row = copy + (j - j0) * P.a_copy_row_bytes;
      std::memcpy(row, P.a + j * P.a_row_bytes, P.K * esz);
      std::memset(row + P.K * esz, 0, P.a_copy_row_bytes - P.K * esz);  // QPlan::a_rows_padded
    }
    a_rows = copy;
    a_stride = P.a_copy_row_bytes;
    a_row0 = j0;
  }
  alignas(64) int32_t comp_panel[64];
  // The zero-point terms of one panel, or of a one-call block's panels (Order::one_call).
  int32_t* comp = o.one_call ? reinterpret_cast<int32_t*>(static_cast<char*>(scratch) + ts.comp_off) : comp_panel;
  const void* bptr[kMaxNR];
  alignas(64) uint32_t cs_local[64];
  const size_t l2 = cpu_features().l2 ? cpu_features().l2 : 256 * 1024;
  const bool stream_out = !P.hook && P.M * P.N * P.c_elem > l2;
  // The tail step read whole: A's rows padded with zeros to the kernel's step, the panels readable past it.
  const size_t slack = qgemm_panel_slack(k);
  const bool k_padded = P.a_rows_padded && slack > 0 && k.row_align >= k.kstep && (!P.packed || P.packed_slack >= slack);
  // Panel i (channels i .. i + mi; one_call: the panels from i / MR on): its weights (packed now if B is not
  // prepacked) and final epilogue.
  const auto setup_panel = [&](size_t i, size_t mi, QEpilogue* ep) -> const uint8_t* {
    const uint8_t* panel;
    const int32_t* cs = P.colsum ? P.colsum + i : nullptr;
    if (P.packed) {
      panel = P.packed + (i / MR) * panel_bytes;
    } else {  // pack on first use: the panel is still in L1 when the kernel reads it
      qgemm_pack_groups(k, P.b_type, panel_buf, P.b, P.ldb, P.K, i, mi, 0, ceil_div(P.K, G));
      panel = panel_buf;
      if (compensate) {
        qgemm_panel_column_sums(k, panel_buf, P.K, cs_local);
        cs = reinterpret_cast<const int32_t*>(cs_local);
      }
    }
    if (compensate) {
      const uint32_t kza = uint32_t(P.K) * uint32_t(P.za);
      for (size_t ii = 0; ii < round_up(mi, MR); ++ii) {
        const uint32_t zb = P.b_zero && ii < mi ? uint32_t(P.b_zero[i + ii]) : 0u;
        comp[ii] = ii < mi ? int32_t(kza * zb - uint32_t(P.za) * uint32_t(cs[ii])) : 0;
      }
      ep->col_comp = comp;
    }
    if (k.zero_points_in_kernel) {
      ep->x_zero = P.za;
      ep->w_zero = P.b_zero ? P.b_zero + i : nullptr;
    } else {
      ep->b_zero = P.b_zero ? P.b_zero + i : nullptr;
    }
    ep->out = P.out;
    ep->stream_out = stream_out;
    ep->relu = P.relu;
    ep->scale = P.scale ? P.scale + i : nullptr;
    ep->bias = P.bias ? P.bias + i : nullptr;
    ep->lo = P.lo;
    ep->hi = P.hi;
    ep->k_padded = k_padded;
    return panel;
  };
  // One kernel call: channels i .. i + mi of rows j .. j + nj over k0 .. k0 + kk. Blocks before the last
  // leave raw int32 partial sums in w (ld ldw), which the next block starts from; the last one runs ep.
  const auto call = [&](size_t i, size_t mi, size_t j, size_t nj, size_t k0, size_t kk, const uint8_t* panel,
                        const QEpilogue& ep, int32_t* w, size_t ldw) {
    const bool first = k0 == 0, last = k0 + kk >= P.K;
    QEpilogue e = last ? ep : QEpilogue{};
    e.x_zero = ep.x_zero;  // the partial sums are of the zero-point-subtracted products, if the kernel forms them
    e.w_zero = ep.w_zero;
    e.k_padded = ep.k_padded;
    e.c_in = first ? nullptr : w;
    e.ld_in = ldw;
    e.tile_i = i;
    e.tile_j = j;
    for (size_t jj = 0; jj < nj; ++jj) bptr[jj] = a_rows + (j + jj - a_row0) * a_stride + k0 * esz;
    const uint8_t* a = panel + (k0 / G) * MR * G * qgemm_a_elem_size(k);
    if (!last) {
      k.run(mi, nj, kk, 1, a, bptr, nullptr, 0, w, ldw, &e);
      return;
    }
    e.row_sum = P.row_sum ? P.row_sum + j : nullptr;
    if (P.hook)  // row j of the task at tiles + (j - j0) * MR
      k.run(mi, nj, kk, 1, a, bptr, nullptr, 0, tiles + (j - j0) * MR * P.c_elem, MR, &e);
    else
      k.run(mi, nj, kk, 1, a, bptr, nullptr, 0, static_cast<uint8_t*>(P.c) + (j * P.ldc + i) * P.c_elem, P.ldc, &e);
  };
  if (o.one_call) {  // whole K, prepacked, no hook
    for (size_t b0 = i0; b0 < i1; b0 += o.block) {
      const size_t mb = std::min(i1, b0 + o.block) - b0, whole = mb / MR, rest = mb % MR;
      QEpilogue ep;
      const uint8_t* panel = setup_panel(b0, mb, &ep);
      const size_t r0 = whole * MR;
      QEpilogue ep_rest = qepilogue_at(ep, r0);  // the block's last, partial panel
      ep_rest.tile_i = b0 + r0;
      ep.tile_i = b0;
      for (size_t j = j0; j < j1; j += NR) {
        const size_t nj = std::min(NR, j1 - j);
        for (size_t jj = 0; jj < nj; ++jj) bptr[jj] = a_rows + (j + jj - a_row0) * a_stride;
        ep.row_sum = ep_rest.row_sum = P.row_sum ? P.row_sum + j : nullptr;
        ep.tile_j = ep_rest.tile_j = j;
        uint8_t* c = static_cast<uint8_t*>(P.c) + (j * P.ldc + b0) * P.c_elem;
        if (whole) k.run_panels(whole, nj, P.K, 1, panel, panel_bytes, bptr, nullptr, 0, c, P.ldc, &ep);
        if (rest) k.run(rest, nj, P.K, 1, panel + whole * panel_bytes, bptr, nullptr, 0, c + r0 * P.c_elem, P.ldc, &ep_rest);
      }
    }
  } else if (o.rows_outer) {
    // Packed panels are contiguous and stream from L2 at full speed; NR rows of A are NR streams that do not.
    for (size_t b0 = i0; b0 < i1; b0 += o.block) {
      const size_t b1 = std::min(i1, b0 + o.block);
      for (size_t j = j0; j < j1; j += NR)
        for (size_t i = b0; i < b1; i += MR) {
          const size_t mi = std::min(MR, P.N - i);
          QEpilogue ep;
          const uint8_t* panel = setup_panel(i, mi, &ep);
          call(i, mi, j, std::min(NR, j1 - j), 0, P.K, panel, ep, nullptr, 0);
        }
    }
  } else {
    for (size_t i = i0; i < i1; i += MR) {
      const size_t mi = std::min(MR, P.N - i);
      QEpilogue ep;
      const uint8_t* panel = setup_panel(i, mi, &ep);
      // K blocks (seed Q3 keeps whole K where the panel fits L1; beyond, the MR x kc slice of the panel stays
      // in L1 while the task's rows stream past it, and the partial sums go through `work`, L2-resident).
      size_t k0 = 0;
      do {  // once for K = 0: the epilogue still runs
        for (size_t j = j0; j < j1; j += NR)
          call(i, mi, j, std::min(NR, j1 - j), k0, std::min(kc, P.K - k0), panel, ep, work + (j - j0) * MR, MR);
        k0 += kc;
      } while (k0 < P.K);
      // The hook after the panel's kernels, not between them (between them, AMX's tile stores waited).
      if (P.hook)
        for (size_t j = j0; j < j1; j += NR)
          P.hook(P.hook_ctx, QTile{i, j, mi, std::min(NR, j1 - j), P.out, tiles + (j - j0) * MR * P.c_elem, MR, nullptr});
    }
  }
  if (k.finish) k.finish();
}

std::atomic<size_t> g_kc_override{0};

}  // namespace

bool qgemm_rows_outer_fits(const QGemmKernel& k, size_t K) {
  const size_t l1 = cpu_features().l1d ? cpu_features().l1d : 32 * 1024;
  return k.rows_outer && size_t(k.nr) * K * qgemm_x_elem_size(k) <= l1 * 2 / 3;
}

// The hooks' values are capped: any K block or channel block past 2^32 means "all of it", and a value near
// 2^64 would wrap to 0 when rounded up to the kernel's step (an endless K or block loop).
constexpr size_t kHookCap = size_t(1) << 32;
void set_qgemm_kc(size_t kc) { g_kc_override.store(std::min(kc, kHookCap)); }
void set_qgemm_rows_outer(int v, size_t block) {
  g_rows_outer_override.store(v);
  g_rows_outer_block.store(std::min(block, kHookCap));
}

// The K block: whole K while an MR x K panel fits half of L1d (seed Q3), else balanced blocks that do, in
// whole steps of the kernel's inner loop (a 64-k AMX step: a block boundary elsewhere would cost a tail);
// always whole K for a whole_k kernel.
size_t qgemm_choose_kc(const QGemmKernel& k, size_t K) {
  const size_t G = size_t(std::max(k.kgroup, k.kstep)), ov = g_kc_override.load();
  if (ov) return round_up(ov, G);
  // AMX: the panel streams from L2 at full speed, the partial sums do not (docs/performance.md: "qgemm: loop
  // order and K blocks").
  if (k.whole_k) return K;
  const CpuFeatures& f = cpu_features();
  const size_t l1 = f.l1d ? f.l1d : 32 * 1024;
  const size_t kc_max = std::max<size_t>(64, (l1 / 2) / (size_t(k.mr) * qgemm_a_elem_size(k)) / G * G);
  if (K <= kc_max + kc_max / 2) return K;
  return round_up(ceil_div(K, ceil_div(K, kc_max)), G);
}

void qgemm_execute(const QPlan& P) {
  if (P.M == 0 || P.N == 0) return;
  const QGemmKernel& k = *P.kern;
  const CpuFeatures& f = cpu_features();
  const size_t l2 = f.l2 ? f.l2 : 256 * 1024;
  // Rows per block: the block of A (rows x K) stays in half of L2 while the panels sweep it.
  const size_t row_bytes = std::max<size_t>(P.K * qgemm_x_elem_size(k), 1);
  const size_t rows_max = std::max<size_t>(size_t(k.nr), (l2 / 2) / row_bytes / size_t(k.nr) * size_t(k.nr));
  size_t mc, nc;
  const double ops = 2.0 * double(P.M) * double(P.N) * double(std::max<size_t>(P.K, 1));
  // A kernel's own (larger) limit was measured with B packed per call, where tasks that split the rows each
  // pack every panel again. Prepacked panels are shared: there the default limit holds. Up to kStreamRows rows
  // with B larger than L2, the call is a stream of B from memory, which each thread's bandwidth speeds up: a
  // thread per 256 KiB of B. B within L2 is not a stream from memory and keeps the default limit (unmeasured
  // which is better there). docs/performance.md: "qgemm: threads".
  const bool streams_b = P.M <= kStreamRows && P.N * P.K * qgemm_a_elem_size(k) > l2;
  const bool own_limit = k.min_ops_per_thread > 0 && !P.packed && P.M > size_t(k.nr) / 2;
  const double min_ops = streams_b ? std::min(kQGemmMinOpsPerThread, 2.0 * double(P.M) * double(256 << 10))
                                   : own_limit ? k.min_ops_per_thread : kQGemmMinOpsPerThread;
  split_gemm_tasks(P.N, P.M, size_t(k.mr), size_t(k.nr), P.N, rows_max, ops, min_ops, &mc, &nc);
  const size_t tm = ceil_div(P.N, mc), tn = ceil_div(P.M, nc);
  const Order o = choose_order(P);
  const TaskScratch ts = task_scratch(P, o, std::min(nc, P.M));
  parallel_for_scratch(tm * tn, ts.bytes, [&](size_t t, void* scratch) {
    const size_t bi = t % tm, bj = t / tm;
    const size_t i0 = bi * mc, i1 = std::min(P.N, (bi + 1) * mc), j0 = bj * nc, j1 = std::min(P.M, (bj + 1) * nc);
    run_task(P, o, i0, i1, j0, j1, ts, scratch);
    if (P.stored && !P.hook) P.stored(P.stored_ctx, i0, i1, j0, j1);
  });
}

namespace {
bool shifts(const QGemmKernel& k, QType a_type) {
  return (k.kind == QKind::u8s8 && a_type == QType::s8) || (k.kind == QKind::s8s8 && a_type == QType::u8);
}
bool widens(const QGemmKernel& k, QType a_type) { return qgemm_widens_x(k) && a_type != QType::s16; }
}  // namespace

// The row stride of A's copy: aligned rows for a kernel that wants them.
size_t aligned_row_bytes(const QGemmKernel& k, size_t K, bool align_rows) {
  return align_rows && k.row_align > 0 ? round_up(K, size_t(k.row_align)) : K;
}

bool qgemm_realign_pays(const QGemmKernel& k, size_t N) { return k.row_align > 0 && N >= 16 * size_t(k.mr); }

QPrepareBytes qgemm_prepare_a_bytes(const QGemmKernel& k, QType a_type, size_t M, size_t K, bool need_row_sums,
                                    bool align_rows) {
  const bool copy = shifts(k, a_type) || widens(k, a_type);
  const size_t row = widens(k, a_type) ? 2 * K : aligned_row_bytes(k, K, align_rows);
  return {copy ? M * row : 0, need_row_sums ? M * sizeof(int32_t) : 0};
}

int32_t qgemm_prepare_a(const QGemmKernel& k, QType a_type, const void* a, size_t lda, size_t M, size_t K, int32_t za,
                        bool need_row_sums, uint8_t* buf, int32_t* sums, QPlan* P, bool align_rows) {
  const bool shift = shifts(k, a_type), widen = widens(k, a_type);
  const size_t esz = a_type == QType::s16 ? 2 : 1;
  const size_t ra = align_rows && !widen ? size_t(k.row_align) : 0;
  const bool realign = ra > 0 && !shift && (reinterpret_cast<uintptr_t>(a) % ra != 0 || (M > 1 && lda * esz % ra != 0));
  const size_t row = widen ? 2 * K : aligned_row_bytes(k, K, ra > 0);
  if (!shift && !widen) {  // A itself, copied onto aligned rows by each task if it must be
    P->a = static_cast<const uint8_t*>(a);
    P->a_row_bytes = lda * esz;
    P->a_copy_row_bytes = realign ? row : 0;
  } else {
    P->a = buf;
    P->a_row_bytes = row;
    P->a_copy_row_bytes = 0;
  }
  P->a_rows_padded = ra > 0 && (shift || realign);
  P->row_sum = need_row_sums ? sums : nullptr;
  if (!shift && !widen && !need_row_sums) return za;
  uint8_t* out = buf;
  int32_t* rs = sums;
  const size_t chunk = std::max<size_t>(1, (1 << 16) / std::max<size_t>(K, 1));
  parallel_for(ceil_div(M, chunk), [&](size_t t) {
    for (size_t m = t * chunk; m < std::min(M, (t + 1) * chunk); ++m) {
      uint32_t s = 0;  // modulo 2^32
      if (a_type == QType::s16) {
        const int16_t* src = static_cast<const int16_t*>(a) + m * lda;
        for (size_t p = 0; p < K; ++p) s += uint32_t(int32_t(src[p]));
      } else if (shift) {
        const uint8_t* src = static_cast<const uint8_t*>(a) + m * lda;
        uint8_t* dst = out + m * row;
        if (k.kind == QKind::u8s8) {
          for (size_t p = 0; p < K; ++p) {
            dst[p] = uint8_t(src[p] ^ 0x80);
            s += dst[p];
          }
        } else {
          for (size_t p = 0; p < K; ++p) {
            dst[p] = uint8_t(src[p] ^ 0x80);
            s += uint32_t(int32_t(int8_t(dst[p])));
          }
        }
        for (size_t p = K; p < row; ++p) dst[p] = 0;  // QPlan::a_rows_padded
      } else if (widen) {
        int16_t* dst = reinterpret_cast<int16_t*>(out) + m * K;
        if (a_type == QType::u8) {
          const uint8_t* src = static_cast<const uint8_t*>(a) + m * lda;
          for (size_t p = 0; p < K; ++p) { dst[p] = src[p]; s += uint32_t(int32_t(src[p])); }
        } else {
          const int8_t* src = static_cast<const int8_t*>(a) + m * lda;
          for (size_t p = 0; p < K; ++p) { dst[p] = src[p]; s += uint32_t(int32_t(src[p])); }
        }
      } else if (a_type == QType::s8) {  // int8 as an s8s8 kernel reads it
        const int8_t* src = static_cast<const int8_t*>(a) + m * lda;
        for (size_t p = 0; p < K; ++p) s += uint32_t(int32_t(src[p]));
      } else {
        const uint8_t* src = static_cast<const uint8_t*>(a) + m * lda;
        for (size_t p = 0; p < K; ++p) s += uint32_t(int32_t(src[p]));
      }
      if (need_row_sums) rs[m] = int32_t(s);
    }
  });
  if (!shift) return za;
  return k.kind == QKind::u8s8 ? za + 128 : za - 128;
}

}  // namespace nnkern
