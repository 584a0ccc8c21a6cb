// Joining and cutting along an axis, for every element type: Concat and Split. Both are row copies: the
// dimensions before the axis are rows, each input (Concat) or output (Split) a run of bytes within each row.
// Also nnkern.ChannelShuffle, the optimizer's join, shuffle and cut of ShuffleNet's units in one pass.
#include <algorithm>
#include <memory>

#include "core/checked.h"
#include "core/kernel_family.h"
#include "kernels/quantize_list.h"
#include "ops/graph/ops/byte_table.h"
#include "ops/graph/ops/common.h"
#include "ops/graph/ops/elementwise.h"
#include "ops/graph/ops/strided.h"

namespace nnkern::graph {

namespace {

std::vector<TensorDesc> infer_concat(const NodeSpec& n) {
  if (n.inputs.empty()) n.invalid("needs at least one input");
  const TensorDesc& first = n.in(0);
  if (!n.has("axis")) n.invalid("needs its axis attribute");
  if (first.rank() == 0) n.invalid("cannot concatenate scalars");
  const size_t axis = normalize_axis(n.attr_int("axis", 0), first.rank(), "Concat axis");
  std::vector<int64_t> shape = first.shape;
  shape[axis] = 0;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const TensorDesc& x = n.in(i);
    if (!x.present()) n.invalid("input " + std::to_string(i) + " is missing");
    if (x.dtype != first.dtype) n.invalid("inputs of different types");
    bool fits = x.rank() == first.rank();
    for (size_t d = 0; fits && d < x.rank(); ++d) fits = d == axis || x.shape[d] == first.shape[d];
    if (!fits) n.invalid("input " + x.str() + " does not fit " + first.str() + " along axis " + std::to_string(axis));
    shape[axis] = int64_t(checked_add(size_t(shape[axis]), size_t(x.shape[axis])));
  }
  return one(first.dtype, shape);
}

// Each input's run of bytes copied into the output's rows, except an input its producer already wrote there (the
// plan's slice of this output: Step::joins_rows).
class ConcatStep final : public Step {
 public:
  explicit ConcatStep(RowsJoin join) : join_(std::move(join)) {}
  void run(const StepData& d) const override {
    auto* y = static_cast<uint8_t*>(d.out(0));
    for (size_t i = 0; i < join_.at.size(); ++i)
      if (d.in(i) != y + join_.at[i])
        copy_rows(d.in(i), join_.bytes[i], y + join_.at[i], join_.pitch, join_.rows, join_.bytes[i]);
  }
  const RowsJoin* joins_rows() const override { return &join_; }

 private:
  RowsJoin join_;
};

std::unique_ptr<Step> make_concat(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers&) {
  const size_t axis = normalize_axis(n.attr_int("axis", 0), out[0].rank(), "Concat axis");
  const size_t esize = dtype_size(out[0].dtype);
  if (n.inputs.size() == 1) return view_step(out[0].bytes());
  RowsJoin join;
  join.rows = elements_before(out[0].shape, axis);
  join.pitch = elements_from(out[0].shape, axis) * esize;
  for (const TensorDesc& x : n.inputs) {  // each input's bytes per row, after the ones before it
    join.at.push_back(join.at.empty() ? 0 : join.at.back() + join.bytes.back());
    join.bytes.push_back(elements_from(x.shape, axis) * esize);
  }
  return std::make_unique<ConcatStep>(std::move(join));
}

// The sizes of Split's outputs along the axis: the split input (an empty one counts as left out), else equal parts
// (the last one smaller when the dimension does not divide: ONNX's num_outputs rule, which also covers the older
// form's even split).
std::vector<int64_t> split_sizes(const NodeSpec& n, size_t axis) {
  const int64_t dim = n.in(0).shape[axis];
  const size_t count = n.num_outputs;
  if (count == 0) n.invalid("needs at least one output");
  if (n.has_input(1) && n.in(1).elements() > 0) {
    if (n.has("num_outputs")) n.invalid("give either the split input or the num_outputs attribute, not both");
    std::vector<int64_t> sizes = n.need_constant(1, "split").ints();
    if (sizes.size() != count)
      n.invalid("split has " + std::to_string(sizes.size()) + " entries for " + std::to_string(count) + " outputs");
    int64_t sum = 0;
    for (int64_t s : sizes) {
      if (s < 0) n.invalid("split sizes must be >= 0");
      sum += s;
    }
    if (sum != dim)
      n.invalid("split sizes add up to " + std::to_string(sum) + ", not the dimension " + std::to_string(dim));
    return sizes;
  }
  if (n.has("num_outputs") && n.attr_int("num_outputs", 0) != int64_t(count))
    n.invalid("num_outputs is " + std::to_string(n.attr_int("num_outputs", 0)) + " but the node has " +
              std::to_string(count) + " outputs");
  const int64_t part = (dim + int64_t(count) - 1) / int64_t(count);
  const int64_t last = dim - part * int64_t(count - 1);
  if (last < 0)
    n.invalid("cannot split a dimension of " + std::to_string(dim) + " into " + std::to_string(count) +
              " parts of " + std::to_string(part));
  std::vector<int64_t> sizes(count, part);
  sizes.back() = last;
  return sizes;
}

std::vector<TensorDesc> infer_split(const NodeSpec& n) {
  const TensorDesc& x = n.in(0);
  if (x.rank() == 0) n.invalid("cannot split a scalar");
  const size_t axis = normalize_axis(n.attr_int("axis", 0), x.rank(), "Split axis");
  std::vector<TensorDesc> outs;
  for (int64_t s : split_sizes(n, axis)) {
    std::vector<int64_t> shape = x.shape;
    shape[axis] = s;
    outs.push_back(TensorDesc{x.dtype, shape});
  }
  return outs;
}

std::unique_ptr<Step> make_split(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers&) {
  const TensorDesc& x = n.in(0);
  const size_t axis = normalize_axis(n.attr_int("axis", 0), x.rank(), "Split axis");
  const size_t esize = dtype_size(x.dtype), rows = elements_before(x.shape, axis);
  const size_t in_row = elements_from(x.shape, axis) * esize;
  std::vector<size_t> out_row;
  for (const TensorDesc& o : out) out_row.push_back(elements_from(o.shape, axis) * esize);
  if (out.size() == 1) return view_step(x.bytes());
  return fn_step([rows, in_row, out_row](const StepData& d) {
    const auto* xb = static_cast<const uint8_t*>(d.in(0));
    size_t at = 0;
    for (size_t j = 0; j < out_row.size(); ++j) {
      copy_rows(xb + at, in_row, d.out(j), out_row[j], rows, out_row[j]);
      at += out_row[j];
    }
  });
}

// nnkern.ChannelShuffle(a, b), attribute splits (>= 1, default 1), `splits` outputs: ShuffleNet's Concat of two
// tensors along their last axis, its channel shuffle of two groups and the equal Slices after it, in one pass (the
// optimizer's, onnx/_fuse.py). a and b have one shape, c elements along the last axis; with
// z[..., 2i] = a[..., i] and z[..., 2i + 1] = b[..., i], output k is z[..., k * 2c / splits : (k + 1) * 2c / splits].
// Inputs 2 .. 1 + splits (optional, 8-bit a and b): a constant table of 256 entries of their type for output k, each
// row written then mapped through it in place (an nnkern.Lookup reading the output, fuse_lookup: its bits).
std::vector<TensorDesc> infer_channel_shuffle(const NodeSpec& n) {
  if (n.inputs.size() < 2) n.invalid("needs two inputs");
  const TensorDesc& a = n.in(0);
  const TensorDesc& b = n.in(1);
  if (a.rank() == 0) n.invalid("needs inputs of rank >= 1");
  if (a.dtype != b.dtype || a.shape != b.shape)
    n.invalid("needs two inputs of one type and shape, has " + a.str() + " and " + b.str());
  const int64_t splits = n.attr_int("splits", 1), width = 2 * a.shape.back();
  if (splits < 1 || width % splits != 0)
    n.invalid("splits must divide the " + std::to_string(width) + " interleaved elements, is " +
              std::to_string(splits));
  if (n.num_outputs != size_t(splits))
    n.invalid("has " + std::to_string(n.num_outputs) + " outputs for " + std::to_string(splits) + " splits");
  if (n.inputs.size() > 2 + size_t(splits)) n.invalid("has more tables than outputs");
  for (size_t i = 2; i < n.inputs.size(); ++i) {
    if (!n.has_input(i)) continue;
    const TensorDesc& t = n.need_constant(i, "table").desc;
    if ((a.dtype != DType::u8 && a.dtype != DType::i8) || t.dtype != a.dtype || t.elements() != 256)
      n.invalid("a table needs 8-bit inputs and 256 entries of their type, got " + t.str());
  }
  std::vector<int64_t> shape = a.shape;
  shape.back() = width / splits;
  return std::vector<TensorDesc>(size_t(splits), TensorDesc{a.dtype, shape});
}

std::unique_ptr<Step> make_channel_shuffle(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers&) {
  const TensorDesc& a = n.in(0);
  const size_t c = size_t(a.shape.back()), rows = c ? a.elements() / c : 0, part = 2 * c / out.size();
  const size_t esize = dtype_size(a.dtype), splits = out.size();
  std::vector<std::shared_ptr<const ByteTable>> tables(splits);  // per output, or none
  for (size_t k = 0; k < splits; ++k)
    if (n.has_input(2 + k))
      tables[k] = std::make_shared<ByteTable>(byte_table(n.need_constant(2 + k, "table"), a.dtype == DType::i8));
  const bool any_table = std::any_of(tables.begin(), tables.end(), [](const auto& t) { return t != nullptr; });
  return fn_step([c, rows, part, esize, splits, tables](const StepData& d) {
    const LookupFn lookup = quantize_family().dispatched().lookup;
    with_word(esize, [&](auto w) {
      using T = decltype(w);
      const T* pa = d.in<T>(0);
      const T* pb = d.in<T>(1);
      const auto run = [&](size_t r0, size_t r1) {
        for (size_t k = 0; k < splits; ++k) {
          T* y = d.out<T>(k);
          const size_t z0 = k * part;  // this output's first element of the interleaved row
          const bool pairs = z0 % 2 == 0 && part % 2 == 0;  // whole pairs: a plain interleaving loop
          for (size_t r = r0; r < r1; ++r) {
            const size_t row = r * c;
            T* yr = y + r * part;
            if (pairs) {
              const size_t i0 = row + z0 / 2;
              interleave(pa + i0, pb + i0, yr, part / 2);
            } else {
              for (size_t q = 0; q < part; ++q) {
                const size_t z = z0 + q, i = row + z / 2;
                yr[q] = z % 2 ? pb[i] : pa[i];
              }
            }
          }
          if constexpr (sizeof(T) == 1) {  // the rows just written, contiguous in this output: one run
            uint8_t* rows8 = reinterpret_cast<uint8_t*>(y + r0 * part);
            if (tables[k]) lookup(tables[k]->data(), rows8, rows8, (r1 - r0) * part);
          }
        }
      };
      if (rows * 2 * c < elementwise_parallel_min()) run(0, rows);  // the threshold counts elements, not rows
      else parallel_for_ranges(rows, run);
    });
  }, any_table ? "+ table" : "");
}

}  // namespace

void register_graph_ops_movement() {
  register_op("Concat", {infer_concat, make_concat});
  register_op("Split", {infer_split, make_split});
  register_op("nnkern.ChannelShuffle", {infer_channel_shuffle, make_channel_shuffle});
}

}  // namespace nnkern::graph
