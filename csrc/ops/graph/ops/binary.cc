// Elementwise ops of two inputs with numpy broadcasting: Add, Sub, Mul, Div on float32, int32 and int64.
#include "ops/graph/ops/common.h"
#include "ops/graph/ops/elementwise.h"

namespace nnkern::graph {

namespace {

std::vector<TensorDesc> infer_arith(const NodeSpec& n) {
  n.require_types({0, 1}, {DType::f32, DType::i32, DType::i64});
  if (n.in(0).dtype != n.in(1).dtype) n.invalid("inputs of different types");
  return one(n.in(0).dtype, broadcast_shapes(n.in(0).shape, n.in(1).shape));
}

template <typename T, typename F>
std::unique_ptr<Step> arith_step(const NodeSpec& n, const TensorDesc& out, F f) {
  const Broadcast bc = plan_broadcast({n.in(0).shape, n.in(1).shape}, out.shape);
  const int over = n.in(0).shape == out.shape ? 0 : n.in(1).shape == out.shape ? 1 : -1;
  return in_place_step([bc, f](const StepData& d) { broadcast2(bc, d.in<T>(0), d.in<T>(1), d.out<T>(0), f); }, over);
}

template <template <typename> class Op>
std::unique_ptr<Step> make_arith(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers&) {
  switch (out[0].dtype) {
    case DType::f32: return arith_step<float>(n, out[0], Op<float>{});
    case DType::i32: return arith_step<int32_t>(n, out[0], Op<int32_t>{});
    default: return arith_step<int64_t>(n, out[0], Op<int64_t>{});
  }
}

template <typename T> struct AddOp { T operator()(T a, T b) const { return a + b; } };
template <typename T> struct SubOp { T operator()(T a, T b) const { return a - b; } };
template <typename T> struct MulOp { T operator()(T a, T b) const { return a * b; } };
template <typename T> struct DivOp { T operator()(T a, T b) const { return b == 0 ? T(0) : a / b; } };
template <> struct DivOp<float> { float operator()(float a, float b) const { return a / b; } };

}  // namespace

void register_graph_ops_binary() {
  register_op("Add", {infer_arith, make_arith<AddOp>});
  register_op("Sub", {infer_arith, make_arith<SubOp>});
  register_op("Mul", {infer_arith, make_arith<MulOp>});
  register_op("Div", {infer_arith, make_arith<DivOp>});
}

}  // namespace nnkern::graph
