// AVX-512 sigmoid / tanh (seeds I18, I19); contracts in kernels/f32_activation.h.
//   minimax:  t = min(tmax, |x|) (this operand order keeps NaN; tmax = the float below 16, so bits(t) >> 22
//             <= 261 and only the lower clamp is needed), idx = max(bits(t) >> 22, 246),
//             c_j = permutexvar(idx, C_j) (lane idx & 15), g = (c2 t + c1) t + d0 = sigmoid(|x|) - 1/2 in
//             [0, 1/2] (d0 = c0 - 1/2), y = fma(g, +-1, 1/2) with +-1 = 1 carrying the sign of x (one
//             ternlog, off the critical path): 11 vector ops per 16 elements, like vpmovd2m + a masked
//             1 - f, but all of them for port 0 or 5 (vpmovd2m is port 0 only).
//             tanh: the same on u = min(tmax, |x|), tmax below 8, with tanh's own table (idx >= 244), and
//             the sign of x ORed onto p(u) >= 0: 10 vector ops per 16 elements.
//   scalef:   I19 as in the manual: xp = 0.5 - x log2e, y = reduce(xp) = xp - floor(xp), p(y) ~ 2^(y-0.5),
//             e = scalef(p, xp) = e^-x, sigmoid = min(1, rcp14(1 + e)) (rcp14 may exceed 1/d by 2^-14).
//   accurate: the same on a = min(126, |x|): e = e^-a in [0, 1], d = 1 + e in [1, 2], rcp14 + one
//             Newton step (no inf * 0 possible), f = e r = sigmoid(-|x|), y = x >= 0 ? 1 - f : f.
//   tanh:     (scalef, accurate) on |x| with the sign of x restored: 2 sigmoid(2|x|) - 1 (scalef) or
//             1 - 2 sigmoid(-2|x|) (accurate), clamped at 0 below.
// Loop: kernels/inc/f32_activation_loop.inc (4 vectors per iteration, aligned loads or, for the *_stream
// variants, aligned vmovntps stores, a masked head and tail).
#include <immintrin.h>

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

struct MinimaxTables {
  alignas(64) uint32_t c0[16], c1[16], c2[16];
};
// Lane L serves idx with idx & 15 == L, i.e. interval k = (L - idx0) mod 16.
constexpr MinimaxTables lane_tables(uint32_t idx0, const uint32_t* c0, const uint32_t* c1, const uint32_t* c2) {
  MinimaxTables t{};
  for (uint32_t lane = 0; lane < 16; ++lane) {
    const uint32_t k = (lane - idx0) & 15;
    t.c0[lane] = c0[k];
    t.c1[lane] = c1[k];
    t.c2[lane] = c2[k];
  }
  return t;
}
constexpr MinimaxTables kSigmoidTables =  // c0 = d0: the kernel computes sigmoid(|x|) - 1/2
    lane_tables(act_coeffs::kMinimaxIdx0, act_coeffs::kMinimaxD0, act_coeffs::kMinimaxC1, act_coeffs::kMinimaxC2);
constexpr MinimaxTables kTanhTables =
    lane_tables(act_coeffs::kTanhIdx0, act_coeffs::kTanhC0, act_coeffs::kTanhC1, act_coeffs::kTanhC2);

__m512 load_table(const uint32_t* p) { return _mm512_castsi512_ps(_mm512_load_si512(p)); }
__m512 bcast_bits(uint32_t b) { return _mm512_castsi512_ps(_mm512_set1_epi32(int(b))); }
__m512 with_sign_of(__m512 v, __m512 x) {  // v >= 0 or NaN: OR in x's sign bit
  return _mm512_castsi512_ps(_mm512_ternarylogic_epi32(_mm512_castps_si512(v), _mm512_castps_si512(x),
                                                       _mm512_set1_epi32(int(0x80000000u)), 0xF8));  // a | (b & c)
}

template <bool Tanh>
struct Minimax {
  static constexpr const MinimaxTables& kT = Tanh ? kTanhTables : kSigmoidTables;
  __m512 C0 = load_table(kT.c0), C1 = load_table(kT.c1), C2 = load_table(kT.c2);
  __m512 tmax = bcast_bits(Tanh ? act_coeffs::kTanhTMax : act_coeffs::kMinimaxTMax), one = _mm512_set1_ps(1.0f),
         half = _mm512_set1_ps(0.5f);
  __m512i lo = _mm512_set1_epi32(int(Tanh ? act_coeffs::kTanhIdx0 : act_coeffs::kMinimaxIdx0));
  __m512 operator()(__m512 x) const {
    const __m512 t = _mm512_min_ps(tmax, _mm512_abs_ps(x));  // NaN in |x| -> NaN (min returns its 2nd operand)
    const __m512i idx = _mm512_max_epi32(_mm512_srli_epi32(_mm512_castps_si512(t), 22), lo);
    const __m512 c2 = _mm512_permutexvar_ps(idx, C2), c1 = _mm512_permutexvar_ps(idx, C1),
                 c0 = _mm512_permutexvar_ps(idx, C0);
    const __m512 p = _mm512_fmadd_ps(_mm512_fmadd_ps(c2, t, c1), t, c0);  // tanh(|x|), or sigmoid(|x|) - 1/2
    if (Tanh) return with_sign_of(p, x);                                  // p >= 0
    return _mm512_fmadd_ps(p, with_sign_of(one, x), half);               // 1/2 +- p: +-0 -> 1/2, -inf -> +0
  }
};

template <bool Tanh>
struct Scalef {
  __m512 c0 = bcast_bits(act_coeffs::kExp2Deg2[0]), c1 = bcast_bits(act_coeffs::kExp2Deg2[1]),
         c2 = bcast_bits(act_coeffs::kExp2Deg2[2]);
  __m512 mlog2e = _mm512_set1_ps(Tanh ? -2.0f * kLog2e : -kLog2e), half = _mm512_set1_ps(0.5f),
         one = _mm512_set1_ps(1.0f), zero = _mm512_setzero_ps();
  __m512 operator()(__m512 x) const {
    const __m512 arg = Tanh ? _mm512_abs_ps(x) : x;
    const __m512 xp = _mm512_fmadd_ps(arg, mlog2e, half);   // e^-arg = 2^(xp - 0.5)
    const __m512 y = _mm512_reduce_ps(xp, 1);                // xp - floor(xp) in [0, 1)
    const __m512 p = _mm512_fmadd_ps(_mm512_fmadd_ps(c2, y, c1), y, c0);
    const __m512 e = _mm512_scalef_ps(p, xp);                // p 2^floor(xp); +inf / 0 saturate
    const __m512 s = _mm512_min_ps(one, _mm512_rcp14_ps(_mm512_add_ps(e, one)));
    if (Tanh) return with_sign_of(_mm512_max_ps(zero, _mm512_fmsub_ps(s, _mm512_set1_ps(2.0f), one)), x);
    return s;
  }
};

template <bool Tanh>
struct Accurate {
  __m512 c0 = bcast_bits(act_coeffs::kExp2Deg5[0]), c1 = bcast_bits(act_coeffs::kExp2Deg5[1]),
         c2 = bcast_bits(act_coeffs::kExp2Deg5[2]), c3 = bcast_bits(act_coeffs::kExp2Deg5[3]),
         c4 = bcast_bits(act_coeffs::kExp2Deg5[4]), c5 = bcast_bits(act_coeffs::kExp2Deg5[5]);
  __m512 mlog2e = _mm512_set1_ps(-kLog2e), half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f),
         clampv = _mm512_set1_ps(126.0f), zero = _mm512_setzero_ps();
  __m512 operator()(__m512 x) const {
    __m512 a = _mm512_abs_ps(x);
    if (Tanh) a = _mm512_add_ps(a, a);
    a = _mm512_min_ps(clampv, a);                            // e^-126 underflows to 0; NaN stays
    const __m512 xp = _mm512_fmadd_ps(a, mlog2e, half);      // <= 0.5
    const __m512 y = _mm512_reduce_ps(xp, 1);
    __m512 p = _mm512_fmadd_ps(c5, y, c4);
    p = _mm512_fmadd_ps(p, y, c3);
    p = _mm512_fmadd_ps(p, y, c2);
    p = _mm512_fmadd_ps(p, y, c1);
    p = _mm512_fmadd_ps(p, y, c0);
    const __m512 e = _mm512_scalef_ps(p, xp);                // e^-a in [0, 1]
    const __m512 d = _mm512_add_ps(e, one);                  // [1, 2]
    __m512 r = _mm512_rcp14_ps(d);
    r = _mm512_fmadd_ps(_mm512_fnmadd_ps(d, r, one), r, r);  // Newton: r + r (1 - d r)
    const __m512 f = _mm512_mul_ps(e, r);                    // sigmoid(-a)
    if (Tanh) return with_sign_of(_mm512_max_ps(zero, _mm512_fnmadd_ps(f, _mm512_set1_ps(2.0f), one)), x);
    const __mmask16 nonneg = __mmask16(~_mm512_movepi32_mask(_mm512_castps_si512(x)));
    return _mm512_mask_sub_ps(f, nonneg, one, f);
  }
};

#include "kernels/inc/f32_zmm.inc"
#include "kernels/inc/f32_activation_loop.inc"

}  // namespace

NNK_ACTIVATION_SET(avx512, Avx512F32, Minimax<false>, Scalef<false>, Accurate<false>, Minimax<true>, Scalef<true>,
                   Accurate<true>)

}  // namespace nnkern
