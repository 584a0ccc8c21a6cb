// Normalizations by per-channel or per-slice statistics (float32, float64):
//   BatchNormalization (inference, training_mode 0): X (N, C, ...), per channel c
//       a = Scale[c] * (1 / sqrt(Var[c] + epsilon)), b = B[c] - Mean[c] * a, Y = X * a + b
//     (onnxruntime's order of operations; the parameters are read at each run). A BatchNormalization after a Conv
//     is folded into the convolution when the model is imported; this op is the one that stays.
//   InstanceNormalization: X (N, C, D1, ...), per (n, c) plane mean and variance (two passes),
//       Y = (X - mean) * (Scale[c] / sqrt(var + epsilon)) + B[c]
//   LpNormalization: Y = X / ||X||_p along axis, p 1 or 2 (0 where the norm is 0, as onnxruntime gives)
//   MeanVarianceNormalization: over `axes` (default 0, 2, 3), Y = (X - mean) / (sqrt(var) + 1e-9), ONNX's
//     definition (the variance by two passes, so never negative: a constant slice gives 0 where onnxruntime's
//     kernel gives NaN)
// Sums in the fixed order of ops/graph/ops/reduction.h.
#include <cmath>
#include <limits>

#include "ops/graph/ops/axis_loops.h"
#include "ops/graph/ops/common.h"
#include "ops/graph/ops/elementwise.h"
#include "ops/graph/ops/reduction.h"
#include "ops/graph/ops/typed.h"

namespace nnkern::graph {

namespace {

// X of rank >= min_rank and per-channel parameters inputs [first, last] of X's type and C elements.
void check_channel_params(const NodeSpec& n, size_t min_rank, size_t last) {
  const TensorDesc& x = n.in(0);
  if (x.rank() < min_rank) n.invalid("needs an input of rank >= " + std::to_string(min_rank) + ", got " + x.str());
  for (size_t i = 1; i <= last; ++i) {
    if (!n.has_input(i)) n.invalid("input " + std::to_string(i) + " is missing");
    const TensorDesc& p = n.in(i);
    if (p.dtype != x.dtype)
      n.unsupported("parameters of another element type than X (" + p.str() + ", X " + x.str() + ")");
    if (p.rank() != 1 || p.shape[0] != x.shape[1])
      n.invalid("input " + std::to_string(i) + " " + p.str() + " must have X's " + std::to_string(x.shape[1]) +
                " channels");
  }
}

// ---- BatchNormalization

std::vector<TensorDesc> infer_batch_norm(const NodeSpec& n) {
  n.require_types({0, 1, 2, 3, 4}, {DType::f32, DType::f64});
  if (n.attr_int("training_mode", 0) != 0) n.unsupported("training_mode 1: plans run inference only");
  if (n.num_outputs > 1) n.unsupported("the running mean and variance outputs (training mode only)");
  check_channel_params(n, 2, 4);
  return {n.in(0)};
}

std::unique_ptr<Step> make_batch_norm(const NodeSpec& n, const std::vector<TensorDesc>&, SharedLayers&) {
  const TensorDesc& x = n.in(0);
  const size_t C = size_t(x.shape[1]);
  AxisSplit planes = split_at_axis(x.shape, 1);  // outer N, n C, inner the spatial size
  planes.outer = checked_mul(planes.outer, planes.n);
  planes.n = 1;
  const float epsilon = n.attr_float("epsilon", 1e-5f);
  return dispatch_types<float, double>(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return in_place_step(
        [planes, C, epsilon](const StepData& d) {
          const T* x = d.in<T>(0);
          const T *scale = d.in<T>(1), *bias = d.in<T>(2), *mean = d.in<T>(3), *var = d.in<T>(4);
          T* y = d.out<T>(0);
          const size_t S = planes.inner;
          for_axis_tiles(planes, [&](size_t p, size_t j0, size_t j1) {
            const size_t c = p % C;
            const T a = T(1) / std::sqrt(var[c] + T(epsilon)) * scale[c];
            const T b = bias[c] - mean[c] * a;
            const T* xp = x + p * S;
            T* yp = y + p * S;
            for (size_t j = j0; j < j1; ++j) yp[j] = xp[j] * a + b;
          });
        },
        0);
  });
}

// ---- InstanceNormalization

std::vector<TensorDesc> infer_instance_norm(const NodeSpec& n) {
  n.require_types({0, 1, 2}, {DType::f32, DType::f64});
  check_channel_params(n, 3, 2);
  return {n.in(0)};
}

std::unique_ptr<Step> make_instance_norm(const NodeSpec& n, const std::vector<TensorDesc>&, SharedLayers&) {
  const TensorDesc& x = n.in(0);
  const size_t C = size_t(x.shape[1]);
  AxisSplit planes = split_at_axis(x.shape, 1);  // each (n, c) plane one row
  planes.outer = checked_mul(planes.outer, planes.n);
  planes.n = planes.inner;
  planes.inner = 1;
  const float epsilon = n.attr_float("epsilon", 1e-5f);
  return dispatch_types<float, double>(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return fn_step([planes, C, epsilon](const StepData& d) {
      const T* x = d.in<T>(0);
      const T *scale = d.in<T>(1), *bias = d.in<T>(2);
      T* y = d.out<T>(0);
      const size_t S = planes.n;
      for_axis_tiles(planes, [&](size_t p, size_t, size_t) {
        const size_t c = p % C;
        const T* xp = x + p * S;
        T* yp = y + p * S;
        const T mean = reduce_run<SumOp<T>>(xp, S, [](T v) { return v; }) / T(S);
        const T var = reduce_run<SumOp<T>>(xp, S, [mean](T v) { return (v - mean) * (v - mean); }) / T(S);
        const T a = scale[c] / std::sqrt(var + T(epsilon)), b = bias[c];
        for (size_t i = 0; i < S; ++i) yp[i] = (xp[i] - mean) * a + b;
      });
    });
  });
}

// ---- LpNormalization

std::vector<TensorDesc> infer_lp_norm(const NodeSpec& n) {
  n.require_types({0}, {DType::f32, DType::f64});
  if (n.in(0).rank() == 0) n.invalid("needs an input of rank >= 1, got a scalar");
  normalize_axis(n.attr_int("axis", -1), n.in(0).rank(), "axis");
  const int64_t p = n.attr_int("p", 2);
  if (p != 1 && p != 2) n.invalid("p must be 1 or 2, got " + std::to_string(p));
  return {n.in(0)};
}

template <int P, typename T>
struct NormTerm {
  T operator()(T v) const { return P == 1 ? std::fabs(v) : v * v; }
};

// What x is divided by: the norm, or +inf where it is 0 (then every x of the slice is 0, and 0 / inf gives the 0
// onnxruntime returns).
template <typename T>
T divisor(T norm) {
  return norm == T(0) ? std::numeric_limits<T>::infinity() : norm;
}

template <int P, typename T>
void lp_norm(const AxisSplit& s, const T* x, T* y) {
  for_axis_tiles(s, [&](size_t o, size_t j0, size_t j1) {
    const T* xo = x + o * s.n * s.inner;
    T* yo = y + o * s.n * s.inner;
    if (s.inner == 1) {
      const T sum = reduce_run<SumOp<T>>(xo, s.n, NormTerm<P, T>{});
      const T d = divisor(P == 1 ? sum : std::sqrt(sum));
      for (size_t i = 0; i < s.n; ++i) yo[i] = xo[i] / d;
      return;
    }
    const size_t len = j1 - j0;
    T norm[kTile];
    for (size_t j = 0; j < len; ++j) norm[j] = T(0);
    for (size_t i = 0; i < s.n; ++i)
      for (size_t j = 0; j < len; ++j) norm[j] += NormTerm<P, T>{}(xo[i * s.inner + j0 + j]);
    for (size_t j = 0; j < len; ++j) norm[j] = divisor(P == 1 ? norm[j] : std::sqrt(norm[j]));
    for (size_t i = 0; i < s.n; ++i)
      for (size_t j = 0; j < len; ++j) yo[i * s.inner + j0 + j] = xo[i * s.inner + j0 + j] / norm[j];
  });
}

std::unique_ptr<Step> make_lp_norm(const NodeSpec& n, const std::vector<TensorDesc>&, SharedLayers&) {
  const TensorDesc& x = n.in(0);
  const AxisSplit s = split_at_axis(x.shape, normalize_axis(n.attr_int("axis", -1), x.rank(), "axis"));
  const bool l1 = n.attr_int("p", 2) == 1;
  return dispatch_types<float, double>(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return fn_step([s, l1](const StepData& d) {
      if (l1) lp_norm<1>(s, d.in<T>(0), d.out<T>(0));
      else lp_norm<2>(s, d.in<T>(0), d.out<T>(0));
    });
  });
}

// ---- MeanVarianceNormalization

std::vector<bool> mvn_axes(const NodeSpec& n) {
  const TensorDesc& x = n.in(0);
  std::vector<bool> reduced(x.rank(), false);
  for (int64_t a : n.attr_ints("axes", {0, 2, 3})) {
    const size_t ax = normalize_axis(a, x.rank(), "axes entry");
    if (reduced[ax]) n.invalid("axes repeat axis " + std::to_string(a));
    reduced[ax] = true;
  }
  return reduced;
}

std::vector<TensorDesc> infer_mvn(const NodeSpec& n) {
  n.require_types({0}, {DType::f32, DType::f64});
  mvn_axes(n);
  return {n.in(0)};
}

std::unique_ptr<Step> make_mvn(const NodeSpec& n, const std::vector<TensorDesc>&, SharedLayers&) {
  const TensorDesc& x = n.in(0);
  const std::vector<bool> reduced = mvn_axes(n);
  const ReducePlan p = plan_reduce(x.shape, reduced);
  std::vector<int64_t> stat_shape = x.shape;
  for (size_t i = 0; i < x.rank(); ++i)
    if (reduced[i]) stat_shape[i] = 1;
  const Broadcast bc = plan_broadcast({x.shape, stat_shape, stat_shape}, x.shape);
  return dispatch_types<float, double>(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return fn_step([p, bc](const StepData& d) {
      if (p.outputs == 0 || p.count == 0) return;  // no elements
      const T* x = d.in<T>(0);
      std::vector<T> mean(p.outputs), sd(p.outputs);
      const T count = T(p.count);
      auto none = [](size_t) { return T(0); };
      run_reduce<SumOp<T>>(p, x, [](T v, T) { return v; }, none, [&](size_t o, T s) { mean[o] = s / count; });
      run_reduce<SumOp<T>>(
          p, x, [](T v, T m) { return (v - m) * (v - m); }, [&](size_t o) { return mean[o]; },
          [&](size_t o, T s) { sd[o] = std::sqrt(s / count) + T(1e-9); });
      broadcast3(bc, x, mean.data(), sd.data(), d.out<T>(0), [](T v, T m, T s) { return (v - m) / s; });
    });
  });
}

}  // namespace

void register_graph_ops_norm() {
  register_op("BatchNormalization", {infer_batch_norm, make_batch_norm});
  register_op("InstanceNormalization", {infer_instance_norm, make_instance_norm});
  register_op("LpNormalization", {infer_lp_norm, make_lp_norm});
  register_op("MeanVarianceNormalization", {infer_mvn, make_mvn});
}

}  // namespace nnkern::graph
