// Slice of any element type: starts, ends, axes and steps are constants (they decide the output's shape); the
// output is a StridedCopy of the input (a negative step reads backwards).
#include <algorithm>
#include <set>

#include "ops/graph/ops/common.h"
#include "ops/graph/ops/strided.h"

namespace nnkern::graph {

namespace {

struct SliceGeometry {
  std::vector<int64_t> start, step, shape;  // per input dimension: first index, step, output size
};

SliceGeometry slice_geometry(const NodeSpec& n) {
  const TensorDesc& x = n.in(0);
  const size_t r = x.rank();
  const std::vector<int64_t> starts = n.need_constant(1, "starts").ints();
  const std::vector<int64_t> ends = n.need_constant(2, "ends").ints();
  const size_t k = starts.size();
  if (ends.size() != k) n.invalid("starts and ends have different lengths");
  std::vector<int64_t> axes, steps;
  if (n.has_input(3)) axes = n.need_constant(3, "axes").ints();
  else for (size_t i = 0; i < k; ++i) axes.push_back(int64_t(i));
  if (n.has_input(4)) steps = n.need_constant(4, "steps").ints();
  else steps.assign(k, 1);
  if (axes.size() != k || steps.size() != k) n.invalid("starts, ends, axes and steps must have the same length");
  SliceGeometry g;
  g.start.assign(r, 0);
  g.step.assign(r, 1);
  g.shape = x.shape;
  std::set<size_t> seen;
  for (size_t i = 0; i < k; ++i) {
    const size_t a = normalize_axis(axes[i], r, "Slice axis");
    if (!seen.insert(a).second) n.invalid("axes repeat " + std::to_string(axes[i]));
    const int64_t dim = x.shape[a], step = steps[i];
    if (step == 0) n.invalid("steps must not be 0");
    // ONNX's clamping: negative positions count from the end; then start in [0, dim] and end in [0, dim] for a
    // positive step, start in [0, dim - 1] and end in [-1, dim - 1] for a negative one (so INT64_MAX / INT64_MIN
    // mean "to the end" in the step's direction).
    int64_t s = starts[i], e = ends[i];
    if (s < 0) s = s < -dim ? -1 : s + dim;  // written so that INT64_MIN does not overflow
    if (e < 0) e = e < -dim ? -1 : e + dim;
    int64_t count = 0;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      count = e > s ? 1 + (e - s - 1) / step : 0;
    } else if (dim > 0) {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      // (s - e) / -step rounded up; -step as unsigned, so that INT64_MIN does not overflow.
      const uint64_t back = uint64_t(-(step + 1)) + 1;
      count = s > e ? int64_t(1 + uint64_t(s - e - 1) / back) : 0;
    }
    g.start[a] = count > 0 ? s : 0;
    g.step[a] = step;
    g.shape[a] = count;
  }
  return g;
}

std::vector<TensorDesc> infer_slice(const NodeSpec& n) { return one(n.in(0).dtype, slice_geometry(n).shape); }

std::unique_ptr<Step> make_slice(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers&) {
  const TensorDesc& x = n.in(0);
  const SliceGeometry g = slice_geometry(n);
  const std::vector<size_t> xs = contiguous_strides(x.shape);
  std::vector<int64_t> stride(x.rank());
  int64_t base = 0;
  for (size_t a = 0; a < x.rank(); ++a) {
    // A step larger than the dimension takes one element at most: its stride is never used (nor overflows).
    stride[a] = g.shape[a] > 1 ? int64_t(xs[a]) * g.step[a] : 0;
    base += g.start[a] * int64_t(xs[a]);
  }
  bool whole = true;  // every axis whole and in order: the input's bytes
  for (size_t a = 0; a < x.rank(); ++a) whole = whole && g.shape[a] == x.shape[a] && (g.step[a] > 0 || x.shape[a] <= 1);
  if (whole) return view_step(x.bytes());
  const StridedCopy copy(g.shape, stride, base, dtype_size(x.dtype));
  return fn_step([copy](const StepData& d) { copy.run(d.in(0), d.out(0)); });
}

}  // namespace

void register_graph_ops_slice() { register_op("Slice", {infer_slice, make_slice}); }

}  // namespace nnkern::graph
