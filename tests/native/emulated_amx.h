// Portable C++ stand-ins for the AMX intrinsics the bf16 GEMM kernel uses (ldtilecfg, sttilecfg, tilezero,
// tileloadd, tilestored, tdpbf16ps, tilerelease) on top of the AVX-512 ones (emulated_avx512.h), so that the AMX
// kernel's tile logic (configuration, K steps and tails, gathers, the epilogue) runs on CPUs without AMX:
// tests/native/CMakeLists.txt force-includes this header into test_bf16_gemm_emulated. The semantics are the Intel
// pseudo-code's: tiles hold `rows` x `colsb` bytes as configured (a load zeroes the rest), tdpbf16ps adds per pair
// the even product, then the odd one, each sum rounded, bf16 denormals read as zero and denormal sums flushed. What
// would fault on hardware (a tile used unconfigured, shapes that do not match) aborts. Test code only.
#pragma once
#include "emulated_avx512.h"

#include <cstdio>
#include <cstdlib>

using __mmask64 = uint64_t;

struct EmuTiles {
  bool configured = false;
  uint8_t rows[8] = {};
  uint16_t colsb[8] = {};
  alignas(64) uint8_t data[8][16][64] = {};
};
static thread_local EmuTiles emu_tiles;

[[noreturn]] static inline void emu_amx_fault(const char* what, int t) {
  std::fprintf(stderr, "emulated AMX: %s (tile %d)\n", what, t);
  std::abort();
}

static inline void emu_tile_check(int t) {
  if (t < 0 || t > 7) emu_amx_fault("no such tile", t);
  if (!emu_tiles.configured || emu_tiles.rows[t] == 0 || emu_tiles.colsb[t] == 0) emu_amx_fault("unconfigured", t);
}

// ldtilecfg: palette 1 with at most 16 rows of 64 bytes per tile; palette 0 releases. All tile data is zeroed.
static inline void _tile_loadconfig(const void* p) {
  const uint8_t* cfg = static_cast<const uint8_t*>(p);
  emu_tiles = EmuTiles();
  if (cfg[0] == 0) return;
  if (cfg[0] != 1) emu_amx_fault("palette other than 1", -1);
  for (int t = 0; t < 8; ++t) {
    std::memcpy(&emu_tiles.colsb[t], cfg + 16 + 2 * t, 2);
    emu_tiles.rows[t] = cfg[48 + t];
    if (emu_tiles.rows[t] > 16 || emu_tiles.colsb[t] > 64 || emu_tiles.colsb[t] % 4) emu_amx_fault("bad shape", t);
  }
  emu_tiles.configured = true;
}
// sttilecfg: the configuration loaded, or 64 zero bytes when none is.
static inline void _tile_storeconfig(void* p) {
  uint8_t* cfg = static_cast<uint8_t*>(p);
  std::memset(cfg, 0, 64);
  if (!emu_tiles.configured) return;
  cfg[0] = 1;
  for (int t = 0; t < 8; ++t) {
    std::memcpy(cfg + 16 + 2 * t, &emu_tiles.colsb[t], 2);
    cfg[48 + t] = emu_tiles.rows[t];
  }
}
static inline void _tile_release() { emu_tiles = EmuTiles(); }

static inline void _tile_zero(int t) {
  emu_tile_check(t);
  std::memset(emu_tiles.data[t], 0, sizeof emu_tiles.data[t]);
}
static inline void _tile_loadd(int t, const void* base, long stride) {
  emu_tile_check(t);
  std::memset(emu_tiles.data[t], 0, sizeof emu_tiles.data[t]);
  for (int r = 0; r < emu_tiles.rows[t]; ++r)
    std::memcpy(emu_tiles.data[t][r], static_cast<const char*>(base) + r * stride, emu_tiles.colsb[t]);
}
static inline void _tile_stored(int t, void* base, long stride) {
  emu_tile_check(t);
  for (int r = 0; r < emu_tiles.rows[t]; ++r)
    std::memcpy(static_cast<char*>(base) + r * stride, emu_tiles.data[t][r], emu_tiles.colsb[t]);
}

// tdpbf16ps c, a, b: c[m][n] (float32) += sum over k of a[m] pair k . b[k] pair n.
static inline void _tile_dpbf16ps(int c, int a, int b) {
  emu_tile_check(c);
  emu_tile_check(a);
  emu_tile_check(b);
  const EmuTiles& e = emu_tiles;
  if (e.rows[c] != e.rows[a] || e.colsb[c] != e.colsb[b] || e.colsb[a] / 4 != e.rows[b] || c == a || c == b || a == b)
    emu_amx_fault("tdpbf16ps shapes", c);
  for (int m = 0; m < e.rows[c]; ++m) {
    float row[16];
    std::memcpy(row, e.data[c][m], 64);
    for (int k = 0; k < e.colsb[a] / 4; ++k)
      for (int n = 0; n < e.colsb[c] / 4; ++n)
        for (int h = 0; h < 2; ++h) {
          uint16_t x, y;
          std::memcpy(&x, e.data[a][m] + 4 * k + 2 * h, 2);
          std::memcpy(&y, e.data[b][k] + 4 * n + 2 * h, 2);
          row[n] = emu_ftz(row[n] + emu_bf16_daz(x) * emu_bf16_daz(y));
        }
    std::memcpy(emu_tiles.data[c][m], row, 64);
  }
}

// The AVX-512 byte moves of the kernel's gathers and buffers.
static inline __m512i _mm512_setzero_si512() { return _mm512_set1_epi32(0); }
static inline void _mm512_store_si512(void* p, __m512i x) { std::memcpy(p, x.i, 64); }
static inline __m512i _mm512_maskz_loadu_epi8(__mmask64 k, const void* p) {
  __m512i r = _mm512_setzero_si512();
  for (int b = 0; b < 64; ++b)  // masked bytes are never read
    if ((k >> b) & 1) reinterpret_cast<uint8_t*>(r.i)[b] = static_cast<const uint8_t*>(p)[b];
  return r;
}
