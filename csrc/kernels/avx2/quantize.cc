// AVX2 quantize / dequantize, 8 floats per step; the tail runs the same float32 operations one element at a
// time. See kernels/quantize.h for the exact formula.
#include <immintrin.h>

#include <cstddef>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/quantize.h"

namespace nnkern {
namespace {

#define NNK_INLINE inline __attribute__((always_inline))
#include "kernels/inc/qgemm_ymm.inc"  // YmmOps::store_b8: the low byte of each int32 lane, stored

void quantize_tail(const float* x, uint8_t* q, size_t n, const float* scale, const int32_t* zp, size_t stride,
                   float lo, float hi) {
  for (size_t i = 0; i < n; ++i) {
    const __m128 s = _mm_set_ss(scale[i * stride]), z = _mm_set_ss(float(zp[i * stride]));
    const __m128 v = _mm_set_ss(x[i]);
    __m128 t = _mm_add_ss(_mm_round_ss(v, _mm_div_ss(v, s), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), z);
    t = _mm_min_ss(_mm_max_ss(t, _mm_set_ss(lo)), _mm_set_ss(hi));
    if (x[i] != x[i]) t = z;
    q[i] = uint8_t(_mm_cvtss_si32(t));
  }
}

void quantize_run(const float* x, uint8_t* q, size_t n, const float* scale, const int32_t* zp, size_t stride,
                  bool is_signed) {
  const float lo_s = is_signed ? -128.0f : 0.0f, hi_s = is_signed ? 127.0f : 255.0f;
  const __m256 lo = _mm256_set1_ps(lo_s), hi = _mm256_set1_ps(hi_s);
  __m256 s = _mm256_set1_ps(scale[0]), z = _mm256_set1_ps(float(zp[0]));
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    if (stride) {
      s = _mm256_loadu_ps(scale + i);
      z = _mm256_cvtepi32_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(zp + i)));
    }
    __m256 t = _mm256_add_ps(_mm256_round_ps(_mm256_div_ps(v, s), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), z);
    t = _mm256_min_ps(_mm256_max_ps(t, lo), hi);
    t = _mm256_blendv_ps(t, z, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    YmmOps::store_b8(q + i, _mm256_cvtps_epi32(t), 8);
  }
  quantize_tail(x + i, q + i, n - i, stride ? scale + i : scale, stride ? zp + i : zp, stride, lo_s, hi_s);
}

void dequantize_run(const uint8_t* q, float* x, size_t n, const float* scale, const int32_t* zp, size_t stride,
                    bool is_signed) {
  __m256 s = _mm256_set1_ps(scale[0]), z = _mm256_set1_ps(float(zp[0]));
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + i));
    const __m256i w = is_signed ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b);
    if (stride) {
      s = _mm256_loadu_ps(scale + i);
      z = _mm256_cvtepi32_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(zp + i)));
    }
    _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_sub_ps(_mm256_cvtepi32_ps(w), z), s));
  }
  for (; i < n; ++i) {
    const __m128 v = _mm_set_ss(is_signed ? float(int8_t(q[i])) : float(q[i]));
    const __m128 t = _mm_mul_ss(_mm_sub_ss(v, _mm_set_ss(float(zp[i * stride]))), _mm_set_ss(scale[i * stride]));
    x[i] = _mm_cvtss_f32(t);
  }
}

struct Ymm {
  using V = __m256;
  static constexpr size_t kLanes = 8;
  static constexpr bool kMaskedTail = false;  // the last n % 8 run scalar
  static V set1(float f) { return _mm256_set1_ps(f); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static V min(V a, V acc) { return _mm256_min_ps(a, acc); }
  static V max(V a, V acc) { return _mm256_max_ps(a, acc); }
  static float reduce_min(V v) { return fold(v, [](float t, float r) { return t < r; }); }
  static float reduce_max(V v) { return fold(v, [](float t, float r) { return t > r; }); }
  // Lanes 1..7 into lane 0 in order, a lane replacing the result only when strictly better.
  template <typename Better>
  static float fold(V v, Better better) {
    alignas(32) float t[8];
    _mm256_store_ps(t, v);
    float r = t[0];
    for (int j = 1; j < 8; ++j) r = better(t[j], r) ? t[j] : r;
    return r;
  }
};

#include "kernels/inc/f32_minmax_loop.inc"
#include "kernels/inc/lookup_ymm.inc"

void minmax_run(const float* x, size_t n, float* lo, float* hi) { minmax_loop<Ymm>(x, n, lo, hi); }

// QLinearAdd / QLinearMul (kernels/qbinary.h) 8 bytes at a time, the last n % 8 read through a zero-padded copy:
// the compiler's vectors of qbinary_loop went 32 bytes at a time and left up to 31 to a scalar division each
// (docs/performance.md: "ONNX: byte tables and broadcast QLinearAdd / QLinearMul"). The same float32 operations
// in the same order: max(v, lo) and min(v, hi) keep the loop's NaN -> lo rule.
template <typename T, bool kMul>
void qbinary_ymm(const T* a, const T* b, T* y, size_t n, const QBinaryParams& p) {
  const __m256 sa = _mm256_set1_ps(p.sa), za = _mm256_set1_ps(p.za), sb = _mm256_set1_ps(p.sb);
  const __m256 zb = _mm256_set1_ps(p.zb), sc = _mm256_set1_ps(p.sc), zc = _mm256_set1_ps(p.zc);
  const __m256 lo = _mm256_set1_ps(p.lo), hi = _mm256_set1_ps(p.hi), magic = _mm256_set1_ps(12582912.0f);
  const auto widen = [](const T* q) {
    const __m128i v = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q));
    return _mm256_cvtepi32_ps(std::is_signed_v<T> ? _mm256_cvtepi8_epi32(v) : _mm256_cvtepu8_epi32(v));
  };
  const auto eight = [&](const T* pa, const T* pb, T* py, int count) {
    const __m256 x = _mm256_mul_ps(_mm256_sub_ps(widen(pa), za), sa);
    const __m256 z = _mm256_mul_ps(_mm256_sub_ps(widen(pb), zb), sb);
    __m256 v = _mm256_add_ps(_mm256_div_ps(kMul ? _mm256_mul_ps(x, z) : _mm256_add_ps(x, z), sc), zc);
    v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
    v = _mm256_sub_ps(_mm256_add_ps(v, magic), magic);
    YmmOps::store_b8(reinterpret_cast<uint8_t*>(py), _mm256_cvttps_epi32(v), count);
  };
  size_t i = 0;
  for (; i + 8 <= n; i += 8) eight(a + i, b + i, y + i, 8);
  if (i < n) {
    T ta[8] = {}, tb[8] = {};
    std::memcpy(ta, a + i, n - i);
    std::memcpy(tb, b + i, n - i);
    eight(ta, tb, y + i, int(n - i));
  }
}

}  // namespace

NNK_QBINARY_KERNEL_WITH(avx2, qbinary_ymm)

const QuantizeKernel quantize__avx2 = {"quantize__avx2", quantize_run, dequantize_run, minmax_run, qbinary__avx2,
                                       lookup_ymm};

}  // namespace nnkern
