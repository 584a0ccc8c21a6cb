// Elementwise sigmoid / tanh over a contiguous float32 buffer (y == x allowed), dispatched per ISA
// and split over the thread pool for large n. The per-ISA kernels (kernels/f32_activation.h) are
// exported for fused epilogues: f32_activation_family().dispatched().sigmoid[int(method)](n, x, y).
#pragma once
#include <cstddef>

#include "core/isa.h"
#include "kernels/f32_activation.h"
#include "core/kernel_family.h"
#include "kernels/f32_activation_list.h"

namespace nnkern {

// y is x or disjoint from it. Outputs of 32 MiB and more that are not in place go through the streaming
// variants where the ISA has them.
void f32_sigmoid(ActMethod method, size_t n, const float* x, float* y);
void f32_tanh(ActMethod method, size_t n, const float* x, float* y);
// erf (kernels/f32_erf.h: at most 2.7 ulp, the same bits on every ISA).
void f32_erf(size_t n, const float* x, float* y);

// Test hook: runs `kernels` on every `stride`-th float32 bit pattern with |x| <= hi (both signs,
// +-0 included) and compares with a float64 reference. Threaded; the result does not depend on the
// thread count.
struct ActivationSweep {
  double max_abs_err = 0.0;
  float worst_x = 0.0f;
  float worst_y = 0.0f;
  size_t count = 0;
  size_t out_of_range = 0;  // outputs outside [0, 1] (sigmoid) / [-1, 1] (tanh), or NaN
};
ActivationSweep sweep_activation(const F32ActivationKernels& kernels, bool tanh, ActMethod method, float hi,
                                 size_t stride);

}  // namespace nnkern
