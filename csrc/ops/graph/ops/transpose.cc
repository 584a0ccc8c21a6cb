// Transpose of any element type: the output walked in order, the input gathered through the permuted strides,
// the innermost output dimension as a contiguous run of the loop.
#include <cstring>
#include <numeric>

#include "core/threadpool.h"
#include "ops/graph/ops/common.h"

namespace nnkern::graph {

namespace {

std::vector<int64_t> perm_of(const NodeSpec& n) {
  const size_t r = n.in(0).rank();
  std::vector<int64_t> perm = n.attr_ints("perm");
  if (perm.empty()) {
    for (size_t i = 0; i < r; ++i) perm.push_back(int64_t(r - 1 - i));
  }
  if (perm.size() != r) n.invalid("perm must have one entry per input dimension");
  std::vector<bool> seen(r, false);
  for (int64_t& p : perm) {
    const size_t a = normalize_axis(p, r, "perm entry");
    if (seen[a]) n.invalid("perm repeats an axis");
    seen[a] = true;
    p = int64_t(a);
  }
  return perm;
}

std::vector<TensorDesc> infer_transpose(const NodeSpec& n) {
  const TensorDesc& x = n.in(0);
  const std::vector<int64_t> perm = perm_of(n);
  std::vector<int64_t> shape;
  for (int64_t p : perm) shape.push_back(x.shape[size_t(p)]);
  return one(x.dtype, shape);
}

template <typename T>
void transpose(const T* x, T* y, const std::vector<int64_t>& oshape, const std::vector<size_t>& istride) {
  const size_t r = oshape.size();
  if (r == 0) { y[0] = x[0]; return; }
  const size_t inner = size_t(oshape[r - 1]), step = istride[r - 1];
  size_t outer = 1;
  for (size_t i = 0; i + 1 < r; ++i) outer *= size_t(oshape[i]);
  if (inner == 0) return;
  auto rows = [&](size_t o0, size_t o1) {
    for (size_t o = o0; o < o1; ++o) {
      size_t rem = o, off = 0;
      for (size_t i = r - 1; i-- > 0;) {
        off += (rem % size_t(oshape[i])) * istride[i];
        rem /= size_t(oshape[i]);
      }
      T* dst = y + o * inner;
      const T* src = x + off;
      for (size_t j = 0; j < inner; ++j) dst[j] = src[j * step];
    }
  };
  if (outer * inner < (size_t(1) << 15)) rows(0, outer);
  else parallel_for_ranges(outer, rows);
}

std::unique_ptr<Step> make_transpose(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers&) {
  const TensorDesc& x = n.in(0);
  const std::vector<int64_t> perm = perm_of(n);
  const std::vector<size_t> xs = contiguous_strides(x.shape);
  std::vector<size_t> istride;
  for (int64_t p : perm) istride.push_back(xs[size_t(p)]);
  const std::vector<int64_t> oshape = out[0].shape;
  const size_t bytes = out[0].bytes();
  switch (dtype_size(x.dtype)) {
    case 1: return fn_step([=](const StepData& d) { if (bytes) transpose(d.in<uint8_t>(0), d.out<uint8_t>(0), oshape, istride); });
    case 2: return fn_step([=](const StepData& d) { if (bytes) transpose(d.in<uint16_t>(0), d.out<uint16_t>(0), oshape, istride); });
    case 4: return fn_step([=](const StepData& d) { if (bytes) transpose(d.in<uint32_t>(0), d.out<uint32_t>(0), oshape, istride); });
    default: return fn_step([=](const StepData& d) { if (bytes) transpose(d.in<uint64_t>(0), d.out<uint64_t>(0), oshape, istride); });
  }
}

}  // namespace

void register_graph_ops_transpose() { register_op("Transpose", {infer_transpose, make_transpose}); }

}  // namespace nnkern::graph
