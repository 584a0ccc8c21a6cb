// Ops whose output reads the input through strides, for every element type (a StridedCopy each): Expand
// (broadcast dimensions read with stride 0), Tile (the output seen as [r0, d0, r1, d1, ...], the repeats read
// with stride 0), DepthToSpace and SpaceToDepth (a reshape to 6-D, a transpose, a reshape back).
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

// DepthToSpace / SpaceToDepth: the input seen as 6-D (`view`), the output the transpose `perm` of that view.
struct BlockMove {
  std::vector<int64_t> view, perm, out;
};

BlockMove block_move(const NodeSpec& n, bool to_space) {
  const TensorDesc& x = n.in(0);
  if (x.rank() != 4) n.invalid("expects a 4-D input (N, C, H, W), got " + x.str());
  const int64_t b = n.attr_int("blocksize", 0);
  if (b < 1) n.invalid("blocksize must be >= 1");
  const std::string mode = n.attr_string("mode", "DCR");
  if (mode != "DCR" && mode != "CRD") n.invalid("mode must be DCR or CRD, not '" + mode + "'");
  const bool dcr = mode == "DCR";
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  BlockMove m;
  if (to_space) {
    if (C % (b * b)) n.invalid("channels " + std::to_string(C) + " are not a multiple of blocksize^2");
    const int64_t c = C / (b * b);
    m.view = dcr ? std::vector<int64_t>{N, b, b, c, H, W} : std::vector<int64_t>{N, c, b, b, H, W};
    m.perm = dcr ? std::vector<int64_t>{0, 3, 4, 1, 5, 2} : std::vector<int64_t>{0, 1, 4, 2, 5, 3};
    m.out = {N, c, int64_t(checked_mul(size_t(H), size_t(b))), int64_t(checked_mul(size_t(W), size_t(b)))};
  } else {
    if (H % b || W % b) n.invalid("spatial size " + x.str() + " is not a multiple of blocksize " + std::to_string(b));
    m.view = {N, C, H / b, b, W / b, b};
    m.perm = dcr ? std::vector<int64_t>{0, 3, 5, 1, 2, 4} : std::vector<int64_t>{0, 1, 3, 5, 2, 4};
    m.out = {N, int64_t(checked_mul(size_t(C), size_t(b), size_t(b))), H / b, W / b};
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
  std::vector<int64_t> shape;
  for (int64_t p : m.perm) shape.push_back(m.view[size_t(p)]);
  const StridedCopy copy(shape, permuted_strides(m.view, m.perm), 0, dtype_size(n.in(0).dtype));
  if (copy.contiguous()) return view_step(n.in(0).bytes());  // blocksize 1, or sizes of 1 that move nothing
  return fn_step([copy](const StepData& d) { copy.run(d.in(0), d.out(0)); });
}

}  // namespace

void register_graph_ops_rearrange() {
  register_op("Expand", {infer_expand, make_expand});
  register_op("Tile", {infer_tile, make_tile});
  register_op("DepthToSpace", {infer_block<true>, make_block<true>});
  register_op("SpaceToDepth", {infer_block<false>, make_block<false>});
}

}  // namespace nnkern::graph
