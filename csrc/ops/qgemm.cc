// The public integer GEMM ops (ops/qgemm.h): qgemm / qgemm16 (B packed per call, or read directly by the
// small-M path) and the prepacked PackedQGemm of QLinear. They choose the kernel, prepare the operands and
// hand a plan to the driver (ops/qgemm_driver.h); packing is ops/qgemm_pack.h, the kernel lists
// ops/qgemm_kernels.cc.
#include "ops/qgemm.h"

#include <algorithm>
#include <cstring>

#include "core/workspace.h"
#include "ops/qgemm_driver.h"
#include "ops/qgemm_gemv.h"
#include "ops/qgemm_pack.h"

namespace nnkern {

void qgemm(const QgemmArgs& g) {
  if (g.M == 0 || g.N == 0) return;
  const int bits = g.b_type == QType::s16 ? 16 : 8;
  const QGemmKernel& k = qgemm_kernel(bits);
  QPlan P{};
  P.kern = &k;
  P.M = g.M; P.N = g.N; P.K = g.K;
  bool any_zb = g.b_zero ? false : g.b_zero_scalar != 0;
  if (g.b_zero)
    for (size_t n = 0; n < g.N && !any_zb; ++n) any_zb = g.b_zero[n] != 0;
  const bool row_sums = any_zb && !k.zero_points_in_kernel;
  const QGemvKernel* gemv = qgemm_kernels().gemv;
  const bool small_m = gemv && bits == 8 && k.kind == QKind::u8s8 && k.kgroup == 4 && g.M <= kQGemvMaxM;
  const size_t b_esz = g.b_type == QType::s16 ? 2 : 1;
  // Rows of B within a page: each task packs the panel it needs right before using it (a column strip of
  // B, K lines on at most K pages), so the packed panel is read from L1. Long rows: a column strip would
  // touch a page per row (TLB misses on every line), so all of B is packed in row sweeps first.
  const bool pack_all = !small_m && g.ldb * b_esz > 4096;
  // One workspace for the call: the padded b zero points, the prepared A and its row sums, packed B.
  const size_t np = qgemm_padded_n(g.N), panels = qgemm_ceil_div(g.N, size_t(k.mr));
  const QPrepareBytes ab = qgemm_prepare_a_bytes(k, g.a_type, g.M, g.K, row_sums);
  WorkspaceLayout l;
  const size_t zb_off = l.add(any_zb ? np * sizeof(int32_t) : 0), a_off = l.add(ab.buf), sums_off = l.add(ab.sums);
  const size_t packed_off = l.add(pack_all ? panels * qgemm_panel_bytes(k, g.K) : 0);
  const size_t colsum_off = l.add(pack_all ? panels * size_t(k.mr) * sizeof(int32_t) : 0);
  Workspace ws(l.bytes);
  if (any_zb) {
    int32_t* zb = ws.as<int32_t>(zb_off);
    for (size_t n = 0; n < np; ++n) zb[n] = n < g.N ? (g.b_zero ? g.b_zero[n] : g.b_zero_scalar) : 0;
    P.b_zero = zb;
  }
  P.za = qgemm_prepare_a(k, g.a_type, g.a, g.lda, g.M, g.K, g.a_zero, row_sums, ws.as<uint8_t>(a_off),
                         ws.as<int32_t>(sums_off), &P);
  const bool need_colsum = P.za != 0 && !k.zero_points_in_kernel;
  if (small_m) {
    qgemm_gemv(*gemv, g, P);  // small M: B read once, unpacked
    return;
  }
  if (!pack_all) {
    P.packed = nullptr;
    P.colsum = nullptr;
    P.b_type = g.b_type;
    P.b = g.b;
    P.ldb = g.ldb;
  } else {
    uint8_t* packed = ws.as<uint8_t>(packed_off);
    int32_t* colsum = need_colsum ? ws.as<int32_t>(colsum_off) : nullptr;
    qgemm_pack_all(k, g.b_type, g.b, g.ldb, g.K, g.N, packed, colsum);
    P.packed = packed;
    P.colsum = colsum;
  }
  P.kc = qgemm_choose_kc(k, g.K);
  P.out = QOut::i32;
  P.c = g.c;
  P.ldc = g.ldc;
  P.c_elem = 4;
  qgemm_execute(P);
}

PackedQGemm::PackedQGemm(const int8_t* w, size_t K, size_t N, size_t ldw)
    : kernel_(&qgemm_kernel(8)), K_(K), N_(N) {
  raw_.resize(std::max<size_t>(K * N, 1));
  for (size_t p = 0; p < K; ++p) std::memcpy(raw_.data() + p * N, w + p * ldw, N);
  const QGemmKernel& k = *kernel_;
  const size_t MR = size_t(k.mr), panels = qgemm_ceil_div(N, MR);
  packed_.resize(std::max<size_t>(panels * qgemm_panel_bytes(k, K), 1));
  colsum_.resize(std::max<size_t>(panels * MR, 1));
  qgemm_pack_all(k, QType::s8, raw_.data(), N, K, N, packed_.data(), colsum_.data());
}

void PackedQGemm::run(size_t M, QType x_type, const void* x, size_t ldx, int32_t x_zero, const QOutput& o) const {
  if (M == 0 || N_ == 0) return;
  const QGemmKernel& k = qgemm_kernel(8);
  QPlan P{};
  P.kern = &k;
  P.M = M; P.N = N_; P.K = K_;
  // One workspace for the call: the prepared activations and, if the cap changed since packing, the
  // weights packed for this call's kernel from the kept copy.
  const bool repack = &k != kernel_;
  const size_t panels = qgemm_ceil_div(N_, size_t(k.mr));
  WorkspaceLayout l;
  const size_t a_off = l.add(qgemm_prepare_a_bytes(k, x_type, M, K_, false).buf);
  const size_t packed_off = l.add(repack ? panels * qgemm_panel_bytes(k, K_) : 0);
  const size_t colsum_off = l.add(repack ? panels * size_t(k.mr) * sizeof(int32_t) : 0);
  Workspace ws(l.bytes);
  P.za = qgemm_prepare_a(k, x_type, x, ldx, M, K_, x_zero, false, ws.as<uint8_t>(a_off), nullptr, &P);
  if (!repack) {
    P.packed = packed_.data();
    P.colsum = colsum_.data();
  } else {
    qgemm_pack_all(k, QType::s8, raw_.data(), N_, K_, N_, ws.as<uint8_t>(packed_off), ws.as<int32_t>(colsum_off));
    P.packed = ws.as<uint8_t>(packed_off);
    P.colsum = ws.as<int32_t>(colsum_off);
  }
  P.kc = qgemm_choose_kc(k, K_);
  P.out = o.out;
  P.c = o.c;
  P.ldc = o.ldc;
  P.c_elem = o.out == QOut::i32 || o.out == QOut::f32 ? 4 : 1;
  P.scale = o.scale;
  P.bias = o.bias;
  P.relu = o.relu;
  P.lo = o.lo;
  P.hi = o.hi;
  qgemm_execute(P);
}

}  // namespace nnkern
