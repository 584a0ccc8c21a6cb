// Portable C++ stand-ins for the AVX-512 intrinsics that the bf16 GEMM kernels use (the f32_zmm.inc traits,
// vpbroadcastd, vpandd, vpslld, vdpbf16ps), so that their tile logic (tails, masks, epilogue) runs on CPUs without
// AVX-512: tests/native/CMakeLists.txt compiles csrc/kernels/avx512bf16/bf16_gemm.cc and avx512/bf16_gemm.cc a
// second time with this header forced in first (-include) for test_bf16_gemm_emulated. It blocks <immintrin.h> and defines the types and functions
// with the Intel pseudo-code's semantics (vdpbf16ps: per lane, the odd pair's product then the even one's, each
// sum rounded, bf16 denormals read as zero, denormal sums flushed to zero). Test code only: never in the library.
#pragma once
#include <xmmintrin.h>  // _mm_prefetch, the one SSE intrinsic the traits use

#define _IMMINTRIN_H_INCLUDED 1  // the kernel's #include <immintrin.h> is then empty

#include <cmath>
#include <cstdint>
#include <cstring>

struct EmuZmmF { float f[16]; };
struct EmuZmmI { int32_t i[16]; };
using __m512 = EmuZmmF;
using __m512i = EmuZmmI;
using __m512bh = EmuZmmI;  // so that the kernels' (__m512bh) casts of an __m512i are the identity
using __mmask16 = uint16_t;

static inline __m512 _mm512_loadu_ps(const float* p) { __m512 r; std::memcpy(r.f, p, 64); return r; }
static inline __m512 _mm512_maskz_loadu_ps(__mmask16 k, const float* p) {
  __m512 r;
  for (int l = 0; l < 16; ++l) r.f[l] = (k >> l) & 1 ? p[l] : 0.0f;  // masked lanes are never read
  return r;
}
static inline void _mm512_storeu_ps(float* p, __m512 x) { std::memcpy(p, x.f, 64); }
static inline void _mm512_mask_storeu_ps(float* p, __mmask16 k, __m512 x) {
  for (int l = 0; l < 16; ++l)
    if ((k >> l) & 1) p[l] = x.f[l];
}
static inline void _mm512_stream_ps(float* p, __m512 x) { _mm512_storeu_ps(p, x); }
static inline __m512 _mm512_set1_ps(float v) { __m512 r; for (float& f : r.f) f = v; return r; }
static inline __m512 _mm512_setzero_ps() { return _mm512_set1_ps(0.0f); }
#define NNK_EMU_LANEWISE(name, expr)                       \
  static inline __m512 name(__m512 a, __m512 b) {           \
    __m512 r;                                               \
    for (int l = 0; l < 16; ++l) {                          \
      const float x = a.f[l], y = b.f[l];                   \
      r.f[l] = (expr);                                      \
    }                                                       \
    return r;                                               \
  }
NNK_EMU_LANEWISE(_mm512_mul_ps, x * y)
NNK_EMU_LANEWISE(_mm512_add_ps, x + y)
NNK_EMU_LANEWISE(_mm512_sub_ps, x - y)
#undef NNK_EMU_LANEWISE
static inline __m512 _mm512_fmadd_ps(__m512 a, __m512 b, __m512 c) {
  __m512 r;
  for (int l = 0; l < 16; ++l) r.f[l] = std::fma(a.f[l], b.f[l], c.f[l]);
  return r;
}
// vmaxps / vminps: the second operand when either is NaN (or both are zeros); src where k is clear.
static inline __m512 _mm512_mask_max_ps(__m512 src, __mmask16 k, __m512 a, __m512 b) {
  __m512 r;
  for (int l = 0; l < 16; ++l) r.f[l] = (k >> l) & 1 ? (a.f[l] > b.f[l] ? a.f[l] : b.f[l]) : src.f[l];
  return r;
}
static inline __m512 _mm512_mask_min_ps(__m512 src, __mmask16 k, __m512 a, __m512 b) {
  __m512 r;
  for (int l = 0; l < 16; ++l) r.f[l] = (k >> l) & 1 ? (a.f[l] < b.f[l] ? a.f[l] : b.f[l]) : src.f[l];
  return r;
}
static inline float _mm512_reduce_add_ps(__m512 x) {  // a fixed order: halves, then quarters, ...
  for (int w = 8; w >= 1; w /= 2)
    for (int l = 0; l < w; ++l) x.f[l] += x.f[l + w];
  return x.f[0];
}
static inline __m512i _mm512_loadu_si512(const void* p) { __m512i r; std::memcpy(r.i, p, 64); return r; }
static inline __m512i _mm512_set1_epi32(int32_t v) { __m512i r; for (int32_t& i : r.i) i = v; return r; }
static inline __m512i _mm512_and_si512(__m512i a, __m512i b) {
  for (int l = 0; l < 16; ++l) a.i[l] &= b.i[l];
  return a;
}
static inline __m512i _mm512_mask_slli_epi32(__m512i src, __mmask16 k, __m512i a, unsigned n) {
  for (int l = 0; l < 16; ++l)
    if ((k >> l) & 1) src.i[l] = int32_t(uint32_t(a.i[l]) << n);
  return src;
}
static inline __m512 _mm512_castsi512_ps(__m512i a) { __m512 r; std::memcpy(r.f, a.i, 64); return r; }

static inline float emu_bf16_daz(uint16_t h) {
  if ((h & 0x7f80u) == 0) h &= 0x8000u;  // a denormal (or zero) bf16 reads as a signed zero
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
static inline float emu_ftz(float x) { return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x; }

static inline __m512 _mm512_dpbf16_ps(__m512 acc, __m512bh a, __m512bh b) {
  for (int l = 0; l < 16; ++l) {
    const uint32_t x = uint32_t(a.i[l]), y = uint32_t(b.i[l]);
    float s = acc.f[l];
    s = emu_ftz(s + emu_bf16_daz(uint16_t(x >> 16)) * emu_bf16_daz(uint16_t(y >> 16)));
    s = emu_ftz(s + emu_bf16_daz(uint16_t(x)) * emu_bf16_daz(uint16_t(y)));
    acc.f[l] = s;
  }
  return acc;
}
