// Integer GEMM micro-kernel contract (u8 x s8 and s16 x s16 -> s32), shared by every ISA. Baseline
// header: no intrinsics.
//
// Terms are column-major, as for the FP32 kernels (kernels/f32_gemm.h): a kernel computes one tile
//   C(m x n) = epilogue(sum over taps t < ks of A_t(m x k) * B_t(k x n)),   m <= MR, n <= NR, any k >= 0,
// with A = the packed weights (vector lanes run along output channels i) and B = the activations (one
// broadcast per output row j). The row-major driver maps C[M, N] = X[M, K] W[K, N] onto this with
// A = W^T and B = X^T, so tile row i is an output channel and tile column j a row of X.
//
// Indirect form (QNNPACK q8conv / XNNPACK igemm): ks taps, reduced over all ks x k in registers, the
// epilogue applied once. ks = 1 with zero = null and b_offset = 0 is the plain GEMM tile: one template per
// ISA serves both.
//
// Products are summed in groups of G consecutive k (G = 4 for u8 x s8: VPDPBUSD's 4-byte groups; G = 2 for
// s16 x s16: VPDPWSSD / VPMADDWD pairs; G = 8 for USMMLA; G = 1 for the NEON widening kernels; the "cG" of
// a kernel's name), and A is packed in that interleaved layout, each tap padded to whole groups:
//   A_t(i, p) = a[(t * kg + p / G) * MR * G + i * G + p % G],   kg = ceil(k / G)   (int8, or int16 for s16)
//   (s16w8: int8, each vector's worth loaded and sign-extended to the int16 pairs it multiplies)
// i.e. ks * round_up(k, G) rows of one panel of MR channels, zero-padded to MR channels and, per tap, to a
// multiple of G in k (so a kernel may always load whole vectors of A, and tap t starts at a whole group).
// With ks = 1 this is the GEMM panel. Each output channel's G weights of one group are contiguous.
//   B_t(p, j) = row(t, j)[p]   with b[t * NR + j] (ks x NR pointers, tap-major, stride NR whatever n is;
//                        entries j >= n are never read) and
//                        row(t, j) = b[t * NR + j] == zero ? zero : (const char*) b[t * NR + j] + b_offset.
//                        An entry equal to `zero` is a padding tap and reads the shared zero row as is; every
//                        other entry is moved by b_offset bytes, so an indirection buffer built once per
//                        input shape (pointers relative to a null or a nominal base) serves every batch /
//                        input address. The kernel reads exactly row(t, j)[0 .. k-1] (uint8 / int8 / int16 by
//                        the kernel's kind). zero may be null when no entry uses it.
//   The zero row holds the input zero point in the kernel's operand domain (uint8 za for u8s8, int8 za - 128
//   for s8s8 after the driver's shift, za for s16), k elements: a padding tap then contributes exactly what a
//   real input of value za (real value 0) would. The epilogue's corrections see the ks * k products as one
//   reduction of length K = ks * k: row_sum[j] must be the sum of all ks * k values column j reads, the
//   zero-row values included (za * k per padding tap), and col_comp the K * za * zb - za * colsum of the
//   ks * k weights; then (a - za)(w - zb) summed over every tap is exact, padding taps adding 0. The
//   QNNPACK-style kernels (zero_points_in_kernel) subtract x_zero = za from every element, the zero row's
//   too, so padding adds 0 there with no sums at all.
//   C(i, j) = c[j * ldc + i]   (elements of the output type; only the m x n tile is written), or, with
//                        QEpilogue::c_rows, at c_rows[j] + i.
//
// Accumulation is modulo 2^32 (VPDPBUSD / VPDPWSSD / VPMADDWD + VPADDD all wrap, none saturates in the
// ways used here), so the result is exact whenever the true value fits int32: the Python layer checks
// that bound before calling.
#pragma once
#include <cstddef>
#include <cstdint>

namespace nnkern {

enum class QOut : int { i32 = 0, f32 = 1, u8 = 2, s8 = 3 };
// Bytes per output element of each kind.
constexpr size_t qout_elem_size(QOut o) { return o == QOut::i32 || o == QOut::f32 ? 4 : 1; }

// Applied as the tile is stored, in registers (seed I12). With acc the raw sum of A(i,p) B(p,j)
// (plus c_in(i, j) when given):
//   v = acc + col_comp[i] - b_zero[i] * row_sum[j]                (int32, modulo 2^32)
//   i32:   C = relu ? max(v, 0) : v
//   f32:   C = fma(float(v), scale[i], bias[i]), then max(C, 0) if relu
//   u8/s8: C = (int) rint(min(max(fma(float(v), scale[i], bias[i]), lo), hi))   (ties to even;
//          a ReLU is folded into lo by the caller: lo = max(lo, output zero point))
// col_comp / b_zero / scale / bias may be null (0 / no term / - / 0). The per-row arrays (col_comp,
// b_zero, scale, bias) are read for ceil(m / lanes) * lanes entries: callers pad them to MR.
// row_sum is read for j < n.
// For the convolutions (fused pixel shuffle and pooling), both unused (null) by the plain GEMM, each one
// test of a pointer per tile:
//   c_rows: output column j goes to c_rows[j] (element i at c_rows[j] + i) instead of c + j * ldc.
//   hook:   called once per tile, after the tile is stored, with its position (tile_i, tile_j: set by the
//           caller per call, passed through) and where its values now are.
struct QTile {
  size_t i0, j0;               // QEpilogue::tile_i / tile_j
  size_t m, n;
  QOut out;
  void* c;                     // C(i, j) at c + (j * ldc + i) elements ...
  size_t ldc;
  void* const* c_rows;         // ... or, when not null, at c_rows[j] + i
};
using QTileHook = void (*)(void* ctx, const QTile& tile);

struct QEpilogue {
  const int32_t* col_comp = nullptr;
  const int32_t* b_zero = nullptr;
  const int32_t* row_sum = nullptr;
  QOut out = QOut::i32;
  bool relu = false;
  const float* scale = nullptr;
  const float* bias = nullptr;
  float lo = 0.0f, hi = 0.0f;
  // If not null, the accumulators start from c_in[j * ld_in + i] (int32, only the m x n tile is read)
  // instead of 0: the driver's K blocks pass their partial sums on this way.
  const int32_t* c_in = nullptr;
  size_t ld_in = 0;
  // Kernels with QGemmKernel::zero_points_in_kernel only (QNNPACK style, seed Q1): the products are
  // (A(i, p) - w_zero[i]) (B(p, j) - x_zero), both differences formed before widening, so the driver needs
  // no row/column sums. x_zero in [0, 255]; w_zero in [-128, 127], padded like the per-row arrays (null = 0).
  // Other kernels ignore both (the driver then leaves them at 0 / null).
  int32_t x_zero = 0;
  const int32_t* w_zero = nullptr;
  void* const* c_rows = nullptr;  // [n] output column pointers, or null: c + j * ldc
  QTileHook hook = nullptr;       // or null
  void* hook_ctx = nullptr;
  size_t tile_i = 0, tile_j = 0;  // passed to the hook
  // The output is larger than the caches: a kernel may write it with non-temporal stores (no read for
  // ownership, nothing evicted); its QGemmKernel::finish then fences them.
  bool stream_out = false;
  // The reduction's tail may be read whole (a kernel with a kstep, AMX): each B column holds zeros from k up to
  // the next multiple of kstep, readable, and the packed A is readable for MR * kstep bytes past its end (the
  // values there are never used: they meet those zeros). Set only by the GEMM driver, for the plain form.
  bool k_padded = false;
  // Each tap's k % G tail may be read as a whole group: every B column, and the zero row, is readable for G - 1
  // elements past its k values, whose products meet the packed A's zero padding of the group. Set by the indirect
  // convolution where its input allows it (ops/qconv/indirect.cc: 3-channel images otherwise assemble each tap's
  // last word byte by byte); a kernel may ignore it.
  bool k_overread = false;
};

// One signature for the GEMM (ks = 1, zero = null, b_offset = 0) and the indirect (convolution) tile; see
// the layouts above. b holds ks * NR pointers.
using QGemmUkernel = void (*)(size_t m, size_t n, size_t k, size_t ks, const void* a, const void* const* b,
                              const void* zero, size_t b_offset, void* c, size_t ldc, const QEpilogue* ep);

// The epilogue of a tile whose channels start i rows into ep's: the per-row arrays advanced by i.
inline QEpilogue qepilogue_at(QEpilogue ep, size_t i) {
  if (ep.col_comp) ep.col_comp += i;
  if (ep.b_zero) ep.b_zero += i;
  if (ep.w_zero) ep.w_zero += i;
  if (ep.scale) ep.scale += i;
  if (ep.bias) ep.bias += i;
  return ep;
}

// `panels` whole panels of MR channels over the same n columns in one call: panel p (its packed A at
// a + p * a_panel_bytes) is the tile run(MR, n, k, ks, ...) would compute for channels p * MR .. p * MR + MR - 1,
// read from the epilogue's per-row arrays and written to C (c + p * MR elements along each column, or c_rows[j]
// + p * MR) at those channels. The layer's short reductions (MobileNet's expand layers: k = 16-32) spent as much
// time in each tile's call and set-up as in its products. Takes no tile hook (ep->hook null).
using QGemmPanelsUkernel = void (*)(size_t panels, size_t n, size_t k, size_t ks, const void* a, size_t a_panel_bytes,
                                    const void* const* b, const void* zero, size_t b_offset, void* c, size_t ldc,
                                    const QEpilogue* ep);

// Element types of a kernel's operands: activations (B) x weights (A).
enum class QKind : int {
  u8s8 = 0,  // uint8 activations x int8 weights (VPDPBUSD, USMMLA, the NEON widening kernel)
  s8s8 = 1,  // int8 x int8 (SDOT): the driver shifts uint8 activations to int8 (x ^ 0x80, zero point - 128)
  s16 = 2,   // int16 x int16 (8-bit data widened by the driver)
  s16w8 = 3,  // int16 x int16 with the weights packed as int8, widened by the kernel as it loads them (half the
              // bytes of s16's panels; the driver widens the activations as for s16)
};

struct QGemmKernel {
  const char* name;  // = its symbol = its name in cpu_info() and test ids: kind_gemm_MRxNRcG__isa
  int mr, nr;
  int kgroup;  // G: k values per packed group (4: VPDPBUSD / SDOT bytes, 8: USMMLA, 2: int16 pairs, 1: none)
  QGemmUkernel run;
  QKind kind = QKind::u8s8;
  bool zero_points_in_kernel = false;  // subtracts QEpilogue::x_zero / w_zero itself (see there)
  int kstep = 0;  // k values per inner-loop iteration, if more than kgroup: the tests sweep k past it
  // Kernels that keep per-thread state between calls (AMX's tile configuration): called by a driver on
  // each thread once its loop of tiles ends, to drop that state. Null for the others. Correctness never
  // depends on it (the AMX kernel checks its configuration on every call).
  void (*finish)() = nullptr;
  // Measured limits below which the best kernel of the levels below runs instead (the dispatch's choice,
  // ops/qgemm/qgemm.h qgemm_kernel): a reduction per tile (ks * k) under min_depth, or k per tap under min_k.
  int min_depth = 0, min_k = 0;
  // The column sums of one packed panel of `groups` groups (ks = 1), all MR channels, into cs (set, modulo
  // 2^32), where the kernel's ISA does it faster than the baseline loop (ops/qgemm/pack.h). Or null.
  void (*panel_sums)(const void* panel, size_t groups, uint32_t* cs) = nullptr;
  // Runs all of K in one call wherever it can (ops/qgemm/driver.h qgemm_choose_kc): for kernels whose
  // partial sums cost more than streaming a panel deeper than L1 (AMX: tile stores and reloads).
  bool whole_k = false;
  // Work per thread (2 M N K ops) below which the GEMM driver uses fewer threads; 0: its default
  // (ops/qgemm/driver.h kQGemmMinOpsPerThread). A measured limit, where a second thread costs more than it gives.
  double min_ops_per_thread = 0;
  // Activation rows loaded whole, 64 bytes at a time (AMX tileloadd): where A's rows are not aligned to
  // this, the GEMMs with enough output channels to repay the copy (ops/qgemm/driver.h qgemm_realign_pays)
  // copy them onto rows that are, since a row split across two cache lines costs both lines on every load
  // (numpy's large arrays start 16 bytes into a page). 0: any alignment.
  int row_align = 0;
  // Prepacked GEMMs run each task rows outer (ops/qgemm/driver.cc): NR rows of A held in L1, the packed
  // panels streaming from L2. For a kernel whose NR rows are many streams and whose panels are read by
  // loads the L2 prefetcher follows (AMX: 32 rows of tileloadd vs a contiguous panel); the VNNI kernels keep
  // their panel in L1 (docs/performance.md: "qgemm: loop order and K blocks").
  bool rows_outer = false;
  // 7: exact only for weights in [-64, 64] (AVX2's VPMADDUBSW: each pair of u8 x s8 products is summed with int16
  // saturation, which such weights never reach); dispatched only for layers whose weights all are. 8: any int8.
  // (Last: the kernels' positional initializers end before it.)
  int weight_bits = 8;
  // The whole-panel form (QGemmPanelsUkernel), or null: the drivers then call run once per panel.
  QGemmPanelsUkernel run_panels = nullptr;
};

// A kernel with its whole-panel form (constexpr: constant-initialized, before any list reads it).
constexpr QGemmKernel qgemm_with_panels(QGemmKernel k, QGemmPanelsUkernel run_panels) {
  k.run_panels = run_panels;
  return k;
}

// Small-M u8 x s8 product straight from a row-major B, without packing (the GEMV path of qgemm, where
// packing B would cost as much as the product): for m < M <= max_m and n < nn,
//   c[m * ldc + n] = sum_k a[m * lda + k] * b[k * ldb + n]          (int32, modulo 2^32)
// and, if colsum != null, colsum[n] = sum_k b[k * ldb + n]; with accumulate, both are added to the values
// already in c / colsum (the driver walks K in slices that stay in L2). Reads exactly a[m][0..K-1] and
// b[k][0..nn-1].
using QGemvUkernel = void (*)(size_t M, size_t nn, size_t K, const uint8_t* a, size_t lda, const int8_t* b,
                              size_t ldb, int32_t* c, size_t ldc, int32_t* colsum, bool accumulate);
struct QGemvKernel {
  const char* name;
  QGemvUkernel run;
  size_t max_m;  // the largest M it takes (the driver packs B for more rows)
};
// The kernels themselves are declared by their list, kernels/qgemm_list.h (baseline code only: it brings in
// the STL). The kernel files, which must stay STL-free, define them `extern const` instead of including it.

}  // namespace nnkern
