// FP32 skinny-GEMM kernels for AArch64 NEON (ARMv8.0): see kernels/f32_gemv.h for the contract.
//
// rows (GEMV, y = x B with B rows contiguous; Linear at batch 1): blocks of 8 rows of B x 32 columns:
//   the 8 x values sit in 2 q registers and each FMLA takes its x as a lane (`fmla v.4s, v.4s, v.s[l]`),
//   8 accumulators (32 columns) + 2 x registers + 8 B loads per row pair in flight: about 20 of the 32
//   V registers. 8 sequential row streams, each read once. Row tails: 4, 2, 1; column tails: 4-wide
//   vectors, then scalar FMAs (each column is the same single FMA chain in p order either way).
// dot (small N, or GEMV against a transposed B): a 3 x 4 tile of accumulators (12 q + 3 A rows + 1 B^T
//   row), each a 4-lane partial sum along K; per 4-step of K, 3 + 4 loads feed 12 independent FMLAs. The
//   K tail (k % 4) is loaded through a zeroed stack copy (NEON has no masked loads: nothing past
//   a[i][k-1] / bt[j][k-1] is read). Lanes are added in a fixed order: (0 + 2) + (1 + 3).
// Every (m, n) dot tile is an instantiation of ONE template, dot_tile<kM, kN>.
//
// One-definition rule: NEON flags only; helpers in an anonymous namespace, no STL.
#include <arm_neon.h>

#include <cstddef>

#include "kernels/f32_gemv.h"

#define NNK_INLINE inline __attribute__((always_inline))

namespace nnkern {
namespace {

constexpr int kDotMR = 3, kDotNR = 4;

// The first r (< 4) floats at p, zero-filled: the masked load of the K / column tails.
NNK_INLINE float32x4_t load_partial(const float* p, size_t r) {
  float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (size_t i = 0; i < r; ++i) t[i] = p[i];
  return vld1q_f32(t);
}

NNK_INLINE float hsum(float32x4_t v) {
  const float32x4_t s = vaddq_f32(v, vextq_f32(v, v, 2));  // (0 + 2, 1 + 3, ...)
  return vgetq_lane_f32(s, 0) + vgetq_lane_f32(s, 1);
}

template <int L>
NNK_INLINE float32x4_t fma_x(float32x4_t acc, float32x4_t b, const float32x4_t (&vx)[2]) {
  return vfmaq_laneq_f32(acc, b, vx[L / 4], L % 4);
}

#include "kernels/inc/f32_gemv_row_blocks.inc"  // for_row_blocks

// x's kR values of a block of rows: as scalars (the column tail's FMADDs) and as lanes of two q registers.
template <int kR>
struct RowValues {
  float xs[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  float32x4_t vx[2];
  RowValues(const float* x, size_t incx) {
    for (int r = 0; r < kR; ++r) xs[r] = x[r * incx];
    vx[0] = vld1q_f32(xs);
    vx[1] = vld1q_f32(xs + 4);
  }
};

// acc[j] += sum over the kR rows, in row order, of x[r] * b[r * ldb + j], for j < n.
template <int kR>
NNK_INLINE void rows_block_of(size_t n, const RowValues<kR>& x, const float* b, size_t ldb, float* acc) {
  const float32x4_t(&vx)[2] = x.vx;
  const float* br[kR];
#pragma GCC unroll 8
  for (int r = 0; r < kR; ++r) br[r] = b + r * ldb;
  size_t j = 0;
  for (; j + 32 <= n; j += 32) {
    float32x4_t s[8];
#pragma GCC unroll 8
    for (int v = 0; v < 8; ++v) s[v] = vld1q_f32(acc + j + 4 * v);
#define NNK_ROW(R)                                                                          \
  if (R < kR) {                                                                             \
    _Pragma("GCC unroll 8") for (int v = 0; v < 8; ++v) s[v] = fma_x<R>(s[v], vld1q_f32(br[R] + j + 4 * v), vx); \
  }
    NNK_ROW(0) NNK_ROW(1) NNK_ROW(2) NNK_ROW(3) NNK_ROW(4) NNK_ROW(5) NNK_ROW(6) NNK_ROW(7)
#undef NNK_ROW
#pragma GCC unroll 8
    for (int v = 0; v < 8; ++v) vst1q_f32(acc + j + 4 * v, s[v]);
  }
  for (; j + 4 <= n; j += 4) {
    float32x4_t s = vld1q_f32(acc + j);
#define NNK_ROW(R) \
  if (R < kR) s = fma_x<R>(s, vld1q_f32(br[R] + j), vx);
    NNK_ROW(0) NNK_ROW(1) NNK_ROW(2) NNK_ROW(3) NNK_ROW(4) NNK_ROW(5) NNK_ROW(6) NNK_ROW(7)
#undef NNK_ROW
    vst1q_f32(acc + j, s);
  }
  for (; j < n; ++j) {
    float s = acc[j];
    for (int r = 0; r < kR; ++r) s = __builtin_fmaf(x.xs[r], br[r][j], s);  // FMADD: the lanes' single rounding
    acc[j] = s;
  }
}

void rows_neon(size_t n, size_t k, const float* x, size_t incx, const float* b, size_t ldb, float* acc) {
  if (n == 0) return;
  for_row_blocks(k, [&](auto rows, size_t p) NNK_INLINE_LAMBDA {
    constexpr int kR = decltype(rows)::value;
    rows_block_of<kR>(n, RowValues<kR>(x + p * incx, incx), b + p * ldb, ldb, acc);
  });
}

// rows_panels: per block of kR rows, x's values once for every panel, then each panel's columns in rows_neon's
// order; the panels' chains are independent, so the core overlaps them.
void rows_panels_neon(size_t np, size_t pw, size_t k, const float* x, const float* b, size_t panel_stride,
                      float* acc) {
  if (pw == 0) return;
  for_row_blocks(k, [&](auto rows, size_t p) NNK_INLINE_LAMBDA {
    constexpr int kR = decltype(rows)::value;
    const RowValues<kR> xr(x + p, 1);
    for (size_t q = 0; q < np; ++q) rows_block_of<kR>(pw, xr, b + q * panel_stride + p * pw, pw, acc + q * pw);
  });
}

// alpha * acc, + beta * C (only if beta != 0), + bias, clamp: the order of f32_gemm's epilogue. FMAX /
// FMIN return NaN when either operand is NaN, so a NaN result passes the clamp, as in the reference.
NNK_INLINE float32x4_t epilogue_v(float32x4_t v, float32x4_t c, float32x4_t bias, bool has_bias,
                                  const F32Epilogue& ep) {
  v = vmulq_n_f32(v, ep.alpha);
  if (ep.beta != 0.0f) v = vaddq_f32(v, vmulq_n_f32(c, ep.beta));
  if (has_bias) v = vaddq_f32(v, bias);
  if (ep.clamp) v = vminq_f32(vmaxq_f32(v, vdupq_n_f32(ep.clamp_min)), vdupq_n_f32(ep.clamp_max));
  return v;
}

void store_neon(size_t n, const float* acc, float* c, const F32Epilogue* ep) {
  const bool beta = ep->beta != 0.0f, bias = ep->bias != nullptr;
  size_t j = 0;
  for (; j + 4 <= n; j += 4)
    vst1q_f32(c + j, epilogue_v(vld1q_f32(acc + j), beta ? vld1q_f32(c + j) : vdupq_n_f32(0.0f),
                                bias ? vld1q_f32(ep->bias + j) : vdupq_n_f32(0.0f), bias, *ep));
  for (; j < n; ++j) c[j] = f32_epilogue_scalar(acc[j], c + j, j, *ep);
}

template <int kM, int kN>
NNK_INLINE void dot_step(float32x4_t (&acc)[kM][kN], const float32x4_t (&va)[kM], const float* const (&br)[kN],
                         size_t p, size_t r) {
#pragma GCC unroll 4
  for (int j = 0; j < kN; ++j) {
    const float32x4_t vb = r == 4 ? vld1q_f32(br[j] + p) : load_partial(br[j] + p, r);
#pragma GCC unroll 3
    for (int i = 0; i < kM; ++i) acc[i][j] = vfmaq_f32(acc[i][j], va[i], vb);
  }
}

template <int kM, int kN>
__attribute__((noinline)) void dot_tile(size_t k, const float* a, size_t lda, const float* bt, size_t ldbt, float* c,
                                        size_t ldc, const F32Epilogue* ep) {
  const float* ar[kM];
  const float* br[kN];
#pragma GCC unroll 3
  for (int i = 0; i < kM; ++i) ar[i] = a + i * lda;
#pragma GCC unroll 4
  for (int j = 0; j < kN; ++j) br[j] = bt + j * ldbt;
  float32x4_t acc[kM][kN];
#pragma GCC unroll 3
  for (int i = 0; i < kM; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < kN; ++j) acc[i][j] = vdupq_n_f32(0.0f);
  size_t p = 0;
  for (; p + 4 <= k; p += 4) {
    float32x4_t va[kM];
#pragma GCC unroll 3
    for (int i = 0; i < kM; ++i) va[i] = vld1q_f32(ar[i] + p);
    dot_step<kM, kN>(acc, va, br, p, 4);
  }
  if (const size_t r = k - p) {
    float32x4_t va[kM];
    for (int i = 0; i < kM; ++i) va[i] = load_partial(ar[i] + p, r);
    dot_step<kM, kN>(acc, va, br, p, r);
  }
#pragma GCC unroll 3
  for (int i = 0; i < kM; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < kN; ++j) {
      float* cij = c + i * ldc + j;
      *cij = f32_epilogue_scalar(hsum(acc[i][j]), cij, j, *ep);
    }
}

#include "kernels/inc/f32_gemv_dot.inc"  // dot_tiles: (m, n) -> dot_tile<m, n>

}  // namespace

const F32GemvKernel f32_gemv_3x4__neon = {"f32_gemv_3x4__neon", rows_neon, store_neon, kDotMR, kDotNR, dot_tiles,
                                          nullptr, 0, 0, rows_panels_neon};

}  // namespace nnkern
