#include "ops/graph/ops/elementwise.h"

#include "core/checked.h"

namespace nnkern::graph {

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
  bc.inner_step.assign(k, 0);
  bc.outer_strides.assign(k, {});
  // The inner run: trailing dims over which every input either advances contiguously or stays put.
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
    } else {
      bool same = mode == bc.inner_step;
      // Contiguity: an advancing input must have no gap, which holds since its dims here all match the output.
      if (!same) break;
    }
    bc.inner = checked_mul(bc.inner, size_t(out[i]));
    --d;
  }
  for (size_t i = 0; i < d; ++i) {
    if (out[i] == 1) continue;
    bc.outer_dims.push_back(out[i]);
    for (size_t j = 0; j < k; ++j) bc.outer_strides[j].push_back(strides[j][i]);
  }
  return bc;
}

}  // namespace nnkern::graph
