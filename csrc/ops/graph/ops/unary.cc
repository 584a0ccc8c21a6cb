// Elementwise ops of one float32 input: Relu, LeakyRelu, Sigmoid, Tanh, Clip. Sigmoid and Tanh run nnkern's
// activation kernels ("accurate": ops/activation/activation.h); the others a plain loop.
#include <algorithm>
#include <cmath>

#include "ops/activation/activation.h"
#include "ops/graph/ops/common.h"
#include "ops/graph/ops/elementwise.h"

namespace nnkern::graph {

namespace {

std::vector<TensorDesc> infer_f32_unary(const NodeSpec& n) {
  n.require_types({0}, {DType::f32});
  return {n.in(0)};
}

template <typename F>
std::unique_ptr<Step> f32_map_step(size_t count, F f) {
  return in_place_step([count, f](const StepData& d) { map_elements(d.in<float>(0), d.out<float>(0), count, f); }, 0);
}

std::unique_ptr<Step> make_relu(const NodeSpec& n, const std::vector<TensorDesc>&, SharedLayers&) {
  return f32_map_step(n.in(0).elements(), [](float v) { return v > 0.0f ? v : (v != v ? v : 0.0f); });
}

std::unique_ptr<Step> make_leaky_relu(const NodeSpec& n, const std::vector<TensorDesc>&, SharedLayers&) {
  const float alpha = n.attr_float("alpha", 0.01f);
  return f32_map_step(n.in(0).elements(), [alpha](float v) { return v < 0.0f ? v * alpha : v; });
}

std::unique_ptr<Step> make_sigmoid(const NodeSpec& n, const std::vector<TensorDesc>&, SharedLayers&) {
  const size_t count = n.in(0).elements();
  return in_place_step([count](const StepData& d) { f32_sigmoid(ActMethod::accurate, count, d.in<float>(0), d.out<float>(0)); }, 0,
                       "accurate");
}

std::unique_ptr<Step> make_tanh(const NodeSpec& n, const std::vector<TensorDesc>&, SharedLayers&) {
  const size_t count = n.in(0).elements();
  return in_place_step([count](const StepData& d) { f32_tanh(ActMethod::accurate, count, d.in<float>(0), d.out<float>(0)); }, 0,
                       "accurate");
}

std::vector<TensorDesc> infer_clip(const NodeSpec& n) {
  n.require_types({0, 1, 2}, {DType::f32});
  for (size_t i : {size_t(1), size_t(2)})
    if (n.has_input(i) && n.in(i).elements() != 1) n.invalid("min and max must be scalars");
  return {n.in(0)};
}

std::unique_ptr<Step> make_clip(const NodeSpec& n, const std::vector<TensorDesc>&, SharedLayers&) {
  const size_t count = n.in(0).elements();
  const bool has_lo = n.has_input(1), has_hi = n.has_input(2);
  // min and max are read at each run: they may be graph inputs.
  return in_place_step(
      [count, has_lo, has_hi](const StepData& d) {
        const float lo = has_lo ? *d.in<float>(1) : -INFINITY, hi = has_hi ? *d.in<float>(2) : INFINITY;
        map_elements(d.in<float>(0), d.out<float>(0), count, [lo, hi](float v) {
          return v != v ? v : std::min(std::max(v, lo), hi);
        });
      },
      0);
}

}  // namespace

void register_graph_ops_unary() {
  register_op("Relu", {infer_f32_unary, make_relu});
  register_op("LeakyRelu", {infer_f32_unary, make_leaky_relu});
  register_op("Sigmoid", {infer_f32_unary, make_sigmoid});
  register_op("Tanh", {infer_f32_unary, make_tanh});
  register_op("Clip", {infer_clip, make_clip});
}

}  // namespace nnkern::graph
