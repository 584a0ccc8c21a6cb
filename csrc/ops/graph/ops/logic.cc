// Comparisons and logic with numpy broadcasting: Equal (every type, bool included), Less, Greater, LessOrEqual,
// GreaterOrEqual (numeric types) -> bool; And, Or, Xor (bool); Where (a bool condition choosing between two inputs
// of any type). Comparisons with NaN are false (Equal too), as IEEE and onnxruntime have them.
#include "ops/graph/ops/common.h"
#include "ops/graph/ops/elementwise.h"

namespace nnkern::graph {

namespace {

template <typename Types>
std::vector<TensorDesc> infer_compare(const NodeSpec& n) {
  require_types(n, {0, 1}, Types{});
  return one(DType::boolean, broadcast_inputs(n, 0, 2));
}

struct Eq { template <typename T> bool operator()(T a, T b) const { return a == b; } };
struct Lt { template <typename T> bool operator()(T a, T b) const { return a < b; } };
struct Gt { template <typename T> bool operator()(T a, T b) const { return a > b; } };
struct Le { template <typename T> bool operator()(T a, T b) const { return a <= b; } };
struct Ge { template <typename T> bool operator()(T a, T b) const { return a >= b; } };
struct AndOp { bool operator()(bool a, bool b) const { return a & b; } };
struct OrOp { bool operator()(bool a, bool b) const { return a | b; } };
struct XorOp { bool operator()(bool a, bool b) const { return a ^ b; } };

template <typename Cmp, typename Types>
std::unique_ptr<Step> make_compare(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers&) {
  return visit_dtype(n.in(0).dtype, Types{}, [&](auto t) {
    using T = typename decltype(t)::type;
    return binary_step<T, T, bool>(n, out[0], Cmp{});
  });
}

template <typename Cmp, typename Types>
OpDef compare_op() {
  return {infer_compare<Types>, make_compare<Cmp, Types>};
}

using BoolType = TypeList<bool>;

std::vector<TensorDesc> infer_where(const NodeSpec& n) {
  n.require_types({0}, {DType::boolean});
  require_types(n, {1, 2}, AllTypes{});
  std::vector<int64_t> shape = broadcast_inputs(n, 1, 2);
  try {
    shape = broadcast_shapes(n.in(0).shape, shape);
  } catch (const std::invalid_argument&) {
    n.invalid("input shapes do not broadcast: " + n.in(0).str() + ", " + n.in(1).str() + ", " + n.in(2).str());
  }
  return one(n.in(1).dtype, shape);
}

std::unique_ptr<Step> make_where(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers&) {
  const Broadcast bc = plan_broadcast({n.in(0).shape, n.in(1).shape, n.in(2).shape}, out[0].shape);
  const std::vector<int64_t>& shape = out[0].shape;
  const int over = n.in(1).shape == shape ? 1 : n.in(2).shape == shape ? 2 : -1;
  return visit_dtype(out[0].dtype, AllTypes{}, [&](auto t) {
    using T = typename decltype(t)::type;
    return in_place_step(
        [bc](const StepData& d) {
          broadcast3(bc, d.in<bool>(0), d.in<T>(1), d.in<T>(2), d.out<T>(0), [](bool c, T x, T y) { return c ? x : y; });
        },
        over);
  });
}

}  // namespace

void register_graph_ops_logic() {
  register_op("Equal", compare_op<Eq, AllTypes>());
  register_op("Less", compare_op<Lt, NumericTypes>());
  register_op("Greater", compare_op<Gt, NumericTypes>());
  register_op("LessOrEqual", compare_op<Le, NumericTypes>());
  register_op("GreaterOrEqual", compare_op<Ge, NumericTypes>());
  register_op("And", compare_op<AndOp, BoolType>());
  register_op("Or", compare_op<OrOp, BoolType>());
  register_op("Xor", compare_op<XorOp, BoolType>());
  register_op("Where", {infer_where, make_where});
}

}  // namespace nnkern::graph
