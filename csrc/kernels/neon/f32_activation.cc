// NEON sigmoid / tanh for AArch64 (ARMv8.0 baseline, -march=armv8-a; seeds I18, I19). Contracts in
// kernels/f32_activation.h; same schemes and coefficients as the AVX-512 file, with NEON's tools:
//
//   minimax:  t = min(|x|, tmax) (FMIN keeps NaN; tmax = the float below 16, so bits(t) >> 22 <= 261),
//             k = bits(t) >> 22 - 246 saturating at 0 (UQSUB: |x| < 2^-4 -> interval 0), and the 16-entry
//             tables (64 bytes = 4 q registers each) looked up by TBL with 4 registers: byte index
//             4k + {0,1,2,3} in each lane (one MLA: k * 0x04040404 + 0x03020100).
//             sigmoid: g = (c2 t + c1) t + d0 = f - 1/2 in [0, 1/2] (d0 = c0 - 1/2, exact), the sign of x
//             copied onto g by a bit select, y = 1/2 + g: 1 - f for x < 0 without a compare (g(tmax) = 1/2 exactly:
//             +-inf -> 1 / +0; g(0) = 0: +-0 -> 1/2).
//             tanh: tanh's own table on u = min(|x|, float below 8), y = p(u) with the sign of x copied.
//   scalef / accurate: on a = min(|x|, 88) (tanh: 2a, a <= 44): e = e^-a = p(r) 2^n with n = round(v),
//             v = -a log2e, found by adding 1.5 * 2^23 + 127 (the sum's low mantissa bits are n + 127, so a
//             shift by 23 builds 2^n: exponent arithmetic), r = 1/2 - n + a (-log2e) in [0, 1] (one FMA)
//             and p(r) ~ 2^(r - 1/2) (degree 2 or 5, p(1/2) = 1). n + 127 >= 0 since a <= 88, and n + 127 = 0
//             gives 2^n = +0, so e = 0 there: sigmoid(-88.1 .. -inf) = +0 (the true value is below 6e-39).
//             d = 1 + e in [1, 2], q = 1/d by FRECPE and two FRECPS Newton steps (the second makes
//             1/1 = 1 and 1/2 = 1/2 exact, so sigmoid(+inf) = 1 and sigmoid(0) = 1/2; d <= 2 means no
//             inf * 0 in the steps). sigmoid: x < 0 ? e q : q (both in [0, 1]); tanh: (1 - e) q with
//             the sign of x (tanh(+-0) = +-0, odd by construction).
//
// Tail: n % 4 elements are copied through a 4-float stack buffer and run through the same vector code,
// so no byte outside x[0, n) / y[0, n) is read or written (NEON has no masked loads or stores).
//
// Instruction counts per 4 elements, main loop (8 elements per iteration; aarch64-linux-gnu-g++ 12.2 -O3
// -march=armv8-a; `tools/neon-loop-stats.py <build>/.../neon/f32_activation.cc.o`), loads, stores and
// loop control included, no stack access:
//   sigmoid minimax 15.5: FABS FMIN USHR UQSUB MOV+MLA, 3 TBL, 2 FMLA, BIT FADD, + LD1/STR/loop 2.5
//   tanh minimax    14.5: the same without the FADD
//   sigmoid scalef  24.5      tanh scalef  24.5
//   sigmoid accurate 30.5     tanh accurate 30.5
// (FMLA overwrites its addend, so each polynomial coefficient costs a MOV besides its FMLA.)
//
// One-definition rule: this file gets the NEON flags only; every helper is in an anonymous namespace
// (internal linkage) and no STL is used.
#include <arm_neon.h>

#include <cstddef>
#include <cstdint>

#include "kernels/f32_activation.h"
#include "kernels/f32_activation_coeffs.h"
#include "kernels/f32_erf.h"
#include "kernels/f32_exp.h"
#include "kernels/f32_softmax.h"

#define NNK_INLINE inline __attribute__((always_inline))

namespace nnkern {
namespace {

constexpr float kLog2e = 1.44269504f;
// 1.5 * 2^23 + 127: adding it to v in [-127, 0] rounds v to an integer n and leaves n + 127 in the low bits.
constexpr float kRoundBias = 12583039.0f;

NNK_INLINE float32x4_t bcast_bits(uint32_t b) { return vreinterpretq_f32_u32(vdupq_n_u32(b)); }

NNK_INLINE uint8x16x4_t load_table(const uint32_t* t) {
  const uint8_t* p = reinterpret_cast<const uint8_t*>(t);
  uint8x16x4_t r;
  r.val[0] = vld1q_u8(p);
  r.val[1] = vld1q_u8(p + 16);
  r.val[2] = vld1q_u8(p + 32);
  r.val[3] = vld1q_u8(p + 48);
  return r;
}

NNK_INLINE float32x4_t lookup(const uint8x16x4_t& table, uint8x16_t bytes) {
  return vreinterpretq_f32_u8(vqtbl4q_u8(table, bytes));
}

// The loop, 2 vectors per iteration, for any n. The constants and tables live in the caller's locals,
// captured by reference by `f`: GCC keeps those in registers, whereas the uint8x16x4_t tables as
// members of a functor object were reloaded from the stack in every iteration. With 4 vectors per
// iteration the 12 table registers no longer fit next to the temporaries (spills).
template <typename F>
NNK_INLINE void run(size_t n, const float* x, float* y, const F& f) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    float32x4x2_t v = vld1q_f32_x2(x + i);  // one LD1 of two registers
    v.val[0] = f(v.val[0]);
    v.val[1] = f(v.val[1]);
    vst1q_f32(y + i, v.val[0]);
    vst1q_f32(y + i + 4, v.val[1]);
  }
  for (; i + 4 <= n; i += 4) vst1q_f32(y + i, f(vld1q_f32(x + i)));
  if (i < n) {  // 1..3 left: through a stack buffer, so nothing past n is touched
    float buf[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (size_t j = 0; j < n - i; ++j) buf[j] = x[i + j];
    vst1q_f32(buf, f(vld1q_f32(buf)));
    for (size_t j = 0; j < n - i; ++j) y[i + j] = buf[j];
  }
}

// Scheme A with a 16-interval table (kernels/f32_activation_coeffs.h); Tanh picks tanh's own table.
template <bool Tanh>
void minimax(size_t n, const float* x, float* y) {
  const uint8x16x4_t C0 = load_table(Tanh ? act_coeffs::kTanhC0 : act_coeffs::kMinimaxD0);
  const uint8x16x4_t C1 = load_table(Tanh ? act_coeffs::kTanhC1 : act_coeffs::kMinimaxC1);
  const uint8x16x4_t C2 = load_table(Tanh ? act_coeffs::kTanhC2 : act_coeffs::kMinimaxC2);
  const float32x4_t tmax = bcast_bits(Tanh ? act_coeffs::kTanhTMax : act_coeffs::kMinimaxTMax);
  const uint32x4_t idx0 = vdupq_n_u32(Tanh ? act_coeffs::kTanhIdx0 : act_coeffs::kMinimaxIdx0);
  const uint32x4_t byte_offsets = vdupq_n_u32(0x03020100u), sign = vdupq_n_u32(0x80000000u);
  const float32x4_t half = vdupq_n_f32(0.5f);
  run(n, x, y, [&](float32x4_t v) __attribute__((always_inline)) {
    const float32x4_t t = vminq_f32(vabsq_f32(v), tmax);  // NaN stays NaN
    const uint32x4_t k = vqsubq_u32(vshrq_n_u32(vreinterpretq_u32_f32(t), 22), idx0);  // 0..15 (NaN: any)
    const uint8x16_t bytes = vreinterpretq_u8_u32(vmlaq_n_u32(byte_offsets, k, 0x04040404u));
    const float32x4_t c2 = lookup(C2, bytes), c1 = lookup(C1, bytes), c0 = lookup(C0, bytes);
    const float32x4_t p = vfmaq_f32(c0, vfmaq_f32(c1, c2, t), t);  // tanh(|x|), or g = sigmoid(|x|) - 1/2
    const float32x4_t signed_p = vbslq_f32(sign, v, p);             // p >= 0: sign of x, rest of p
    return Tanh ? signed_p : vaddq_f32(half, signed_p);
  });
}

// e = e^-a (a = |x|, or 2|x| for tanh) as p(r) 2^n, then sigmoid or tanh from e and 1 / (1 + e).
template <bool Tanh, int Deg>
void exp_neg(size_t n, const float* x, float* y) {
  const uint32_t* coeffs = Deg == 2 ? act_coeffs::kExp2Deg2 : act_coeffs::kExp2Deg5;
  const float32x4_t c0 = bcast_bits(coeffs[0]), c1 = bcast_bits(coeffs[1]), c2 = bcast_bits(coeffs[2]);
  const float32x4_t c3 = bcast_bits(coeffs[Deg >= 3 ? 3 : 0]), c4 = bcast_bits(coeffs[Deg >= 4 ? 4 : 0]),
                    c5 = bcast_bits(coeffs[Deg >= 5 ? 5 : 0]);
  const float32x4_t amax = vdupq_n_f32(Tanh ? 44.0f : 88.0f), mlog2e = vdupq_n_f32(Tanh ? -2.0f * kLog2e : -kLog2e);
  const float32x4_t bias = vdupq_n_f32(kRoundBias), half = vdupq_n_f32(0.5f), one = vdupq_n_f32(1.0f);
  const uint32x4_t sign = vdupq_n_u32(0x80000000u);
  run(n, x, y, [&](float32x4_t v) __attribute__((always_inline)) {
    const float32x4_t a = vminq_f32(vabsq_f32(v), amax);            // NaN stays NaN
    // v = a mlog2e = -a log2e (tanh: -2a log2e) in [-127, 0]; e^-a (tanh: e^-2a) = 2^v = 2^n 2^(r - 1/2)
    const float32x4_t sum = vaddq_f32(vmulq_f32(a, mlog2e), bias);  // 1.5 * 2^23 + 127 + n, n = round(v)
    const float32x4_t nf = vsubq_f32(sum, bias);                    // n, exact
    const float32x4_t r = vfmaq_f32(vsubq_f32(half, nf), a, mlog2e);  // r = 1/2 - n + v, in [0, 1]
    float32x4_t p;
    if (Deg == 2) {
      p = vfmaq_f32(c0, vfmaq_f32(c1, c2, r), r);
    } else {
      p = vfmaq_f32(c4, c5, r);
      p = vfmaq_f32(c3, p, r);
      p = vfmaq_f32(c2, p, r);
      p = vfmaq_f32(c1, p, r);
      p = vfmaq_f32(c0, p, r);
    }
    const float32x4_t scale = vreinterpretq_f32_u32(vshlq_n_u32(vreinterpretq_u32_f32(sum), 23));  // 2^n or +0
    float32x4_t e = vmulq_f32(p, scale);  // in [0, 1]
    // The empty asm keeps GCC from fusing e into 1 + e and 1 - e (FMLA / FMLS overwrite their addend, so
    // each fused form costs a MOV of the constant: 2 instructions per 4 elements more than FADD / FSUB).
    asm("" : "+w"(e));
    const float32x4_t d = vaddq_f32(e, one);  // [1, 2]
    float32x4_t rd = vrecpeq_f32(d);
    rd = vmulq_f32(rd, vrecpsq_f32(d, rd));
    rd = vmulq_f32(rd, vrecpsq_f32(d, rd));     // 1 / d; exact at d = 1 and d = 2
    if (Tanh) return vbslq_f32(sign, v, vmulq_f32(vsubq_f32(one, e), rd));  // (1 - e) / (1 + e) >= 0
    return vbslq_f32(vcltzq_f32(v), vmulq_f32(e, rd), rd);                   // sigmoid(-|x|) : sigmoid(|x|)
  });
}

}  // namespace

void f32_sigmoid__neon_minimax(size_t n, const float* x, float* y) { minimax<false>(n, x, y); }
void f32_sigmoid__neon_scalef(size_t n, const float* x, float* y) { exp_neg<false, 2>(n, x, y); }
void f32_sigmoid__neon_accurate(size_t n, const float* x, float* y) { exp_neg<false, 5>(n, x, y); }
void f32_tanh__neon_minimax(size_t n, const float* x, float* y) { minimax<true>(n, x, y); }
void f32_tanh__neon_scalef(size_t n, const float* x, float* y) { exp_neg<true, 2>(n, x, y); }
void f32_tanh__neon_accurate(size_t n, const float* x, float* y) { exp_neg<true, 5>(n, x, y); }

NNK_F32_ERF_KERNEL(neon)
NNK_F32_EXP_NONPOS_KERNEL(neon)
NNK_F32_GELU_KERNEL(neon)
NNK_F32_SOFTMAX_KERNEL(neon)
NNK_F32_POST_OPS_KERNEL(neon)

const F32ActivationKernels f32_activation__neon = {
    "neon",
    {f32_sigmoid__neon_minimax, f32_sigmoid__neon_scalef, f32_sigmoid__neon_accurate},
    {f32_tanh__neon_minimax, f32_tanh__neon_scalef, f32_tanh__neon_accurate},
    {"f32_sigmoid__neon_minimax", "f32_sigmoid__neon_scalef", "f32_sigmoid__neon_accurate"},
    {"f32_tanh__neon_minimax", "f32_tanh__neon_scalef", "f32_tanh__neon_accurate"},
    {nullptr, nullptr, nullptr},  // no streaming variants
    {nullptr, nullptr, nullptr},
    f32_erf__neon,
    "f32_erf__neon",
    f32_exp_nonpos__neon,
    "f32_exp_nonpos__neon",
    f32_gelu__neon,
    "f32_gelu__neon",
    f32_softmax__neon,
    "f32_softmax__neon",
    f32_post_ops__neon,
    "f32_post_ops__neon",
};

}  // namespace nnkern
