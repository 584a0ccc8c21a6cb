// Integer GEMM micro-kernels for AArch64 NEON (ARMv8.0 baseline), QNNPACK style (seeds Q1-Q4):
//   u8s8_gemm_8x8c1__neon    uint8 activations, int8 weights, zero points subtracted BEFORE the products
//                        (USUBL / SSUBL widen a - za and w - zb to int16 exactly: |a - za|, |w - zb| <= 255),
//                        then SMLAL / SMLAL2 by lane into int32: each product is at most 255 * 255 in
//                        magnitude, the sums wrap modulo 2^32 like every other kernel's. No row or column
//                        sums are needed (QGemmKernel::zero_points_in_kernel).
//   s16_gemm_8x8c1__neon   the same loop on int16 operands (qgemm16, and 8-bit data on no level here): no
//                        widening, zero points by the driver's row/column sums.
//
// Column-major terms (kernels/qgemm.h): 8 output channels (A, packed with G = 1: the 8 weights of one k
// are 8 contiguous bytes) x 8 rows of X (B, one pointer per row). The whole K runs inside the kernel
// (seed Q3) in steps of 8, the k % 8 remainder inside too, for each of the ks taps (indirect form); a full 8 x 8 tile is always computed, rows
// j >= n repeat row n - 1 and are not stored, channels m..7 are the panel's zero padding.
//
// Register allocation (32 V registers), per step of 8 k:
//   16 accumulators  C(0..3, j), C(4..7, j) for j = 0..7 (int32x4)
//    8 activations   X(j, p .. p+7) - za widened to int16x8, one per row: the by-lane operand of SMLAL,
//                    which for 16-bit lanes must live in V0-V15
//    2 weights       W(0..7, p+kk) - zb widened to int16x8 (one live, the next one loading)
//   = 26 live, and the zero points (2 more) when used.
// Loads per MAC: per 8 k, 8 activation loads (8 bytes each) + 8 weight loads (8 bytes) = 16 loads for
// 8 x 8 x 8 = 512 MACs: 0.031 loads/MAC (QNNPACK's 8x8 ARM64 kernel: the same 16 per 512); the 64
// int32 results are stored once per tile. Per 8 k: 128 SMLAL(2) (4 MACs each) + 16 SUBL + 16 loads.
// Inner loop as built (aarch64-linux-gnu-g++ 12.2 -O3 -march=armv8-a; tools/neon-loop-stats.py on the
// object), one iteration = 8 k of the full tile, no stack access:
//   u8s8_gemm_8x8c1__neon    166 instructions: 128 SMLAL/SMLAL2, 16 LDR d (8 activations, 8 weights),
//                        16 USUBL/SSUBL, 6 loop/offset; 77% of the instructions are MACs. QNNPACK's
//                        8x8 ARM64 assembly kernel has the same per-8-k budget (16 loads, 16 subtracts,
//                        128 multiply-accumulates): the subtraction of the zero points is free here,
//                        it is the widening every int8 kernel without SDOT needs anyway.
//   s16_gemm_8x8c1__neon   152 instructions: 128 SMLAL/SMLAL2, 16 LDR q, 8 loop/offset.
//
// One-definition rule: this file gets the NEON flags only; every helper has internal linkage, no STL.
#include <arm_neon.h>

#include <cstddef>
#include <cstdint>

#include "kernels/qgemm.h"

namespace nnkern {
namespace {

#include "kernels/inc/qgemm_neon.inc"

// uint8 activations minus their zero point, int8 weights minus theirs: int16 lanes.
struct U8Operands {
  using AElem = int8_t;
  using BElem = uint8_t;
  uint8x8_t x_zero;
  int8x8_t w_zero;
  explicit U8Operands(const QEpilogue* ep) {
    x_zero = vdup_n_u8(uint8_t(ep->x_zero));
    if (ep->w_zero) {
      const int16x8_t z = vcombine_s16(vmovn_s32(vld1q_s32(ep->w_zero)), vmovn_s32(vld1q_s32(ep->w_zero + 4)));
      w_zero = vmovn_s16(z);
    } else {
      w_zero = vdup_n_s8(0);
    }
  }
  NNK_INLINE int16x8_t x(const uint8_t* p) const { return vreinterpretq_s16_u16(vsubl_u8(vld1_u8(p), x_zero)); }
  NNK_INLINE int16x8_t w(const int8_t* p) const { return vsubl_s8(vld1_s8(p), w_zero); }
};

// int16 operands as they are (zero points, if any, are the driver's compensation in the epilogue).
struct S16Operands {
  using AElem = int16_t;
  using BElem = int16_t;
  explicit S16Operands(const QEpilogue*) {}
  NNK_INLINE int16x8_t x(const int16_t* p) const { return vld1q_s16(p); }
  NNK_INLINE int16x8_t w(const int16_t* p) const { return vld1q_s16(p); }
};

// One k of the step: the 8 channels' weights times lane L of every row's activations.
template <int L, class Ops>
NNK_INLINE void mac_lane(int32x4_t (&acc)[kTileN][2], const Ops& ops, const typename Ops::AElem* w,
                         const int16x8_t (&xv)[kTileN]) {
  const int16x8_t wv = ops.w(w + L * kTileM);
#pragma GCC unroll 8
  for (int j = 0; j < kTileN; ++j) {
    acc[j][0] = vmlal_laneq_s16(acc[j][0], vget_low_s16(wv), xv[j], L);
    acc[j][1] = vmlal_high_laneq_s16(acc[j][1], wv, xv[j], L);
  }
}

// no-schedule-insns: GCC's first scheduler otherwise hoists all eight weight loads of a step to its top and
// runs out of V registers (spills and moves in the loop, as seen in the f32 kernel).
template <class Ops>
__attribute__((optimize("no-schedule-insns"))) void widen_8x8(size_t m, size_t n, size_t k, size_t ks, const void* a,
                                                              const void* const* b, const void* zero, size_t b_offset,
                                                              void* c, size_t ldc, const QEpilogue* ep) {
  using AElem = typename Ops::AElem;
  using BElem = typename Ops::BElem;
  if (m == 0 || n == 0) return;
  const Ops ops(ep);
  const AElem* w = static_cast<const AElem*>(a);
  int32x4_t acc[kTileN][2];
#pragma GCC unroll 8
  for (int j = 0; j < kTileN; ++j) acc[j][0] = acc[j][1] = vdupq_n_s32(0);

#pragma GCC unroll 1
  for (size_t tap = 0; tap < ks; ++tap, b += kTileN) {  // taps (kernels/qgemm.h); the zero row holds x_zero
    const BElem* x[kTileN];
    tile_rows(b, n, zero, b_offset, x);
    size_t p = 0;
#pragma GCC unroll 1
    for (; p + 8 <= k; p += 8) {
      int16x8_t xv[kTileN];
#pragma GCC unroll 8
      for (int j = 0; j < kTileN; ++j) xv[j] = ops.x(x[j] + p);
      mac_lane<0>(acc, ops, w, xv);
      mac_lane<1>(acc, ops, w, xv);
      mac_lane<2>(acc, ops, w, xv);
      mac_lane<3>(acc, ops, w, xv);
      mac_lane<4>(acc, ops, w, xv);
      mac_lane<5>(acc, ops, w, xv);
      mac_lane<6>(acc, ops, w, xv);
      mac_lane<7>(acc, ops, w, xv);
      w += 8 * kTileM;
    }
    if (const size_t r = k - p) {  // 1..7 more k: read exactly r elements of each row
      int16x8_t xv[kTileN];
      for (int j = 0; j < kTileN; ++j) {
        BElem t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (size_t q = 0; q < r; ++q) t[q] = x[j][p + q];
        xv[j] = ops.x(t);
      }
      mac_lane<0>(acc, ops, w, xv);
      if (r > 1) mac_lane<1>(acc, ops, w, xv);
      if (r > 2) mac_lane<2>(acc, ops, w, xv);
      if (r > 3) mac_lane<3>(acc, ops, w, xv);
      if (r > 4) mac_lane<4>(acc, ops, w, xv);
      if (r > 5) mac_lane<5>(acc, ops, w, xv);
      if (r > 6) mac_lane<6>(acc, ops, w, xv);
      w += r * kTileM;
    }
  }
  store_tile(acc, m, n, c, ldc, ep);
}

}  // namespace

NNK_NEON_QGEMM_KERNEL(u8s8_gemm_8x8c1__neon, 1, widen_8x8<U8Operands>, QKind::u8s8, true, 8);
NNK_NEON_QGEMM_KERNEL(s16_gemm_8x8c1__neon, 1, widen_8x8<S16Operands>, QKind::s16, false, 8);

}  // namespace nnkern
