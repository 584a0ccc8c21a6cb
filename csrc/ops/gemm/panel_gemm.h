// FP32 GEMM over weights packed once as full-K panels, with a post-op hook per group of panels.
// Row-major, like NumPy: C[M, N] = epilogue(X[M, K] W[N, K]^T), X given as one pointer per row.
//
// Unlike PackedF32Gemm (K blocks of kc, partial sums stored through C), every tile here runs the
// whole K in one micro-kernel call, so
//   * a tile's outputs are final when the kernel stores them: a post-op can consume a group of tiles
//     right away, while they are in L1 (the LSTM cell update; later, conv post-ops);
//   * each output element is one FMA chain in K order whatever M, the tile's position, the task split
//     or the thread count: a row of C is bit-identical whichever other rows are computed with it.
// The price: the A panel (MR x K) is read from L2 rather than L1 when K is large; the B rows are read in
// place (no packed copy), which suits the small M of a recurrent step. A lone row (M = 1, or the last of a
// column group) runs the group's panels as one GEMV instead (kernels/f32_gemv.h rows_panels): the same bits.
#pragma once
#include <cstddef>
#include <vector>

#include "core/buffer.h"
#include "kernels/f32_gemm.h"

namespace nnkern {

// Rows row0 .. row0 + rows - 1 of W (rows <= MR) in one panel.
struct PanelRows {
  size_t row0, rows;
};

// Consecutive panels of MR rows (the last one shorter): W's rows in their own order.
std::vector<PanelRows> contiguous_panels(size_t N, size_t mr);

// Rows of W packed for one micro-kernel: panel q holds A(i, p) = W(span(q).row0 + i, p) at
// panel(q)[p * MR + i], zero-padded to MR rows. Panels are visited in list order, `group` at a time
// (the panels a post-op reads together; the list's length is a multiple of it).
class F32FullKPanels {
 public:
  F32FullKPanels(const F32GemmKernel& kernel, const float* w, size_t ldw, size_t N, size_t K,
                 std::vector<PanelRows> panels, size_t group);
  F32FullKPanels(F32FullKPanels&&) = default;

  const F32GemmKernel& kernel() const { return *kernel_; }
  size_t N() const { return N_; }
  size_t K() const { return K_; }
  size_t group() const { return group_; }
  size_t groups() const { return spans_.size() / group_; }
  size_t panel_count() const { return spans_.size(); }
  const PanelRows& span(size_t q) const { return spans_[q]; }
  const float* panel(size_t q) const { return data_.data() + q * size_t(kernel_->mr) * K_; }
  const std::vector<PanelRows>& spans() const { return spans_; }
  void unpack(float* w, size_t ldw) const;  // back to W[N, K] (rows in no panel are left alone)

 private:
  const F32GemmKernel* kernel_;
  size_t N_, K_, group_;
  std::vector<PanelRows> spans_;
  AlignedBuffer<float> data_;
};

// Called after the tiles of group `group` are stored for rows r0 .. r0 + nr - 1 of C (nr <= the kernel's
// NR: one column group of tiles, just written, so still in L1). It may read and write C in those rows
// and the group's columns, and anything else that no other group touches.
using PanelPostOp = void (*)(void* ctx, size_t group, size_t r0, size_t nr);

struct PanelGemmArgs {
  size_t M = 0;
  const float* const* x = nullptr;  // x[r]: row r of X, K contiguous floats
  float* c = nullptr;               // C[r, n] at c[r * ldc + n], n = W's row index
  size_t ldc = 0;
  F32Epilogue ep;                   // bias indexed by W's row; beta != 0 reads C first; no c_rows, no tile hook
  PanelPostOp post = nullptr;       // optional
  void* post_ctx = nullptr;
  // Visit the groups last to first. Alternating the direction between consecutive calls on the same
  // weights starts each call on the panels the previous one read last, which are still in L2: a
  // weight a little larger than L2 then streams partly from L2 instead of entirely from L3.
  bool reverse = false;
};

// Tasks split the rows into L2-sized blocks and the groups into contiguous ranges (results do not
// depend on the split). Runs on the thread pool (inline when called from inside a parallel_for task).
void panel_gemm(const F32FullKPanels& w, const PanelGemmArgs& a);

}  // namespace nnkern
