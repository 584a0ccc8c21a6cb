// Elementwise reductions over 1..N inputs with numpy broadcasting: Sum, Mean (float32, float64), Max, Min (every
// numeric type). The inputs fold left to right, ((x0 + x1) + x2) ..., and Mean multiplies the sum by 1 / N, as
// onnxruntime computes them; Max and Min of floats return NaN where any input is NaN. One input: the output is
// that input (a view).
#include "ops/graph/ops/common.h"
#include "ops/graph/ops/elementwise.h"

namespace nnkern::graph {

namespace {

template <typename Types>
std::vector<TensorDesc> infer_variadic(const NodeSpec& n) {
  if (n.inputs.empty()) n.invalid("needs at least one input");
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    if (!n.has_input(i)) n.invalid("input " + std::to_string(i) + " is missing");
    require_types(n, {i}, Types{});
  }
  return one(n.in(0).dtype, broadcast_inputs(n, 0, n.inputs.size()));
}

struct SumOp { template <typename T> T operator()(T a, T b) const { return a + b; } };
struct MaxOp {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) return (a != a) | (a > b) ? a : b;
    else return a > b ? a : b;
  }
};
struct MinOp {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) return (a != a) | (a < b) ? a : b;
    else return a < b ? a : b;
  }
};

// The fold of inputs 0..N-1 into output 0; `last` is the op of the final fold (Mean's scaled sum).
template <typename T, typename F, typename Last>
std::unique_ptr<Step> fold_step(const NodeSpec& n, const TensorDesc& out, F f, Last last) {
  const size_t k = n.inputs.size();
  std::vector<Broadcast> bcs{plan_broadcast({n.in(0).shape, n.in(1).shape}, out.shape)};
  for (size_t i = 2; i < k; ++i) bcs.push_back(plan_broadcast({out.shape, n.in(i).shape}, out.shape));
  // In place only with two inputs: with more, a later input might be the same tensor as the one overwritten.
  const int over = k > 2 ? -1 : n.in(0).shape == out.shape ? 0 : n.in(1).shape == out.shape ? 1 : -1;
  return in_place_step(
      [bcs, f, last](const StepData& d) {
        T* y = d.out<T>(0);
        const size_t stages = bcs.size();
        if (stages == 1) broadcast2(bcs[0], d.in<T>(0), d.in<T>(1), y, last);
        else broadcast2(bcs[0], d.in<T>(0), d.in<T>(1), y, f);
        for (size_t s = 1; s < stages; ++s) {
          if (s + 1 == stages) broadcast2(bcs[s], static_cast<const T*>(y), d.in<T>(s + 1), y, last);
          else broadcast2(bcs[s], static_cast<const T*>(y), d.in<T>(s + 1), y, f);
        }
      },
      over);
}

template <typename Op, typename Types>
std::unique_ptr<Step> make_fold(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers&) {
  if (n.inputs.size() == 1) return view_step(n.in(0).bytes());
  return visit_dtype(out[0].dtype, Types{}, [&](auto t) {
    using T = typename decltype(t)::type;
    return fold_step<T>(n, out[0], Op{}, Op{});
  });
}

std::unique_ptr<Step> make_mean(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers&) {
  if (n.inputs.size() == 1) return view_step(n.in(0).bytes());
  return visit_dtype(out[0].dtype, FloatTypes{}, [&](auto t) {
    using T = typename decltype(t)::type;
    const T inv = T(1) / T(n.inputs.size());
    return fold_step<T>(n, out[0], SumOp{}, [inv](T a, T b) { return (a + b) * inv; });
  });
}

}  // namespace

void register_graph_ops_variadic() {
  register_op("Sum", {infer_variadic<FloatTypes>, make_fold<SumOp, FloatTypes>});
  register_op("Mean", {infer_variadic<FloatTypes>, make_mean});
  register_op("Max", {infer_variadic<NumericTypes>, make_fold<MaxOp, NumericTypes>});
  register_op("Min", {infer_variadic<NumericTypes>, make_fold<MinOp, NumericTypes>});
}

}  // namespace nnkern::graph
