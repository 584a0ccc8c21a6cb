// The public integer GEMM ops (ops/qgemm/qgemm.h): qgemm / qgemm16 (B packed per call, or read directly by the
// small-M path) and the prepacked PackedQGemm of QLinear. They choose the kernel, prepare the operands and
// hand a plan to the driver (ops/qgemm/driver.h); packing is ops/qgemm/pack.h, the kernel lists
// ops/qgemm/kernels.cc.
#include "ops/qgemm/qgemm.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "core/algorithm.h"
#include "core/isa.h"
#include "core/workspace.h"
#include "kernels/qgemm_list.h"
#include "ops/qgemm/driver.h"
#include "ops/qgemm/gemv.h"
#include "ops/qgemm/pack.h"

namespace nnkern {

namespace {

// One qgemm call as its algorithm table sees it.
struct QgemmCall {
  const QgemmArgs& g;
  const QGemmKernel& k;
  bool any_zb;  // some b zero point is not 0
  bool row_sums() const { return any_zb && !k.zero_points_in_kernel; }
  size_t b_esz() const { return g.b_type == QType::s16 ? 2 : 1; }
};

// Scratch every path needs: the padded b zero points, the prepared A and its row sums.
struct CommonScratch {
  WorkspaceLayout l;
  size_t zb_off, a_off, sums_off;
  explicit CommonScratch(const QgemmCall& c) {
    const QPrepareBytes ab = qgemm_prepare_a_bytes(c.k, c.g.a_type, c.g.M, c.g.K, c.row_sums(),
                                                    qgemm_realign_pays(c.k, c.g.N));
    zb_off = l.add(c.any_zb ? qgemm_padded_n(c.g.N) * sizeof(int32_t) : 0);
    a_off = l.add(ab.buf);
    sums_off = l.add(ab.sums);
  }
};

// Fills P's zero points and prepared A from the workspace (laid out by CommonScratch).
void prepare(const QgemmCall& c, const CommonScratch& cs, const Workspace& ws, QPlan& P) {
  const QgemmArgs& g = c.g;
  P.kern = &c.k;
  P.M = g.M; P.N = g.N; P.K = g.K;
  if (c.any_zb) {
    int32_t* zb = ws.as<int32_t>(cs.zb_off);
    const size_t np = qgemm_padded_n(g.N);
    for (size_t n = 0; n < np; ++n) zb[n] = n < g.N ? (g.b_zero ? g.b_zero[n] : g.b_zero_scalar) : 0;
    P.b_zero = zb;
  }
  P.za = qgemm_prepare_a(c.k, g.a_type, g.a, g.lda, g.M, g.K, g.a_zero, c.row_sums(), ws.as<uint8_t>(cs.a_off),
                         ws.as<int32_t>(cs.sums_off), &P, qgemm_realign_pays(c.k, g.N));
  P.kc = qgemm_choose_kc(c.k, g.K);
  P.out = QOut::i32;
  P.c = g.c;
  P.ldc = g.ldc;
  P.c_elem = 4;
}

// The call as the GEMV path prepares it: activations as a u8s8 kernel without in-kernel zero points reads
// them (the preparation depends on that alone, so the scalar one stands for all).
QgemmCall gemv_call(const QgemmCall& c) { return {c.g, u8s8_gemm_8x4c4__scalar, c.any_zb}; }

size_t all_panels_bytes(const QgemmCall& c) {
  const size_t panels = qgemm_ceil_div(c.g.N, size_t(c.k.mr));
  return workspace_align(qgemm_packed_gemm_bytes(c.k, c.g.K, c.g.N)) + panels * size_t(c.k.mr) * sizeof(int32_t);
}

const AlgorithmTable<QgemmCall>& qgemm_algorithms() {
  static const AlgorithmTable<QgemmCall> table("qgemm", {
      // Small M (8-bit x int8 with a GEMV kernel): B read once, unpacked, the zero-point terms added after.
      // The activations are prepared as for a u8s8 kernel (int8 shifted to uint8), whatever GEMM kernel the
      // level has (avx2's is s16).
      {"gemv",
       [](const QgemmCall& c) {
         return qgemm_kernels().gemv && c.g.b_type == QType::s8 && c.g.M <= qgemm_kernels().gemv->max_m;
       },
       nullptr, [](const QgemmCall& c) { return CommonScratch(gemv_call(c)).l.bytes; },
       [](const QgemmCall& c, const Workspace& ws) {
         const QgemmCall u = gemv_call(c);
         QPlan P{};
         prepare(u, CommonScratch(u), ws, P);
         qgemm_gemv(*qgemm_kernels().gemv, u.g, P);
       }},
      // Each task packs the panel of B it is about to use (a column strip: K lines on at most K pages while
      // B's rows fit a page), so the packed panel is read from L1. Preferred while all rows of A fit one
      // task's L2 block: beyond, every block of rows packs every panel again. Where the kernel runs packed
      // panels rows outer (ops/qgemm/driver.cc), from a quarter of L2 of A on, B packed once and read rows
      // outer wins (docs/performance.md: "qgemm: packing per panel or all of B").
      {"pack_per_panel", [](const QgemmCall&) { return true; },
       [](const QgemmCall& c) {
         const size_t l2 = cpu_features().l2 ? cpu_features().l2 : 256 * 1024;
         const size_t a_bytes = c.g.M * c.g.K * qgemm_x_elem_size(c.k);
         if (qgemm_rows_outer_fits(c.k, c.g.K) && a_bytes >= l2 / 4) return false;
         return c.g.ldb * c.b_esz() <= 4096 && a_bytes <= l2 / 2;
       },
       [](const QgemmCall& c) { return CommonScratch(c).l.bytes; },
       [](const QgemmCall& c, const Workspace& ws) {
         QPlan P{};
         prepare(c, CommonScratch(c), ws, P);
         P.b_type = c.g.b_type;
         P.b = c.g.b;
         P.ldb = c.g.ldb;
         qgemm_execute(P);
       }},
      // Long rows of B (a column strip would touch a page per row): all of B packed in row sweeps first.
      {"pack_all", [](const QgemmCall&) { return true; }, nullptr,
       [](const QgemmCall& c) { return CommonScratch(c).l.bytes + all_panels_bytes(c); },
       [](const QgemmCall& c, const Workspace& ws) {
         QPlan P{};
         const CommonScratch cs(c);
         prepare(c, cs, ws, P);
         uint8_t* packed = ws.as<uint8_t>(cs.l.bytes);
         const bool need_colsum = P.za != 0 && !c.k.zero_points_in_kernel;
         int32_t* colsum = need_colsum
                               ? ws.as<int32_t>(cs.l.bytes + workspace_align(qgemm_packed_gemm_bytes(c.k, c.g.K, c.g.N)))
                               : nullptr;
         qgemm_pack_gemm(c.k, c.g.b_type, c.g.b, c.g.ldb, c.g.K, c.g.N, packed, colsum);
         P.packed = packed;
         P.packed_slack = qgemm_panel_slack(c.k);
         P.colsum = colsum;
         qgemm_execute(P);
       }},
  });
  return table;
}

[[maybe_unused]] const bool algorithms_registered = (qgemm_algorithms(), true);

}  // namespace

size_t qgemm_max_exact_k(QType a_type, int32_t a_zero, int32_t b_dev) {
  const int64_t lo = a_type == QType::u8 ? 0 : -128, hi = a_type == QType::u8 ? 255 : 127;
  const int64_t da = std::max(a_zero - lo, hi - a_zero);
  return size_t(INT32_MAX / (da * std::max<int64_t>(b_dev, 1)));
}

void qgemm_check_exact(const char* op, QType a_type, int32_t a_zero, size_t K, int32_t b_dev) {
  const bool u8 = a_type == QType::u8;
  if (a_type == QType::s16 || a_zero < (u8 ? 0 : -128) || a_zero > (u8 ? 255 : 127))
    throw std::invalid_argument(std::string(op) + ": the input zero point " + std::to_string(a_zero) +
                                " is outside the range of " + (u8 ? "uint8" : "int8") + " input");
  const size_t kmax = qgemm_max_exact_k(a_type, a_zero, b_dev);
  if (K > kmax)
    throw std::invalid_argument(std::string(op) + ": K = " + std::to_string(K) + " exceeds " + std::to_string(kmax) +
                                ", the largest K whose accumulators all fit int32 for this input type and zero point");
}

void qgemm(const QgemmArgs& g, const std::string& algorithm) {
  if (g.a_type != QType::s16) {
    if (g.b_type != QType::s8) throw std::invalid_argument("qgemm: 8-bit a needs int8 b");
    int32_t b_dev = 0;
    for (size_t n = 0; n < (g.b_zero ? g.N : 1); ++n) {
      const int32_t zb = g.b_zero ? g.b_zero[n] : g.b_zero_scalar;
      if (zb < -128 || zb > 127) throw std::invalid_argument("qgemm: a zero point of b is outside the int8 range");
      b_dev = std::max(b_dev, std::max(zb + 128, 127 - zb));
    }
    qgemm_check_exact("qgemm", g.a_type, g.a_zero, g.K, b_dev);
  }
  const QGemmKernel& k = qgemm_kernel(g.b_type == QType::s16 ? 16 : 8, g.K);
  bool any_zb = g.b_zero ? false : g.b_zero_scalar != 0;
  if (g.b_zero)
    for (size_t n = 0; n < g.N && !any_zb; ++n) any_zb = g.b_zero[n] != 0;
  const QgemmCall call{g, k, any_zb};
  const Algorithm<QgemmCall>& a = qgemm_algorithms().select(call, algorithm);  // errors before any work
  if (g.M == 0 || g.N == 0) return;
  Workspace ws(a.workspace_bytes(call));
  a.run(call, ws);
}

PackedQGemm::PackedQGemm(const int8_t* w, size_t K, size_t N, size_t ldw) : K_(K), N_(N) {
  raw_.resize(std::max<size_t>(K * N, 1));
  for (size_t p = 0; p < K; ++p) std::memcpy(raw_.data() + p * N, w + p * ldw, N);
  narrow_ = qgemm_narrow_weights(raw_.data(), K * N);
  kernel_ = &qgemm_kernel(8, K, 1, narrow_);
  const QGemmKernel& k = *kernel_;
  const size_t MR = size_t(k.mr), panels = qgemm_ceil_div(N, MR);
  packed_.resize(std::max<size_t>(qgemm_packed_gemm_bytes(k, K, N), 1));
  colsum_.resize(std::max<size_t>(panels * MR, 1));
  qgemm_pack_gemm(k, QType::s8, raw_.data(), N, K, N, packed_.data(), colsum_.data());
}

void PackedQGemm::run(size_t M, QType x_type, const void* x, size_t ldx, int32_t x_zero, const QOutput& o) const {
  qgemm_check_exact("QLinear", x_type, x_zero, K_);
  if (M == 0 || N_ == 0) return;
  const QGemmKernel& k = qgemm_kernel(8, K_, 1, narrow_);
  QPlan P{};
  P.kern = &k;
  P.M = M; P.N = N_; P.K = K_;
  // One workspace for the call: the prepared activations and, if the cap changed since packing, the
  // weights packed for this call's kernel from the kept copy.
  const bool repack = &k != kernel_;
  const size_t panels = qgemm_ceil_div(N_, size_t(k.mr));
  WorkspaceLayout l;
  const bool realign = qgemm_realign_pays(k, N_);
  const size_t a_off = l.add(qgemm_prepare_a_bytes(k, x_type, M, K_, false, realign).buf);
  const size_t packed_off = l.add(repack ? qgemm_packed_gemm_bytes(k, K_, N_) : 0);
  const size_t colsum_off = l.add(repack ? panels * size_t(k.mr) * sizeof(int32_t) : 0);
  Workspace ws(l.bytes);
  P.za = qgemm_prepare_a(k, x_type, x, ldx, M, K_, x_zero, false, ws.as<uint8_t>(a_off), nullptr, &P, realign);
  P.packed_slack = qgemm_panel_slack(k);  // both buffers keep it
  if (!repack) {
    P.packed = packed_.data();
    P.colsum = colsum_.data();
  } else {
    qgemm_pack_gemm(k, QType::s8, raw_.data(), N_, K_, N_, ws.as<uint8_t>(packed_off), ws.as<int32_t>(colsum_off));
    P.packed = ws.as<uint8_t>(packed_off);
    P.colsum = ws.as<int32_t>(colsum_off);
  }
  P.kc = qgemm_choose_kc(k, K_);
  P.out = o.out;
  P.c = o.c;
  P.ldc = o.ldc;
  P.c_elem = qout_elem_size(o.out);
  P.scale = o.scale;
  P.bias = o.bias;
  P.relu = o.relu;
  P.lo = o.lo;
  P.hi = o.hi;
  qgemm_execute(P);
}

}  // namespace nnkern
