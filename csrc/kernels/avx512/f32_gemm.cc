// FP32 GEMM micro-kernel for AVX-512 (F): a 48x8 register tile, the 512-bit analogue of seed O1.
//
// Why 48 x 8 (MR x NR): 32 zmm registers hold 24 accumulators (3 zmm of A rows x 8 B columns), the
// 3 zmm of the A column and the broadcasts of B. 24 independent FMA chains are 3x the 8 needed to
// cover 2 FMA ports x 4-cycle latency. Per k step: 3 A loads + 8 broadcasts feed 24 FMAs
// (0.46 loads/FMA, each broadcast reused by 3 FMAs), well inside 2 loads/cycle at 2 FMAs/cycle.
// 32x12 (also 24 accumulators) would need fewer bytes per flop (44 vs 56 floats per step), but its
// 12 independent B column pointers plus A, the offsets, strides and the counter exceed the 15 usable
// GPRs, so the hot loop would reload B pointers from the stack; with 8 B pointers everything stays
// in registers. (The B operand is one pointer per column by contract, so columns cannot share one
// base register.)
//
// Every tail is an instantiation of ONE template, tile<kNV, kMasked, kN, kCopy>:
//   M (seed O5 with opmasks): kNV = ceil(m / 16) zmm per A column, the last one masked when
//     m % 16 != 0 (_mm512_maskz_loadu_ps / _mm512_mask_storeu_ps: masked lanes never fault), so A is
//     never read past row m-1 and C never touched outside the m x n tile.
//   kN = 8..1 (seed O4): only b[0..n-1] are dereferenced.
//   K (seed O3): a loop of 8 steps, then 4, 2 and 1 steps applied in sequence.
//   kCopy (seed O6): also store the A panel to a_copy[p * 48 + i] (i < m) as it is read.
// The epilogue (alpha, beta, bias, clamp) is applied once per tile, at store time.
//
// One-definition rule: this file is compiled with AVX-512 flags; every helper lives in an anonymous
// namespace (internal linkage) and no STL is used.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/f32_gemm.h"

#define NNK_INLINE inline __attribute__((always_inline))

namespace nnkern {
namespace {

constexpr int kMR = 48, kNR = 8;
constexpr int kMV = kMR / 16;  // zmm per full A column

template <int kNV, bool kMasked>
NNK_INLINE __m512 load_v(const float* p, int v, __mmask16 mask) {
  if (kMasked && v == kNV - 1) return _mm512_maskz_loadu_ps(mask, p + 16 * v);
  return _mm512_loadu_ps(p + 16 * v);
}

template <int kNV, bool kMasked>
NNK_INLINE void store_v(float* p, int v, __m512 x, __mmask16 mask) {
  if (kMasked && v == kNV - 1)
    _mm512_mask_storeu_ps(p + 16 * v, mask, x);
  else
    _mm512_storeu_ps(p + 16 * v, x);
}

template <int kNV, bool kMasked, int kN, bool kCopy, int kSteps>
NNK_INLINE void steps(__m512 (&acc)[kN][kMV], const float*& a, size_t a_stride, float*& a_copy,
                      const float* const (&bp)[kN], size_t& o, size_t b_stride, __mmask16 mask) {
  // The 8-step block (seed O3's k8) is emitted as a loop of single steps: any unroll makes GCC 12's
  // register allocator rotate the 24 accumulators through vmovaps and spill; rolled, one step is
  // exactly 3 A loads, 8 vbroadcastss, 24 vfmadd231ps, 2 pointer adds and a fused sub+jne.
#pragma GCC unroll 1
  for (int u = 0; u < kSteps; ++u) {
    __m512 va[kNV];
#pragma GCC unroll 3
    for (int v = 0; v < kNV; ++v) va[v] = load_v<kNV, kMasked>(a, v, mask);
    if (kCopy) {
#pragma GCC unroll 3
      for (int v = 0; v < kNV; ++v) store_v<kNV, kMasked>(a_copy, v, va[v], mask);
      a_copy += kMR;
    }
#pragma GCC unroll 8
    for (int j = 0; j < kN; ++j) {
      const __m512 vb = _mm512_set1_ps(bp[j][o]);
#pragma GCC unroll 3
      for (int v = 0; v < kNV; ++v) acc[j][v] = _mm512_fmadd_ps(va[v], vb, acc[j][v]);
    }
    a += a_stride;
    o += b_stride;
    // One induction variable each for A and B (GCC would otherwise keep an offset register per step).
    __asm__("" : "+r"(a), "+r"(o));
  }
}

template <int kNV, bool kMasked, int kN, bool kCopy>
__attribute__((noinline)) void tile(size_t m, size_t k, const float* a, size_t a_stride, float* a_copy,
                                    const float* const* b, size_t b_stride, float* c, size_t ldc,
                                    const F32Epilogue* ep) {
  const __mmask16 mask = kMasked ? static_cast<__mmask16>((1u << (m - 16 * (kNV - 1))) - 1u) : 0;

  const float* bp[kN];
#pragma GCC unroll 8
  for (int j = 0; j < kN; ++j) bp[j] = b[j];

  __m512 acc[kN][kMV];
#pragma GCC unroll 8
  for (int j = 0; j < kN; ++j)
#pragma GCC unroll 3
    for (int v = 0; v < kNV; ++v) acc[j][v] = _mm512_setzero_ps();

  // The C tile is read (or written) only after the K loop: start fetching its lines now, so the
  // misses of a C larger than L2 overlap with the FMAs instead of stalling the epilogue.
#pragma GCC unroll 8
  for (int j = 0; j < kN; ++j) {
    const char* col = reinterpret_cast<const char*>(c + j * ldc);
    for (size_t off = 0; off < m * sizeof(float); off += 64) _mm_prefetch(col + off, _MM_HINT_T0);
    _mm_prefetch(col + (m - 1) * sizeof(float), _MM_HINT_T0);  // the last line of an unaligned column
  }

  size_t o = 0;  // B(p, j) = bp[j][o], o = p * b_stride
  size_t kk = k;
  for (; kk >= 8; kk -= 8) steps<kNV, kMasked, kN, kCopy, 8>(acc, a, a_stride, a_copy, bp, o, b_stride, mask);
  if (kk & 4) steps<kNV, kMasked, kN, kCopy, 4>(acc, a, a_stride, a_copy, bp, o, b_stride, mask);
  if (kk & 2) steps<kNV, kMasked, kN, kCopy, 2>(acc, a, a_stride, a_copy, bp, o, b_stride, mask);
  if (kk & 1) steps<kNV, kMasked, kN, kCopy, 1>(acc, a, a_stride, a_copy, bp, o, b_stride, mask);

  // Epilogue, in the reference's order: alpha * acc, + beta * C (C read only if beta != 0), + bias, clamp.
  const __m512 valpha = _mm512_set1_ps(ep->alpha);
#pragma GCC unroll 8
  for (int j = 0; j < kN; ++j)
#pragma GCC unroll 3
    for (int v = 0; v < kNV; ++v) acc[j][v] = _mm512_mul_ps(valpha, acc[j][v]);
  if (ep->beta != 0.0f) {
    const __m512 vbeta = _mm512_set1_ps(ep->beta);
#pragma GCC unroll 8
    for (int j = 0; j < kN; ++j)
#pragma GCC unroll 3
      for (int v = 0; v < kNV; ++v)
        acc[j][v] = _mm512_add_ps(acc[j][v], _mm512_mul_ps(vbeta, load_v<kNV, kMasked>(c + j * ldc, v, mask)));
  }
  if (ep->bias) {
#pragma GCC unroll 3
    for (int v = 0; v < kNV; ++v) {
      const __m512 vbias = load_v<kNV, kMasked>(ep->bias, v, mask);
#pragma GCC unroll 8
      for (int j = 0; j < kN; ++j) acc[j][v] = _mm512_add_ps(acc[j][v], vbias);
    }
  }
  if (ep->clamp) {
    // vmaxps/vminps return the second operand when either is NaN: a NaN result passes through unchanged.
    const __m512 vmin = _mm512_set1_ps(ep->clamp_min), vmax = _mm512_set1_ps(ep->clamp_max);
#pragma GCC unroll 8
    for (int j = 0; j < kN; ++j)
#pragma GCC unroll 3
      for (int v = 0; v < kNV; ++v) {
        // The all-lanes mask_ forms emit plain vmaxps/vminps; the unmasked intrinsics trip GCC 12's
        // false -Wmaybe-uninitialized on _mm512_undefined_ps (GCC PR 105593).
        const __m512 x = _mm512_mask_max_ps(acc[j][v], 0xFFFF, vmin, acc[j][v]);
        acc[j][v] = _mm512_mask_min_ps(x, 0xFFFF, vmax, x);
      }
  }
#pragma GCC unroll 8
  for (int j = 0; j < kN; ++j)
#pragma GCC unroll 3
    for (int v = 0; v < kNV; ++v) store_v<kNV, kMasked>(c + j * ldc, v, acc[j][v], mask);
}

using TileFn = void (*)(size_t, size_t, const float*, size_t, float*, const float* const*, size_t, float*, size_t,
                        const F32Epilogue*);

// n -> tile<..., n, ...>, by compile-time recursion (kN = kNR .. 1).
template <int kNV, bool kMasked, bool kCopy, int kN = kNR>
NNK_INLINE TileFn pick_n(size_t n) {
  if (n == static_cast<size_t>(kN)) return tile<kNV, kMasked, kN, kCopy>;
  if constexpr (kN > 1) return pick_n<kNV, kMasked, kCopy, kN - 1>(n);
  return nullptr;
}

// m -> (kNV = ceil(m / 16), kMasked = m % 16 != 0), by compile-time recursion (kNV = kMV .. 1).
template <bool kCopy, int kNV = kMV>
NNK_INLINE TileFn pick(size_t m, size_t n) {
  if (m > static_cast<size_t>(16 * (kNV - 1))) {
    return m == static_cast<size_t>(16 * kNV) ? pick_n<kNV, false, kCopy>(n) : pick_n<kNV, true, kCopy>(n);
  }
  if constexpr (kNV > 1) return pick<kCopy, kNV - 1>(m, n);
  return nullptr;
}

void f32_gemm_avx512_run(size_t m, size_t n, size_t k, const float* a, size_t a_stride, float* a_copy,
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

const F32GemmKernel f32_gemm_avx512 = {"f32_gemm_48x8__avx512", kMR, kNR, f32_gemm_avx512_run};

}  // namespace nnkern
