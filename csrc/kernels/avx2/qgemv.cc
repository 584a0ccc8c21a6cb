// Small-M integer GEMV for AVX2 (kernels/qgemm.h QGemvKernel): u8 x s8 straight from row-major B, exact.
//
// Without VNNI the exact product is VPMADDWD on int16 pairs (VPMADDUBSW saturates, see avx2/qgemm.cc).
// Per pair of B rows and 16 channels: two 16-byte loads, one byte interleave (punpcklbw / punpckhbw) and
// two sign extensions (vpmovsxbw) give the (b[k][n], b[k+1][n]) int16 pairs of 16 channels in channel
// order; each of the M rows then costs one broadcast of its (a[k], a[k+1]) pair and two VPMADDWD + VPADDD.
// About 11 uops per 32 multiply-adds at M = 1, and no packed copy of B is written or read. A is widened
// to int16 once per chunk of kKChunk k values, on the stack; B is swept kGroup rows at a time.
// It runs well ahead of packing B at these sizes, short of the shuffle ports' limit (docs/performance.md:
// "qgemm: GEMV").
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/qgemm.h"

#define NNK_INLINE inline __attribute__((always_inline))

namespace nnkern {
namespace {

constexpr size_t kKChunk = 512;  // k values of A widened at a time: 4 rows x 1 KiB on the stack
constexpr size_t kBlock = 16;    // channels per block
constexpr size_t kGroup = 8;     // rows of B per sweep over the channels (even)

// 16 bytes of a row of B from its block's first channel; channels past nn read as 0 (never read past nn).
NNK_INLINE __m128i load_row(const int8_t* p, size_t nn) {
  if (nn >= kBlock) return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  alignas(16) int8_t t[kBlock] = {};
  __builtin_memcpy(t, p, nn);
  return _mm_load_si128(reinterpret_cast<const __m128i*>(t));
}

// 16 int32 (two ymm) from / to p, only nn of them touched.
NNK_INLINE void load16(__m256i (&v)[2], const int32_t* p, size_t nn) {
  if (nn >= kBlock) {
    v[0] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    v[1] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 8));
    return;
  }
  alignas(32) int32_t t[kBlock] = {};
  __builtin_memcpy(t, p, nn * sizeof(int32_t));
  v[0] = _mm256_load_si256(reinterpret_cast<const __m256i*>(t));
  v[1] = _mm256_load_si256(reinterpret_cast<const __m256i*>(t + 8));
}
NNK_INLINE void store16(int32_t* p, const __m256i (&v)[2], size_t nn) {
  if (nn >= kBlock) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v[0]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p + 8), v[1]);
    return;
  }
  alignas(32) int32_t t[kBlock];
  _mm256_store_si256(reinterpret_cast<__m256i*>(t), v[0]);
  _mm256_store_si256(reinterpret_cast<__m256i*>(t + 8), v[1]);
  __builtin_memcpy(p, t, nn * sizeof(int32_t));
}

// Rows k .. k + rows of B (rows <= kGroup) against A's widened rows a16 (a pad 0 past an odd end), over
// all nn channels, 16 at a time: the partial sums go through c (and colsum), which stay in L1, while each
// row of B is read front to back. (A block of channels swept down all of K instead reads one 16-byte piece
// per row at B's row stride, which at power-of-two strides falls into a few L1 sets and misses.)
// accumulate adds to c and colsum instead of overwriting them.
template <int kM, bool kSum>
__attribute__((noinline)) void gemv_rows(size_t nn, size_t rows, const int16_t (*a16)[kKChunk], size_t k,
                                         const int8_t* b, size_t ldb, int32_t* c, size_t ldc, int32_t* colsum,
                                         bool accumulate) {
  const __m256i ones = _mm256_set1_epi16(1);
  for (size_t n0 = 0; n0 < nn; n0 += kBlock) {
    const size_t w = nn - n0 < kBlock ? nn - n0 : kBlock;
    __m256i acc[kM][2], sum[2];
    for (int m = 0; m < kM; ++m) {
      if (accumulate) load16(acc[m], c + m * ldc + n0, w);
      else acc[m][0] = acc[m][1] = _mm256_setzero_si256();
    }
    if (kSum) {
      if (accumulate) load16(sum, colsum + n0, w);
      else sum[0] = sum[1] = _mm256_setzero_si256();
    }
    for (size_t r = 0; r < rows; r += 2) {
      const int8_t* row = b + r * ldb + n0;
      const __m128i r0 = load_row(row, w);
      const __m128i r1 = r + 1 < rows ? load_row(row + ldb, w) : _mm_setzero_si128();
      const __m256i w0 = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(r0, r1));  // channels 0..7, pairs (k, k+1)
      const __m256i w1 = _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(r0, r1));  // channels 8..15
      for (int m = 0; m < kM; ++m) {
        int32_t pair;
        __builtin_memcpy(&pair, &a16[m][k + r], sizeof(pair));
        const __m256i am = _mm256_set1_epi32(pair);
        acc[m][0] = _mm256_add_epi32(acc[m][0], _mm256_madd_epi16(w0, am));
        acc[m][1] = _mm256_add_epi32(acc[m][1], _mm256_madd_epi16(w1, am));
      }
      if (kSum) {
        sum[0] = _mm256_add_epi32(sum[0], _mm256_madd_epi16(w0, ones));
        sum[1] = _mm256_add_epi32(sum[1], _mm256_madd_epi16(w1, ones));
      }
    }
    for (int m = 0; m < kM; ++m) store16(c + m * ldc + n0, acc[m], w);
    if (kSum) store16(colsum + n0, sum, w);
  }
}

template <int kM>
void gemv_m(size_t nn, size_t K, const uint8_t* a, size_t lda, const int8_t* b, size_t ldb, int32_t* c, size_t ldc,
            int32_t* colsum, bool accumulate) {
  alignas(32) int16_t a16[kM][kKChunk];
  size_t k0 = 0;
  do {  // once with K == 0: zeros are then written (or c left as it is when accumulating)
    const size_t kk = K - k0 < kKChunk ? K - k0 : kKChunk;
    for (int m = 0; m < kM; ++m) {
      for (size_t k = 0; k < kk; ++k) a16[m][k] = a[m * lda + k0 + k];
      if (kk & 1) a16[m][kk] = 0;
    }
    size_t k = 0;
    do {
      const size_t rows = kk - k < kGroup ? kk - k : kGroup;
      const bool acc = accumulate || k0 + k > 0;
      if (colsum) gemv_rows<kM, true>(nn, rows, a16, k, b + (k0 + k) * ldb, ldb, c, ldc, colsum, acc);
      else gemv_rows<kM, false>(nn, rows, a16, k, b + (k0 + k) * ldb, ldb, c, ldc, nullptr, acc);
      k += rows;
    } while (k < kk);
    k0 += kk;
  } while (k0 < K);
}

#include "kernels/inc/qgemv_run.inc"

}  // namespace

extern const QGemvKernel u8s8_gemv_4x16__avx2 = {"u8s8_gemv_4x16__avx2", gemv_run, 4};

}  // namespace nnkern
