// Softmax, LogSoftmax and Hardmax over one axis (float32, float64). Below opset 13 the import marks the node
// coerce_2d = 1: the input is then seen as 2-D, flattened at the axis, and the op runs over the whole tail.
// Numerically stable: the maximum m of the slice is subtracted before exp, so every exp argument is <= 0.
//   Softmax:    y = e^(x - m) / sum e^(x - m)   (the exps stored, then scaled by the sum's reciprocal)
//   LogSoftmax: y = (x - m) - log(sum e^(x - m))
//   Hardmax:    1 at the first maximum (the first NaN if any), 0 elsewhere
// Along the last axis each row takes one pass for the maximum, one computing and storing the exps piece by piece
// (summed while the piece is in cache) and one scaling; float32 softmax rows run all three in the f32_activation
// kernels' softmax (kernels/f32_softmax.h, vectorized per ISA). Over another axis the inner positions of a tile
// advance together. Sums in the fixed order of ops/graph/ops/reduction.h; rows split across the pool.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/kernel_family.h"
#include "kernels/f32_activation_list.h"
#include "ops/graph/ops/axis_loops.h"
#include "ops/graph/ops/common.h"
#include "ops/graph/ops/reduction.h"
#include "ops/graph/ops/typed.h"

namespace nnkern::graph {

namespace {

enum class Kind { softmax, log_softmax, hardmax };

template <typename T>
inline bool replaces_max(T v, T best) {
  return v > best || (is_nan(v) && !is_nan(best));
}

template <Kind K, typename T>
void row(const T* x, T* y, size_t n, F32UnaryUkernel softmax_kernel) {
  if constexpr (K == Kind::hardmax) {
    size_t at = 0;
    for (size_t i = 1; i < n; ++i)
      if (replaces_max(x[i], x[at])) at = i;
    for (size_t i = 0; i < n; ++i) y[i] = T(0);
    y[at] = T(1);
    return;
  }
  if constexpr (K == Kind::softmax && std::is_same_v<T, float>) {
    softmax_kernel(n, x, y);  // the ISA's loops (kernels/f32_softmax.h): the steps below, the same bits
    return;
  }
  const auto same = [](T v) { return v; };
  const T m = extreme_run<true>(x, n);
  if constexpr (K == Kind::softmax) {
    Fold<SumOp<T>> f;
    for (size_t b = 0; b < n; b += kPiece) {
      const size_t len = std::min(kPiece, n - b);
      for (size_t i = b; i < b + len; ++i) y[i] = exp_nonpos(x[i] - m);
      f.add(reduce_piece<SumOp<T>>(y + b, len, same));
    }
    const T inv = T(1) / f.result();
    for (size_t i = 0; i < n; ++i) y[i] *= inv;
  } else {
    const T ls = std::log(reduce_run<SumOp<T>>(x, n, [m](T v) { return exp_nonpos(v - m); }));
    for (size_t i = 0; i < n; ++i) y[i] = (x[i] - m) - ls;
  }
}

// Inner positions [j0, j1) of one outer block: element (i, j) at i * inner + j.
template <Kind K, typename T>
void columns(const T* x, T* y, size_t n, size_t inner, size_t j0, size_t j1) {
  const size_t len = j1 - j0;
  x += j0;
  y += j0;
  if constexpr (K == Kind::hardmax) {
    T best[kTile];
    size_t at[kTile];
    for (size_t j = 0; j < len; ++j) {
      best[j] = x[j];
      at[j] = 0;
    }
    for (size_t i = 1; i < n; ++i)
      for (size_t j = 0; j < len; ++j) {
        const bool b = replaces_max(x[i * inner + j], best[j]);
        best[j] = b ? x[i * inner + j] : best[j];
        at[j] = b ? i : at[j];
      }
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0; j < len; ++j) y[i * inner + j] = at[j] == i ? T(1) : T(0);
    return;
  }
  using Key = FloatKey<T>;
  typename Key::I mk[kTile];
  T m[kTile], total[kTile], group[kTile];
  for (size_t j = 0; j < len; ++j) {
    mk[j] = std::numeric_limits<typename Key::I>::min();
    total[j] = group[j] = T(0);
  }
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < len; ++j) mk[j] = std::max(mk[j], Key::template key_nan<true>(x[i * inner + j]));
  for (size_t j = 0; j < len; ++j) m[j] = Key::value(mk[j]);
  size_t k = 0;
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < len; ++j) {
      const T e = exp_nonpos(x[i * inner + j] - m[j]);
      if constexpr (K == Kind::softmax) y[i * inner + j] = e;
      group[j] += e;
    }
    if (++k == kGroup) {
      for (size_t j = 0; j < len; ++j) {
        total[j] += group[j];
        group[j] = T(0);
      }
      k = 0;
    }
  }
  if constexpr (K == Kind::softmax) {
    for (size_t j = 0; j < len; ++j) total[j] = T(1) / (total[j] + group[j]);
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0; j < len; ++j) y[i * inner + j] *= total[j];
  } else {
    for (size_t j = 0; j < len; ++j) total[j] = std::log(total[j] + group[j]);
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0; j < len; ++j) y[i * inner + j] = (x[i * inner + j] - m[j]) - total[j];
  }
}

AxisSplit split_of(const NodeSpec& n) {
  const TensorDesc& x = n.in(0);
  if (x.rank() == 0) n.invalid("needs an input of rank >= 1, got a scalar");
  const size_t axis = normalize_axis(n.attr_int("axis", -1), x.rank(), "axis");
  if (n.attr_int("coerce_2d", 0) == 0) return split_at_axis(x.shape, axis);
  AxisSplit s = split_at_axis(x.shape, axis);
  s.n = checked_mul(s.n, s.inner);
  s.inner = 1;
  return s;
}

std::vector<TensorDesc> infer_softmax(const NodeSpec& n) {
  n.require_types({0}, {DType::f32, DType::f64});
  split_of(n);
  return {n.in(0)};
}

template <Kind K>
std::unique_ptr<Step> make_softmax(const NodeSpec& n, const std::vector<TensorDesc>&, SharedLayers&) {
  const AxisSplit s = split_of(n);
  return dispatch_types<float, double>(n.in(0).dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return fn_step(
        [s](const StepData& d) {
          const T* x = d.in<T>(0);
          T* y = d.out<T>(0);
          if (s.n == 0) return;
          const F32UnaryUkernel softmax_kernel = f32_activation_family().dispatched().softmax;
          for_axis_tiles(s, [&](size_t o, size_t j0, size_t j1) {
            const size_t off = o * s.n * s.inner;
            if (s.inner == 1) row<K>(x + off, y + off, s.n, softmax_kernel);
            else columns<K>(x + off, y + off, s.n, s.inner, j0, j1);
          });
        },
        s.inner == 1 ? "rows" : "columns");
  });
}

}  // namespace

void register_graph_ops_softmax() {
  register_op("Softmax", {infer_softmax, make_softmax<Kind::softmax>});
  register_op("LogSoftmax", {infer_softmax, make_softmax<Kind::log_softmax>});
  register_op("Hardmax", {infer_softmax, make_softmax<Kind::hardmax>});
}

}  // namespace nnkern::graph
