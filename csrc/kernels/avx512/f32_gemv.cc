// FP32 skinny-GEMM kernels for AVX-512 (F): see kernels/f32_gemv.h for the contract.
//
// rows (GEMV, y = x B with B rows contiguous): blocks of 8 rows of B x 64 columns (4 zmm). Per block
//   the 8 x values are broadcast once, the 4 accumulators are loaded from acc[], get 32 FMAs (each in
//   row order) and are stored back. The 8 rows are 8 sequential streams (hardware-prefetch friendly,
//   one page per row at a time), instead of 48-float slivers of every row 4 KiB apart. Row tails: 4,
//   2, 1; column tails: 16-wide vectors, then one masked vector (maskz loads never fault).
// rows_m (2-16 rows of x, B read once for all of them): kernels/f32_gemv_rows_m.inc, 4 rows of x at a time.
// dot (small N, or GEMV against a transposed B): a 3 x 8 tile of accumulators (24 zmm + 3 A rows + 1
//   B^T row = 28 of 32), each a 16-lane partial sum along K; per 16-step of K, 3 + 8 loads feed 24
//   independent FMAs (FMA bound, not load bound). The K tail is one masked step. Lanes are added in
//   _mm512_reduce_add_ps's fixed order, then the epilogue is applied per element.
// Every (m, n) tile is an instantiation of ONE template, dot_tile<kM, kN>.
//
// One-definition rule: compiled with AVX-512 flags; helpers in an anonymous namespace, no STL.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/f32_gemv.h"

#define NNK_INLINE inline __attribute__((always_inline))

namespace nnkern {
namespace {

constexpr int kDotMR = 3, kDotNR = 8;

NNK_INLINE __mmask16 tail_mask(size_t r) { return static_cast<__mmask16>((1u << r) - 1u); }

template <int kR>
NNK_INLINE void rows_block(size_t n, const float* x, size_t incx, const float* b, size_t ldb, float* acc) {
  __m512 vx[kR];
  const float* br[kR];
#pragma GCC unroll 8
  for (int r = 0; r < kR; ++r) {
    vx[r] = _mm512_set1_ps(x[r * incx]);
    br[r] = b + r * ldb;
  }
  size_t j = 0;
  for (; j + 64 <= n; j += 64) {
    __m512 s[4];
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) s[v] = _mm512_loadu_ps(acc + j + 16 * v);
#pragma GCC unroll 8
    for (int r = 0; r < kR; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) s[v] = _mm512_fmadd_ps(vx[r], _mm512_loadu_ps(br[r] + j + 16 * v), s[v]);
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) _mm512_storeu_ps(acc + j + 16 * v, s[v]);
  }
  for (; j + 16 <= n; j += 16) {
    __m512 s = _mm512_loadu_ps(acc + j);
#pragma GCC unroll 8
    for (int r = 0; r < kR; ++r) s = _mm512_fmadd_ps(vx[r], _mm512_loadu_ps(br[r] + j), s);
    _mm512_storeu_ps(acc + j, s);
  }
  if (j < n) {
    const __mmask16 mask = tail_mask(n - j);
    __m512 s = _mm512_maskz_loadu_ps(mask, acc + j);
#pragma GCC unroll 8
    for (int r = 0; r < kR; ++r) s = _mm512_fmadd_ps(vx[r], _mm512_maskz_loadu_ps(mask, br[r] + j), s);
    _mm512_mask_storeu_ps(acc + j, mask, s);
  }
}

void rows_avx512(size_t n, size_t k, const float* x, size_t incx, const float* b, size_t ldb, float* acc) {
  if (n == 0) return;
  size_t p = 0;
  for (; p + 8 <= k; p += 8) rows_block<8>(n, x + p * incx, incx, b + p * ldb, ldb, acc);
  if (k - p >= 4) { rows_block<4>(n, x + p * incx, incx, b + p * ldb, ldb, acc); p += 4; }
  if (k - p >= 2) { rows_block<2>(n, x + p * incx, incx, b + p * ldb, ldb, acc); p += 2; }
  if (k - p >= 1) rows_block<1>(n, x + p * incx, incx, b + p * ldb, ldb, acc);
}

#include "kernels/avx512/f32_traits.inc"
#include "kernels/f32_gemv_rows_m.inc"  // rows_m<Avx512F32>

// alpha * acc, + beta * C (only if beta != 0), + bias, clamp: the order of f32_gemm's epilogue.
NNK_INLINE __m512 epilogue_v(__m512 v, const float* c, const float* bias, __mmask16 mask, const F32Epilogue& ep) {
  v = _mm512_mul_ps(_mm512_set1_ps(ep.alpha), v);
  if (ep.beta != 0.0f) v = _mm512_add_ps(v, _mm512_mul_ps(_mm512_set1_ps(ep.beta), _mm512_maskz_loadu_ps(mask, c)));
  if (bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, bias));
  if (ep.clamp) {  // vmaxps/vminps return the second operand (v) when either is NaN: NaN passes
    v = _mm512_mask_max_ps(v, 0xFFFF, _mm512_set1_ps(ep.clamp_min), v);
    v = _mm512_mask_min_ps(v, 0xFFFF, _mm512_set1_ps(ep.clamp_max), v);
  }
  return v;
}

void store_avx512(size_t n, const float* acc, float* c, const F32Epilogue* ep) {
  size_t j = 0;
  for (; j + 16 <= n; j += 16)
    _mm512_storeu_ps(c + j, epilogue_v(_mm512_loadu_ps(acc + j), c + j, ep->bias ? ep->bias + j : nullptr, 0xFFFF, *ep));
  if (j < n) {
    const __mmask16 mask = tail_mask(n - j);
    _mm512_mask_storeu_ps(c + j, mask,
                          epilogue_v(_mm512_maskz_loadu_ps(mask, acc + j), c + j, ep->bias ? ep->bias + j : nullptr,
                                     mask, *ep));
  }
}

template <int kM, int kN>
NNK_INLINE void dot_step(__m512 (&acc)[kM][kN], const float* const (&ar)[kM], const float* const (&br)[kN], size_t p,
                         __mmask16 mask, bool masked) {
  __m512 va[kM];
#pragma GCC unroll 3
  for (int i = 0; i < kM; ++i) va[i] = masked ? _mm512_maskz_loadu_ps(mask, ar[i] + p) : _mm512_loadu_ps(ar[i] + p);
#pragma GCC unroll 8
  for (int j = 0; j < kN; ++j) {
    const __m512 vb = masked ? _mm512_maskz_loadu_ps(mask, br[j] + p) : _mm512_loadu_ps(br[j] + p);
#pragma GCC unroll 3
    for (int i = 0; i < kM; ++i) acc[i][j] = _mm512_fmadd_ps(va[i], vb, acc[i][j]);
  }
}

template <int kM, int kN>
__attribute__((noinline)) void dot_tile(size_t k, const float* a, size_t lda, const float* bt, size_t ldbt, float* c,
                                        size_t ldc, const F32Epilogue* ep) {
  const float* ar[kM];
  const float* br[kN];
#pragma GCC unroll 3
  for (int i = 0; i < kM; ++i) ar[i] = a + i * lda;
#pragma GCC unroll 8
  for (int j = 0; j < kN; ++j) br[j] = bt + j * ldbt;
  __m512 acc[kM][kN];
#pragma GCC unroll 3
  for (int i = 0; i < kM; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < kN; ++j) acc[i][j] = _mm512_setzero_ps();
  size_t p = 0;
  for (; p + 16 <= k; p += 16) dot_step<kM, kN>(acc, ar, br, p, 0xFFFF, false);
  if (p < k) dot_step<kM, kN>(acc, ar, br, p, tail_mask(k - p), true);
#pragma GCC unroll 3
  for (int i = 0; i < kM; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < kN; ++j) {
      float* cij = c + i * ldc + j;
      *cij = f32_epilogue_scalar(_mm512_reduce_add_ps(acc[i][j]), cij, j, *ep);
    }
}

#include "kernels/f32_gemv_dot.inc"  // dot_tiles: (m, n) -> dot_tile<m, n>

}  // namespace

const F32GemvKernel f32_gemv_3x8__avx512 = {"f32_gemv_3x8__avx512", rows_avx512, store_avx512, kDotMR, kDotNR, dot_tiles,
                                           rows_m<Avx512F32>, 16};

}  // namespace nnkern
