// FP32 skinny-GEMM kernels for AVX2 + FMA: see kernels/f32_gemv.h for the contract.
//
// rows (GEMV, y = x B with B rows contiguous): blocks of 8 rows of B x 32 columns (4 ymm): 8 broadcast
//   x values + 4 accumulators + 1 temporary = 13 of 16 ymm. The 8 rows are 8 sequential streams.
//   Row tails: 4, 2, 1; column tails: 8-wide vectors, then one masked vector (vmaskmovps never faults
//   on masked-out lanes).
// rows_m (2-16 rows of x, B read once for all of them): kernels/f32_gemv_rows_m.inc, 2 rows of x at a time.
//   Auto takes it for up to 8 rows whatever B's size: the 16x6 tile runs 8 rows as 6 + 2 and packs B's
//   column strips (one Sapphire Rapids core at the AVX2 level, rows / tiles GFLOP/s: 8x1024x1024 64 / 45,
//   8x3072x768 59 / 30, 8x1000x300 84 / 76, 4x1000x300 65 / 66; 12 rows: 66 / 60, 84 / 86).
// dot (small N, or GEMV against a transposed B): a 3 x 4 tile of accumulators (12 ymm + 3 A rows +
//   1 B^T row = 16), each an 8-lane partial sum along K; per 8-step of K, 3 + 4 loads feed 12
//   independent FMAs. The K tail is one masked step. Lanes are added in a fixed order (hsum), then
//   the epilogue is applied per element.
// Every (m, n) tile is an instantiation of ONE template, dot_tile<kM, kN>.
//
// One-definition rule: compiled with -mavx2 -mfma; helpers in an anonymous namespace, no STL.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/f32_gemv.h"

#define NNK_INLINE inline __attribute__((always_inline))

namespace nnkern {
namespace {

constexpr int kDotMR = 3, kDotNR = 4;

#include "kernels/avx2/f32_traits.inc"  // Avx2F32; kMaskTable: lane i of tail_mask(r) is all-ones iff i < r
#include "kernels/f32_gemv_rows_m.inc"  // rows_m<Avx2F32>

NNK_INLINE __m256i tail_mask(size_t r) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kMaskTable + 8 - r));
}

NNK_INLINE __m256 maskz_load(__m256i mask, const float* p) { return _mm256_maskload_ps(p, mask); }

// Lanes added in a fixed order: (0+4, 1+5, 2+6, 3+7), then pairs, then the last two.
NNK_INLINE float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

template <int kR>
NNK_INLINE void rows_block(size_t n, const float* x, size_t incx, const float* b, size_t ldb, float* acc) {
  __m256 vx[kR];
  const float* br[kR];
#pragma GCC unroll 8
  for (int r = 0; r < kR; ++r) {
    vx[r] = _mm256_set1_ps(x[r * incx]);
    br[r] = b + r * ldb;
  }
  size_t j = 0;
  for (; j + 32 <= n; j += 32) {
    __m256 s[4];
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) s[v] = _mm256_loadu_ps(acc + j + 8 * v);
#pragma GCC unroll 8
    for (int r = 0; r < kR; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) s[v] = _mm256_fmadd_ps(vx[r], _mm256_loadu_ps(br[r] + j + 8 * v), s[v]);
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) _mm256_storeu_ps(acc + j + 8 * v, s[v]);
  }
  for (; j + 8 <= n; j += 8) {
    __m256 s = _mm256_loadu_ps(acc + j);
#pragma GCC unroll 8
    for (int r = 0; r < kR; ++r) s = _mm256_fmadd_ps(vx[r], _mm256_loadu_ps(br[r] + j), s);
    _mm256_storeu_ps(acc + j, s);
  }
  if (j < n) {
    const __m256i mask = tail_mask(n - j);
    __m256 s = maskz_load(mask, acc + j);
#pragma GCC unroll 8
    for (int r = 0; r < kR; ++r) s = _mm256_fmadd_ps(vx[r], maskz_load(mask, br[r] + j), s);
    _mm256_maskstore_ps(acc + j, mask, s);
  }
}

void rows_avx2(size_t n, size_t k, const float* x, size_t incx, const float* b, size_t ldb, float* acc) {
  if (n == 0) return;
  size_t p = 0;
  for (; p + 8 <= k; p += 8) rows_block<8>(n, x + p * incx, incx, b + p * ldb, ldb, acc);
  if (k - p >= 4) { rows_block<4>(n, x + p * incx, incx, b + p * ldb, ldb, acc); p += 4; }
  if (k - p >= 2) { rows_block<2>(n, x + p * incx, incx, b + p * ldb, ldb, acc); p += 2; }
  if (k - p >= 1) rows_block<1>(n, x + p * incx, incx, b + p * ldb, ldb, acc);
}

// alpha * acc, + beta * C (only if beta != 0), + bias, clamp: the order of f32_gemm's epilogue.
NNK_INLINE __m256 epilogue_v(__m256 v, const float* c, const float* bias, __m256i mask, const F32Epilogue& ep) {
  v = _mm256_mul_ps(_mm256_set1_ps(ep.alpha), v);
  if (ep.beta != 0.0f) v = _mm256_add_ps(v, _mm256_mul_ps(_mm256_set1_ps(ep.beta), maskz_load(mask, c)));
  if (bias) v = _mm256_add_ps(v, maskz_load(mask, bias));
  if (ep.clamp) {  // vmaxps/vminps return the second operand (v) when either is NaN: NaN passes
    v = _mm256_max_ps(_mm256_set1_ps(ep.clamp_min), v);
    v = _mm256_min_ps(_mm256_set1_ps(ep.clamp_max), v);
  }
  return v;
}

void store_avx2(size_t n, const float* acc, float* c, const F32Epilogue* ep) {
  size_t j = 0;
  for (; j + 8 <= n; j += 8)
    _mm256_storeu_ps(c + j, epilogue_v(_mm256_loadu_ps(acc + j), c + j, ep->bias ? ep->bias + j : nullptr, _mm256_set1_epi32(-1), *ep));
  if (j < n) {
    const __m256i mask = tail_mask(n - j);
    _mm256_maskstore_ps(c + j, mask,
                          epilogue_v(maskz_load(mask, acc + j), c + j, ep->bias ? ep->bias + j : nullptr,
                                     mask, *ep));
  }
}

template <int kM, int kN>
NNK_INLINE void dot_step(__m256 (&acc)[kM][kN], const float* const (&ar)[kM], const float* const (&br)[kN], size_t p,
                         __m256i mask, bool masked) {
  __m256 va[kM];
#pragma GCC unroll 3
  for (int i = 0; i < kM; ++i) va[i] = masked ? maskz_load(mask, ar[i] + p) : _mm256_loadu_ps(ar[i] + p);
#pragma GCC unroll 8
  for (int j = 0; j < kN; ++j) {
    const __m256 vb = masked ? maskz_load(mask, br[j] + p) : _mm256_loadu_ps(br[j] + p);
#pragma GCC unroll 3
    for (int i = 0; i < kM; ++i) acc[i][j] = _mm256_fmadd_ps(va[i], vb, acc[i][j]);
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
  __m256 acc[kM][kN];
#pragma GCC unroll 3
  for (int i = 0; i < kM; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < kN; ++j) acc[i][j] = _mm256_setzero_ps();
  size_t p = 0;
  for (; p + 8 <= k; p += 8) dot_step<kM, kN>(acc, ar, br, p, _mm256_set1_epi32(-1), false);
  if (p < k) dot_step<kM, kN>(acc, ar, br, p, tail_mask(k - p), true);
#pragma GCC unroll 3
  for (int i = 0; i < kM; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < kN; ++j) {
      float* cij = c + i * ldc + j;
      *cij = f32_epilogue_scalar(hsum(acc[i][j]), cij, j, *ep);
    }
}

#include "kernels/f32_gemv_dot.inc"  // dot_tiles: (m, n) -> dot_tile<m, n>

}  // namespace

const F32GemvKernel f32_gemv_3x4__avx2 = {"f32_gemv_3x4__avx2", rows_avx2, store_avx2, kDotMR, kDotNR, dot_tiles,
                                         rows_m<Avx2F32>, 16, 8};

}  // namespace nnkern
