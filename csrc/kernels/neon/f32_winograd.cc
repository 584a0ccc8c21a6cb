// The NEON Winograd transform kernel (kernels/f32_winograd.h): the template on 4-float vectors.
#include <arm_neon.h>

#include <cstddef>

#include "kernels/f32_winograd_list.h"

#define NNK_INLINE inline __attribute__((always_inline))

namespace nnkern {
namespace {

struct NeonF32 {
  using V = float32x4_t;
  static constexpr int L = 4;
  static NNK_INLINE V load(const float* p) { return vld1q_f32(p); }
  static NNK_INLINE void store(float* p, V x) { vst1q_f32(p, x); }
  static NNK_INLINE V add(V a, V b) { return vaddq_f32(a, b); }
  static NNK_INLINE V sub(V a, V b) { return vsubq_f32(a, b); }
  static NNK_INLINE V mul(V a, V b) { return vmulq_f32(a, b); }
  static NNK_INLINE V fmadd(V a, V b, V c) { return vfmaq_f32(c, a, b); }
  static NNK_INLINE V set1(float x) { return vdupq_n_f32(x); }
  static NNK_INLINE V zero() { return vdupq_n_f32(0.0f); }
  static NNK_INLINE V max(V a, V b) { return vmaxq_f32(a, b); }
  static NNK_INLINE V min(V a, V b) { return vminq_f32(a, b); }
  static NNK_INLINE float hsum(V x) { return vaddvq_f32(x); }
};

#include "kernels/inc/f32_winograd.inc"

}  // namespace

const F32WinogradKernel f32_winograd_4__neon = winograd_kernel<NeonF32>("f32_winograd_4__neon");

}  // namespace nnkern
