// Integer GEMM micro-kernel for AArch64 with the dot product (ARMv8.2 +dotprod): s8s8_gemm_8x8c4__neondot.
//
// SDOT multiplies int8 by int8 only (UDOT uint8 by uint8; the mixed USDOT needs i8mm), so this kernel is
// of kind s8s8: the driver shifts uint8 activations to int8 (x ^ 0x80 = x - 128, zero point - 128) and
// folds both zero points into row/column sums, as for VPDPBUSD (kernels/qgemm.h, ops/qgemm/qgemm.cc).
//
// Column-major terms: 8 output channels (A, packed in groups of G = 4 k: one 32-bit lane holds a channel's
// 4 weights) x 8 rows of X (B). Per step of 16 k, each row's 16 activation bytes are one register and
// `sdot v.4s, w.16b, x.4b[g]` takes group g of them by lane (no broadcast instructions), so:
// Register allocation (32 V registers):
//   16 accumulators  C(0..3, j), C(4..7, j), j = 0..7 (int32x4)
//    8 activations   X(j, p .. p+15) (int8x16), consumed by lane, 4 groups each
//    2 weights       W(0..3, g), W(4..7, g) (int8x16: 4 channels x 4 k)
//   = 26 live.
// Loads per MAC: per 16 k, 8 activation loads + 8 weight loads (16 bytes each) = 16 loads for 8 x 8 x 16
// = 1024 MACs: 0.016 loads/MAC, half the widening kernel's (u8s8_gemm_8x8c1__neon), with 64 SDOT (16 MACs
// each) instead of 256 SMLAL for the same work.
// Inner loop as built (aarch64-linux-gnu-g++ 12.2 -O3 -march=armv8.2-a+dotprod, tools/neon-loop-stats.py),
// one iteration = 16 k: 82 instructions, 64 SDOT, 12 vector-load instructions (16 q registers: LDP for
// the weights), 6 loop/offset; no stack access. 1024 MACs per 82 instructions (12.5 per instruction,
// against 3.1 for the widening kernel).
//
// The whole K runs inside (seed Q3), for each of the ks taps (indirect form); the k % 16 remainder reads exactly the remaining bytes of each row
// (a stack copy) and the remaining groups of the zero-padded panel. Rows j >= n repeat row n - 1 and are
// not stored. One-definition rule: +dotprod flags for this file only, internal linkage, no STL.
#include <arm_neon.h>

#include <cstddef>
#include <cstdint>

#include "kernels/qgemm.h"

namespace nnkern {
namespace {

#include "kernels/inc/qgemm_neon.inc"

template <int G>
NNK_INLINE void dot_group(int32x4_t (&acc)[kTileN][2], const int8_t* w, const int8x16_t (&xv)[kTileN]) {
  const int8x16_t w0 = vld1q_s8(w + G * 32), w1 = vld1q_s8(w + G * 32 + 16);
#pragma GCC unroll 8
  for (int j = 0; j < kTileN; ++j) {
    acc[j][0] = vdotq_laneq_s32(acc[j][0], w0, xv[j], G);
    acc[j][1] = vdotq_laneq_s32(acc[j][1], w1, xv[j], G);
  }
}

// no-schedule-insns: keeps GCC's first scheduler from hoisting the weight loads into a register rotation.
__attribute__((optimize("no-schedule-insns"))) void sdot_8x8(size_t m, size_t n, size_t k, size_t ks, const void* a,
                                                             const void* const* b, const void* zero, size_t b_offset,
                                                             void* c, size_t ldc, const QEpilogue* ep) {
  if (m == 0 || n == 0) return;
  const int8_t* w = static_cast<const int8_t*>(a);
  int32x4_t acc[kTileN][2];
#pragma GCC unroll 8
  for (int j = 0; j < kTileN; ++j) acc[j][0] = acc[j][1] = vdupq_n_s32(0);

#pragma GCC unroll 1
  for (size_t tap = 0; tap < ks; ++tap, b += kTileN) {  // taps (kernels/qgemm.h); each starts at a whole group
    const int8_t* x[kTileN];
    tile_rows(b, n, zero, b_offset, x);
    size_t p = 0;
#pragma GCC unroll 1
    for (; p + 16 <= k; p += 16) {
      int8x16_t xv[kTileN];
#pragma GCC unroll 8
      for (int j = 0; j < kTileN; ++j) xv[j] = vld1q_s8(x[j] + p);
      dot_group<0>(acc, w, xv);
      dot_group<1>(acc, w, xv);
      dot_group<2>(acc, w, xv);
      dot_group<3>(acc, w, xv);
      w += 16 * kTileM;
    }
    if (const size_t r = k - p) {  // 1..15 more k: exactly r bytes of each row, ceil(r / 4) packed groups
      int8x16_t xv[kTileN];
      for (int j = 0; j < kTileN; ++j) {
        int8_t t[16] = {0};
        for (size_t q = 0; q < r; ++q) t[q] = x[j][p + q];
        xv[j] = vld1q_s8(t);
      }
      dot_group<0>(acc, w, xv);
      if (r > 4) dot_group<1>(acc, w, xv);
      if (r > 8) dot_group<2>(acc, w, xv);
      if (r > 12) dot_group<3>(acc, w, xv);
      w += (r + 3) / 4 * 4 * kTileM;
    }
  }
  store_tile(acc, m, n, c, ldc, ep);
}

}  // namespace

NNK_NEON_QGEMM_KERNEL(s8s8_gemm_8x8c4__neondot, 4, sdot_8x8, QKind::s8s8, false, 16);

}  // namespace nnkern
