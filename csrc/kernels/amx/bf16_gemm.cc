// bf16 GEMM micro-kernel for AMX-BF16 (kernels/bf16_gemm.h): tdpbf16ps, 16 x 16 x 16 pairs (8192 multiply-adds) per
// instruction, the AMX-INT8 kernel's structure (kernels/amx/qgemm.cc) on bf16 pairs.
//
// Tile 32 x 32 (MR features x NR rows of X) as 2 x 2 accumulator tiles of 16 rows x 16 float32 features, from two
// activation tiles (16 rows of X x 16 pairs: 64 bytes of a row) and two weight tiles (16 pairs x 16 features x a
// pair). The packed panel with MR = 32 already is the weight tiles' layout: a pair row of the panel is 128 bytes,
// features 0-15 then 16-31, so each weight tile is a strided load (stride 128). Tile registers: C 0-3, activations
// 4-5, weights 6-7; every 16 pairs, 4 loads and 4 tdpbf16ps. The last partial step (kq % 16 pairs) goes through
// zero-filled buffers on both sides, so no load reads past a row's pairs or past the panel; rows of X not evenly
// spaced are gathered 64 bytes at a time. The accumulators go through memory once, at the end, into the float32
// epilogue (alpha, beta, bias, clamp, c_rows) on 16 features at a time.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/bf16_gemm_list.h"

#define NNK_INLINE inline __attribute__((always_inline))

namespace nnkern {
namespace {

#include "kernels/inc/amx_tile_config.inc"
#include "kernels/inc/f32_zmm.inc"

constexpr int kMR = 32, kNR = 32;
constexpr size_t kStepPairs = 16;                    // pairs per tile step: one 64-byte activation row
constexpr size_t kStepBytes = kStepPairs * 4;        // 64
constexpr size_t kPairRow = size_t(kMR) * 2 * 2;     // bytes of one packed pair row (32 features x 2 bf16): 128

// One 16-pair step of the 2 x 2 tiles: activation rows at x, `stride` bytes apart (16 per tile), weight pair rows
// at w, kPairRow apart (features 0-15, then 16-31 at + 64 bytes).
template <bool kM2, bool kN2>
NNK_INLINE void step(const char* x, intptr_t stride, const char* w) {
  _tile_loadd(4, x, stride);
  if (kN2) _tile_loadd(5, x + 16 * stride, stride);
  _tile_loadd(6, w, kPairRow);
  if (kM2) _tile_loadd(7, w + 64, kPairRow);
  _tile_dpbf16ps(0, 4, 6);
  if (kM2) _tile_dpbf16ps(1, 4, 7);
  if (kN2) _tile_dpbf16ps(2, 5, 6);
  if (kM2 && kN2) _tile_dpbf16ps(3, 5, 7);
}

// Copies `bytes` (<= 64) from each of the n rows at byte offset off into dst[j * 64], zero-filled to 64.
NNK_INLINE void gather_rows(char* dst, const char* const* rows, size_t n, size_t off, size_t bytes) {
  const __mmask64 mask = bytes >= 64 ? ~__mmask64(0) : (__mmask64(1) << bytes) - 1;
  for (size_t j = 0; j < n; ++j) _mm512_store_si512(dst + j * 64, _mm512_maskz_loadu_epi8(mask, rows[j] + off));
}

// Accumulates the kq pairs of the n rows against the panel into the C tiles (started at zero) and stores them at
// acc[j * kMR + i]. kM2 / kN2: the second feature half / row half is used.
template <bool kM2, bool kN2>
__attribute__((noinline)) void tiles(size_t n, size_t kq, const uint16_t* a, const void* const* b, float* acc) {
  configure(tiles_2x2<kM2, kN2>(n));
  _tile_zero(0);
  if (kM2) _tile_zero(1);
  if (kN2) _tile_zero(2);
  if (kM2 && kN2) _tile_zero(3);

  const char* rows[kNR];
  for (size_t j = 0; j < n; ++j) rows[j] = static_cast<const char*>(b[j]);
  // Evenly spaced rows load in place with the spacing as the tile stride (every row block of the driver).
  const intptr_t s = n > 1 ? intptr_t(rows[1]) - intptr_t(rows[0]) : intptr_t(kStepBytes);
  bool even = s >= 0;
  for (size_t j = 2; j < n && even; ++j) even = intptr_t(rows[j]) - intptr_t(rows[j - 1]) == s;
  alignas(64) char xbuf[kNR * kStepBytes];
  const char* w = reinterpret_cast<const char*>(a);
  const size_t full = kq / kStepPairs, tail = kq % kStepPairs;
  for (size_t t = 0; t < full; ++t, w += kStepPairs * kPairRow) {
    const size_t off = t * kStepBytes;
    if (even) {
      step<kM2, kN2>(rows[0] + off, s, w);
    } else {
      gather_rows(xbuf, rows, n, off, kStepBytes);
      step<kM2, kN2>(xbuf, intptr_t(kStepBytes), w);
    }
  }
  if (tail) {
    // The panel's last `tail` pair rows, the rest of the 16-row weight tile zero, against the rows' last pairs.
    alignas(64) char wbuf[kStepPairs * kPairRow];
    const __m512i z = _mm512_setzero_si512();
    for (size_t q = 0; q < kStepPairs; ++q) {
      _mm512_store_si512(wbuf + q * kPairRow, q < tail ? _mm512_loadu_si512(w + q * kPairRow) : z);
      _mm512_store_si512(wbuf + q * kPairRow + 64, q < tail && kM2 ? _mm512_loadu_si512(w + q * kPairRow + 64) : z);
    }
    gather_rows(xbuf, rows, n, full * kStepBytes, tail * 4);
    step<kM2, kN2>(xbuf, intptr_t(kStepBytes), wbuf);
  }
  const size_t ld = kMR * sizeof(float);
  _tile_stored(0, acc, ld);
  if (kM2) _tile_stored(1, acc + 16, ld);
  if (kN2) _tile_stored(2, acc + 16 * kMR, ld);
  if (kM2 && kN2) _tile_stored(3, acc + 16 * kMR + 16, ld);
}

// F32Epilogue on acc[j * kMR + i], 16 features at a time, in the reference's order: alpha * acc, + beta * C (read only
// if beta != 0), + bias, clamp.
void epilogue(size_t m, size_t n, const float* acc, float* c, size_t ldc, const F32Epilogue* ep) {
  using T = Avx512F32;
  const T::V valpha = T::set1(ep->alpha), vbeta = T::set1(ep->beta);
  const T::V vmin = T::set1(ep->clamp_min), vmax = T::set1(ep->clamp_max);
  const bool beta = ep->beta != 0.0f;
  for (size_t i = 0; i < m; i += 16) {
    const T::Mask mask = T::mask(int(m - i < 16 ? m - i : 16));
    const T::V vbias = ep->bias ? T::maskz_load(ep->bias + i, mask) : T::zero();
    for (size_t j = 0; j < n; ++j) {
      float* cj = f32_c_col(c, ldc, j, *ep) + i;
      T::V x = T::mul(valpha, T::maskz_load(acc + j * kMR + i, mask));
      if (beta) x = T::add(x, T::mul(vbeta, T::maskz_load(cj, mask)));
      if (ep->bias) x = T::add(x, vbias);
      if (ep->clamp) x = T::min(vmax, T::max(vmin, x));  // NaN passes through (max / min return it)
      T::mask_store(cj, mask, x);
    }
  }
}

void run(size_t m, size_t n, size_t kq, const uint16_t* a, const void* const* b, float* c, size_t ldc,
         const F32Epilogue* ep) {
  if (m == 0 || n == 0) return;
  alignas(64) float acc[kNR * kMR];
  if (m > 16 && n > 16) tiles<true, true>(n, kq, a, b, acc);
  else if (m > 16) tiles<true, false>(n, kq, a, b, acc);
  else if (n > 16) tiles<false, true>(n, kq, a, b, acc);
  else tiles<false, false>(n, kq, a, b, acc);
  epilogue(m, n, acc, c, ldc, ep);
}

// The tiles stay configured between calls (configure()); the driver releases them after its tiles on each thread, so
// an idle thread carries no AMX state into context switches.
void release() { _tile_release(); }

}  // namespace

const Bf16GemmKernel bf16_gemm_32x32__amx = {"bf16_gemm_32x32__amx", kMR, kNR, false, run, release};

}  // namespace nnkern
