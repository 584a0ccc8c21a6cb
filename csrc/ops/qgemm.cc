// The public integer GEMM ops (ops/qgemm.h): qgemm / qgemm16 (B packed per call, or read directly by the
// small-M path) and the prepacked PackedQGemm of QLinear. They choose the kernel, prepare the operands and
// hand a plan to the driver (ops/qgemm_driver.h); packing is ops/qgemm_pack.h, the kernel lists
// ops/qgemm_kernels.cc.
#include "ops/qgemm.h"

#include <algorithm>
#include <cstring>

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
  // b zero points, padded to the panels (or null when all are zero).
  AlignedBuffer<int32_t> zb;
  bool any_zb = g.b_zero ? false : g.b_zero_scalar != 0;
  if (g.b_zero)
    for (size_t n = 0; n < g.N && !any_zb; ++n) any_zb = g.b_zero[n] != 0;
  if (any_zb) {
    const size_t np = qgemm_padded_n(g.N);
    zb.resize(np);
    for (size_t n = 0; n < np; ++n) zb.data()[n] = n < g.N ? (g.b_zero ? g.b_zero[n] : g.b_zero_scalar) : 0;
    P.b_zero = zb.data();
  }
  thread_local AlignedBuffer<uint8_t> abuf;
  thread_local AlignedBuffer<int32_t> sums;
  P.za = qgemm_prepare_a(k, g.a_type, g.a, g.lda, g.M, g.K, g.a_zero, any_zb && !k.zero_points_in_kernel, abuf, sums, &P);
  const bool need_colsum = P.za != 0 && !k.zero_points_in_kernel;
  const QGemvKernel* gemv = qgemm_kernels().gemv;
  if (gemv && bits == 8 && k.kind == QKind::u8s8 && k.kgroup == 4 && g.M <= kQGemvMaxM) {
    qgemm_gemv(*gemv, g, P);  // small M: B read once, unpacked
    return;
  }
  const size_t b_esz = g.b_type == QType::s16 ? 2 : 1;
  if (g.ldb * b_esz <= 4096) {
    // Rows of B within a page: each task packs the panel it needs right before using it (a column strip
    // of B, K lines on at most K pages), so the packed panel is read from L1.
    P.packed = nullptr;
    P.colsum = nullptr;
    P.b_type = g.b_type;
    P.b = g.b;
    P.ldb = g.ldb;
  } else {
    // Long rows: a column strip would touch a page per row (TLB misses on every line): pack all of B in
    // row sweeps first.
    thread_local AlignedBuffer<uint8_t> packed;
    thread_local AlignedBuffer<int32_t> colsum;
    const size_t panels = qgemm_ceil_div(g.N, size_t(k.mr));
    packed.resize(std::max<size_t>(panels * qgemm_panel_bytes(k, g.K), 1));
    if (need_colsum) colsum.resize(panels * size_t(k.mr));
    qgemm_pack_all(k, g.b_type, g.b, g.ldb, g.K, g.N, packed.data(), need_colsum ? colsum.data() : nullptr);
    P.packed = packed.data();
    P.colsum = colsum.data();
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
  thread_local AlignedBuffer<uint8_t> abuf;
  thread_local AlignedBuffer<int32_t> sums;
  P.za = qgemm_prepare_a(k, x_type, x, ldx, M, K_, x_zero, false, abuf, sums, &P);
  thread_local AlignedBuffer<uint8_t> repacked;
  thread_local AlignedBuffer<int32_t> recolsum;
  if (&k == kernel_) {
    P.packed = packed_.data();
    P.colsum = colsum_.data();
  } else {  // the cap changed since packing: pack per call from the kept weights
    const size_t panels = qgemm_ceil_div(N_, size_t(k.mr));
    repacked.resize(std::max<size_t>(panels * qgemm_panel_bytes(k, K_), 1));
    recolsum.resize(panels * size_t(k.mr));
    qgemm_pack_all(k, QType::s8, raw_.data(), N_, K_, N_, repacked.data(), recolsum.data());
    P.packed = repacked.data();
    P.colsum = recolsum.data();
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
