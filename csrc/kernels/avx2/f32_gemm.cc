// FP32 GEMM micro-kernel for AVX2 + FMA: oneDNN's 16x6 register tile (seeds O1, O3-O6).
//
// Column-major terms (see kernels/f32_gemm.h): per k step p, two ymm hold the 16-float column A(:, p),
// each B(p, j) is broadcast (vbroadcastss) and multiplied into 2 of 12 accumulators (vfmadd231ps).
// 12 accumulators + 2 A + 1-2 broadcast registers fit the 16 ymm; 12 independent FMA chains cover
// 2 FMA ports x 4-cycle latency.
//
// Every tail is an instantiation of ONE template, tile<kMClass, kN, kCopy>:
//   kMClass (seed O5): m = 16 (two full moves), 9..15 (one full + one masked move), 8 (one full move),
//                      1..7 (one masked move). Masked moves are vmaskmovps, which never fault on
//                      masked-out lanes, so A is never read past row m-1 and C never touched outside m x n.
//   kN (seed O4):      n = 6..1, only b[0..n-1] are dereferenced.
//   K (seed O3):       a loop of 8 steps, then 4, 2 and 1 steps applied in sequence.
//   kCopy (seed O6):   also store the A panel to a_copy[p * 16 + i] (i < m) as it is read.
// The epilogue (alpha, beta, bias, clamp) is applied once per tile, at store time.
//
// One-definition rule: this file is compiled with -mavx2 -mfma; every helper lives in an anonymous
// namespace (internal linkage) and no STL is used, so no AVX2 code can be picked by the linker for
// baseline callers.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/f32_gemm.h"

#define NNK_INLINE inline __attribute__((always_inline))

namespace nnkern {
namespace {

constexpr int kMR = 16, kNR = 6;

enum MClass : int { kM16 = 0, kM9to15 = 1, kM8 = 2, kM1to7 = 3 };

// Lane i of tail_mask(r) is all-ones iff i < r (1 <= r <= 8).
alignas(64) const int32_t kMaskTable[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

NNK_INLINE __m256i tail_mask(size_t r) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kMaskTable + 8 - r));
}

template <int kMC>
struct MShape {
  static constexpr int kNV = (kMC == kM16 || kMC == kM9to15) ? 2 : 1;  // ymm per A column
  static constexpr bool kMasked = (kMC == kM9to15 || kMC == kM1to7);  // last ymm is partial
};

// Vector v (of kNV) of a 16-row column: the last one masked for the partial classes.
template <int kMC>
NNK_INLINE __m256 load_v(const float* p, int v, __m256i mask) {
  if (MShape<kMC>::kMasked && v == MShape<kMC>::kNV - 1) return _mm256_maskload_ps(p + 8 * v, mask);
  return _mm256_loadu_ps(p + 8 * v);
}

template <int kMC>
NNK_INLINE void store_v(float* p, int v, __m256 x, __m256i mask) {
  if (MShape<kMC>::kMasked && v == MShape<kMC>::kNV - 1)
    _mm256_maskstore_ps(p + 8 * v, mask, x);
  else
    _mm256_storeu_ps(p + 8 * v, x);
}

// kSteps consecutive k steps: A column loads (once per p), optional panel copy, kN broadcasts, FMAs.
template <int kMC, int kN, bool kCopy, int kSteps>
NNK_INLINE void steps(__m256 (&acc)[kN][2], const float*& a, size_t a_stride, float*& a_copy,
                      const float* const (&bp)[kN], size_t& o, size_t b_stride, __m256i mask) {
  constexpr int kNV = MShape<kMC>::kNV;
  // The 8-step block (seed O3's k8) is emitted as two 4-step bodies: with a full 8x unroll GCC 12's
  // register allocator rotates accumulators through vmovaps and spills to the stack; at 4 steps the
  // loop body is exactly 8 A loads, 24 vbroadcastss, 48 vfmadd231ps and 2 pointer adds per 4 k.
#pragma GCC unroll 4
  for (int u = 0; u < kSteps; ++u) {
    __m256 va[kNV];
#pragma GCC unroll 2
    for (int v = 0; v < kNV; ++v) va[v] = load_v<kMC>(a, v, mask);
    if (kCopy) {
#pragma GCC unroll 2
      for (int v = 0; v < kNV; ++v) store_v<kMC>(a_copy, v, va[v], mask);
      a_copy += kMR;
    }
#pragma GCC unroll 6
    for (int j = 0; j < kN; ++j) {
      const __m256 vb = _mm256_broadcast_ss(bp[j] + o);
#pragma GCC unroll 2
      for (int v = 0; v < kNV; ++v) acc[j][v] = _mm256_fmadd_ps(va[v], vb, acc[j][v]);
    }
    a += a_stride;
    o += b_stride;
    // Keep one induction variable each for A and B: without this GCC precomputes a separate offset
    // register per unrolled step (o + u * b_stride) and runs out of GPRs (spills in the hot loop).
    __asm__("" : "+r"(a), "+r"(o));
  }
}

template <int kMC, int kN, bool kCopy>
__attribute__((noinline)) void tile(size_t m, size_t k, const float* a, size_t a_stride, float* a_copy,
                                    const float* const* b, size_t b_stride, float* c, size_t ldc,
                                    const F32Epilogue* ep) {
  constexpr int kNV = MShape<kMC>::kNV;
  const __m256i mask = MShape<kMC>::kMasked ? tail_mask(m - 8 * (kNV - 1)) : _mm256_setzero_si256();

  const float* bp[kN];
#pragma GCC unroll 6
  for (int j = 0; j < kN; ++j) bp[j] = b[j];

  __m256 acc[kN][2];
#pragma GCC unroll 6
  for (int j = 0; j < kN; ++j)
#pragma GCC unroll 2
    for (int v = 0; v < kNV; ++v) acc[j][v] = _mm256_setzero_ps();

  // The C tile is read (or written) only after the K loop: start fetching its lines now, so the
  // misses of a C larger than L2 overlap with the FMAs instead of stalling the epilogue.
#pragma GCC unroll 6
  for (int j = 0; j < kN; ++j) {
    const char* col = reinterpret_cast<const char*>(c + j * ldc);
    for (size_t off = 0; off < m * sizeof(float); off += 64) _mm_prefetch(col + off, _MM_HINT_T0);
    _mm_prefetch(col + (m - 1) * sizeof(float), _MM_HINT_T0);  // the last line of an unaligned column
  }

  size_t o = 0;  // B(p, j) = bp[j][o], o = p * b_stride
  size_t kk = k;
  for (; kk >= 8; kk -= 8) steps<kMC, kN, kCopy, 8>(acc, a, a_stride, a_copy, bp, o, b_stride, mask);
  if (kk & 4) steps<kMC, kN, kCopy, 4>(acc, a, a_stride, a_copy, bp, o, b_stride, mask);
  if (kk & 2) steps<kMC, kN, kCopy, 2>(acc, a, a_stride, a_copy, bp, o, b_stride, mask);
  if (kk & 1) steps<kMC, kN, kCopy, 1>(acc, a, a_stride, a_copy, bp, o, b_stride, mask);

  // Epilogue, in the reference's order: alpha * acc, + beta * C (C read only if beta != 0), + bias, clamp.
  const __m256 valpha = _mm256_set1_ps(ep->alpha);
#pragma GCC unroll 6
  for (int j = 0; j < kN; ++j)
#pragma GCC unroll 2
    for (int v = 0; v < kNV; ++v) acc[j][v] = _mm256_mul_ps(valpha, acc[j][v]);
  if (ep->beta != 0.0f) {
    const __m256 vbeta = _mm256_set1_ps(ep->beta);
#pragma GCC unroll 6
    for (int j = 0; j < kN; ++j)
#pragma GCC unroll 2
      for (int v = 0; v < kNV; ++v)
        acc[j][v] = _mm256_add_ps(acc[j][v], _mm256_mul_ps(vbeta, load_v<kMC>(c + j * ldc, v, mask)));
  }
  if (ep->bias) {
#pragma GCC unroll 2
    for (int v = 0; v < kNV; ++v) {
      const __m256 vbias = load_v<kMC>(ep->bias, v, mask);
#pragma GCC unroll 6
      for (int j = 0; j < kN; ++j) acc[j][v] = _mm256_add_ps(acc[j][v], vbias);
    }
  }
  if (ep->clamp) {
    // vmaxps/vminps return the second operand when either is NaN: a NaN result passes through unchanged.
    const __m256 vmin = _mm256_set1_ps(ep->clamp_min), vmax = _mm256_set1_ps(ep->clamp_max);
#pragma GCC unroll 6
    for (int j = 0; j < kN; ++j)
#pragma GCC unroll 2
      for (int v = 0; v < kNV; ++v) acc[j][v] = _mm256_min_ps(vmax, _mm256_max_ps(vmin, acc[j][v]));
  }
#pragma GCC unroll 6
  for (int j = 0; j < kN; ++j)
#pragma GCC unroll 2
    for (int v = 0; v < kNV; ++v) store_v<kMC>(c + j * ldc, v, acc[j][v], mask);
}

using TileFn = void (*)(size_t, size_t, const float*, size_t, float*, const float* const*, size_t, float*, size_t,
                        const F32Epilogue*);

// n -> tile<kMC, n, kCopy>, by compile-time recursion (kN = kNR .. 1).
template <int kMC, bool kCopy, int kN = kNR>
NNK_INLINE TileFn pick_n(size_t n) {
  if (n == static_cast<size_t>(kN)) return tile<kMC, kN, kCopy>;
  if constexpr (kN > 1) return pick_n<kMC, kCopy, kN - 1>(n);
  return nullptr;
}

template <bool kCopy>
NNK_INLINE TileFn pick(size_t m, size_t n) {
  if (m == 16) return pick_n<kM16, kCopy>(n);
  if (m > 8) return pick_n<kM9to15, kCopy>(n);
  if (m == 8) return pick_n<kM8, kCopy>(n);
  return pick_n<kM1to7, kCopy>(n);
}

void f32_gemm_16x6__avx2_run(size_t m, size_t n, size_t k, const float* a, size_t a_stride, float* a_copy,
                             const float* const* b, size_t b_stride, float* c, size_t ldc, const F32Epilogue* ep) {
  if (m == 0) return;
  if (n == 0) {  // nothing to compute, but the panel copy is still owed
    for (size_t p = 0; p < k && a_copy; ++p)
      for (size_t i = 0; i < m; ++i) a_copy[p * kMR + i] = a[p * a_stride + i];
    return;
  }
  const TileFn fn = a_copy ? pick<true>(m, n) : pick<false>(m, n);
  fn(m, k, a, a_stride, a_copy, b, b_stride, c, ldc, ep);
}

}  // namespace

const F32GemmKernel f32_gemm_16x6__avx2 = {"f32_gemm_16x6__avx2", kMR, kNR, f32_gemm_16x6__avx2_run};

}  // namespace nnkern
