// FP32 skinny-GEMM kernels, shared contract of every ISA. Baseline header: no intrinsics.
//
// Two shapes where the 48x8 / 16x6 register tile of f32_gemm.h wastes most of its work:
//   * M = 1 (GEMV): the tile runs with one broadcast column (3 or 2 dependent FMA chains) and walks
//     B's K rows with a leading-dimension stride per panel.
//   * small N (N <= dot_nr): vector lanes run along N, so a 48-wide panel is mostly padding.
// Row-major terms here (NumPy's C[M, N] = A[M, K] B[K, N]), unlike f32_gemm.h.
//
// rows ("axpy form", B rows streamed contiguously):
//     acc[j] += x[p * incx] * b[p * ldb + j]   for p = 0 .. k-1 in order, j < n,
//   one FMA per term, in p order: each acc[j] is one sequential FMA chain whatever the blocking
//   (n, column chunks, K blocks of the caller), so results never depend on the thread count.
// rows_m (optional): the rows form for m <= rows_mr rows of x at once, B read once for all of them:
//     acc[i * ldacc + j] += x[i * x_row + p * incx] * b[p * ldb + j]   i < m, j < n, p in order,
//   each element the same FMA chain as rows gives it for its row alone (bit-identical to m calls of rows).
// rows_panels (optional): the rows form over np consecutive panels of a packed operand, each pw columns wide and
//   its rows pw floats apart (f32_gemm.h's packed A panels, read as B here), panel q at b + q * panel_stride:
//     acc[q * pw + j] += x[p] * b[q * panel_stride + p * pw + j]   q < np, j < pw, p in order,
//   bit-identical to np calls of rows(pw, k, x, 1, panel q, pw, acc + q * pw), and so to f32_gemm's tile on one
//   column of B. Why it exists: one panel is only pw / L FMA chains (2 on AVX2), latency-bound; the panels'
//   chains interleaved per row block keep the FMA ports busy (a batch-1 Linear, an LSTM step at batch 1).
// store: c[j] = epilogue(acc[j]) (bias[j] per column; beta == 0 never reads c), j < n.
// dot ("dot-product form", vectorized along K):
//     C(i, j) = epilogue(sum_p a[i * lda + p] * bt[j * ldbt + p]),  c[i * ldc + j], bias[j],
//   i < m <= dot_mr, j < n <= dot_nr, any k >= 0. Each (i, j) keeps per-lane partial sums over
//   p = lane, lane + W, ... (W = vector width) then adds the lanes in a fixed order, so a result
//   does not depend on m, n or where the tile sits. The K tail is a masked load: no element past
//   a[i * lda + k - 1] or bt[j * ldbt + k - 1] is read.
#pragma once
#include <cstddef>

#include "kernels/f32_gemm.h"  // F32Epilogue

namespace nnkern {

using F32GemvRowsFn = void (*)(size_t n, size_t k, const float* x, size_t incx, const float* b, size_t ldb,
                               float* acc);
using F32GemvRowsMFn = void (*)(size_t m, size_t n, size_t k, const float* x, size_t x_row, size_t incx,
                                const float* b, size_t ldb, float* acc, size_t ldacc);
using F32GemvRowsPanelsFn = void (*)(size_t np, size_t pw, size_t k, const float* x, const float* b,
                                     size_t panel_stride, float* acc);
using F32GemvStoreFn = void (*)(size_t n, const float* acc, float* c, const F32Epilogue* ep);
using F32GemvDotFn = void (*)(size_t m, size_t n, size_t k, const float* a, size_t lda, const float* bt, size_t ldbt,
                              float* c, size_t ldc, const F32Epilogue* ep);

struct F32GemvKernel {
  const char* name;
  F32GemvRowsFn rows;
  F32GemvStoreFn store;
  int dot_mr, dot_nr;
  F32GemvDotFn dot;
  F32GemvRowsMFn rows_m = nullptr;  // or null: the driver runs rows once per row of x
  int rows_mr = 0;
  // Up to this many rows of x, auto runs rows_m whatever B's size (a measured limit, ops/gemm/gemv.cc); beyond
  // it, and with 0, only for up to 8 rows against a B larger than L2.
  int rows_m_auto = 0;
  F32GemvRowsPanelsFn rows_panels = nullptr;  // or null: the driver runs rows once per panel
  // Up to this many outputs (C's columns) auto takes the dot path, a measured limit (ops/gemm/gemv.cc); 0: dot_nr.
  int dot_auto_n = 0;
};

extern const F32GemvKernel f32_gemv__scalar;      // scalar reference: the oracle and the fallback
extern const F32GemvKernel f32_gemv_3x4__avx2;
extern const F32GemvKernel f32_gemv_3x8__avx512;
extern const F32GemvKernel f32_gemv_3x4__neon;

}  // namespace nnkern
