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
#include "kernels/inc/quantize_ymm.inc"

void quantize_tail(const float* x, uint8_t* q, size_t n, const float* scale, const int32_t* zp, size_t stride,
                   float lo, float hi) {
  for (size_t i = 0; i < n; ++i) q[i] = quantize1(x[i], scale[i * stride], float(zp[i * stride]), lo, hi);
}

// One scale (stride 0): 32 floats per step, their bytes packed and stored at once, which the byte store of every 8
// bound (docs/performance.md: "QuantizeLinear: 32 floats per step"); per-channel scales and the rest 8 at a time.
void quantize_run(const float* x, uint8_t* q, size_t n, const float* scale, const int32_t* zp, size_t stride,
                  bool is_signed) {
  const float lo_s = is_signed ? -128.0f : 0.0f, hi_s = is_signed ? 127.0f : 255.0f;
  const __m256 lo = _mm256_set1_ps(lo_s), hi = _mm256_set1_ps(hi_s);
  __m256 s = _mm256_set1_ps(scale[0]), z = _mm256_set1_ps(float(zp[0]));
  const auto eight = [&](const float* p) { return quantize8(_mm256_loadu_ps(p), s, z, lo, hi); };
  size_t i = 0;
  for (; !stride && i + 32 <= n; i += 32) {
    const __m256i w01 = _mm256_packs_epi32(eight(x + i), eight(x + i + 8));
    const __m256i w23 = _mm256_packs_epi32(eight(x + i + 16), eight(x + i + 24));
    const __m256i bytes = is_signed ? _mm256_packs_epi16(w01, w23) : _mm256_packus_epi16(w01, w23);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + i),
                        _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  }
  for (; i + 8 <= n; i += 8) {
    if (stride) {
      s = _mm256_loadu_ps(scale + i);
      z = _mm256_cvtepi32_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(zp + i)));
    }
    YmmOps::store_b8(q + i, eight(x + i), 8);
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
#include "kernels/inc/quantize_planes_ymm.inc"

void minmax_run(const float* x, size_t n, float* lo, float* hi) { minmax_loop<Ymm>(x, n, lo, hi); }

// QLinearAdd / QLinearMul (kernels/qbinary.h) 32 bytes per step, then 8, the last n % 8 read through a
// zero-padded copy (the compiler's vectors of qbinary_loop left up to 31 bytes to a scalar division each:
// docs/performance.md, "ONNX: byte tables and broadcast QLinearAdd / QLinearMul"). The same float32 values in
// the same order, three operations fewer per vector, which bound the loop on the vector ports rather than the
// division (docs/performance.md: "QLinearAdd: 32 bytes per step"): a zero point subtracted from the widened
// integers (exact, as in float), and rint as vcvtps2dq, which rounds half to even in the default rounding mode as
// the (v + 1.5 * 2^23) - 1.5 * 2^23 of the loop does. max(v, lo) and min(v, hi) keep the loop's NaN -> lo rule.
template <typename T, bool kMul>
void qbinary_ymm(const T* a, const T* b, T* y, size_t n, const QBinaryParams& p) {
  const __m256 sa = _mm256_set1_ps(p.sa), sb = _mm256_set1_ps(p.sb), sc = _mm256_set1_ps(p.sc);
  const __m256 zc = _mm256_set1_ps(p.zc), lo = _mm256_set1_ps(p.lo), hi = _mm256_set1_ps(p.hi);
  const __m256i za = _mm256_set1_epi32(int32_t(p.za)), zb = _mm256_set1_epi32(int32_t(p.zb));
  const auto centered = [](const T* q, __m256i zero) {  // float(q[i]) - zero, for 8 bytes
    const __m128i v = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q));
    return _mm256_cvtepi32_ps(
        _mm256_sub_epi32(std::is_signed_v<T> ? _mm256_cvtepi8_epi32(v) : _mm256_cvtepu8_epi32(v), zero));
  };
  const auto eight = [&](const T* pa, const T* pb) {  // 8 results as int32 lanes
    const __m256 x = _mm256_mul_ps(centered(pa, za), sa), z = _mm256_mul_ps(centered(pb, zb), sb);
    const __m256 v = _mm256_add_ps(_mm256_div_ps(kMul ? _mm256_mul_ps(x, z) : _mm256_add_ps(x, z), sc), zc);
    return _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(v, lo), hi));
  };
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i q0 = eight(a + i, b + i), q1 = eight(a + i + 8, b + i + 8);
    const __m256i q2 = eight(a + i + 16, b + i + 16), q3 = eight(a + i + 24, b + i + 24);
    // Packed in lane order (exact: the values are within the byte range), then the 32-bit units put back in order.
    const __m256i w01 = _mm256_packs_epi32(q0, q1), w23 = _mm256_packs_epi32(q2, q3);
    const __m256i bytes = std::is_signed_v<T> ? _mm256_packs_epi16(w01, w23) : _mm256_packus_epi16(w01, w23);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i),
                        _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  }
  for (; i + 8 <= n; i += 8) YmmOps::store_b8(reinterpret_cast<uint8_t*>(y + i), eight(a + i, b + i), 8);
  if (i < n) {
    T ta[8] = {}, tb[8] = {};
    std::memcpy(ta, a + i, n - i);
    std::memcpy(tb, b + i, n - i);
    YmmOps::store_b8(reinterpret_cast<uint8_t*>(y + i), eight(ta, tb), int(n - i));
  }
}

}  // namespace

NNK_QBINARY_KERNEL_WITH(avx2, qbinary_ymm)

const QuantizeKernel quantize__avx2 = {"quantize__avx2", quantize_run, dequantize_run, minmax_run, qbinary__avx2,
                                       lookup_ymm, quantize_planes_ymm};

}  // namespace nnkern
