// bf16 GEMM micro-kernel for AArch64 with the BF16 extension (kernels/bf16_gemm.h): BFMMLA, 8x8, K in groups of 4.
//
// BFMMLA (vbfmmlaq_f32) multiplies a 2 x 4 bf16 matrix by the transpose of another into a 2 x 2 float32 block: 16
// multiply-adds per instruction, twice BFDOT's 8.
//
// Column-major terms: 8 features (A, packed in groups of G = 4 k: a feature's 4 values are 8 contiguous bytes, so
// features 2t and 2t+1 of one group are one 16-byte register) x 8 rows of X (B). Per group of 4 k, rows 2s and 2s+1
// are combined into one register (two 8-byte loads) and
//   acc[t][s] += W(2t..2t+1, p..p+3) X(2s..2s+1, p..p+3)^T   = [C(2t, 2s), C(2t, 2s+1), C(2t+1, 2s), C(2t+1, 2s+1)]
// Register allocation (32 V registers):
//   16 accumulators  acc[t][s], t = 0..3 feature pairs, s = 0..3 row pairs (float32x4 = a 2 x 2 block)
//    4 weights       feature pairs (bf16x8)
//    4 activations   row pairs (bf16x8)
//   = 24 live. After the K loop, UZP1 / UZP2 turn the blocks into columns of C (the features of one row).
// Loads per MAC: per 4 k, 4 weight loads (16 bytes) + 8 activation loads (8 bytes) = 12 loads for 8 x 8 x 4 = 256
// multiply-adds (0.047 loads per multiply-add; the BFDOT kernel: 8 + 8 per 8 x 8 x 8, 0.031, at half the rate).
// Inner loop as built (aarch64-linux-gnu-g++ 12.2 -O3 -march=armv8.2-a+dotprod+i8mm+bf16, tools/neon-loop-stats.py),
// one iteration = 4 k: 34 instructions, 16 BFMMLA, 10 vector loads, no stack access: 256 multiply-adds per 34
// instructions (7.5 per instruction; the BFDOT kernel: 85 instructions, 64 BFDOT per 8 k, 6.0).
// An odd kq leaves one pair: its activations are loaded as 4 bytes per row, the panel's group zero-padded.
// Rows j >= n repeat row n - 1 and are not stored. Arm's BFMMLA, as BFDOT, sums each pair's products before
// rounding (non-IEEE, denormals flushed): within the bound of kernels/bf16_gemm.h, not the reference's bits.
#include <arm_neon.h>

#include <cstddef>
#include <cstdint>

#include "kernels/bf16_gemm_list.h"

#define NNK_INLINE inline __attribute__((always_inline))

namespace nnkern {
namespace {

#include "kernels/inc/neon_static_for.inc"

constexpr int kMR = 8, kNR = 8, kGroup = 4;

template <int kN>
void tile(size_t m, size_t kq, const uint16_t* a, const void* const* b, float* c, size_t ldc, const F32Epilogue* ep);
#include "kernels/inc/bf16_neon_run.inc"

// Rows r0 and r1's 4 values from k = 2q on (two pairs) as one register; `half` reads one pair each, zero above.
template <bool kHalf>
NNK_INLINE bfloat16x8_t row_pair(const uint16_t* r0, const uint16_t* r1, size_t q) {
  uint64_t x0 = 0, x1 = 0;
  __builtin_memcpy(&x0, r0 + 2 * q, kHalf ? 4 : 8);
  __builtin_memcpy(&x1, r1 + 2 * q, kHalf ? 4 : 8);
  return vreinterpretq_bf16_u64(vcombine_u64(vcreate_u64(x0), vcreate_u64(x1)));
}

template <int kN>
__attribute__((noinline)) void tile(size_t m, size_t kq, const uint16_t* a, const void* const* b, float* c,
                                    size_t ldc, const F32Epilogue* ep) {
  constexpr int kS = (kN + 1) / 2;  // row pairs
  float32x4_t acc[4][kS];
  const uint16_t* bp[2 * kS];
  static_for<0, 2 * kS>([&](auto j) {
    bp[j.value] = static_cast<const uint16_t*>(b[j.value < kN ? j.value : kN - 1]);
  });
  static_for<0, 4>([&](auto t) { static_for<0, kS>([&](auto s) { acc[t.value][s.value] = vdupq_n_f32(0.0f); }); });
  const auto group = [&](auto half, size_t q) {
    bfloat16x8_t w[4], x[kS];
    static_for<0, 4>([&](auto t) { w[t.value] = vreinterpretq_bf16_u16(vld1q_u16(a + 8 * t.value)); });
    static_for<0, kS>([&](auto s) {
      x[s.value] = row_pair<decltype(half)::value>(bp[2 * s.value], bp[2 * s.value + 1], q);
    });
    static_for<0, 4>([&](auto t) {
      static_for<0, kS>([&](auto s) {
        acc[t.value][s.value] = vbfmmlaq_f32(acc[t.value][s.value], w[t.value], x[s.value]);
      });
    });
    a += kGroup * kMR;
  };
  size_t q = 0;
  for (; q + 2 <= kq; q += 2) group(std::false_type(), q);
  if (q < kq) group(std::true_type(), q);

  float values[2 * kS][kMR];
  static_for<0, kS>([&](auto s) {
    static_for<0, 2>([&](auto h) {  // features 0-3, then 4-7
      const float32x4_t lo = acc[2 * h.value][s.value], hi = acc[2 * h.value + 1][s.value];
      vst1q_f32(values[2 * s.value] + 4 * h.value, vuzp1q_f32(lo, hi));
      vst1q_f32(values[2 * s.value + 1] + 4 * h.value, vuzp2q_f32(lo, hi));
    });
  });
  store_columns<kN>(&values[0][0], m, c, ldc, ep);
}

}  // namespace

const Bf16GemmKernel bf16_gemm_8x8c4__neonbf16 = {"bf16_gemm_8x8c4__neonbf16", kMR, kNR, false, run, nullptr, kGroup};

}  // namespace nnkern
