// FP32 GEMM micro-kernel contract, shared by every ISA. Baseline header: no intrinsics.
//
// Terms are column-major, as in seed O1 (oneDNN's 16x6 kernel): a kernel computes one tile
//   C(m x n) = epilogue(A(m x k) * B(k x n)),   m <= MR, n <= NR, any k >= 0,
// with the MR rows of A held in vector registers and each B element broadcast.
// The row-major driver maps a NumPy C[M, N] = X[M, K] W[K, N] onto this with A = W^T
// (vectors run along C's contiguous rows) and B = X^T (one broadcast per output row).
//
//   A(i, p) = a[p * a_stride + i]   a_stride = MR for a packed panel, or the leading
//                                   dimension when A is read in place (seed O6).
//   B(p, j) = b[j][p * b_stride]    one pointer per column: a plain, transposed, packed
//                                   or indirect (indirection-buffer) operand alike.
//   C(i, j) = c[j * ldc + i]
//
// If a_copy is not null, the kernel also stores the A panel it reads into a_copy[p * MR + i]
// (i < m), so the caller can reuse it packed (seed O6 copy-on-first-use).
//
// Indirect form (igemm: XNNPACK igemm / QNNPACK q8conv style, for convolutions). The reduction runs
// over ks taps of k values each, in registers, and the epilogue is applied once:
//   C(i, j) = epilogue( sum_{t < ks} sum_{p < k} A(i, t * k + p) * X_t(p, j) )
//   A       packed: A(i, q) = a[q * MR + i], q = t * k + p, so ks * k rows of MR floats (the weights
//           of tap t, channel p). Rows i >= m of each step must be readable (a packed panel always
//           is; their values only reach lanes that are never stored).
//   b       ks * NR pointers, tap-major: b[t * NR + j] is column j's pointer for tap t (entries j >= n
//           are never read). X_t(p, j) = q[p] for q = b[t * NR + j], contiguous in p (b_stride 1).
//   zero    a padding tap: a pointer equal to `zero` is read as is (k readable floats, all zero);
//           every other pointer gets b_offset BYTES added first. An indirection buffer that points
//           into one image can then be cached per input shape and reused for every image (offset).
// With ks = 1, no zero row and offset 0 this is the plain kernel with a packed A and b_stride 1; both
// forms are instances of one tile template per ISA. a_copy and strided B exist in the plain form only.
//
// Epilogue extensions for fused convolutions (both free when unused: one test per tile):
//   c_rows     if not null, C(:, j) is stored at c_rows[j] instead of c + j * ldc (c and ldc unused):
//              column j is a row of the row-major output, hence the name; e.g. a pixel shuffle's
//              scattered output rows. beta != 0 reads C there too.
//   tile_hook  if not null, called once per tile after it is stored, with the tile's final values and
//              its position (tile_i, tile_j: whatever coordinates the caller put in the epilogue),
//              e.g. a fused pooling that folds each tile into its pooled output.
//   residual   if not null, R(i, j) = residual[j * ldr + i] is added after the bias, before the clamp: a
//              ResNet shortcut added as the tile is stored (seed I13), the bits of a separate Add and Relu.
//              The f32_gemm kernels only (gemv, conv and bf16 kernels take none); never overlapping C.
#pragma once
#include <cstddef>

namespace nnkern {

// One stored tile, as the tile hook sees it: C(i, j) = values[j * ld + i], i < m, j < n.
struct F32Tile {
  size_t tile_i, tile_j;  // F32Epilogue::tile_i / tile_j, passed through
  size_t m, n;
  const float* values;
  size_t ld;
};

// Post-ops applied as the tile is stored: C = clamp(alpha * acc + beta * C + bias[i] + R(i, j)).
// beta == 0 means C is never read (BLAS semantics: NaN in C is ignored). c_rows and the tile hook are
// for the f32_gemm kernels only (the f32_gemv kernels ignore them).
struct F32Epilogue {
  float alpha = 1.0f;
  float beta = 0.0f;
  const float* bias = nullptr;  // indexed by tile row i (a per-output-feature bias), or null
  bool clamp = false;           // apply [clamp_min, clamp_max] (ReLU is {0, +inf})
  float clamp_min = 0.0f;
  float clamp_max = 0.0f;
  float* const* c_rows = nullptr;  // per-column output pointers (see above), or null: c + j * ldc
  void (*tile_hook)(void* ctx, const F32Tile& tile) = nullptr;
  void* tile_ctx = nullptr;
  size_t tile_i = 0, tile_j = 0;  // the tile's position, for the hook only
  const float* residual = nullptr;  // R(i, j) = residual[j * ldr + i] (see above), or null
  size_t ldr = 0;
};

// Where column j of the tile lives.
static inline float* f32_c_col(float* c, size_t ldc, size_t j, const F32Epilogue& ep) {
  return ep.c_rows ? ep.c_rows[j] : c + j * ldc;
}

// The epilogue of one element, in every kernel's order: alpha * acc, + beta * C (c is read only if
// beta != 0), + bias[i], + *r (the residual's element, where the kernel takes one), clamp (NaN compares
// false and passes through). The scalar references use it, and the SIMD kernels for their scalar
// leftovers. static: each kernel file compiles its own copy with its own flags, so no ISA-flagged copy
// can be picked for baseline code.
static inline float f32_epilogue_scalar(float acc, const float* c, size_t i, const F32Epilogue& ep,
                                        const float* r = nullptr) {
  float v = ep.alpha * acc;
  if (ep.beta != 0.0f) v += ep.beta * *c;
  if (ep.bias) v += ep.bias[i];
  if (r) v += *r;
  if (ep.clamp) {
    if (v < ep.clamp_min) v = ep.clamp_min;
    if (v > ep.clamp_max) v = ep.clamp_max;
  }
  return v;
}

using F32GemmUkernel = void (*)(size_t m, size_t n, size_t k, const float* a, size_t a_stride, float* a_copy,
                                const float* const* b, size_t b_stride, float* c, size_t ldc,
                                const F32Epilogue* ep);

using F32IgemmUkernel = void (*)(size_t m, size_t n, size_t k, size_t ks, const float* a, const float* const* b,
                                 const float* zero, size_t b_offset, float* c, size_t ldc, const F32Epilogue* ep);

// Whole panels (optional): `panels` full panels of a packed A, panel q at a + q * a_panel_stride (A(i, p) =
// panel[p * MR + i], i < MR), against the same n <= NR columns of B. Panel q's tile is exactly run(MR, n, k, panel
// q, MR, nullptr, b, b_stride, c + q * MR, ldc, ep) with the epilogue's bias and residual q * MR rows further (and
// c_rows[j] + q * MR where given): one call where a driver would make `panels`, for the short reductions whose
// call set-up is a large part of a tile. ep->tile_hook must be null (those tiles run one call each).
using F32GemmPanelsUkernel = void (*)(size_t panels, size_t n, size_t k, const float* a, size_t a_panel_stride,
                                      const float* const* b, size_t b_stride, float* c, size_t ldc,
                                      const F32Epilogue* ep);

struct F32GemmKernel {
  const char* name;
  int mr, nr;
  F32GemmUkernel run;      // plain form
  F32IgemmUkernel igemm;   // indirect form (ks taps, zero row, offset)
  F32GemmPanelsUkernel run_panels = nullptr;  // whole panels of the plain form, or null
};

// The oracle (kernels/ref/f32_gemm.cc, baseline code) for any tile size: the indirect form with explicit
// strides, b[t * b_tap_stride + j] and X_t(p, j) = q[p * b_stride]. f32_gemm_8x4__scalar is this with
// MR = 8, NR = 4; the tests compare every kernel, plain and indirect, against it.
void f32_gemm_reference(size_t m, size_t n, size_t k, size_t ks, const float* a, size_t a_stride,
                        const float* const* b, size_t b_tap_stride, size_t b_stride, const float* zero,
                        size_t b_offset, float* c, size_t ldc, const F32Epilogue* ep);

// The kernels are listed, with their ISA levels, in kernels/f32_gemm_list.h; each is defined in
// csrc/kernels/<isa>/f32_gemm.cc (compiled with that ISA's flags only).

}  // namespace nnkern
