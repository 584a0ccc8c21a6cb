// Ops whose output reads the input through strides, for every element type (a StridedCopy each): Expand
// (broadcast dimensions read with stride 0), Tile (the output seen as [r0, d0, r1, d1, ...], the repeats read
// with stride 0), DepthToSpace and SpaceToDepth (a reshape to 6-D, a transpose, a reshape back).
#include <algorithm>

#include "core/checked.h"
#include "ops/graph/ops/common.h"
#include "ops/graph/ops/strided.h"

namespace nnkern::graph {

namespace {

std::vector<TensorDesc> infer_expand(const NodeSpec& n) {
  const TensorDesc& x = n.in(0);
  const std::vector<int64_t> shape = n.need_constant(1, "shape").ints();
  if (n.in(1).rank() != 1) n.invalid("shape must be 1-D");
  for (int64_t d : shape)
    if (d < 0) n.invalid("shape entries must be >= 0");
  try {
    return one(x.dtype, broadcast_shapes(x.shape, shape));
  } catch (const std::invalid_argument& e) {
    n.invalid(std::string(e.what()) + " (input " + x.str() + ")");
  }
}

std::unique_ptr<Step> make_expand(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers&) {
  const TensorDesc& x = n.in(0);
  const std::vector<int64_t>& oshape = out[0].shape;
  const size_t lead = oshape.size() - x.rank();
  const std::vector<size_t> xs = contiguous_strides(x.shape);
  std::vector<int64_t> stride(oshape.size(), 0);
  for (size_t d = 0; d < x.rank(); ++d) stride[lead + d] = x.shape[d] == 1 ? 0 : int64_t(xs[d]);
  if (out[0].elements() == x.elements()) return view_step(x.bytes());  // nothing repeated
  const StridedCopy copy(oshape, stride, 0, dtype_size(x.dtype));
  return fn_step([copy](const StepData& d) { copy.run(d.in(0), d.out(0)); });
}

std::vector<TensorDesc> infer_tile(const NodeSpec& n) {
  const TensorDesc& x = n.in(0);
  const std::vector<int64_t> repeats = n.need_constant(1, "repeats").ints();
  if (repeats.size() != x.rank())
    n.invalid("repeats has " + std::to_string(repeats.size()) + " entries for an input of rank " +
              std::to_string(x.rank()));
  std::vector<int64_t> shape;
  for (size_t d = 0; d < x.rank(); ++d) {
    if (repeats[d] < 0) n.invalid("repeats must be >= 0");
    shape.push_back(int64_t(checked_mul(size_t(x.shape[d]), size_t(repeats[d]))));
  }
  return one(x.dtype, shape);
}

std::unique_ptr<Step> make_tile(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers&) {
  const TensorDesc& x = n.in(0);
  const std::vector<int64_t> repeats = n.need_constant(1, "repeats").ints();
  if (out[0].elements() == x.elements()) return view_step(x.bytes());  // every repeat 1 (or nothing at all)
  const std::vector<size_t> xs = contiguous_strides(x.shape);
  std::vector<int64_t> shape, stride;
  for (size_t d = 0; d < x.rank(); ++d) {
    shape.push_back(repeats[d]);
    stride.push_back(0);
    shape.push_back(x.shape[d]);
    stride.push_back(int64_t(xs[d]));
  }
  const StridedCopy copy(shape, stride, 0, dtype_size(x.dtype));
  return fn_step([copy](const StepData& d) { copy.run(d.in(0), d.out(0)); });
}

// DepthToSpace / SpaceToDepth: the input seen as 6-D (`view`, each 4-D dimension split in parts), the output the
// transpose `perm` of that view. nnkern.DepthToSpace / nnkern.SpaceToDepth (the layout pass's fusion of a Transpose
// before them) read their input through the transpose `input_perm`: the op's NCHW operand is
// Transpose(X, input_perm), never written out.
struct BlockMove {
  std::vector<int64_t> view, perm, out;
  std::vector<int64_t> stride;  // of the view's dimensions, in X's elements
};

BlockMove block_move(const NodeSpec& n, bool to_space) {
  const TensorDesc& in = n.in(0);
  if (in.rank() != 4) n.invalid("expects a 4-D input (N, C, H, W), got " + in.str());
  std::vector<int64_t> shape = in.shape, strides(4);  // the NCHW operand and its strides in X
  const std::vector<size_t> xs = contiguous_strides(in.shape);
  std::vector<int64_t> input_perm{0, 1, 2, 3};
  if (n.op.rfind("nnkern.", 0) == 0) {
    input_perm = n.attr_ints("input_perm");
    std::vector<int64_t> sorted = input_perm;
    std::sort(sorted.begin(), sorted.end());
    if (sorted != std::vector<int64_t>{0, 1, 2, 3}) n.invalid("input_perm must be a permutation of 0..3");
  }
  for (size_t d = 0; d < 4; ++d) {
    shape[d] = in.shape[size_t(input_perm[d])];
    strides[d] = int64_t(xs[size_t(input_perm[d])]);
  }
  const int64_t b = n.attr_int("blocksize", 0);
  if (b < 1) n.invalid("blocksize must be >= 1");
  const std::string mode = n.attr_string("mode", "DCR");
  if (mode != "DCR" && mode != "CRD") n.invalid("mode must be DCR or CRD, not '" + mode + "'");
  const bool dcr = mode == "DCR";
  const int64_t N = shape[0], C = shape[1], H = shape[2], W = shape[3];
  BlockMove m;
  std::vector<std::vector<int64_t>> parts;  // each NCHW dimension's parts in the view
  if (to_space) {
    if (C % (b * b)) n.invalid("channels " + std::to_string(C) + " are not a multiple of blocksize^2");
    const int64_t c = C / (b * b);
    parts = {{N}, dcr ? std::vector<int64_t>{b, b, c} : std::vector<int64_t>{c, b, b}, {H}, {W}};
    m.perm = dcr ? std::vector<int64_t>{0, 3, 4, 1, 5, 2} : std::vector<int64_t>{0, 1, 4, 2, 5, 3};
    m.out = {N, c, int64_t(checked_mul(size_t(H), size_t(b))), int64_t(checked_mul(size_t(W), size_t(b)))};
  } else {
    if (H % b || W % b) n.invalid("spatial size " + in.str() + " is not a multiple of blocksize " + std::to_string(b));
    parts = {{N}, {C}, {H / b, b}, {W / b, b}};
    m.perm = dcr ? std::vector<int64_t>{0, 3, 5, 1, 2, 4} : std::vector<int64_t>{0, 1, 3, 5, 2, 4};
    m.out = {N, int64_t(checked_mul(size_t(C), size_t(b), size_t(b))), H / b, W / b};
  }
  for (size_t d = 0; d < 4; ++d) {  // a part's stride: its dimension's, times the sizes of the parts after it
    int64_t s = strides[d];
    std::vector<int64_t> st(parts[d].size());
    for (size_t k = parts[d].size(); k-- > 0;) {
      st[k] = s;
      s *= parts[d][k];
    }
    m.view.insert(m.view.end(), parts[d].begin(), parts[d].end());
    m.stride.insert(m.stride.end(), st.begin(), st.end());
  }
  return m;
}

template <bool ToSpace>
std::vector<TensorDesc> infer_block(const NodeSpec& n) {
  return one(n.in(0).dtype, block_move(n, ToSpace).out);
}

template <bool ToSpace>
std::unique_ptr<Step> make_block(const NodeSpec& n, const std::vector<TensorDesc>&, SharedLayers&) {
  const BlockMove m = block_move(n, ToSpace);
  std::vector<int64_t> shape, stride;
  for (int64_t p : m.perm) {
    shape.push_back(m.view[size_t(p)]);
    stride.push_back(m.stride[size_t(p)]);
  }
  const StridedCopy copy(shape, stride, 0, dtype_size(n.in(0).dtype));
  if (copy.contiguous()) return view_step(n.in(0).bytes());  // blocksize 1, or sizes of 1 that move nothing
  return fn_step([copy](const StepData& d) { copy.run(d.in(0), d.out(0)); });
}

}  // namespace

void register_graph_ops_rearrange() {
  register_op("Expand", {infer_expand, make_expand});
  register_op("Tile", {infer_tile, make_tile});
  register_op("DepthToSpace", {infer_block<true>, make_block<true>});
  register_op("SpaceToDepth", {infer_block<false>, make_block<false>});
  register_op("nnkern.DepthToSpace", {infer_block<true>, make_block<true>});
  register_op("nnkern.SpaceToDepth", {infer_block<false>, make_block<false>});
}

}  // namespace nnkern::graph
