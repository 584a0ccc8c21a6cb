// Integer GEMM micro-kernels for AVX-512 VNNI: u8 x s8 with vpdpbusd and s16 x s16 with vpdpwssd, zmm.
//
// Tile 64 x 6 (MR x NR), in the spirit of seed example 7-1 (broadcast 4 activation bytes, load 64 bytes of
// packed weights, many independent accumulators): per group of 4 k, 4 zmm loads of packed weights (64
// channels x 4 bytes), 6 vpbroadcastd of 4 activation bytes, 24 vpdpbusd into 24 accumulators. Register
// budget: 24 accumulators + 4 weight vectors + 1-2 broadcasts <= 32 zmm. 24 independent chains cover
// 2 ports x 5-cycle latency more than twice; loads are 10 per 24 vpdpbusd, within 2-3 loads/cycle.
// 6 B-column pointers + A + offset + counter fit the GPRs (see the FP32 kernel's note on 12 columns).
// The weight operand is s8 and the activation u8 (vpdpbusd's unsigned operand is the broadcast one).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/qgemm.h"

namespace nnkern {
namespace {

#include "kernels/inc/qgemm_tile.inc"
#include "kernels/inc/qgemm_zmm.inc"
#include "kernels/inc/qgemm_panel_sums_zmm.inc"

struct U8S8 : ZmmOps {
  static constexpr int G = 4;
  using AElem = int8_t;
  using BElem = uint8_t;
  static NNK_INLINE V dot(V acc, V b, V a) { return _mm512_dpbusd_epi32(acc, b, a); }
};
struct S16 : ZmmOps {
  static constexpr int G = 2;
  using AElem = int16_t;
  using BElem = int16_t;
  static NNK_INLINE V dot(V acc, V b, V a) { return _mm512_dpwssd_epi32(acc, b, a); }
};

}  // namespace

extern const QGemmKernel u8s8_gemm_64x6c4__avx512vnni = qgemm_with_panels(
    {"u8s8_gemm_64x6c4__avx512vnni", 64, 6, 4, QGemmTemplate<U8S8, 64, 6>::run, QKind::u8s8, false, 0, nullptr, 0, 0,
     panel_sums_c4<64>},
    QGemmTemplate<U8S8, 64, 6>::run_panels);
extern const QGemmKernel s16_gemm_64x6c2__avx512vnni = qgemm_with_panels(
    {"s16_gemm_64x6c2__avx512vnni", 64, 6, 2, QGemmTemplate<S16, 64, 6>::run, QKind::s16}, QGemmTemplate<S16, 64, 6>::run_panels);

}  // namespace nnkern

// ---- GEMV: small M straight from row-major B ----------------------------------------------------------
// B is read along its rows: per group of 16 rows, a block of up to kColBlock channels (one run of up to 2 KiB
// per row, which the hardware prefetchers stream), interleaved in registers 64 channels x 4 rows at a time (4
// masked loads, 8 vpunpck per 128-bit lane), then 4 (M + (colsum ? 1 : 0)) vpdpbusd per interleaved vector
// into accumulators kept in L1 for the whole block, each loaded and stored once per 16 rows. Walking
// 64-channel strips down all of K instead (registers as accumulators) read one line per row per strip, a page
// apart, far below the bandwidth (docs/performance.md: "qgemm: GEMV"). The lane-wise interleave leaves
// accumulator q of a 64-channel group holding channels 16 L + 4 q + d in lane L; one 4 x 4 transpose of 128-bit
// blocks (vshufi32x4) converts to and from the channel order at the block's load and store.
namespace nnkern {
namespace {

constexpr size_t kAccBytes = 24 * 1024;  // the block's accumulators (M rows + the column sums): half of L1

// The 4 x 4 transpose of 128-bit blocks between accumulator order and channel order (its own inverse).
NNK_INLINE void transpose_blocks(__m512i (&v)[4]) {
  const __m512i t0 = _mm512_maskz_shuffle_i32x4(0xFFFF, v[0], v[1], 0x44), t1 = _mm512_maskz_shuffle_i32x4(0xFFFF, v[2], v[3], 0x44);
  const __m512i t2 = _mm512_maskz_shuffle_i32x4(0xFFFF, v[0], v[1], 0xEE), t3 = _mm512_maskz_shuffle_i32x4(0xFFFF, v[2], v[3], 0xEE);
  v[0] = _mm512_maskz_shuffle_i32x4(0xFFFF, t0, t1, 0x88);
  v[1] = _mm512_maskz_shuffle_i32x4(0xFFFF, t0, t1, 0xDD);
  v[2] = _mm512_maskz_shuffle_i32x4(0xFFFF, t2, t3, 0x88);
  v[3] = _mm512_maskz_shuffle_i32x4(0xFFFF, t2, t3, 0xDD);
}

NNK_INLINE __mmask16 block_mask(size_t nn, int l) {
  if (nn <= size_t(16 * l)) return 0;
  const size_t left = nn - 16 * l;
  return left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1u);
}

// acc[g * 4 .. g * 4 + 3]: the 64-channel group g in accumulator order, from / to channel order at p.
NNK_INLINE void load_group(__m512i* acc, const int32_t* p, size_t nn) {
  __m512i v[4];
  for (int l = 0; l < 4; ++l) v[l] = _mm512_maskz_loadu_epi32(block_mask(nn, l), p + 16 * l);
  transpose_blocks(v);
  for (int l = 0; l < 4; ++l) acc[l] = v[l];
}
NNK_INLINE void store_group(const __m512i* acc, int32_t* p, size_t nn) {
  __m512i v[4] = {acc[0], acc[1], acc[2], acc[3]};
  transpose_blocks(v);
  for (int l = 0; l < 4; ++l) _mm512_mask_storeu_epi32(p + 16 * l, block_mask(nn, l), v[l]);
}

// kT quads of rows (4 k each, from row k, the last one `r` rows, zero beyond) of one 64-channel group,
// interleaved into w[t][q]; each accumulator of the group is then loaded once, gets kT vpdpbusd per row of
// A and is stored: with kT = 4, 4 times fewer L1 round trips than one quad at a time (the stores bound the
// loop).
template <int kM, bool kSum, int kT>
NNK_INLINE void gemv_quads(size_t k, size_t r, const uint8_t* a, size_t lda, const int8_t* p, size_t ldb,
                           __mmask64 mask, __m512i* am, size_t m_stride, __m512i* sum) {
  const __m512i z = _mm512_setzero_si512();
  __m512i w[kT][4];
#pragma GCC unroll 4
  for (int t = 0; t < kT; ++t) {
    const size_t rt = t + 1 < kT ? 4 : r;  // rows of this quad
    const int8_t* q0 = p + (k + 4 * size_t(t)) * ldb;
    const __m512i r0 = _mm512_maskz_loadu_epi8(mask, q0);
    const __m512i r1 = rt > 1 ? _mm512_maskz_loadu_epi8(mask, q0 + ldb) : z;
    const __m512i r2 = rt > 2 ? _mm512_maskz_loadu_epi8(mask, q0 + 2 * ldb) : z;
    const __m512i r3 = rt > 3 ? _mm512_maskz_loadu_epi8(mask, q0 + 3 * ldb) : z;
    const __m512i lo01 = _mm512_unpacklo_epi8(r0, r1), hi01 = _mm512_unpackhi_epi8(r0, r1);
    const __m512i lo23 = _mm512_unpacklo_epi8(r2, r3), hi23 = _mm512_unpackhi_epi8(r2, r3);
    w[t][0] = _mm512_unpacklo_epi16(lo01, lo23);
    w[t][1] = _mm512_unpackhi_epi16(lo01, lo23);
    w[t][2] = _mm512_unpacklo_epi16(hi01, hi23);
    w[t][3] = _mm512_unpackhi_epi16(hi01, hi23);
  }
#pragma GCC unroll 16
  for (int m = 0; m < kM; ++m) {
    __m512i bm[kT];
#pragma GCC unroll 4
    for (int t = 0; t < kT; ++t) {
      const size_t rt = t + 1 < kT ? 4 : r;
      int32_t word = 0;
      __builtin_memcpy(&word, a + m * lda + k + 4 * size_t(t), rt);  // never past a[m][K-1]
      bm[t] = _mm512_set1_epi32(word);
    }
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      __m512i v = am[m * m_stride + q];
#pragma GCC unroll 4
      for (int t = 0; t < kT; ++t) v = _mm512_dpbusd_epi32(v, bm[t], w[t][q]);
      am[m * m_stride + q] = v;
    }
  }
  if (kSum) {
    const __m512i ones = _mm512_set1_epi8(1);
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      __m512i v = sum[q];
#pragma GCC unroll 4
      for (int t = 0; t < kT; ++t) v = _mm512_dpbusd_epi32(v, ones, w[t][q]);
      sum[q] = v;
    }
  }
}

// One block of nn <= block channels, all of K, rows of B along: 16 rows at a time, then single quads.
template <int kM, bool kSum>
__attribute__((noinline)) void gemv_block(size_t nn, size_t K, const uint8_t* a, size_t lda, const int8_t* b,
                                          size_t ldb, int32_t* c, size_t ldc, int32_t* colsum, bool accumulate,
                                          __m512i* acc) {
  const size_t groups = (nn + 63) / 64;
  __m512i* sum = acc + kM * groups * 4;
  for (size_t g = 0; g < groups; ++g) {
    const size_t left = nn - 64 * g;
    for (int m = 0; m < kM; ++m) {
      if (accumulate) load_group(acc + (m * groups + g) * 4, c + m * ldc + 64 * g, left);
      else for (int q = 0; q < 4; ++q) acc[(m * groups + g) * 4 + q] = _mm512_setzero_si512();
    }
    if (kSum) {
      if (accumulate) load_group(sum + g * 4, colsum + 64 * g, left);
      else for (int q = 0; q < 4; ++q) sum[g * 4 + q] = _mm512_setzero_si512();
    }
  }
  const auto mask_of = [&](size_t g) {
    const size_t left = nn - 64 * g;
    return left >= 64 ? ~__mmask64(0) : ((__mmask64(1) << left) - 1);
  };
  const size_t m_stride = groups * 4;
  size_t k = 0;
  for (; k + 16 <= K; k += 16)
    for (size_t g = 0; g < groups; ++g)
      gemv_quads<kM, kSum, 4>(k, 4, a, lda, b + 64 * g, ldb, mask_of(g), acc + g * 4, m_stride, sum + g * 4);
  for (; k < K; k += 4)
    for (size_t g = 0; g < groups; ++g)
      gemv_quads<kM, kSum, 1>(k, K - k < 4 ? K - k : 4, a, lda, b + 64 * g, ldb, mask_of(g), acc + g * 4, m_stride,
                              sum + g * 4);
  for (size_t g = 0; g < groups; ++g) {
    const size_t left = nn - 64 * g;
    for (int m = 0; m < kM; ++m) store_group(acc + (m * groups + g) * 4, c + m * ldc + 64 * g, left);
    if (kSum) store_group(sum + g * 4, colsum + 64 * g, left);
  }
}

template <int kM>
void gemv_m(size_t nn, size_t K, const uint8_t* a, size_t lda, const int8_t* b, size_t ldb, int32_t* c, size_t ldc,
            int32_t* colsum, bool accumulate) {
  alignas(64) __m512i acc[kAccBytes / 64];
  const size_t rows = size_t(kM) + (colsum ? 1 : 0);
  const size_t block = kAccBytes / (rows * 4) / 64 * 64;  // channels per block
  for (size_t n0 = 0; n0 < nn; n0 += block) {
    const size_t w = nn - n0 < block ? nn - n0 : block;
    if (colsum) gemv_block<kM, true>(w, K, a, lda, b + n0, ldb, c + n0, ldc, colsum + n0, accumulate, acc);
    else gemv_block<kM, false>(w, K, a, lda, b + n0, ldb, c + n0, ldc, nullptr, accumulate, acc);
  }
}

// Accumulators in L1, not registers: more rows cost only their vpdpbusd. Up to 12 rows this path beats
// packing B even for the AMX kernel; at 16 rows it no longer does everywhere (docs/performance.md: "qgemm:
// GEMV").
#define NNK_GEMV_MAX_M 12
#include "kernels/inc/qgemv_run.inc"

}  // namespace

extern const QGemvKernel u8s8_gemv_12x64__avx512vnni = {"u8s8_gemv_12x64__avx512vnni", gemv_run, 12};

}  // namespace nnkern
