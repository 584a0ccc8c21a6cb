// Integer GEMM micro-kernel for AMX (AMX-TILE + AMX-INT8, Sapphire Rapids and later): u8 x s8 -> s32 with
// tdpbusd, under the same contract as the VNNI kernels (kernels/qgemm.h), so the GEMM driver, QLinear
// and both convolution drivers run it unchanged.
//
// Tile 32 x 32 (MR channels x NR rows of X) as 2 x 2 accumulator tiles of 16 rows x 16 channels, from two
// activation tiles (16 rows x 64 bytes: 64 k of 16 rows) and two weight tiles (16 groups of 4 k x 16
// channels x 4 bytes). The packed c4 panel with MR = 32 already is the weight tile layout: a group row
// of the panel is 128 bytes, channels 0-15 then 16-31, so each weight tile is a strided load (stride 128)
// with no repacking. Tile registers: C 0-3, activations 4-5, weights 6-7; every 64 k, 4 loads and 4
// tdpbusd (16 x 16 x 64 multiply-adds each).
//
// Activation rows are loaded straight from memory when the tap's row pointers are evenly spaced (every
// GEMM tile; a convolution's tile away from padding); otherwise each 64-byte chunk is gathered into a
// buffer first. The last partial chunk of a tap (k % 64) is copied into zero-filled buffers on both sides,
// so no load reads past a row's k bytes or past the panel. The accumulators go through memory once, at
// the end, into the shared AVX-512 epilogue. Tiles are configured per call (rows by the tile's n) and
// released at the end, so the thread carries no tile state between calls.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/qgemm.h"

namespace nnkern {
namespace {

#include "kernels/qepilogue_vec.inc"
#include "kernels/qgemm_zmm.inc"
#include "kernels/amx/tile_config.inc"

constexpr int kMR = 32, kNR = 32, kChunk = 64;  // k per tile step
constexpr size_t kGroupRow = size_t(kMR) * 4;   // bytes of one packed group row (32 channels x 4 k)

// Gathers `bytes` (<= 64) of each of n rows into dst[j * 64], zero-filled to 64.
NNK_INLINE void gather_rows(uint8_t* dst, const uint8_t* const* rows, size_t n, size_t off, size_t bytes) {
  const __mmask64 mask = bytes >= 64 ? ~__mmask64(0) : (__mmask64(1) << bytes) - 1;
  for (size_t j = 0; j < n; ++j) _mm512_store_si512(dst + j * 64, _mm512_maskz_loadu_epi8(mask, rows[j] + off));
}

// Accumulates tap rows x panel into the C tiles. kM2 / kN2: the second channel half / row half is used.
template <bool kM2, bool kN2>
NNK_INLINE void tap(const uint8_t* const* rows, size_t n, size_t k, const int8_t*& a, uint8_t* abuf, uint8_t* wbuf) {
  // Evenly spaced rows load in place with the spacing as the tile stride.
  const auto at = [&](size_t j) { return intptr_t(rows[j]); };
  const intptr_t s = n > 1 ? at(1) - at(0) : kChunk;
  bool even = s >= 0;
  for (size_t j = 2; j < n && even; ++j) even = at(j) - at(j - 1) == s;
  const size_t full = k / kChunk, tail = k % kChunk;
  for (size_t c = 0; c < full; ++c, a += 16 * kGroupRow) {
    const size_t off = c * kChunk;
    if (even) {
      _tile_loadd(4, rows[0] + off, s);
      if (kN2) _tile_loadd(5, rows[0] + 16 * s + off, s);
    } else {
      gather_rows(abuf, rows, n, off, kChunk);
      _tile_loadd(4, abuf, kChunk);
      if (kN2) _tile_loadd(5, abuf + 16 * kChunk, kChunk);
    }
    _tile_loadd(6, a, kGroupRow);
    if (kM2) _tile_loadd(7, a + 64, kGroupRow);
    _tile_dpbusd(0, 4, 6);
    if (kM2) _tile_dpbusd(1, 4, 7);
    if (kN2) _tile_dpbusd(2, 5, 6);
    if (kM2 && kN2) _tile_dpbusd(3, 5, 7);
  }
  if (tail) {
    // The packed tap holds ceil(tail / 4) more group rows (zero beyond k): copied, the rest of the
    // 16-row weight tile zero, so neither operand is read past its end.
    const size_t groups = (tail + 3) / 4;
    for (size_t g = 0; g < 16; ++g) {
      const __m512i z = _mm512_setzero_si512();
      _mm512_store_si512(wbuf + g * kGroupRow, g < groups ? _mm512_loadu_si512(a + g * kGroupRow) : z);
      _mm512_store_si512(wbuf + g * kGroupRow + 64, g < groups && kM2 ? _mm512_loadu_si512(a + g * kGroupRow + 64) : z);
    }
    a += groups * kGroupRow;
    gather_rows(abuf, rows, n, full * kChunk, tail);
    _tile_loadd(4, abuf, kChunk);
    if (kN2) _tile_loadd(5, abuf + 16 * kChunk, kChunk);
    _tile_loadd(6, wbuf, kGroupRow);
    if (kM2) _tile_loadd(7, wbuf + 64, kGroupRow);
    _tile_dpbusd(0, 4, 6);
    if (kM2) _tile_dpbusd(1, 4, 7);
    if (kN2) _tile_dpbusd(2, 5, 6);
    if (kM2 && kN2) _tile_dpbusd(3, 5, 7);
  }
}

template <bool kM2, bool kN2>
__attribute__((noinline)) void tile(size_t m, size_t n, size_t k, size_t ks, const int8_t* a, const void* const* b,
                                    const void* zero, size_t b_offset, int32_t* acc) {
  TileConfig cfg;
  const int n0 = int(n < 16 ? n : 16), n1 = int(n) - n0;
  cfg.set(0, n0, 64);
  cfg.set(4, n0, 64);
  cfg.set(6, 16, 64);
  if (kM2) {
    cfg.set(1, n0, 64);
    cfg.set(7, 16, 64);
  }
  if (kN2) {
    cfg.set(2, n1, 64);
    cfg.set(5, n1, 64);
    if (kM2) cfg.set(3, n1, 64);
  }
  _tile_loadconfig(&cfg);
  _tile_zero(0);
  if (kM2) _tile_zero(1);
  if (kN2) _tile_zero(2);
  if (kM2 && kN2) _tile_zero(3);
  alignas(64) uint8_t abuf[kNR * kChunk];
  alignas(64) uint8_t wbuf[16 * kGroupRow];
  const uint8_t* rows[kNR];
  for (size_t t = 0; t < ks; ++t, b += kNR) {
    for (size_t j = 0; j < n; ++j)
      rows[j] = static_cast<const uint8_t*>(b[j] == zero ? zero : static_cast<const char*>(b[j]) + b_offset);
    tap<kM2, kN2>(rows, n, k, a, abuf, wbuf);
  }
  // acc[j * kMR + i]: row j, channel i.
  _tile_stored(0, acc, kMR * 4);
  if (kM2) _tile_stored(1, acc + 16, kMR * 4);
  if (kN2) _tile_stored(2, acc + 16 * kMR, kMR * 4);
  if (kM2 && kN2) _tile_stored(3, acc + 16 * kMR + 16, kMR * 4);
  _tile_release();
}

// QEpilogue on the stored accumulators, one zmm of 16 channels at a time (the VNNI tile's math).
void epilogue(size_t m, size_t n, const int32_t* acc, void* c, size_t ldc, const QEpilogue* ep) {
  using T = ZmmOps;
  const size_t esz = qout_elem_size(ep->out);
  const __m512 lo = T::setf(ep->lo), hi = T::setf(ep->hi);
  for (size_t j = 0; j < n; ++j) {
    char* col = ep->c_rows ? static_cast<char*>(ep->c_rows[j]) : static_cast<char*>(c) + j * ldc * esz;
    for (size_t i = 0; i < m; i += 16) {
      const int cnt = m - i < 16 ? int(m - i) : 16;
      __m512i x = _mm512_load_si512(acc + j * kMR + i);
      if (ep->c_in) x = T::add(x, T::load_i32(ep->c_in + j * ep->ld_in + i, cnt));
      if (ep->col_comp) x = T::add(x, T::load(ep->col_comp + i));
      if (ep->b_zero) x = T::sub(x, T::mullo(T::load(ep->b_zero + i), T::set1(ep->row_sum[j])));
      switch (ep->out) {
        case QOut::i32:
          T::store_i32(reinterpret_cast<int32_t*>(col) + i, ep->relu ? T::max0(x) : x, cnt);
          break;
        case QOut::f32: {
          const __m512 bias = ep->bias ? T::loadf(ep->bias + i) : T::setf(0.0f);
          T::store_f32(reinterpret_cast<float*>(col) + i, qepilogue_real<T>(x, T::loadf(ep->scale + i), bias, ep->relu), cnt);
          break;
        }
        default: {
          const __m512 bias = ep->bias ? T::loadf(ep->bias + i) : T::setf(0.0f);
          T::store_b8(reinterpret_cast<uint8_t*>(col) + i, qepilogue_b8<T>(x, T::loadf(ep->scale + i), bias, lo, hi), cnt);
          break;
        }
      }
    }
  }
  if (ep->hook) ep->hook(ep->hook_ctx, QTile{ep->tile_i, ep->tile_j, m, n, ep->out, c, ldc, ep->c_rows});
}

void run(size_t m, size_t n, size_t k, size_t ks, const void* a, const void* const* b, const void* zero,
         size_t b_offset, void* c, size_t ldc, const QEpilogue* ep) {
  if (m == 0 || n == 0) return;
  alignas(64) int32_t acc[kNR * kMR];
  const int8_t* w = static_cast<const int8_t*>(a);
  const bool m2 = m > 16, n2 = n > 16;
  if (m2 && n2) tile<true, true>(m, n, k, ks, w, b, zero, b_offset, acc);
  else if (m2) tile<true, false>(m, n, k, ks, w, b, zero, b_offset, acc);
  else if (n2) tile<false, true>(m, n, k, ks, w, b, zero, b_offset, acc);
  else tile<false, false>(m, n, k, ks, w, b, zero, b_offset, acc);
  epilogue(m, n, acc, c, ldc, ep);
}

}  // namespace

extern const QGemmKernel u8s8_gemm_32x32c4__amx = {"u8s8_gemm_32x32c4__amx", 32, 32, 4, run, QKind::u8s8, false, 64};

}  // namespace nnkern
