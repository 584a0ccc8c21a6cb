#include "ops/graph/ops/elementwise.h"

#include <atomic>
#include <string>

#include "core/checked.h"

namespace nnkern::graph {

namespace {
std::atomic<size_t> g_parallel_min{kElementwiseParallel};
}  // namespace

size_t elementwise_parallel_min() { return g_parallel_min.load(std::memory_order_relaxed); }

void set_elementwise_parallel_min(size_t n) {
  g_parallel_min.store(n ? n : kElementwiseParallel, std::memory_order_relaxed);
}

size_t Broadcast::outer() const {
  size_t n = 1;
  for (int64_t d : outer_dims) n = checked_mul(n, size_t(d));
  return n;
}

void Broadcast::offsets(size_t o, size_t* off) const {
  const size_t k = outer_strides.size();
  for (size_t i = 0; i < k; ++i) off[i] = 0;
  for (size_t d = outer_dims.size(); d-- > 0;) {
    const size_t extent = size_t(outer_dims[d]);
    const size_t idx = o % extent;
    o /= extent;
    for (size_t i = 0; i < k; ++i) off[i] += idx * outer_strides[i][d];
  }
}

Broadcast plan_broadcast(const std::vector<std::vector<int64_t>>& inputs, const std::vector<int64_t>& out) {
  const size_t r = out.size(), k = inputs.size();
  // Each input's shape right-aligned to the output's rank, and its contiguous strides.
  std::vector<std::vector<int64_t>> dims(k, std::vector<int64_t>(r, 1));
  std::vector<std::vector<size_t>> strides(k, std::vector<size_t>(r, 0));
  for (size_t i = 0; i < k; ++i) {
    const size_t lead = r - inputs[i].size();
    for (size_t d = 0; d < inputs[i].size(); ++d) dims[i][lead + d] = inputs[i][d];
    size_t s = 1;
    for (size_t d = r; d-- > 0;) {
      strides[i][d] = dims[i][d] == 1 ? 0 : s;
      s = checked_mul(s, size_t(dims[i][d]));
    }
  }
  Broadcast bc;
  bc.out = out;
  bc.total = 1;
  for (int64_t d : out) bc.total = checked_mul(bc.total, size_t(d));
  bc.inner_step.assign(k, 0);
  bc.outer_strides.assign(k, {});
  // The inner run: trailing dims over which every input either advances contiguously or stays put (an advancing
  // input has no gap there: its dims all match the output's).
  size_t d = r;
  bool started = false;
  while (d > 0) {
    const size_t i = d - 1;
    if (out[i] == 1) { --d; continue; }
    std::vector<size_t> mode(k);
    for (size_t j = 0; j < k; ++j) mode[j] = dims[j][i] == out[i] ? 1 : 0;
    if (!started) {
      bc.inner_step = mode;
      started = true;
    } else if (mode != bc.inner_step) {
      break;
    }
    bc.inner = checked_mul(bc.inner, size_t(out[i]));
    --d;
  }
  // The outer dims, neighbours merged where every input steps through them as through one dim.
  for (size_t i = 0; i < d; ++i) {
    if (out[i] == 1) continue;
    bool merge = !bc.outer_dims.empty();
    for (size_t j = 0; j < k && merge; ++j)
      merge = bc.outer_strides[j].back() == strides[j][i] * size_t(out[i]);
    if (merge) {
      bc.outer_dims.back() *= out[i];
      for (size_t j = 0; j < k; ++j) bc.outer_strides[j].back() = strides[j][i];
      continue;
    }
    bc.outer_dims.push_back(out[i]);
    for (size_t j = 0; j < k; ++j) bc.outer_strides[j].push_back(strides[j][i]);
  }
  return bc;
}

std::vector<int64_t> broadcast_inputs(const NodeSpec& n, size_t first, size_t count, bool same_types) {
  std::vector<int64_t> shape;
  std::string shapes;
  for (size_t i = first; i < first + count; ++i) {
    const TensorDesc& t = n.in(i);
    if (!t.present()) n.invalid("input " + std::to_string(i) + " is missing");
    shapes += (shapes.empty() ? "" : ", ") + t.str();
    if (same_types && t.dtype != n.in(first).dtype)
      n.invalid("inputs of different element types: " + std::string(dtype_name(n.in(first).dtype)) + " and " +
                dtype_name(t.dtype));
  }
  for (size_t i = first; i < first + count; ++i) {
    try {
      shape = i == first ? n.in(i).shape : broadcast_shapes(shape, n.in(i).shape);
    } catch (const std::invalid_argument&) {
      n.invalid("input shapes do not broadcast: " + shapes);
    }
  }
  return shape;
}

}  // namespace nnkern::graph
