// The piecewise-linear post-ops of the FP32 convolution (HardSwish, HardSigmoid, LeakyRelu, and the residual's
// add and clamp) over blocks of output rows. In a file of its own so that it compiles without -ftrapping-math
// (CMakeLists.txt): g++ then turns the formulas' compares into vector compares and blends, instead of a branch
// per element.
#include <limits>

#include "ops/activation/pointwise.h"
#include "ops/conv/layer.h"

namespace nnkern {

namespace {

template <typename F>
void map_rows(float* y, size_t rows, size_t n, size_t ld, F f) {
  for (size_t r = 0; r < rows; ++r) {
    float* row = y + r * ld;
    for (size_t i = 0; i < n; ++i) row[i] = f(row[i]);
  }
}

}  // namespace

bool conv_piecewise_post_op(const ConvPostOp& post, float* y, size_t rows, size_t n, size_t ld) {
  const float alpha = post.alpha, beta = post.beta;
  switch (post.act) {
    case ConvActivation::hardswish:
      map_rows(y, rows, n, ld, [](float v) { return hard_swish(v); });
      return true;
    case ConvActivation::hardsigmoid:
      map_rows(y, rows, n, ld, [=](float v) { return hard_sigmoid(v, alpha, beta); });
      return true;
    case ConvActivation::leaky_relu:
      map_rows(y, rows, n, ld, [=](float v) { return leaky_relu(v, alpha); });
      return true;
    default:
      return false;
  }
}

void conv_residual_post_op(const ConvPostOp& post, float* y, const float* r, size_t rows, size_t n, size_t ld,
                           size_t ldr) {
  const float inf = std::numeric_limits<float>::infinity();
  const float hi = post.act == ConvActivation::relu6 ? 6.0f : inf;
  const bool clamp = post.act == ConvActivation::relu || post.act == ConvActivation::relu6;
  for (size_t i = 0; i < rows; ++i) {
    float* __restrict yr = y + i * ld;  // y and r never overlap (PackedConv2d::run)
    const float* __restrict rr = r + i * ldr;
    if (clamp)
      for (size_t j = 0; j < n; ++j) yr[j] = clamp_keep_nan(yr[j] + rr[j], 0.0f, hi);
    else
      for (size_t j = 0; j < n; ++j) yr[j] += rr[j];
  }
}

}  // namespace nnkern
