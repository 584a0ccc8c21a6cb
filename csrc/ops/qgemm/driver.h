// The integer GEMM driver's plan and tile loop (seeds I1, I2, I6, I12, Q1, Q3): blocking, threading and
// the K blocks with partial sums around a micro-kernel (kernels/qgemm.h), from already prepared operands.
// Kernel terms: "m" runs along N (output channels, vector lanes), "n" along M (rows of A, broadcasts).
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/buffer.h"
#include "kernels/qgemm.h"
#include "ops/qgemm/qgemm.h"

namespace nnkern {

// A thread per this many operations of the tiles: below it the wake-up outweighs the half (docs/performance.md:
// "qgemm: threads").
constexpr double kQGemmMinOpsPerThread = 4e5;

struct QPlan {
  const QGemmKernel* kern;
  size_t M, N, K;
  size_t kc;               // K block (a multiple of G); >= K: whole-K kernels
  // Broadcast side: row m of A as the kernel reads it.
  const uint8_t* a;
  size_t a_row_bytes;
  // Nonzero: each task first copies its rows of A (K bytes each) onto rows this many bytes apart (a multiple
  // of the kernel's row_align) in its scratch, and reads them there: aligned, and in the cache of the core
  // that reads them (a copy shared by the tasks would sit in other cores' caches).
  size_t a_copy_row_bytes;
  // A's rows as the kernel reads them (A, its shifted copy or the tasks' copies) hold zeros from K up to the
  // kernel's row_align, so a kernel may read the reduction's tail step whole (QEpilogue::k_padded).
  bool a_rows_padded;
  const int32_t* row_sum;  // [M] or null (no b zero point)
  int32_t za;              // effective (shifted) A zero point
  // Weights: packed panels + column sums ([N padded], or null when za == 0); or, with packed == null, the
  // raw K x N matrix, each task packing the panel it is about to use into an L1-sized buffer.
  const uint8_t* packed;
  size_t packed_slack;     // bytes readable past the last panel (qgemm_panel_slack or 0)
  const int32_t* colsum;
  QType b_type;
  const void* b;
  size_t ldb;
  const int32_t* b_zero;   // [N padded] or null
  QOut out;
  void* c;
  size_t ldc, c_elem;
  const float* scale;
  const float* bias;
  bool relu;
  float lo, hi;
  // If not null, the final tiles go to a per-task buffer (ld MR) instead of c, and each panel's tiles are then
  // handed to hook (kernels/qgemm.h QTileHook; i0 / j0: the tile's channel and row in this plan): fused stages.
  QTileHook hook;
  void* hook_ctx;
  // If not null (and hook null): called when a task has stored its block, channels [i0, i1) x rows [j0, j1) at c,
  // while it is in the task's cache (a convolution's output stage: ops/qconv/stage.h QConvStage::stored).
  void (*stored)(void* ctx, size_t i0, size_t i1, size_t j0, size_t j1);
  void* stored_ctx;
};

// Runs the plan: tasks of (channels x rows) over the thread pool (ops/gemm/tasks.h).
void qgemm_execute(const QPlan& P);

// The K block for k and K: whole K for a whole_k kernel (AMX) or while an MR x K panel fits half of L1d
// (seed Q3), else balanced blocks that do (or the set_qgemm_kc override).
size_t qgemm_choose_kc(const QGemmKernel& k, size_t K);

// Whether a task with k's prepacked panels of depth K runs rows outer (QGemmKernel::rows_outer, with its NR
// rows of K within two thirds of L1d).
bool qgemm_rows_outer_fits(const QGemmKernel& k, size_t K);

// Prepares the broadcast operand into P (a, a_row_bytes, row_sum): int8 activations shifted to uint8 for the
// u8s8 kernels (seed I6) and uint8 ones to int8 for the s8s8 kernels (x ^ 0x80 both ways), 8-bit
// activations widened to int16 for the s16 kernels, and the row sums (of the values the kernel reads) when
// a b zero point needs them, into buf / sums (scratch of the sizes qgemm_prepare_a_bytes gives). Returns the
// effective zero point. align_rows (the GEMMs; a convolution indexes its input rows itself): for a kernel
// with a row_align, a copy shifted for the kernel lies on aligned rows, and A whose rows do not start on
// that alignment is copied onto rows that do, by each task (QPlan::a_copy_row_bytes).
int32_t qgemm_prepare_a(const QGemmKernel& k, QType a_type, const void* a, size_t lda, size_t M, size_t K, int32_t za,
                        bool need_row_sums, uint8_t* buf, int32_t* sums, QPlan* P, bool align_rows = false);
// Whether a GEMM with N output channels copies misaligned A onto aligned rows (align_rows above): only where
// A is read by many panels: with few, the copy costs more than the split loads of a few passes. The rule is on
// N, not on a task's share of it (docs/performance.md: "qgemm: realigning A").
bool qgemm_realign_pays(const QGemmKernel& k, size_t N);
struct QPrepareBytes {
  size_t buf, sums;
};
QPrepareBytes qgemm_prepare_a_bytes(const QGemmKernel& k, QType a_type, size_t M, size_t K, bool need_row_sums,
                                    bool align_rows = false);

}  // namespace nnkern
