// Integer GEMM micro-kernel for AArch64 with the int8 matrix multiply (+i8mm): u8s8_gemm_8x8c8__neoni8mm.
//
// USMMLA (vusmmlaq_s32) multiplies a 2 x 8 uint8 matrix by the transpose of a 2 x 8 int8 matrix into a
// 2 x 2 int32 block: 32 MACs per instruction, uint8 activations times int8 weights, the very contract of
// VPDPBUSD on x86, so this kernel is of kind u8s8 with the zero points folded into row/column sums.
//
// Column-major terms: 8 output channels (A, packed in groups of G = 8 k: a channel's 8 weights are 8
// contiguous bytes, so channels 2t and 2t+1 of one group are one 16-byte register) x 8 rows of X (B).
// Per step of 8 k, rows 2s and 2s+1 are combined into one register (two 8-byte loads) and
//   acc[s][t] += X(2s..2s+1, p..p+7) W(2t..2t+1, p..p+7)^T   = [C(2t, 2s), C(2t+1, 2s), C(2t, 2s+1), C(2t+1, 2s+1)]
// Register allocation (32 V registers):
//   16 accumulators  acc[s][t], s = 0..3 row pairs, t = 0..3 channel pairs (int32x4 = a 2 x 2 block)
//    4 activations   row pairs (uint8x16)
//    4 weights       channel pairs (int8x16)
//   = 24 live. After the K loop, ZIP1/ZIP2 on 64-bit lanes turn the 2 x 2 blocks into rows of 4 channels
//   for the shared store (kernels/inc/qgemm_neon.inc).
// Loads per MAC: per 8 k, 8 activation loads (8 bytes) + 4 weight loads (16 bytes) = 12 loads for
// 8 x 8 x 8 = 512 MACs: 0.023 loads/MAC, with 16 USMMLA (32 MACs each) doing what 32 SDOT or 128 SMLAL do.
// Inner loop as built (aarch64-linux-gnu-g++ 12.2 -O3 -march=armv8.2-a+dotprod+i8mm,
// tools/neon-loop-stats.py), one iteration = 8 k: 36 instructions, 16 USMMLA, 10 vector-load instructions
// (8 LDR d of activation rows, 2 LDP q of weights), 4 INS (the second row of each pair into the high
// half), 6 loop/offset; no stack access. 512 MACs per 36 instructions (14.2 per instruction).
//
// The whole K runs inside (seed Q3), for each of the ks taps (indirect form); the k % 8 remainder reads exactly the remaining bytes of each row
// (a stack copy) times the zero-padded last group of the panel. Rows j >= n repeat row n - 1 and are not
// stored. One-definition rule: +i8mm flags for this file only, internal linkage, no STL.
#include <arm_neon.h>

#include <cstddef>
#include <cstdint>

#include "kernels/qgemm.h"

namespace nnkern {
namespace {

#include "kernels/inc/qgemm_neon.inc"

NNK_INLINE void mmla_step(int32x4_t (&acc)[4][4], const int8_t* w, const uint8x16_t (&xv)[4]) {
  int8x16_t wv[4];
#pragma GCC unroll 4
  for (int t = 0; t < 4; ++t) wv[t] = vld1q_s8(w + 16 * t);
#pragma GCC unroll 4
  for (int s = 0; s < 4; ++s)
#pragma GCC unroll 4
    for (int t = 0; t < 4; ++t) acc[s][t] = vusmmlaq_s32(acc[s][t], xv[s], wv[t]);
}

void usmmla_8x8(size_t m, size_t n, size_t k, size_t ks, const void* a, const void* const* b, const void* zero,
                size_t b_offset, void* c, size_t ldc, const QEpilogue* ep) {
  if (m == 0 || n == 0) return;
  const int8_t* w = static_cast<const int8_t*>(a);
  int32x4_t acc[4][4];
#pragma GCC unroll 4
  for (int s = 0; s < 4; ++s)
#pragma GCC unroll 4
    for (int t = 0; t < 4; ++t) acc[s][t] = vdupq_n_s32(0);

#pragma GCC unroll 1
  for (size_t tap = 0; tap < ks; ++tap, b += kTileN) {  // taps (kernels/qgemm.h); each starts at a whole group
    const uint8_t* x[kTileN];
    tile_rows(b, n, zero, b_offset, x);
    size_t p = 0;
#pragma GCC unroll 1
    for (; p + 8 <= k; p += 8) {
      uint8x16_t xv[4];
#pragma GCC unroll 4
      for (int s = 0; s < 4; ++s) xv[s] = vcombine_u8(vld1_u8(x[2 * s] + p), vld1_u8(x[2 * s + 1] + p));
      mmla_step(acc, w, xv);
      w += 8 * kTileM;
    }
    if (const size_t r = k - p) {  // 1..7 more k: exactly r bytes of each row; the panel's group is padded
      uint8x16_t xv[4];
      for (int s = 0; s < 4; ++s) {
        uint8_t t[16] = {0};
        for (size_t q = 0; q < r; ++q) t[q] = x[2 * s][p + q], t[8 + q] = x[2 * s + 1][p + q];
        xv[s] = vld1q_u8(t);
      }
      mmla_step(acc, w, xv);
      w += 8 * kTileM;
    }
  }

  // 2 x 2 blocks -> rows: row 2s is the low halves of acc[s][2v], acc[s][2v+1], row 2s+1 their high halves.
  int32x4_t rows[kTileN][2];
#pragma GCC unroll 4
  for (int s = 0; s < 4; ++s)
#pragma GCC unroll 2
    for (int v = 0; v < 2; ++v) {
      const int64x2_t lo = vreinterpretq_s64_s32(acc[s][2 * v]), hi = vreinterpretq_s64_s32(acc[s][2 * v + 1]);
      rows[2 * s][v] = vreinterpretq_s32_s64(vzip1q_s64(lo, hi));
      rows[2 * s + 1][v] = vreinterpretq_s32_s64(vzip2q_s64(lo, hi));
    }
  store_tile(rows, m, n, c, ldc, ep);
}

}  // namespace

NNK_NEON_QGEMM_KERNEL(u8s8_gemm_8x8c8__neoni8mm, 8, usmmla_8x8);

}  // namespace nnkern
