// The convolutions' post-ops on a block of output rows just stored (ops/conv/layer.cc PackedConv2d::post_ops):
// y += r where a residual is given, then the activation, in one pass. The formulas are ops/activation/pointwise.h's,
// the separate ONNX ops' (same bits, no FMA contraction); plain loops that each ISA's kernel file compiles under
// its own flags (the compiler's vectors: the baseline build had four lanes and no blend). Baseline header: no
// intrinsics; static, so each kernel file compiles its own copy.
#pragma once
#include <cstddef>

#include "ops/activation/pointwise.h"

namespace nnkern {

// The activations a post-op pass applies (the others run in the kernels' epilogue or through the sigmoid kernels).
enum class F32PostAct : int { none = 0, relu = 1, relu6 = 2, hardswish = 3, hardsigmoid = 4, leaky_relu = 5 };

struct F32PostOpArgs {
  float* y;             // rows rows of n floats, ld apart
  const float* r;       // the residual, rows ldr apart, or null; never overlapping y
  size_t rows, n, ld, ldr;
  F32PostAct act;
  float alpha, beta;    // leaky_relu's alpha, hardsigmoid's alpha and beta
};
using F32PostOpsUkernel = void (*)(const F32PostOpArgs& a);

// The files that compile these loops do so without -ftrapping-math (CMakeLists.txt): with it g++ keeps a
// branch per select and vectorizes nothing. No value changes either way.
template <F32PostAct kAct>
static inline __attribute__((always_inline)) float post_act(float v, float alpha, float beta) {
  if constexpr (kAct == F32PostAct::relu) return clamp_keep_nan(v, 0.0f, __builtin_inff());
  if constexpr (kAct == F32PostAct::relu6) return clamp_keep_nan(v, 0.0f, 6.0f);
  if constexpr (kAct == F32PostAct::hardswish) return hard_swish(v);
  if constexpr (kAct == F32PostAct::hardsigmoid) return hard_sigmoid(v, alpha, beta);
  if constexpr (kAct == F32PostAct::leaky_relu) {
    const float scaled = v * alpha;
    return v < 0.0f ? scaled : v;
  }
  return v;
}

template <F32PostAct kAct, bool kResidual>
static void post_rows(const F32PostOpArgs& a) {
  const float alpha = a.alpha, beta = a.beta;
  for (size_t i = 0; i < a.rows; ++i) {
    float* __restrict y = a.y + i * a.ld;
    const float* __restrict r = kResidual ? a.r + i * a.ldr : nullptr;
    for (size_t j = 0; j < a.n; ++j) {
      float v = y[j];
      if constexpr (kResidual) v += r[j];
      y[j] = post_act<kAct>(v, alpha, beta);
    }
  }
}

template <bool kResidual>
static void post_rows_by_act(const F32PostOpArgs& a) {
  switch (a.act) {
    case F32PostAct::none: return post_rows<F32PostAct::none, kResidual>(a);
    case F32PostAct::relu: return post_rows<F32PostAct::relu, kResidual>(a);
    case F32PostAct::relu6: return post_rows<F32PostAct::relu6, kResidual>(a);
    case F32PostAct::hardswish: return post_rows<F32PostAct::hardswish, kResidual>(a);
    case F32PostAct::hardsigmoid: return post_rows<F32PostAct::hardsigmoid, kResidual>(a);
    case F32PostAct::leaky_relu: return post_rows<F32PostAct::leaky_relu, kResidual>(a);
  }
}

// f32_post_ops__<isa>: the kernel an ISA's file defines at namespace nnkern scope.
#define NNK_F32_POST_OPS_KERNEL(isa)                            \
  void f32_post_ops__##isa(const F32PostOpArgs& a) {            \
    if (a.r)                                                    \
      post_rows_by_act<true>(a);                                \
    else                                                        \
      post_rows_by_act<false>(a);                               \
  }

}  // namespace nnkern
