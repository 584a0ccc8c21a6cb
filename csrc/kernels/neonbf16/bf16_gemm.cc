// bf16 GEMM micro-kernel for AArch64 with the BF16 extension (kernels/bf16_gemm.h): BFDOT by lane, 8x8.
//
// BFDOT adds the dot product of a pair of bf16 values into each float32 lane (`bfdot v.4s, v.8h, v.2h[lane]`), so
// one instruction is 8 multiply-adds, twice an FP32 FMLA's. Per step of 4 pairs: the A column pairs of rows 0-7 are
// two q registers per pair (8 in all), and each B column's 4 pairs are one q register read by lane: 8 B loads
// and 64 BFDOT for 8 x 8 x 8 multiply-adds. 16 accumulators + 8 A + 1-2 B registers of the 32. The last kq % 4
// pairs take each B pair duplicated (plain BFDOT). Arm's BFDOT adds the two products of a pair before rounding
// once (non-IEEE, denormals flushed): within the bound of kernels/bf16_gemm.h, not the reference's bits.
// The epilogue runs per element (f32_epilogue_scalar), from the accumulators stored to the stack.
#include <arm_neon.h>

#include <cstddef>
#include <cstdint>

#include "kernels/bf16_gemm_list.h"

#define NNK_INLINE inline __attribute__((always_inline))

namespace nnkern {
namespace {

#include "kernels/inc/neon_static_for.inc"

constexpr int kMR = 8, kNR = 8;

template <int kN>
void tile(size_t m, size_t kq, const uint16_t* a, const void* const* b, float* c, size_t ldc, const F32Epilogue* ep);
#include "kernels/inc/bf16_neon_run.inc"

NNK_INLINE bfloat16x8_t load_bf16(const uint16_t* p) { return vreinterpretq_bf16_u16(vld1q_u16(p)); }

NNK_INLINE bfloat16x8_t dup_pair(const uint16_t* p) {
  uint32_t pair;
  __builtin_memcpy(&pair, p, 4);
  return vreinterpretq_bf16_u32(vdupq_n_u32(pair));
}

template <int kN>
__attribute__((noinline)) void tile(size_t m, size_t kq, const uint16_t* a, const void* const* b, float* c,
                                    size_t ldc, const F32Epilogue* ep) {
  float32x4_t acc[kN][2];
  const uint16_t* bp[kN];
  static_for<0, kN>([&](auto j) {
    acc[j.value][0] = vdupq_n_f32(0.0f);
    acc[j.value][1] = vdupq_n_f32(0.0f);
    bp[j.value] = static_cast<const uint16_t*>(b[j.value]);
  });
  size_t q = 0;
  for (; q + 4 <= kq; q += 4) {
    bfloat16x8_t va[4][2];
    static_for<0, 4>([&](auto l) {
      va[l.value][0] = load_bf16(a + l.value * 2 * kMR);
      va[l.value][1] = load_bf16(a + l.value * 2 * kMR + 8);
    });
    static_for<0, kN>([&](auto j) {
      const bfloat16x8_t vb = load_bf16(bp[j.value] + 2 * q);
      static_for<0, 4>([&](auto l) {
        acc[j.value][0] = vbfdotq_laneq_f32(acc[j.value][0], va[l.value][0], vb, l.value);
        acc[j.value][1] = vbfdotq_laneq_f32(acc[j.value][1], va[l.value][1], vb, l.value);
      });
    });
    a += 4 * 2 * kMR;
  }
  for (; q < kq; ++q) {
    const bfloat16x8_t a0 = load_bf16(a), a1 = load_bf16(a + 8);
    static_for<0, kN>([&](auto j) {
      const bfloat16x8_t vb = dup_pair(bp[j.value] + 2 * q);
      acc[j.value][0] = vbfdotq_f32(acc[j.value][0], a0, vb);
      acc[j.value][1] = vbfdotq_f32(acc[j.value][1], a1, vb);
    });
    a += 2 * kMR;
  }
  float values[kN][kMR];
  static_for<0, kN>([&](auto j) {
    vst1q_f32(values[j.value], acc[j.value][0]);
    vst1q_f32(values[j.value] + 4, acc[j.value][1]);
  });
  store_columns<kN>(&values[0][0], m, c, ldc, ep);
}

}  // namespace

const Bf16GemmKernel bf16_gemm_8x8__neonbf16 = {"bf16_gemm_8x8__neonbf16", kMR, kNR, false, run};

}  // namespace nnkern
