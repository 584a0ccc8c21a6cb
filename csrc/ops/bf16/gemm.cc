// The packed bf16 GEMM: weights in the dispatched kernel's panels, activations rounded to bf16 rows per call, tasks
// of one panel against a block of rows that stays in L2.
#include <algorithm>
#include <stdexcept>

#include "core/checked.h"
#include "core/isa.h"
#include "core/kernel_family.h"
#include "core/threadpool.h"
#include "core/workspace.h"
#include "kernels/bf16.h"
#include "kernels/bf16_convert_list.h"
#include "ops/bf16/bf16.h"

namespace nnkern {

const KernelFamily<Bf16GemmKernel>& bf16_gemm_family() {
  static const KernelFamily<Bf16GemmKernel> family(
      "bf16_gemm", "bf16_gemm", {NNKERN_BF16_GEMM_LIST(NNKERN_KERNEL_ENTRY)},
      [](const Bf16GemmKernel& k) { return KernelInfo{"", Isa::scalar, k.mr, k.nr, k.kgroup}; });
  return family;
}
NNKERN_REGISTER_FAMILY(bf16_gemm_family)

Bf16Operand Bf16Operand::matrix(const float* data, size_t ld, bool trans) {
  Bf16Operand op;
  op.data = data;
  op.rs = trans ? 1 : ld;
  op.cs = trans ? ld : 1;
  return op;
}

Bf16Operand Bf16Operand::matrix(const uint16_t* bits, size_t ld, bool trans) {
  Bf16Operand op = matrix(static_cast<const float*>(nullptr), ld, trans);
  op.data = bits;
  op.is_bf16 = true;
  return op;
}

const void* Bf16Operand::row(size_t r) const {
  if (row_ptrs) return row_ptrs[r];
  return static_cast<const char*>(data) + r * rs * (is_bf16 ? sizeof(uint16_t) : sizeof(float));
}

Bf16Operand Bf16Operand::from_row(size_t r0) const {
  Bf16Operand op = *this;
  if (row_ptrs)
    op.row_ptrs = row_ptrs + r0;
  else
    op.data = row(r0);
  return op;
}

float Bf16Operand::f32(size_t r, size_t c) const {
  return is_bf16 ? bf16_to_f32(static_cast<const uint16_t*>(row(r))[c * cs]) : static_cast<const float*>(row(r))[c * cs];
}

uint16_t Bf16Operand::bits(size_t r, size_t c) const {
  return is_bf16 ? static_cast<const uint16_t*>(row(r))[c * cs] : f32_to_bf16(static_cast<const float*>(row(r))[c * cs]);
}

namespace {

constexpr size_t kMaxNr = 32;  // the widest tile of the family

size_t pairs(size_t K) { return K / 2 + K % 2; }

// K of a packed panel row for kernel k: the kq pairs in whole groups of k.kgroup.
size_t panel_k(const Bf16GemmKernel& k, size_t kq) { return ceil_div(2 * kq, size_t(k.kgroup)) * size_t(k.kgroup); }

// Rows [begin, end) of op rounded to bf16, as rows of 2 * kq bits, or of their float32 values (an odd K padded with
// a zero): the B operand of a kernel without b_f32, or with it.
void round_rows(const Bf16Operand& op, size_t K, size_t kq, size_t begin, size_t end, uint16_t* out) {
  const Bf16ConvertKernel& cvt = bf16_convert_family().dispatched();
  for (size_t r = begin; r < end; ++r) {
    uint16_t* row = out + r * 2 * kq;
    if (op.cs == 1 && !op.is_bf16) {
      cvt.to_bits(static_cast<const float*>(op.row(r)), row, K);
    } else {
      for (size_t k = 0; k < K; ++k) row[k] = op.bits(r, k);
    }
    if (K % 2) row[K] = 0;
  }
}
void round_rows(const Bf16Operand& op, size_t K, size_t kq, size_t begin, size_t end, float* out) {
  const Bf16ConvertKernel& cvt = bf16_convert_family().dispatched();
  for (size_t r = begin; r < end; ++r) {
    float* row = out + r * 2 * kq;
    if (op.cs == 1 && !op.is_bf16) {
      cvt.to_values(static_cast<const float*>(op.row(r)), row, K);
    } else if (op.cs == 1) {
      cvt.widen(static_cast<const uint16_t*>(op.row(r)), row, K);
    } else {
      for (size_t k = 0; k < K; ++k) row[k] = bf16_to_f32(op.bits(r, k));
    }
    if (K % 2) row[K] = 0.0f;
  }
}

// X's rows as the kernel reads them, into `rows` (M x 2 kq elements of T), threaded when large.
template <typename T>
void rows_for_kernel(const Bf16Operand& x, size_t M, size_t K, size_t kq, T* rows) {
  if (checked_mul(M, K) < (size_t(1) << 16))
    round_rows(x, K, kq, 0, M, rows);
  else
    parallel_for_ranges(M, [&](size_t begin, size_t end) { round_rows(x, K, kq, begin, end, rows); });
}

size_t l2_bytes() { return cpu_features().l2 ? cpu_features().l2 : 256 * 1024; }

}  // namespace

void PackedBf16Gemm::pack(const Bf16GemmKernel& k, const Bf16Operand& w, AlignedBuffer<uint16_t>& out) const {
  const size_t mr = size_t(k.mr), g = size_t(k.kgroup), kp = panel_k(k, kq_), panels = ceil_div(N_, mr);
  out.resize(std::max<size_t>(checked_mul(panels, mr, kp), 1));
  parallel_for(panels, [&](size_t p) {
    uint16_t* panel = out.data() + p * mr * kp;
    for (size_t t = 0; t < kp / g; ++t)
      for (size_t i = 0; i < mr; ++i)
        for (size_t h = 0; h < g; ++h) {
          const size_t n = p * mr + i, kk = g * t + h;
          panel[t * g * mr + g * i + h] = n < N_ && kk < K_ ? w.bits(n, kk) : uint16_t(0);
        }
  });
}

PackedBf16Gemm::PackedBf16Gemm(const Bf16Operand& w, size_t N, size_t K)
    : kernel_(&bf16_gemm_family().dispatched()), N_(N), K_(K), kq_(pairs(K)) {
  pack(*kernel_, w, packed_);
}

void PackedBf16Gemm::run(size_t M, const Bf16Operand& x, float* c, size_t ldc, const F32Epilogue& ep) const {
  if (M == 0 || N_ == 0) return;
  const Bf16GemmKernel& k = bf16_gemm_family().dispatched();
  const uint16_t* panels = packed_.data();
  AlignedBuffer<uint16_t> repacked;
  if (&k != kernel_) {  // the cap changed since packing: this layout belongs to another kernel's tile
    const size_t mr0 = size_t(kernel_->mr), g0 = size_t(kernel_->kgroup), kp0 = panel_k(*kernel_, kq_);
    AlignedBuffer<uint16_t> rows(std::max<size_t>(checked_mul(N_, 2 * kq_), 1));
    for (size_t n = 0; n < N_; ++n)
      for (size_t kk = 0; kk < 2 * kq_; ++kk)
        rows.data()[n * 2 * kq_ + kk] = packed_.data()[(n / mr0) * mr0 * kp0 + (kk / g0) * g0 * mr0 + g0 * (n % mr0) + kk % g0];
    pack(k, Bf16Operand::matrix(rows.data(), 2 * kq_), repacked);
    panels = repacked.data();
  }
  if (size_t(k.nr) > kMaxNr) throw std::logic_error("bf16 GEMM: tile wider than kMaxNr");
  const size_t mr = size_t(k.mr), nr = size_t(k.nr), n_panels = ceil_div(N_, mr), kp = 2 * kq_;
  const size_t kpanel = panel_k(k, kq_);

  // X's rows as the kernel reads them: in place where they already are (bf16 bits, pairs contiguous), else
  // rounded (as bits, or as float32 values for a b_f32 kernel).
  const size_t elem = k.b_f32 ? sizeof(float) : sizeof(uint16_t);
  const bool in_place = !k.b_f32 && x.is_bf16 && x.cs == 1 && K_ % 2 == 0 && !x.row_ptrs;
  // Blocks of rows that stay in half of L2, made smaller while there are fewer tasks than threads can share.
  size_t mb = std::max(nr, (l2_bytes() / 2) / std::max<size_t>(kp * elem, 1) / nr * nr);
  const size_t threads = size_t(get_num_threads());
  while (mb > nr && ceil_div(M, mb) * n_panels < 2 * threads) mb = std::max(nr, mb / 2 / nr * nr);
  const size_t n_blocks = ceil_div(M, mb);
  // Panels [p0, p1) against block blk, whose row r is at rows + (r - first) * row_bytes.
  const auto block = [&](size_t blk, size_t p0, size_t p1, const char* rows, size_t row_bytes, size_t first) {
    const void* b[kMaxNr];
    const size_t end = std::min(M, (blk + 1) * mb);
    for (size_t p = p0; p < p1; ++p) {
      const uint16_t* a = panels + p * mr * kpanel;
      const size_t m = std::min(mr, N_ - p * mr);
      F32Epilogue tep = ep;  // the bias of this panel's features
      if (ep.bias) tep.bias = ep.bias + p * mr;
      for (size_t r = blk * mb; r < end; r += nr) {
        const size_t n = std::min(nr, end - r);
        for (size_t j = 0; j < n; ++j) b[j] = rows + (r + j - first) * row_bytes;
        k.run(m, n, kq_, a, b, c + r * ldc + p * mr, ldc, &tep);
      }
    }
    if (k.finish) k.finish();
  };
  if (!in_place && n_blocks >= 2 * threads) {
    // Enough blocks for every thread: each task rounds its own block into its thread's scratch (still in cache
    // for the panels that follow) and runs every panel on it, with no pass over all of X first.
    parallel_for_scratch(n_blocks, checked_mul(mb, kp, elem), [&](size_t blk, void* scratch) {
      const size_t r0 = blk * mb, rows = std::min(M, r0 + mb) - r0;
      const Bf16Operand xb = x.from_row(r0);
      if (k.b_f32)
        round_rows(xb, K_, kq_, 0, rows, static_cast<float*>(scratch));
      else
        round_rows(xb, K_, kq_, 0, rows, static_cast<uint16_t*>(scratch));
      block(blk, 0, n_panels, static_cast<const char*>(scratch), kp * elem, r0);
    });
    return;
  }
  Workspace ws(in_place ? 0 : checked_mul(M, kp, elem));
  const char* xrows = static_cast<const char*>(x.data);
  size_t row_bytes = x.rs * elem;
  if (!in_place) {
    if (k.b_f32)
      rows_for_kernel(x, M, K_, kq_, ws.as<float>());
    else
      rows_for_kernel(x, M, K_, kq_, ws.as<uint16_t>());
    xrows = ws.as<char>();
    row_bytes = kp * elem;
  }

  // Tasks: one panel against a block of rows.
  parallel_for_2d(n_blocks, n_panels, [&](size_t blk, size_t p) { block(blk, p, p + 1, xrows, row_bytes, 0); });
}

void bf16_gemm(size_t M, size_t N, size_t K, const Bf16Operand& a, const Bf16Operand& b, float* c, size_t ldc,
               const F32Epilogue& ep) {
  if (M == 0 || N == 0) return;
  Bf16Operand w = b;  // W(n, k) = B(k, n)
  std::swap(w.rs, w.cs);
  PackedBf16Gemm(w, N, K).run(M, a, c, ldc, ep);
}

}  // namespace nnkern
