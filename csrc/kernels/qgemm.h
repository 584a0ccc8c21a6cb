// Integer GEMM micro-kernel contract (u8 x s8 and s16 x s16 -> s32), shared by every ISA. Baseline
// header: no intrinsics.
//
// Terms are column-major, as for the FP32 kernels (kernels/f32_gemm.h): a kernel computes one tile
//   C(m x n) = epilogue(A(m x k) * B(k x n)),   m <= MR, n <= NR, any k >= 0,
// with A = the packed weights (vector lanes run along output channels i) and B = the activations (one
// broadcast per output row j). The row-major driver maps C[M, N] = X[M, K] W[K, N] onto this with
// A = W^T and B = X^T, so tile row i is an output channel and tile column j a row of X.
//
// Products are summed in groups of G consecutive k (G = 4 for u8 x s8: VPDPBUSD's 4-byte groups; G = 2 for
// s16 x s16: VPDPWSSD / VPMADDWD pairs; G = 8 for USMMLA; G = 1 for the NEON widening kernels), and A is
// packed in that interleaved layout:
//   A(i, p) = a[(p / G) * MR * G + i * G + p % G]    (int8, or int16 for kind s16),
// one panel of MR rows, zero-padded to MR rows and to a multiple of G in k (so a kernel may always
// load whole vectors of A). Each output channel's G weights of one group are contiguous.
//   B(p, j) = b[j][p]    one pointer per column (uint8 / int8 / int16 by the kernel's kind): a row of X, or
//                        later an indirection-buffer entry. The kernel reads exactly b[j][0 .. k-1].
//   C(i, j) = c[j * ldc + i]   (elements of the output type; only the m x n tile is written)
//
// Accumulation is modulo 2^32 (VPDPBUSD / VPDPWSSD / VPMADDWD + VPADDD all wrap, none saturates in the
// ways used here), so the result is exact whenever the true value fits int32: the Python layer checks
// that bound before calling.
#pragma once
#include <cstddef>
#include <cstdint>

namespace nnkern {

enum class QOut : int { i32 = 0, f32 = 1, u8 = 2, s8 = 3 };

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
};

using QGemmUkernel = void (*)(size_t m, size_t n, size_t k, const void* a, const void* const* b, void* c, size_t ldc,
                              const QEpilogue* ep);

// Element types of a kernel's operands: activations (B) x weights (A).
enum class QKind : int {
  u8s8 = 0,  // uint8 activations x int8 weights (VPDPBUSD, USMMLA, the NEON widening kernel)
  s8s8 = 1,  // int8 x int8 (SDOT): the driver shifts uint8 activations to int8 (x ^ 0x80, zero point - 128)
  s16 = 2,   // int16 x int16 (8-bit data widened by the driver)
};

struct QGemmKernel {
  const char* name;
  int mr, nr;
  int kgroup;  // G: k values per packed group (4: VPDPBUSD / SDOT bytes, 8: USMMLA, 2: int16 pairs, 1: none)
  QGemmUkernel run;
  QKind kind = QKind::u8s8;
  bool zero_points_in_kernel = false;  // subtracts QEpilogue::x_zero / w_zero itself (see there)
  int kstep = 0;  // k values per inner-loop iteration, if more than kgroup: the tests sweep k past it
};

// Small-M u8 x s8 product straight from a row-major B, without packing (the GEMV path of qgemm, where
// packing B would cost as much as the product): for m < M <= kQGemvMaxM and n < nn,
//   c[m * ldc + n] = sum_k a[m * lda + k] * b[k * ldb + n]          (int32, modulo 2^32)
// and, if colsum != null, colsum[n] = sum_k b[k * ldb + n]; with accumulate, both are added to the values
// already in c / colsum (the driver walks K in slices that stay in L2). Reads exactly a[m][0..K-1] and
// b[k][0..nn-1].
constexpr size_t kQGemvMaxM = 4;
using QGemvUkernel = void (*)(size_t M, size_t nn, size_t K, const uint8_t* a, size_t lda, const int8_t* b,
                              size_t ldb, int32_t* c, size_t ldc, int32_t* colsum, bool accumulate);
struct QGemvKernel {
  const char* name;
  QGemvUkernel run;
};
extern const QGemvKernel u8s8_gemv__avx512vnni;

// u8 x s8, G = 4 (VNNI only: without VNNI the exact path widens to s16 and uses the s16 kernels).
extern const QGemmKernel u8s8_gemm_ref;                 // scalar reference, 8 x 4 (also honours x_zero / w_zero)
extern const QGemmKernel s8s8_gemm_ref;                 // its int8 x int8 twin: the oracle of the SDOT kernel
extern const QGemmKernel u8s8_gemm_16x6__avxvnni;       // VEX vpdpbusd, ymm
extern const QGemmKernel u8s8_gemm_64x6__avx512vnni;    // EVEX vpdpbusd, zmm (seed example 7-1)
// s16 x s16, G = 2.
extern const QGemmKernel s16_gemm_ref;
extern const QGemmKernel s16_gemm_16x6__avx2;           // vpmaddwd + vpaddd
extern const QGemmKernel s16_gemm_16x6__avxvnni;        // VEX vpdpwssd
extern const QGemmKernel s16_gemm_64x6__avx512;         // vpmaddwd + vpaddd, zmm
extern const QGemmKernel s16_gemm_64x6__avx512vnni;     // vpdpwssd, zmm
// AArch64 (csrc/kernels/neon*/qgemm.cc; each file states its register allocation and loads per MAC).
extern const QGemmKernel u8_gemm_8x8__neon;             // QNNPACK style: zero points subtracted, widened, SMLAL by lane
extern const QGemmKernel s16_gemm_8x8__neon;            // the same loop on int16 operands
extern const QGemmKernel s8_gemm_8x8__neondot;          // SDOT by lane, G = 4
extern const QGemmKernel u8s8_gemm_8x8__neoni8mm;       // USMMLA (2x8 by 8x2 per instruction), G = 8

}  // namespace nnkern
