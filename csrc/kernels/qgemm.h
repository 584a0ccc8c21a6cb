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
// s16 x s16: VPDPWSSD / VPMADDWD pairs), and A is packed in that interleaved layout:
//   A(i, p) = a[(p / G) * MR * G + i * G + p % G]    (int8 for G = 4, int16 for G = 2),
// one panel of MR rows, zero-padded to MR rows and to a multiple of G in k (so a kernel may always
// load whole vectors of A). Each output channel's G weights of one group sit in one 32-bit lane.
//   B(p, j) = b[j][p]    one pointer per column (uint8 for G = 4, int16 for G = 2): a row of X, or
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
};

using QGemmUkernel = void (*)(size_t m, size_t n, size_t k, const void* a, const void* const* b, void* c, size_t ldc,
                              const QEpilogue* ep);

struct QGemmKernel {
  const char* name;
  int mr, nr;
  int kgroup;  // G: 4 = u8 (B) x s8 (A) groups of 4 bytes, 2 = s16 x s16 pairs
  QGemmUkernel run;
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
extern const QGemmKernel u8s8_gemm_ref;                 // scalar reference, 8 x 4
extern const QGemmKernel u8s8_gemm_16x6__avxvnni;       // VEX vpdpbusd, ymm
extern const QGemmKernel u8s8_gemm_64x6__avx512vnni;    // EVEX vpdpbusd, zmm (seed example 7-1)
// s16 x s16, G = 2.
extern const QGemmKernel s16_gemm_ref;
extern const QGemmKernel s16_gemm_16x6__avx2;           // vpmaddwd + vpaddd
extern const QGemmKernel s16_gemm_16x6__avxvnni;        // VEX vpdpwssd
extern const QGemmKernel s16_gemm_64x6__avx512;         // vpmaddwd + vpaddd, zmm
extern const QGemmKernel s16_gemm_64x6__avx512vnni;     // vpdpwssd, zmm

}  // namespace nnkern
