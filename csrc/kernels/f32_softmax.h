// Softmax of one contiguous row in float32 (the ONNX plan's Softmax along the last axis): the f32_activation
// kernels' softmax, a plain loop compiled under each ISA's flags as exp_nonpos is, so that the maximum, the sum and
// the scaling run in the ISA's vectors too, not only the exps. y = x (in place) is allowed.
//   m = the row's maximum (NaN if any: every output is then NaN);
//   y = e^(x - m) by exp_nonpos_f32 (kernels/f32_exp.h), so every argument is <= 0;
//   s = the sum of y in the graph reductions' fixed order (kernels/fixed_order_sum.h's sizes: pieces, each
//       summed in interleaved partials combined pairwise, the pieces' sums folded a group at a time);
//   y *= 1 / s.
// The same operations in the same order on every ISA (no FMA contraction, no reassociation): the same bits.
// Baseline header: no intrinsics; static, so each kernel file compiles its own copy with its own flags. (That is
// why the maximum's key and the piece sum are written here for float rather than taken from reduction.h's
// templates: an inline template instantiated under an ISA's flags could be the copy baseline code links to.)
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/f32_exp.h"
#include "kernels/fixed_order_sum.h"

namespace nnkern {

// An integer key that orders as the floats do (-0 below +0), a NaN above +inf (reduction.h's FloatKey::key_nan<true>
// for float): g++ vectorizes an integer maximum, not a float one that must let NaN win.
static inline int32_t softmax_key(float f) {
  int32_t b;
  std::memcpy(&b, &f, sizeof b);
  const int32_t nan = (0x7f800000 - (b & 0x7fffffff)) >> 31;  // all ones for a NaN
  b &= ~(nan & INT32_MIN);                                     // a positive NaN
  return b ^ ((b >> 31) & INT32_MAX);
}

static inline float softmax_key_value(int32_t k) {
  const int32_t b = k ^ ((k >> 31) & INT32_MAX);
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

// The sum of y[0, n), n <= kSumPiece, in kSumLanes interleaved partials (fewer elements: in order).
static inline float softmax_piece_sum(const float* y, size_t n) {
  float a = 0.0f;
  if (n < kSumLanes) {
    for (size_t i = 0; i < n; ++i) a += y[i];
    return a;
  }
  float acc[kSumLanes] = {};
  size_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes)
    for (size_t j = 0; j < kSumLanes; ++j) acc[j] += y[i + j];
  for (size_t j = 0; i + j < n; ++j) acc[j] += y[i + j];
  for (size_t w = kSumLanes / 2; w > 0; w /= 2)
    for (size_t j = 0; j < w; ++j) acc[j] += acc[j + w];
  return acc[0];
}

static inline void softmax_row_f32(size_t n, const float* x, float* y) {
  int32_t mk = INT32_MIN;
  for (size_t i = 0; i < n; ++i) mk = std::max(mk, softmax_key(x[i]));
  const float m = softmax_key_value(mk);
  float total = 0.0f, group = 0.0f;
  size_t k = 0;
  for (size_t b = 0; b < n; b += kSumPiece) {
    const size_t len = std::min(kSumPiece, n - b);
    for (size_t i = b; i < b + len; ++i) y[i] = exp_nonpos_f32(x[i] - m);
    group += softmax_piece_sum(y + b, len);  // while the piece is in cache
    if (++k == kSumGroup) {
      total += group;
      group = 0.0f;
      k = 0;
    }
  }
  const float inv = 1.0f / (total + group);
  for (size_t i = 0; i < n; ++i) y[i] *= inv;
}

// Defines f32_softmax__<isa>, the f32_activation kernels' softmax of one row. At namespace nnkern scope.
#define NNK_F32_SOFTMAX_KERNEL(isa)                               \
  void f32_softmax__##isa(size_t n, const float* x, float* y) {   \
    softmax_row_f32(n, x, y);                                     \
  }

}  // namespace nnkern
