// AVX-512 quantize / dequantize (seed I5, example 7-2: scale, round to nearest, add the zero point, clamp,
// narrow, store), 16 floats per step, opmasked tails. See kernels/quantize.h for the exact formula.
#include <immintrin.h>

#include <cstddef>
#include <cmath>
#include <cstdint>

#include "kernels/quantize.h"

namespace nnkern {
namespace {

__mmask16 tail_mask(size_t r) { return __mmask16((1u << r) - 1u); }

void quantize_run(const float* x, uint8_t* q, size_t n, const float* scale, const int32_t* zp, size_t stride,
                  bool is_signed) {
  const __m512 lo = _mm512_set1_ps(is_signed ? -128.0f : 0.0f), hi = _mm512_set1_ps(is_signed ? 127.0f : 255.0f);
  __m512 s = _mm512_set1_ps(scale[0]), z = _mm512_set1_ps(float(zp[0]));
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xFFFF) : tail_mask(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    if (stride) {
      s = _mm512_mask_loadu_ps(_mm512_set1_ps(1.0f), m, scale + i);
      z = _mm512_maskz_cvtepi32_ps(0xFFFF, _mm512_maskz_loadu_epi32(m, zp + i));
    }
    __m512 t = _mm512_add_ps(_mm512_maskz_roundscale_ps(0xFFFF, _mm512_div_ps(v, s), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), z);
    t = _mm512_mask_min_ps(t, 0xFFFF, _mm512_mask_max_ps(t, 0xFFFF, t, lo), hi);  // NaN -> hi here, fixed next
    t = _mm512_mask_mov_ps(t, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), z);
    const __m512i qi = _mm512_maskz_cvtps_epi32(0xFFFF, t);  // integral already: exact
    _mm512_mask_cvtepi32_storeu_epi8(q + i, m, qi);
  }
}

void dequantize_run(const uint8_t* q, float* x, size_t n, const float* scale, const int32_t* zp, size_t stride,
                    bool is_signed) {
  __m512 s = _mm512_set1_ps(scale[0]), z = _mm512_set1_ps(float(zp[0]));
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xFFFF) : tail_mask(n - i);
    const __m128i b = _mm_maskz_loadu_epi8(m, q + i);
    const __m512i w = is_signed ? _mm512_maskz_cvtepi8_epi32(0xFFFF, b) : _mm512_maskz_cvtepu8_epi32(0xFFFF, b);
    if (stride) {
      s = _mm512_maskz_loadu_ps(m, scale + i);
      z = _mm512_maskz_cvtepi32_ps(0xFFFF, _mm512_maskz_loadu_epi32(m, zp + i));
    }
    _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, w), z), s));
  }
}

struct Zmm {
  using V = __m512;
  using Mask = __mmask16;
  static constexpr size_t kLanes = 16;
  static constexpr bool kMaskedTail = true;
  static V set1(float f) { return _mm512_set1_ps(f); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static V min(V a, V acc) { return _mm512_min_ps(a, acc); }
  static V max(V a, V acc) { return _mm512_max_ps(a, acc); }
  static Mask first_lanes(size_t count) { return tail_mask(count); }  // count < 16 here
  static V maskz_load(Mask m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }
  static V mask_min(V acc, Mask m, V a) { return _mm512_mask_min_ps(acc, m, a, acc); }
  static V mask_max(V acc, Mask m, V a) { return _mm512_mask_max_ps(acc, m, a, acc); }
  static float reduce_min(V v) { return _mm512_reduce_min_ps(v); }
  static float reduce_max(V v) { return _mm512_reduce_max_ps(v); }
};

#include "kernels/inc/f32_minmax_loop.inc"

void minmax_run(const float* x, size_t n, float* lo, float* hi) { minmax_loop<Zmm>(x, n, lo, hi); }

#include "kernels/inc/lookup_ymm.inc"  // VBMI's vpermi2b would need a level of its own
#include "kernels/inc/quantize_ymm.inc"
#include "kernels/inc/quantize_planes_ymm.inc"  // 8 pixels of up to 4 planes fill a 256-bit store

}  // namespace

NNK_QBINARY_KERNEL(avx512)

const QuantizeKernel quantize__avx512 = {"quantize__avx512", quantize_run, dequantize_run, minmax_run, qbinary__avx512,
                                         lookup_ymm, quantize_planes_ymm};

}  // namespace nnkern
