// Depthwise INT8 micro-kernel for AArch64 NEON (ARMv8.0 baseline; kernels/qdwconv.h): channels in vector lanes,
// taps in the loop, through the depthwise template (kernels/inc/qdwconv_tile.inc) and the shared output stage
// (kernels/inc/qepilogue_vec.inc). One template vector is 8 channels: the uint8 inputs widened exactly to one
// int16x8 (LDR d + UXTL), the packed int32 weights' low halves as one int16x8 (UZP1 of two q registers: the
// contract keeps every weight within int16, so the low half is the value), and two int32x4 accumulators fed
// by SMLAL / SMLAL2: x * w is at most 255 * 32768 in magnitude, the sums wrap modulo 2^32 like every other
// kernel's, nothing saturates.
//
// Channel tile: 32 channels (4 vectors) of 2 pixels per block, each tap's weights loaded once for both pixels;
// where the channels fit two vectors (16 or fewer), 4 pixels at a time instead (the template's kNPNarrow).
// Register budget (32 V registers): 16 accumulators (2 pixels x 4 vectors, or 4 x 2, of 2 int32x4), 4 weight
// int16x8 and 2-4 widened inputs live: about 24, no spills. A 16-channel block (the AVX2 kernel's) would run
// the tap loop twice as often for the same products, paying its fixed cost (2 row pointers, the loop counter
// and branch: 6 instructions) twice: 52 instructions per 16 SMLAL(2) against 46.
// Tap loops as built (aarch64-linux-gnu-g++ 12.2 -O3 -march=armv8-a; tools/neon-loop-stats.py on the object
// with --mac=smlal,smlal2), one iteration = one tap, no stack access in either:
//   32 channels x 2 pixels: 46 instructions, 16 SMLAL/SMLAL2 (64 MACs), 8 LDR d (inputs) + 4 LDP q (weights),
//                           8 UXTL, 4 UZP1, 2 LDR x (the pixels' row pointers), 4 add/cmp/branch;
//   16 channels x 4 pixels: 40 instructions, 16 SMLAL/SMLAL2, 8 UXTL, 2 UZP1 (the rest loads and loop).
// The remaining channels go through 16- and 8-channel blocks, then the tail (< 8) through a stack copy of
// exactly its bytes.
//
// One-definition rule: this file gets the NEON flags only; every helper has internal linkage, no STL.
#include <arm_neon.h>

#include <cstddef>
#include <cstdint>

#include "kernels/qdwconv.h"

namespace nnkern {
namespace {

#define NNK_INLINE inline __attribute__((always_inline))

// 8 int32 / float lanes as two q registers: the template's vector (L = 8, one int16x8 of inputs).
struct I32x8 {
  int32x4_t lo, hi;
};
struct F32x8 {
  float32x4_t lo, hi;
};

struct DwNeon {
  using V = I32x8;
  using VF = F32x8;
  static constexpr int L = 8;

  // The output stage's operations (kernels/inc/qepilogue_vec.inc); the stores write cnt <= L lanes.
  static NNK_INLINE V zero() { return {vdupq_n_s32(0), vdupq_n_s32(0)}; }
  static NNK_INLINE V load(const int32_t* p) { return {vld1q_s32(p), vld1q_s32(p + 4)}; }
  static NNK_INLINE V add(V a, V b) { return {vaddq_s32(a.lo, b.lo), vaddq_s32(a.hi, b.hi)}; }
  static NNK_INLINE V max0(V a) { return {vmaxq_s32(a.lo, vdupq_n_s32(0)), vmaxq_s32(a.hi, vdupq_n_s32(0))}; }
  static NNK_INLINE VF cvt(V a) { return {vcvtq_f32_s32(a.lo), vcvtq_f32_s32(a.hi)}; }
  static NNK_INLINE VF loadf(const float* p) { return {vld1q_f32(p), vld1q_f32(p + 4)}; }
  static NNK_INLINE VF setf(float x) { return {vdupq_n_f32(x), vdupq_n_f32(x)}; }
  // a * b + c with one rounding, as std::fma in the reference.
  static NNK_INLINE VF fma(VF a, VF b, VF c) { return {vfmaq_f32(c.lo, a.lo, b.lo), vfmaq_f32(c.hi, a.hi, b.hi)}; }
  // FMAXNM / FMINNM: a NaN input gives the other operand, as the reference's fmax / fmin.
  static NNK_INLINE VF maxf(VF a, VF b) { return {vmaxnmq_f32(a.lo, b.lo), vmaxnmq_f32(a.hi, b.hi)}; }
  static NNK_INLINE VF minf(VF a, VF b) { return {vminnmq_f32(a.lo, b.lo), vminnmq_f32(a.hi, b.hi)}; }
  static NNK_INLINE V rnd(VF a) { return {vcvtnq_s32_f32(a.lo), vcvtnq_s32_f32(a.hi)}; }  // ties to even
  // NEON has no masked stores: a partial vector goes through the stack, then exactly cnt elements out.
  template <typename E, typename Q, typename St>
  static NNK_INLINE void store_halves(E* p, Q lo, Q hi, int cnt, St st) {
    if (cnt == L) {
      st(p, lo);
      st(p + 4, hi);
      return;
    }
    E t[L];
    st(t, lo);
    st(t + 4, hi);
    __builtin_memcpy(p, t, size_t(cnt) * sizeof(E));
  }
  static NNK_INLINE void store_i32(int32_t* p, V x, int cnt) {
    store_halves(p, x.lo, x.hi, cnt, [](int32_t* d, int32x4_t v) { vst1q_s32(d, v); });
  }
  static NNK_INLINE void store_f32(float* p, VF x, int cnt) {
    store_halves(p, x.lo, x.hi, cnt, [](float* d, float32x4_t v) { vst1q_f32(d, v); });
  }
  // x is already within [-128, 255]: keep the low byte of each lane.
  static NNK_INLINE void store_b8(uint8_t* p, V x, int cnt) {
    const uint8x8_t b = vreinterpret_u8_s8(vmovn_s16(vcombine_s16(vmovn_s32(x.lo), vmovn_s32(x.hi))));
    if (cnt == L) {
      vst1_u8(p, b);
      return;
    }
    uint8_t t[L];
    vst1_u8(t, b);
    __builtin_memcpy(p, t, size_t(cnt));
  }

  // The depthwise operands (kernels/inc/qdwconv_tile.inc).
  static NNK_INLINE int16x8_t load_u8(const uint8_t* p) { return vreinterpretq_s16_u16(vmovl_u8(vld1_u8(p))); }
  static NNK_INLINE int16x8_t load_u8_part(const uint8_t* p, int n) {
    uint8_t t[L] = {0, 0, 0, 0, 0, 0, 0, 0};
    __builtin_memcpy(t, p, size_t(n));  // n < 8 bytes: never past the row's end
    return load_u8(t);
  }
  // 8 int32 weights -> their low int16 halves (little-endian: the even int16 elements). LDP q + UZP1; LD2's
  // first register would do the same in one instruction, but GCC then copies it out of the register pair
  // (one MOV per LD2 in the loop).
  static NNK_INLINE int16x8_t load_w(const int32_t* p) {
    return vuzp1q_s16(vreinterpretq_s16_s32(vld1q_s32(p)), vreinterpretq_s16_s32(vld1q_s32(p + 4)));
  }
  static NNK_INLINE V madd(V acc, int16x8_t x, int16x8_t w) {
    return {vmlal_s16(acc.lo, vget_low_s16(x), vget_low_s16(w)), vmlal_high_s16(acc.hi, x, w)};
  }
};

#include "kernels/inc/qepilogue_vec.inc"
#include "kernels/inc/qdwconv_tile.inc"

}  // namespace

// Four vectors (32 channels) of two pixels per block, four pixels where the channels fit two vectors: see the
// register budget above.
extern const QDwconvKernel u8s8_dwconv_32c__neon = {"u8s8_dwconv_32c__neon", 32,
                                                    QDwconvTemplate<DwNeon, 4, 2, 4>::run};

}  // namespace nnkern
