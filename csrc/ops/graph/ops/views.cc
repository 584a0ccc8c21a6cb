// Ops that only change how a tensor's bytes are seen: Identity, Dropout (inference), Reshape, Flatten, Squeeze,
// Unsqueeze. Their output shares the input's memory wherever the plan allows (ops/graph/plan.h).
#include <algorithm>
#include <cstring>
#include <set>

#include "core/checked.h"
#include "ops/graph/ops/common.h"

namespace nnkern::graph {

std::unique_ptr<Step> view_step(size_t bytes) {
  auto fn = [bytes](const StepData& d) { views_copy(d, bytes); };
  return std::make_unique<FnStep<decltype(fn)>>(fn, "", -1, true);
}

size_t elements_before(const std::vector<int64_t>& shape, size_t axis) {
  size_t n = 1;
  for (size_t i = 0; i < axis; ++i) n = checked_mul(n, size_t(shape[i]));
  return n;
}
size_t elements_from(const std::vector<int64_t>& shape, size_t axis) {
  size_t n = 1;
  for (size_t i = axis; i < shape.size(); ++i) n = checked_mul(n, size_t(shape[i]));
  return n;
}

namespace {

std::unique_ptr<Step> make_view(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers&) {
  return view_step(n.in(0).bytes());
}

std::vector<TensorDesc> infer_identity(const NodeSpec& n) { return {n.in(0)}; }

std::vector<TensorDesc> infer_dropout(const NodeSpec& n) {
  if (n.has_input(2)) {
    const Constant& training = n.need_constant(2, "training_mode");
    if (training.ints().at(0) != 0) n.unsupported("training_mode must be false: plans run inference only");
  }
  return {n.in(0), TensorDesc{DType::boolean, n.in(0).shape}};
}

std::unique_ptr<Step> make_dropout(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers&) {
  const size_t bytes = n.in(0).bytes(), mask = out.size() > 1 ? out[1].bytes() : 0;
  const bool has_mask = out.size() > 1;
  if (!has_mask) return view_step(bytes);
  // With its mask requested the step writes two outputs, so it copies: the mask is all true in inference.
  return fn_step([bytes, mask](const StepData& d) {
    std::memcpy(d.out(0), d.in(0), bytes);
    std::memset(d.out(1), 1, mask);
  });
}

std::vector<TensorDesc> infer_reshape(const NodeSpec& n) {
  const TensorDesc& x = n.in(0);
  const std::vector<int64_t> spec = n.need_constant(1, "shape").ints();
  const bool allowzero = n.attr_int("allowzero", 0) != 0;
  std::vector<int64_t> shape(spec.size());
  int infer_at = -1;
  size_t known = 1;
  for (size_t i = 0; i < spec.size(); ++i) {
    int64_t d = spec[i];
    if (d == 0 && !allowzero) {
      if (i >= x.rank()) n.invalid("shape entry 0 at position " + std::to_string(i) + " copies a dimension the input lacks");
      d = x.shape[i];
    }
    if (d == -1) {
      if (infer_at >= 0) n.invalid("shape has more than one -1");
      infer_at = int(i);
      continue;
    }
    if (d < 0) n.invalid("shape entry " + std::to_string(d) + " is negative");
    shape[i] = d;
    known = checked_mul(known, size_t(d));
  }
  const size_t total = x.elements();
  if (infer_at >= 0) {
    if (known == 0 || total % known) n.invalid("cannot infer the -1 dimension of " + x.str() + " reshaped");
    shape[size_t(infer_at)] = int64_t(total / known);
  } else if (known != total) {
    n.invalid("cannot reshape " + x.str() + " (" + std::to_string(total) + " elements) into " +
              std::to_string(known) + " elements");
  }
  return one(x.dtype, shape);
}

std::vector<TensorDesc> infer_flatten(const NodeSpec& n) {
  const TensorDesc& x = n.in(0);
  int64_t axis = n.attr_int("axis", 1);
  const int64_t r = int64_t(x.rank());
  if (axis < -r || axis > r) n.invalid("axis " + std::to_string(axis) + " out of range for rank " + std::to_string(r));
  if (axis < 0) axis += r;
  return one(x.dtype, {int64_t(elements_before(x.shape, size_t(axis))), int64_t(elements_from(x.shape, size_t(axis)))});
}

std::vector<TensorDesc> infer_squeeze(const NodeSpec& n) {
  const TensorDesc& x = n.in(0);
  std::set<size_t> axes;
  if (n.has_input(1)) {
    for (int64_t a : n.need_constant(1, "axes").ints()) {
      const size_t ax = normalize_axis(a, x.rank(), "Squeeze axis");
      if (x.shape[ax] != 1) n.invalid("cannot squeeze axis " + std::to_string(a) + " of " + x.str() + ": not of size 1");
      axes.insert(ax);
    }
  } else {
    for (size_t i = 0; i < x.rank(); ++i)
      if (x.shape[i] == 1) axes.insert(i);
  }
  std::vector<int64_t> shape;
  for (size_t i = 0; i < x.rank(); ++i)
    if (!axes.count(i)) shape.push_back(x.shape[i]);
  return one(x.dtype, shape);
}

std::vector<TensorDesc> infer_unsqueeze(const NodeSpec& n) {
  const TensorDesc& x = n.in(0);
  const std::vector<int64_t> given = n.need_constant(1, "axes").ints();
  const size_t r = x.rank() + given.size();
  std::set<size_t> axes;
  for (int64_t a : given)
    if (!axes.insert(normalize_axis(a, r, "Unsqueeze axis")).second) n.invalid("axes repeat " + std::to_string(a));
  std::vector<int64_t> shape;
  size_t k = 0;
  for (size_t i = 0; i < r; ++i) shape.push_back(axes.count(i) ? 1 : x.shape[k++]);
  return one(x.dtype, shape);
}

}  // namespace

void register_graph_ops_views() {
  register_op("Identity", {infer_identity, make_view});
  register_op("Dropout", {infer_dropout, make_dropout});
  register_op("Reshape", {infer_reshape, make_view});
  register_op("Flatten", {infer_flatten, make_view});
  register_op("Squeeze", {infer_squeeze, make_view});
  register_op("Unsqueeze", {infer_unsqueeze, make_view});
}

}  // namespace nnkern::graph
