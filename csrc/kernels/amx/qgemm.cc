// Integer GEMM micro-kernel for AMX (AMX-TILE + AMX-INT8, Sapphire Rapids and later): u8 x s8 -> s32 with
// tdpbusd, under the same contract as the VNNI kernels (kernels/qgemm.h), so the GEMM driver, QLinear
// and both convolution drivers run it unchanged.
//
// Tile 32 x 32 (MR channels x NR rows of X) as 2 x 2 accumulator tiles of 16 rows x 16 channels, from two
// activation tiles (16 rows x 64 bytes: 64 k of 16 rows) and two weight tiles (16 groups of 4 k x 16
// channels x 4 bytes). The packed c4 panel with MR = 32 already is the weight tile layout: a group row
// of the panel is 128 bytes, channels 0-15 then 16-31, so each weight tile is a strided load (stride 128)
// with no repacking. Tile registers: C 0-3, activations 4-5, weights 6-7; every 64 k, 4 loads and 4
// tdpbusd (16 x 16 x 64 multiply-adds each). A tile of one row runs on vpdpbusd instead (run_row).
//
// Activation rows are loaded straight from memory when the tap's row pointers are evenly spaced (every GEMM tile; a
// convolution's tile away from padding); otherwise each 64-byte chunk is gathered into a buffer first. The last partial
// chunk of a tap (k % 64) is copied into zero-filled buffers on both sides, so no load reads past a row's k bytes or
// past the panel; or, where the GEMM driver guarantees rows padded with zeros and panels readable past their end
// (QEpilogue::k_padded), loaded in place like the others (docs/performance.md: "AMX kernel"). The accumulators
// go through memory once, at the end, into the shared AVX-512 epilogue (raw int32 sums of whole 16-channel
// halves, the driver's K blocks, are stored and reloaded by the tiles directly). The tile configuration (rows by the tile's n) is loaded only when the
// thread's current one differs; QGemmKernel::finish releases it.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/qgemm.h"

namespace nnkern {
namespace {

#include "kernels/inc/qepilogue_vec.inc"
#include "kernels/inc/qgemm_zmm.inc"
#include "kernels/inc/amx_tile_config.inc"
#include "kernels/inc/qgemm_panel_sums_zmm.inc"

constexpr int kMR = 32, kNR = 32, kChunk = 64;  // k per tile step
constexpr size_t kGroupRow = size_t(kMR) * 4;   // bytes of one packed group row (32 channels x 4 k)
constexpr size_t kPrefetchChunks = 2;

// Gathers `bytes` (<= 64) of each of n rows into dst[j * 64], zero-filled to 64.
NNK_INLINE void gather_rows(uint8_t* dst, const uint8_t* const* rows, size_t n, size_t off, size_t bytes) {
  const __mmask64 mask = bytes >= 64 ? ~__mmask64(0) : (__mmask64(1) << bytes) - 1;
  for (size_t j = 0; j < n; ++j) _mm512_store_si512(dst + j * 64, _mm512_maskz_loadu_epi8(mask, rows[j] + off));
}

// One 64-k step of the 2 x 2 tiles: activation rows at act, `stride` bytes apart (16 per tile), weight
// group rows at w, kGroupRow apart (channels 0-15, then 16-31 at + 64).
template <bool kM2, bool kN2>
NNK_INLINE void step(const uint8_t* act, intptr_t stride, const int8_t* w) {
  _tile_loadd(4, act, stride);
  if (kN2) _tile_loadd(5, act + 16 * stride, stride);
  _tile_loadd(6, w, kGroupRow);
  if (kM2) _tile_loadd(7, w + 64, kGroupRow);
  _tile_dpbusd(0, 4, 6);
  if (kM2) _tile_dpbusd(1, 4, 7);
  if (kN2) _tile_dpbusd(2, 5, 6);
  if (kM2 && kN2) _tile_dpbusd(3, 5, 7);
}

// Accumulates tap rows x panel into the C tiles. kM2 / kN2: the second channel half / row half is used.
template <bool kM2, bool kN2>
NNK_INLINE void tap(const uint8_t* const* rows, size_t n, size_t k, const int8_t*& a, uint8_t* abuf, uint8_t* wbuf,
                    bool k_padded) {
  // Evenly spaced rows load in place with the spacing as the tile stride.
  const auto at = [&](size_t j) { return intptr_t(rows[j]); };
  const intptr_t s = n > 1 ? at(1) - at(0) : kChunk;
  bool even = s >= 0;
  for (size_t j = 2; j < n && even; ++j) even = at(j) - at(j - 1) == s;
  const bool prefetch = at(0) % 64 != 0 || s % 64 != 0;
  const size_t full = k / kChunk, tail = k % kChunk;
  for (size_t c = 0; c < full; ++c, a += 16 * kGroupRow) {
    const size_t off = c * kChunk;
    if (even) {
      // Rows off the cache lines (a convolution's input; the GEMMs align theirs, row_align) take two lines a
      // chunk each, more streams than the hardware prefetchers follow: fetch the chunk after next
      // ourselves (prefetches never fault). On aligned rows the 16-32 prefetches a step cost more than
      // they save (docs/performance.md: "AMX kernel").
      if (prefetch && c + kPrefetchChunks < full)
        for (size_t j = 0; j < n; ++j) _mm_prefetch(reinterpret_cast<const char*>(rows[0] + j * s + off + kPrefetchChunks * kChunk), _MM_HINT_T0);
      step<kM2, kN2>(rows[0] + off, s, a);
    } else {
      gather_rows(abuf, rows, n, off, kChunk);
      step<kM2, kN2>(abuf, kChunk, a);
    }
  }
  if (tail && even && k_padded) {
    // Rows zero past k (QEpilogue::k_padded): the last step in place, whatever weights follow the tap's
    // ceil(tail / 4) group rows meeting those zeros.
    step<kM2, kN2>(rows[0] + full * kChunk, s, a);
    a += (tail + 3) / 4 * kGroupRow;
  } else if (tail) {
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
    step<kM2, kN2>(abuf, kChunk, reinterpret_cast<const int8_t*>(wbuf));
  }
}

// Accumulates into the C tiles and leaves them there; c_in (whole 16-channel halves only) is loaded as
// the starting value, else the tiles start at 0.
template <bool kM2, bool kN2>
__attribute__((noinline)) void tile(size_t n, size_t k, size_t ks, const int8_t* a, const void* const* b,
                                    const void* zero, size_t b_offset, const int32_t* c_in, size_t ld_in,
                                    bool k_padded) {
  configure(tiles_2x2<kM2, kN2>(n));
  if (c_in) {
    const size_t ld = ld_in * 4;
    _tile_loadd(0, c_in, ld);
    if (kM2) _tile_loadd(1, c_in + 16, ld);
    if (kN2) _tile_loadd(2, c_in + 16 * ld_in, ld);
    if (kM2 && kN2) _tile_loadd(3, c_in + 16 * ld_in + 16, ld);
  } else {
    _tile_zero(0);
    if (kM2) _tile_zero(1);
    if (kN2) _tile_zero(2);
    if (kM2 && kN2) _tile_zero(3);
  }
  alignas(64) uint8_t abuf[kNR * kChunk];
  alignas(64) uint8_t wbuf[16 * kGroupRow];
  const uint8_t* rows[kNR];
  for (size_t t = 0; t < ks; ++t, b += kNR) {
    for (size_t j = 0; j < n; ++j)
      rows[j] = static_cast<const uint8_t*>(b[j] == zero ? zero : static_cast<const char*>(b[j]) + b_offset);
    tap<kM2, kN2>(rows, n, k, a, abuf, wbuf, k_padded);
  }
}

// Stores the C tiles: row j, channel i at dst[j * ld + i] (int32).
template <bool kM2, bool kN2>
NNK_INLINE void store_tiles(int32_t* dst, size_t ld) {
  _tile_stored(0, dst, ld * 4);
  if (kM2) _tile_stored(1, dst + 16, ld * 4);
  if (kN2) _tile_stored(2, dst + 16 * ld, ld * 4);
  if (kM2 && kN2) _tile_stored(3, dst + 16 * ld + 16, ld * 4);
}

// QEpilogue on the stored accumulators acc[j * kMR + i], 16 channels at a time (the VNNI tile's math),
// the per-channel vectors loaded once per 16 channels.
template <QOut kOut>
void epilogue(size_t m, size_t n, const int32_t* acc, bool add_c_in, void* c, size_t ldc, const QEpilogue* ep) {
  using T = ZmmOps;
  constexpr size_t esz = qout_elem_size(kOut);
  const __m512 lo = T::setf(ep->lo), hi = T::setf(ep->hi);
  for (size_t i = 0; i < m; i += 16) {
    const int cnt = m - i < 16 ? int(m - i) : 16;
    const __m512i cc = ep->col_comp ? T::load(ep->col_comp + i) : T::zero();
    const __m512i zb = ep->b_zero ? T::load(ep->b_zero + i) : T::zero();
    const __m512 scale = kOut == QOut::i32 ? T::setf(0.0f) : T::loadf(ep->scale + i);
    const __m512 bias = ep->bias ? T::loadf(ep->bias + i) : T::setf(0.0f);
    for (size_t j = 0; j < n; ++j) {
      char* col = ep->c_rows ? static_cast<char*>(ep->c_rows[j]) : static_cast<char*>(c) + j * ldc * esz;
      __m512i x = T::add(_mm512_load_si512(acc + j * kMR + i), cc);
      if (add_c_in) x = T::add(x, T::load_i32(ep->c_in + j * ep->ld_in + i, cnt));
      if (ep->b_zero) x = T::sub(x, T::mullo(zb, T::set1(ep->row_sum[j])));
      if constexpr (kOut == QOut::i32)
        T::store_i32(reinterpret_cast<int32_t*>(col) + i, ep->relu ? T::max0(x) : x, cnt);
      else if constexpr (kOut == QOut::f32)
        T::store_f32(reinterpret_cast<float*>(col) + i, qepilogue_real<T>(x, scale, bias, ep->relu), cnt);
      else
        T::store_b8(reinterpret_cast<uint8_t*>(col) + i, qepilogue_b8<T>(x, scale, bias, lo, hi), cnt);
    }
  }
}

// The epilogue for the output type of ep: the tiles' stored sums and the row path's both go through it.
void epilogue_for(size_t m, size_t n, const int32_t* acc, bool add_c_in, void* c, size_t ldc, const QEpilogue* ep) {
  switch (ep->out) {
    case QOut::i32: epilogue<QOut::i32>(m, n, acc, add_c_in, c, ldc, ep); break;
    case QOut::f32: epilogue<QOut::f32>(m, n, acc, add_c_in, c, ldc, ep); break;
    case QOut::u8: epilogue<QOut::u8>(m, n, acc, add_c_in, c, ldc, ep); break;
    case QOut::s8: epilogue<QOut::s8>(m, n, acc, add_c_in, c, ldc, ep); break;
  }
}

// Starts fetching the output tile's lines: written only after the K loop, they would otherwise miss
// at the tile stores, which then stall the next tile (a C larger than the caches; docs/performance.md: "AMX
// kernel").
NNK_INLINE void prefetch_output(size_t m, size_t n, void* c, size_t ldc, const QEpilogue* ep) {
  const size_t esz = qout_elem_size(ep->out);
  for (size_t j = 0; j < n; ++j) {
    const char* row = ep->c_rows ? static_cast<const char*>(ep->c_rows[j]) : static_cast<const char*>(c) + j * ldc * esz;
    for (size_t off = 0; off < m * esz; off += 64) _mm_prefetch(row + off, _MM_HINT_T0);
    _mm_prefetch(row + m * esz - 1, _MM_HINT_T0);  // the last line of an unaligned row
  }
}

// How far ahead the row path fetches the panel (16 group rows; the panel is read once, from L2 or memory;
// docs/performance.md: "AMX kernel").
constexpr size_t kRowPrefetch = 2048;

// One row of X (n = 1) with vpdpbusd on the same packed panel (group row g: channels 0-15, then 16-31, 4 k
// each). On the tiles one row costs most of what 16 do, so a lone row (batch-1 Linear, a tile's last row) is
// faster on the vector units; from two rows on the tiles win (docs/performance.md: "AMX kernel"). Four groups in
// flight, each with its own pair of accumulators (the dependency chains of vpdpbusd); the epilogue is the tiles' own, on the row's sums.
void run_row(size_t m, size_t k, size_t ks, const int8_t* w, const void* const* b, const void* zero, size_t b_offset,
             void* c, size_t ldc, const QEpilogue* ep) {
  __m512i acc[4][2];
  for (auto& a : acc) a[0] = a[1] = _mm512_setzero_si512();
  const size_t full = k / 4, tail = k % 4;
  for (size_t t = 0; t < ks; ++t) {
    const uint8_t* row = static_cast<const uint8_t*>(b[t * kNR] == zero ? zero : static_cast<const char*>(b[t * kNR]) + b_offset);
    size_t g = 0;
    for (; g + 4 <= full; g += 4, w += 4 * kGroupRow)
      for (int u = 0; u < 4; ++u) {
        _mm_prefetch(reinterpret_cast<const char*>(w + kRowPrefetch + u * kGroupRow), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(w + kRowPrefetch + u * kGroupRow + 64), _MM_HINT_T0);
        int32_t x;
        __builtin_memcpy(&x, row + 4 * (g + u), 4);
        const __m512i v = _mm512_set1_epi32(x);
        acc[u][0] = _mm512_dpbusd_epi32(acc[u][0], v, _mm512_loadu_si512(w + u * kGroupRow));
        acc[u][1] = _mm512_dpbusd_epi32(acc[u][1], v, _mm512_loadu_si512(w + u * kGroupRow + 64));
      }
    for (; g < full + (tail ? 1 : 0); ++g, w += kGroupRow) {  // the last groups; a partial one reads k % 4 bytes
      int32_t x = 0;
      __builtin_memcpy(&x, row + 4 * g, g < full ? 4 : tail);
      const __m512i v = _mm512_set1_epi32(x);
      acc[0][0] = _mm512_dpbusd_epi32(acc[0][0], v, _mm512_loadu_si512(w));
      acc[0][1] = _mm512_dpbusd_epi32(acc[0][1], v, _mm512_loadu_si512(w + 64));
    }
  }
  alignas(64) int32_t sums[kMR];  // row 0 of the epilogue's acc layout
  for (int h = 0; h < 2; ++h)
    _mm512_store_si512(sums + 16 * h, _mm512_add_epi32(_mm512_add_epi32(acc[0][h], acc[1][h]),
                                                       _mm512_add_epi32(acc[2][h], acc[3][h])));
  epilogue_for(m, 1, sums, ep->c_in != nullptr, c, ldc, ep);
  if (ep->hook) ep->hook(ep->hook_ctx, QTile{ep->tile_i, ep->tile_j, m, 1, ep->out, c, ldc, ep->c_rows});
}

template <bool kM2, bool kN2>
void run_tile(size_t m, size_t n, size_t k, size_t ks, const int8_t* a, const void* const* b, const void* zero,
              size_t b_offset, void* c, size_t ldc, const QEpilogue* ep) {
  // Partial sums come in and raw sums go out through the tiles themselves where whole 16-channel halves
  // allow (the driver's K blocks); anything else goes through acc and the epilogue.
  const bool whole = m % 16 == 0;
  const bool load_c_in = ep->c_in && whole;
  const bool raw = whole && ep->out == QOut::i32 && !ep->relu && !ep->col_comp && !ep->b_zero && !ep->c_rows;
  // Raw sums into an output larger than the caches, on cache lines: through acc and streaming stores,
  // which skip the read for ownership of every line (docs/performance.md: "AMX kernel").
  const bool stream = raw && ep->stream_out && reinterpret_cast<uintptr_t>(c) % 64 == 0 && ldc * 4 % 64 == 0;
  // 8-bit outputs (QLinear) write a quarter of the lines: there the prefetches cost more than the misses.
  if (qout_elem_size(ep->out) >= 4 && !stream) prefetch_output(m, n, c, ldc, ep);
  tile<kM2, kN2>(n, k, ks, a, b, zero, b_offset, load_c_in ? ep->c_in : nullptr, ep->ld_in, ep->k_padded);
  if (stream) {
    alignas(64) int32_t acc[kNR * kMR];
    store_tiles<kM2, kN2>(acc, kMR);
    int32_t* out = static_cast<int32_t*>(c);
    for (size_t j = 0; j < n; ++j)
      for (size_t i = 0; i < m; i += 16)
        _mm512_stream_si512(reinterpret_cast<__m512i*>(out + j * ldc + i), _mm512_load_si512(acc + j * kMR + i));
  } else if (raw) {
    store_tiles<kM2, kN2>(static_cast<int32_t*>(c), ldc);
  } else {
    alignas(64) int32_t acc[kNR * kMR];
    store_tiles<kM2, kN2>(acc, kMR);
    epilogue_for(m, n, acc, ep->c_in && !load_c_in, c, ldc, ep);
  }
  if (ep->hook) ep->hook(ep->hook_ctx, QTile{ep->tile_i, ep->tile_j, m, n, ep->out, c, ldc, ep->c_rows});
}

void run(size_t m, size_t n, size_t k, size_t ks, const void* a, const void* const* b, const void* zero,
         size_t b_offset, void* c, size_t ldc, const QEpilogue* ep) {
  if (m == 0 || n == 0) return;
  const int8_t* w = static_cast<const int8_t*>(a);
  if (n == 1) return run_row(m, k, ks, w, b, zero, b_offset, c, ldc, ep);
  if (m > 16 && n > 16) run_tile<true, true>(m, n, k, ks, w, b, zero, b_offset, c, ldc, ep);
  else if (m > 16) run_tile<true, false>(m, n, k, ks, w, b, zero, b_offset, c, ldc, ep);
  else if (n > 16) run_tile<false, true>(m, n, k, ks, w, b, zero, b_offset, c, ldc, ep);
  else run_tile<false, false>(m, n, k, ks, w, b, zero, b_offset, c, ldc, ep);
}

// The tiles stay configured between calls (configure() above); the drivers release them when their tile
// loop ends, so an idle thread carries no AMX state into context switches.
void release() {
  _mm_sfence();  // the streaming stores (QEpilogue::stream_out) before the driver's results are read
  _tile_release();
}

}  // namespace

// Below 40 M ops per thread a second thread slows the AMX kernel down where B is packed per call (one call's
// worth of tile work on a thread that sat idle, and tasks that split the rows each pack every panel); the
// driver applies it there only (ops/qgemm/driver.cc). Rows of A 64-byte aligned (row_align). Below a reduction
// of 128 (one tap) or 24 per tap (the indirect form), the per-tile cost (tile stores, a partial 64-k step
// copied) outweighs tdpbusd: the VNNI kernel is faster there. docs/performance.md: "AMX kernel", "qgemm: threads",
// "qgemm: realigning A".
extern const QGemmKernel u8s8_gemm_32x32c4__amx = {"u8s8_gemm_32x32c4__amx", 32, 32, 4, run, QKind::u8s8, false, 64, release, 128, 24,
                                                    panel_sums_c4<32>, true, 4e7, 64, true};

}  // namespace nnkern
