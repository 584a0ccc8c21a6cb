// Loops of the ops that work along one axis (Softmax, ArgMax, TopK, CumSum, the normalizations): the tensor seen as
// outer blocks of n positions along the axis, each position `inner` contiguous elements; tiles of up to kTile inner
// positions advance together, so the inner loops run over contiguous elements. Also exp of non-positive float32
// values as a plain loop body the compiler vectorizes. Baseline header.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/checked.h"
#include "core/threadpool.h"
#include "ops/graph/ops/elementwise.h"
#include "ops/graph/ops/reduction.h"

namespace nnkern::graph {

struct AxisSplit {
  size_t outer = 1, n = 1, inner = 1;
  size_t elements() const { return outer * n * inner; }
};

// Around `axis`: outer = the dims before it, n = its length, inner = the dims after it.
inline AxisSplit split_at_axis(const std::vector<int64_t>& shape, size_t axis) {
  AxisSplit s;
  for (size_t i = 0; i < axis; ++i) s.outer = checked_mul(s.outer, size_t(shape[i]));
  s.n = size_t(shape[axis]);
  for (size_t i = axis + 1; i < shape.size(); ++i) s.inner = checked_mul(s.inner, size_t(shape[i]));
  checked_mul(checked_mul(s.outer, s.n), s.inner);
  return s;
}

// fn(o, j0, j1) for each outer block o and each tile [j0, j1) of the inner positions (j1 - j0 <= kTile; one tile
// [0, 1) when inner == 1), in contiguous ranges across the pool when the tensor is large.
template <typename Fn>
void for_axis_tiles(const AxisSplit& s, Fn fn) {
  const size_t tiles = (s.inner + kTile - 1) / kTile, tasks = s.outer * tiles;
  auto run = [&](size_t t0, size_t t1) {
    for (size_t t = t0; t < t1; ++t) {
      const size_t o = t / tiles, j0 = (t % tiles) * kTile;
      fn(o, j0, std::min(s.inner, j0 + kTile));
    }
  };
  if (s.elements() < kElementwiseParallel || tasks < 2) run(0, tasks);
  else parallel_for_ranges(tasks, run);
}

// e^x for x <= 0 (softmax's and log-sum-exp's shifted inputs; the result is wrong above 0): x = k ln 2 + r with
// |r| <= ln 2 / 2 (ln 2 in two parts), e^r by Cephes' degree-6 polynomial, 2^k built in the exponent field. Within
// 1 ulp wherever e^x is a normal float32 (checked over every float32 in [-88, 0]); 0 where it is subnormal (x
// below about -87.3, the arguments clamped at -88, where 2^k is 2^-127: an exponent field of 0); NaN for NaN.
inline float exp_nonpos(float x) {
  // The clamp works on the bits with an integer min: g++ turns a float select into a branch around the
  // computation that follows (a constant in the clamped arm), and the loops calling this would not vectorize.
  uint32_t xb;
  std::memcpy(&xb, &x, 4);
  const uint32_t mag = xb & 0x7FFFFFFFu;
  const uint32_t cb = mag > 0x7F800000u ? xb : (0x80000000u | std::min(mag, 0x42B00000u));  // NaN, or -min(|x|, 88)
  float xc;
  std::memcpy(&xc, &cb, 4);
  const float magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer, held in the low mantissa bits
  const float t = xc * 1.44269504088896341f + magic;
  uint32_t tb;
  std::memcpy(&tb, &t, 4);
  const float k = t - magic;
  float r = xc - k * 0.693359375f;
  r = r - k * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = p * (r * r) + r + 1.0f;
  const uint32_t sb = (tb - 0x4B400000u + 127u) << 23;  // k + 127 in the exponent field, k in [-127, 0]
  float scale;
  std::memcpy(&scale, &sb, 4);
  return e * scale;
}
inline double exp_nonpos(double x) { return std::exp(x); }

}  // namespace nnkern::graph
