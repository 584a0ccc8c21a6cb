// Loops of the ops that work along one axis (Softmax, ArgMax, TopK, CumSum, the normalizations): the tensor seen as
// outer blocks of n positions along the axis, each position `inner` contiguous elements; tiles of up to kTile inner
// positions advance together, so the inner loops run over contiguous elements. Also exp of non-positive values, one
// at a time. Baseline header.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/checked.h"
#include "core/threadpool.h"
#include "kernels/f32_exp.h"
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
  if (s.elements() < elementwise_parallel_min() || tasks < 2) run(0, tasks);
  else parallel_for_ranges(tasks, run);
}

// e^x for x <= 0 (softmax's and log-sum-exp's shifted inputs): kernels/f32_exp.h's formula, one element (the
// f32_activation kernels' exp_nonpos runs it on whole runs).
inline float exp_nonpos(float x) { return exp_nonpos_f32(x); }
inline double exp_nonpos(double x) { return std::exp(x); }

}  // namespace nnkern::graph
