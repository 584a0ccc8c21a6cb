// LayerNormalization (float32, float64): each row of the dims from `axis` normalized by its mean and variance,
//   mean = sum x / N,  var = sum (x - mean)^2 / N (two passes),  inv = 1 / sqrt(var + epsilon),
//   Y = (x - mean) * inv * Scale + B,
// with the optional outputs Mean and InvStdDev (shape X's up to axis, then 1s) in stash_type (float32 or float64).
// The statistics are computed in float64 where X or stash_type is float64, else in float32, the sums in the
// fixed order of ops/graph/ops/reduction.h. Scale and B broadcast to X: where they vary only within a row and
// cover it (the usual Scale of shape X.shape[axis:]) they apply in the same pass, else in broadcast passes after.
#include "ops/graph/ops/axis_loops.h"
#include "ops/graph/ops/common.h"
#include "ops/graph/ops/elementwise.h"
#include "ops/graph/ops/reduction.h"

namespace nnkern::graph {

namespace {

struct LayerNorm {
  size_t axis = 0;
  AxisSplit rows;  // outer = rows, n = the row's length
  DType stash = DType::f32;
  float epsilon = 1e-5f;
};

LayerNorm layer_norm_of(const NodeSpec& n) {
  n.require_types({0, 1, 2}, {DType::f32, DType::f64});
  const TensorDesc& x = n.in(0);
  if (x.rank() == 0) n.invalid("needs an input of rank >= 1, got a scalar");
  if (!n.has_input(1)) n.invalid("needs a Scale input");
  LayerNorm ln;
  ln.axis = normalize_axis(n.attr_int("axis", -1), x.rank(), "axis");
  for (size_t i : {size_t(1), size_t(2)}) {
    if (!n.has_input(i)) continue;
    if (n.in(i).dtype != x.dtype)
      n.invalid(std::string(i == 1 ? "Scale" : "B") + " is " + n.in(i).str() + ", X " + x.str());
    if (n.in(i).rank() > x.rank() || broadcast_shapes(x.shape, n.in(i).shape) != x.shape)
      n.invalid(std::string(i == 1 ? "Scale " : "B ") + n.in(i).str() + " does not broadcast to X " + x.str());
  }
  const int64_t stash = n.attr_int("stash_type", 1);
  if (stash == 1) ln.stash = DType::f32;
  else if (stash == 11) ln.stash = DType::f64;
  else n.unsupported("stash_type " + std::to_string(stash) + " (float32 and float64 only)");
  ln.epsilon = n.attr_float("epsilon", 1e-5f);
  const AxisSplit s = split_at_axis(x.shape, ln.axis);
  ln.rows.outer = s.outer;
  ln.rows.n = checked_mul(s.n, s.inner);
  return ln;
}

std::vector<TensorDesc> infer_layer_norm(const NodeSpec& n) {
  const LayerNorm ln = layer_norm_of(n);
  const TensorDesc& x = n.in(0);
  std::vector<int64_t> stat(x.shape.begin(), x.shape.begin() + std::ptrdiff_t(ln.axis));
  stat.resize(x.rank(), 1);
  return {x, TensorDesc{ln.stash, stat}, TensorDesc{ln.stash, stat}};
}

// Whether a Scale or B of this shape, broadcast to X, is one vector repeated for every row.
bool row_shaped(const std::vector<int64_t>& p, const std::vector<int64_t>& x, size_t axis) {
  const size_t lead = x.size() - p.size();
  for (size_t i = 0; i < x.size(); ++i) {
    const int64_t d = i < lead ? 1 : p[i - lead];
    if (i < axis ? d != 1 : d != x[i]) return false;
  }
  return true;
}

// T: the element type, A: the statistics', U: stash_type's.
template <typename T, typename A, typename U>
std::unique_ptr<Step> layer_norm_step(const NodeSpec& n, const LayerNorm& ln, size_t outputs) {
  const TensorDesc& x = n.in(0);
  const bool has_b = n.has_input(2);
  const bool fused =
      row_shaped(n.in(1).shape, x.shape, ln.axis) && (!has_b || row_shaped(n.in(2).shape, x.shape, ln.axis));
  Broadcast scale_bc, bias_bc;
  if (!fused) {
    scale_bc = plan_broadcast({x.shape, n.in(1).shape}, x.shape);
    if (has_b) bias_bc = plan_broadcast({x.shape, n.in(2).shape}, x.shape);
  }
  const AxisSplit s = ln.rows;
  const A eps = A(ln.epsilon);
  return fn_step(
      [=](const StepData& d) {
        const T* x = d.in<T>(0);
        const T* scale = d.in<T>(1);
        const T* bias = has_b ? d.in<T>(2) : nullptr;
        T* y = d.out<T>(0);
        U* mean_out = outputs > 1 ? d.out<U>(1) : nullptr;
        U* inv_out = outputs > 2 ? d.out<U>(2) : nullptr;
        const size_t N = s.n;
        for_axis_tiles(s, [&](size_t r, size_t, size_t) {
          const T* xr = x + r * N;
          T* yr = y + r * N;
          const A mean = reduce_run<SumOp<A>>(xr, N, [](T v) { return A(v); }) / A(N);
          const A var = reduce_run<SumOp<A>>(xr, N, [mean](T v) {
                          const A c = A(v) - mean;
                          return c * c;
                        }) / A(N);
          const A inv = A(1) / std::sqrt(var + eps);
          if (mean_out) mean_out[r] = U(mean);
          if (inv_out) inv_out[r] = U(inv);
          if (!fused) {
            for (size_t i = 0; i < N; ++i) yr[i] = T((A(xr[i]) - mean) * inv);
          } else if (bias) {
            for (size_t i = 0; i < N; ++i) yr[i] = T((A(xr[i]) - mean) * inv * A(scale[i]) + A(bias[i]));
          } else {
            for (size_t i = 0; i < N; ++i) yr[i] = T((A(xr[i]) - mean) * inv * A(scale[i]));
          }
        });
        if (!fused) {
          broadcast2(scale_bc, y, scale, y, [](T a, T b) { return a * b; });
          if (bias) broadcast2(bias_bc, y, bias, y, [](T a, T b) { return a + b; });
        }
      },
      fused ? "fused scale" : "broadcast scale");
}

std::unique_ptr<Step> make_layer_norm(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers&) {
  const LayerNorm ln = layer_norm_of(n);
  const size_t k = out.size();
  if (n.in(0).dtype == DType::f32) {
    if (ln.stash == DType::f32) return layer_norm_step<float, float, float>(n, ln, k);
    return layer_norm_step<float, double, double>(n, ln, k);
  }
  if (ln.stash == DType::f32) return layer_norm_step<double, double, float>(n, ln, k);
  return layer_norm_step<double, double, double>(n, ln, k);
}

}  // namespace

void register_graph_ops_layer_norm() { register_op("LayerNormalization", {infer_layer_norm, make_layer_norm}); }

}  // namespace nnkern::graph
