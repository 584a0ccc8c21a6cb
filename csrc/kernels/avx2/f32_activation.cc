// AVX2 + FMA sigmoid / tanh; contracts in kernels/f32_activation.h, AVX-512 counterpart in
// kernels/avx512/f32_activation.cc. Differences from AVX-512:
//   minimax:  the 16-entry tables (lane L serves idx = bits(t) >> 22 with idx & 15 == L, as on AVX-512)
//             are two 8-entry halves: permutevar8x32 on each (it reads idx & 7), blend on bit 3 of idx.
//   scalef / accurate: both on a = min(126, |x|) (e = e^-a <= 1, so the Newton step is safe): 2^n by
//             exponent arithmetic for n >= -126, e = 0 below (|x| > 87.68: sigmoid(-|x|) < 1.2e-38, so
//             subnormal outputs flush to 0), then a true division e / (1 + e). (rcp's 12 bits + one Newton
//             step cannot give rcp(2) = 0.5 exactly, so sigmoid(-0) and tanh(0) would miss 0.5 / 0;
//             the Divide=false variant is kept for a CPU where division is slow.)
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

__m256 bcast_bits(uint32_t b) { return _mm256_castsi256_ps(_mm256_set1_epi32(int(b))); }
__m256 load_bits(const uint32_t* p) { return _mm256_castsi256_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
__m256 abs_ps(__m256 x) { return _mm256_and_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF))); }
__m256 with_sign_of(__m256 v, __m256 x) {
  return _mm256_or_ps(v, _mm256_and_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32(int(0x80000000u)))));
}

struct MinimaxTables {
  alignas(32) uint32_t c0[16], c1[16], c2[16];
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
constexpr MinimaxTables kSigmoidTables =
    lane_tables(act_coeffs::kMinimaxIdx0, act_coeffs::kMinimaxC0, act_coeffs::kMinimaxC1, act_coeffs::kMinimaxC2);
constexpr MinimaxTables kTanhTables =
    lane_tables(act_coeffs::kTanhIdx0, act_coeffs::kTanhC0, act_coeffs::kTanhC1, act_coeffs::kTanhC2);

// sigmoid (Tanh = false) or tanh with its own table; t = min(tmax, |x|), tmax just below the top.
template <bool Tanh>
struct Minimax {
  static constexpr const MinimaxTables& kT = Tanh ? kTanhTables : kSigmoidTables;
  __m256 C0lo = load_bits(kT.c0), C0hi = load_bits(kT.c0 + 8);
  __m256 C1lo = load_bits(kT.c1), C1hi = load_bits(kT.c1 + 8);
  __m256 C2lo = load_bits(kT.c2), C2hi = load_bits(kT.c2 + 8);
  __m256 tmax = bcast_bits(Tanh ? act_coeffs::kTanhTMax : act_coeffs::kMinimaxTMax), one = _mm256_set1_ps(1.0f);
  __m256i lo = _mm256_set1_epi32(int(Tanh ? act_coeffs::kTanhIdx0 : act_coeffs::kMinimaxIdx0));
  static __m256 lookup(__m256i idx, __m256 sel, __m256 tlo, __m256 thi) {
    return _mm256_blendv_ps(_mm256_permutevar8x32_ps(tlo, idx), _mm256_permutevar8x32_ps(thi, idx), sel);
  }
  __m256 operator()(__m256 x) const {
    const __m256 t = _mm256_min_ps(tmax, abs_ps(x));  // NaN stays NaN
    const __m256i idx = _mm256_max_epi32(_mm256_srli_epi32(_mm256_castps_si256(t), 22), lo);  // <= lo + 15
    const __m256 sel = _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28));  // bit 3 of idx -> sign: upper half
    const __m256 c2 = lookup(idx, sel, C2lo, C2hi), c1 = lookup(idx, sel, C1lo, C1hi),
                 c0 = lookup(idx, sel, C0lo, C0hi);
    const __m256 f = _mm256_fmadd_ps(_mm256_fmadd_ps(c2, t, c1), t, c0);
    if (Tanh) return with_sign_of(f, x);                    // f >= 0
    return _mm256_blendv_ps(f, _mm256_sub_ps(one, f), x);  // x's sign bit: 1 - f
  }
};

// sigmoid(-a) for a = min(126, |x|) (or 2|x| for tanh), a 2^y polynomial of degree Deg.
template <bool Tanh, int Deg, bool Divide>
struct ExpNeg {
  __m256 c[Deg + 1];
  __m256 mlog2e = _mm256_set1_ps(-kLog2e), half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f),
         clampv = _mm256_set1_ps(126.0f), nmin = _mm256_set1_ps(-126.0f), zero = _mm256_setzero_ps();
  ExpNeg() {
    for (int j = 0; j <= Deg; ++j) c[j] = bcast_bits(Deg == 2 ? act_coeffs::kExp2Deg2[j] : act_coeffs::kExp2Deg5[j]);
  }
  __m256 operator()(__m256 x) const {
    __m256 a = abs_ps(x);
    if (Tanh) a = _mm256_add_ps(a, a);
    a = _mm256_min_ps(clampv, a);
    const __m256 xp = _mm256_fmadd_ps(a, mlog2e, half);  // <= 0.5; e^-a = 2^(xp - 0.5)
    const __m256 n = _mm256_floor_ps(xp);
    const __m256 y = _mm256_sub_ps(xp, n);
    __m256 p = c[Deg];
    for (int j = Deg - 1; j >= 0; --j) p = _mm256_fmadd_ps(p, y, c[j]);
    const __m256i ni = _mm256_max_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(-126));
    const __m256 s = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(ni, _mm256_set1_epi32(127)), 23));
    const __m256 e = _mm256_andnot_ps(_mm256_cmp_ps(xp, nmin, _CMP_LT_OQ), _mm256_mul_ps(p, s));  // 0 if n < -126
    const __m256 d = _mm256_add_ps(e, one);  // [1, 2]
    __m256 f;
    if (Divide) {
      f = _mm256_div_ps(e, d);
    } else {
      __m256 r = _mm256_rcp_ps(d);
      r = _mm256_fmadd_ps(_mm256_fnmadd_ps(d, r, one), r, r);
      f = _mm256_mul_ps(e, r);
    }
    if (Tanh) return with_sign_of(_mm256_max_ps(zero, _mm256_fnmadd_ps(f, _mm256_set1_ps(2.0f), one)), x);
    // x < 0: f (a compare, not the sign bit: -0 takes 1 - f = 0.5 exactly, as rcp(2) may be inexact)
    return _mm256_blendv_ps(_mm256_sub_ps(one, f), f, _mm256_cmp_ps(x, zero, _CMP_LT_OQ));
  }
};

#include "kernels/inc/f32_ymm.inc"
#include "kernels/inc/f32_activation_loop.inc"

using SigmoidScalef = ExpNeg<false, 2, true>;
using SigmoidAccurate = ExpNeg<false, 5, true>;
using TanhScalef = ExpNeg<true, 2, true>;
using TanhAccurate = ExpNeg<true, 5, true>;

}  // namespace

NNK_ACTIVATION_SET(avx2, Avx2F32, Minimax<false>, SigmoidScalef, SigmoidAccurate, Minimax<true>, TanhScalef,
                   TanhAccurate)

}  // namespace nnkern
