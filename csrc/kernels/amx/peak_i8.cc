// The AMX int8 peak: tdpbusd into four independent accumulator tiles from two operand tiles that stay in
// registers (the 2 x 2 shape of the GEMM kernel without its loads), 16 x 16 x 64 multiply-adds each.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/peak_i8.h"

namespace nnkern {
namespace {

#include "kernels/inc/amx_tile_config.inc"

int amx_loop(size_t iters, double* ops_per_iter) {
  TileConfig cfg;
  for (int t = 0; t < 6; ++t) cfg.set(t, 16, 64);
  alignas(64) static const uint8_t ones[16 * 64] = {1};
  alignas(64) int32_t out[16 * 16];
  _tile_loadconfig(&cfg);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, ones, 64);
  _tile_loadd(5, ones, 64);
  for (size_t i = 0; i < iters; ++i) {
    _tile_dpbusd(0, 4, 5);
    _tile_dpbusd(1, 4, 5);
    _tile_dpbusd(2, 4, 5);
    _tile_dpbusd(3, 4, 5);
  }
  _tile_stored(0, out, 64);
  _tile_release();
  *ops_per_iter = 4.0 * 16 * 16 * 64 * 2;
  return out[0];
}

}  // namespace

const I8PeakLoop i8_peak__amx = amx_loop;

}  // namespace nnkern
