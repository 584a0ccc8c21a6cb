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
#pragma once
#include <cstddef>

namespace nnkern {

// Post-ops applied as the tile is stored: C = clamp(alpha * acc + beta * C + bias[i]).
// beta == 0 means C is never read (BLAS semantics: NaN in C is ignored).
struct F32Epilogue {
  float alpha = 1.0f;
  float beta = 0.0f;
  const float* bias = nullptr;  // indexed by tile row i (a per-output-feature bias), or null
  bool clamp = false;           // apply [clamp_min, clamp_max] (ReLU is {0, +inf})
  float clamp_min = 0.0f;
  float clamp_max = 0.0f;
};

// The epilogue of one element, in every kernel's order: alpha * acc, + beta * C (c is read only if
// beta != 0), + bias[i], clamp (NaN compares false and passes through). The scalar references use it,
// and the SIMD kernels for their scalar leftovers. static: each kernel file compiles its own copy with
// its own flags, so no ISA-flagged copy can be picked for baseline code.
static inline float f32_epilogue_scalar(float acc, const float* c, size_t i, const F32Epilogue& ep) {
  float v = ep.alpha * acc;
  if (ep.beta != 0.0f) v += ep.beta * *c;
  if (ep.bias) v += ep.bias[i];
  if (ep.clamp) {
    if (v < ep.clamp_min) v = ep.clamp_min;
    if (v > ep.clamp_max) v = ep.clamp_max;
  }
  return v;
}

using F32GemmUkernel = void (*)(size_t m, size_t n, size_t k, const float* a, size_t a_stride, float* a_copy,
                                const float* const* b, size_t b_stride, float* c, size_t ldc,
                                const F32Epilogue* ep);

struct F32GemmKernel {
  const char* name;
  int mr, nr;
  F32GemmUkernel run;
};

// One per ISA; each defined in csrc/kernels/<isa>/f32_gemm.cc (compiled with that ISA's flags only).
extern const F32GemmKernel f32_gemm_ref;           // scalar reference: the oracle and the fallback
extern const F32GemmKernel f32_gemm_16x6__avx2;    // seed O1
extern const F32GemmKernel f32_gemm_avx512;        // see its file for the MR x NR choice
extern const F32GemmKernel f32_gemm_8x12__neon;    // AArch64: 8x12 with FMA by lane (seed G2)

}  // namespace nnkern
