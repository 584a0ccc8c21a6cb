// Gather and GatherElements of any element type with int32 / int64 indices. The indices are read at run time
// (they may be data); each is checked against the axis first, and one out of range fails the run with
// std::out_of_range naming the node (IndexError in Python) before anything is written. Indices known when the
// plan is built are checked then (ValueError).
#include <stdexcept>

#include "core/threadpool.h"
#include "ops/graph/ops/common.h"
#include "ops/graph/ops/elementwise.h"
#include "ops/graph/ops/strided.h"

namespace nnkern::graph {

namespace {

// The first index of idx[0, count) outside [-dim, dim), or count.
template <typename I>
size_t first_bad_index(const I* idx, size_t count, int64_t dim) {
  for (size_t k = 0; k < count; ++k)
    if (int64_t(idx[k]) < -dim || int64_t(idx[k]) >= dim) return k;
  return count;
}

size_t first_bad_index(DType t, const void* idx, size_t count, int64_t dim) {
  return t == DType::i32 ? first_bad_index(static_cast<const int32_t*>(idx), count, dim)
                         : first_bad_index(static_cast<const int64_t*>(idx), count, dim);
}

int64_t index_at(DType t, const void* idx, size_t k) {
  return t == DType::i32 ? static_cast<const int32_t*>(idx)[k] : static_cast<const int64_t*>(idx)[k];
}

std::string range_message(int64_t value, int64_t dim, size_t axis) {
  return "index " + std::to_string(value) + " is out of range for axis " + std::to_string(axis) +
         " of size " + std::to_string(dim) + " (valid: " + std::to_string(-dim) + " to " + std::to_string(dim - 1) +
         ")";
}

// Checks indices known when the plan is built (ValueError), or at run time (std::out_of_range).
void check_constant_indices(const NodeSpec& n, size_t axis) {
  const Constant* c = n.constant(1);
  if (!c) return;
  const int64_t dim = n.in(0).shape[axis];
  const size_t count = c->desc.elements();
  const size_t bad = first_bad_index(c->desc.dtype, c->data.get(), count, dim);
  if (bad < count) n.invalid(range_message(index_at(c->desc.dtype, c->data.get(), bad), dim, axis));
}

void check_run_indices(const std::string& where, DType t, const void* idx, size_t count, int64_t dim, size_t axis) {
  const size_t bad = first_bad_index(t, idx, count, dim);
  if (bad < count) throw std::out_of_range(where + ": " + range_message(index_at(t, idx, bad), dim, axis));
}

size_t gather_axis(const NodeSpec& n) {
  const TensorDesc& x = n.in(0);
  n.require_types({1}, {DType::i32, DType::i64});
  if (x.rank() == 0) n.invalid("cannot gather from a scalar");
  return normalize_axis(n.attr_int("axis", 0), x.rank(), "Gather axis");
}

std::vector<TensorDesc> infer_gather(const NodeSpec& n) {
  const TensorDesc& x = n.in(0);
  const size_t axis = gather_axis(n);
  check_constant_indices(n, axis);
  std::vector<int64_t> shape(x.shape.begin(), x.shape.begin() + int64_t(axis));
  for (int64_t d : n.in(1).shape) shape.push_back(d);
  for (size_t d = axis + 1; d < x.rank(); ++d) shape.push_back(x.shape[d]);
  if (x.shape[axis] == 0 && n.in(1).elements() > 0) n.invalid("gathers from an empty axis");
  return one(x.dtype, shape);
}

// y[b][k][:] = x[b][idx[k]][:], rows of `inner` elements.
template <typename T, typename I>
void gather(const T* x, const I* idx, T* y, size_t outer, size_t count, int64_t dim, size_t inner) {
  const size_t rows = outer * count;
  auto run = [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r) {
      const size_t b = r / count;
      int64_t i = int64_t(idx[r % count]);
      if (i < 0) i += dim;
      const T* src = x + (b * size_t(dim) + size_t(i)) * inner;
      T* dst = y + r * inner;
      if (inner == 1) *dst = *src;
      else std::memcpy(dst, src, inner * sizeof(T));
    }
  };
  if (rows * inner < elementwise_parallel_min() || rows == 1) run(0, rows);
  else parallel_for_ranges(rows, run);
}

std::unique_ptr<Step> make_gather(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers&) {
  const TensorDesc& x = n.in(0);
  const size_t axis = gather_axis(n);
  const size_t outer = elements_before(x.shape, axis), inner = elements_from(x.shape, axis + 1);
  const size_t count = n.in(1).elements(), esize = dtype_size(x.dtype);
  const int64_t dim = x.shape[axis];
  const DType it = n.in(1).dtype;
  const std::string where = n.where();
  return fn_step([=](const StepData& d) {
    if (count == 0) return;
    check_run_indices(where, it, d.in(1), count, dim, axis);
    if (outer * inner == 0) return;
    with_word(esize, [&](auto w) {
      using T = decltype(w);
      if (it == DType::i32) gather(d.in<T>(0), d.in<int32_t>(1), d.out<T>(0), outer, count, dim, inner);
      else gather(d.in<T>(0), d.in<int64_t>(1), d.out<T>(0), outer, count, dim, inner);
    });
  });
}

std::vector<TensorDesc> infer_gather_elements(const NodeSpec& n) {
  const TensorDesc& x = n.in(0);
  const TensorDesc& idx = n.in(1);
  const size_t axis = gather_axis(n);
  if (idx.rank() != x.rank()) n.invalid("indices " + idx.str() + " must have the rank of data " + x.str());
  for (size_t d = 0; d < x.rank(); ++d)
    if (d != axis && idx.shape[d] > x.shape[d])
      n.invalid("indices " + idx.str() + " exceed data " + x.str() + " along axis " + std::to_string(d));
  check_constant_indices(n, axis);
  return one(x.dtype, idx.shape);
}

// y[.., j, ..] = x[.., idx[.., j, ..], ..] along the axis: output rows (the dimensions before the last) walked with
// an odometer giving the data offset of the row without the axis.
template <typename T, typename I>
void gather_elements(const T* x, const I* idx, T* y, const std::vector<int64_t>& oshape,
                     const std::vector<size_t>& xstride, size_t axis, int64_t dim) {
  const size_t r = oshape.size(), inner = size_t(oshape[r - 1]);
  size_t rows = 1;
  for (size_t d = 0; d + 1 < r; ++d) rows *= size_t(oshape[d]);
  const size_t astride = xstride[axis];
  auto run = [&](size_t r0, size_t r1) {
    std::vector<size_t> pos(r, 0);
    size_t off = 0;
    for (size_t d = r - 1, rem = r0; d-- > 0;) {
      pos[d] = rem % size_t(oshape[d]);
      rem /= size_t(oshape[d]);
      if (d != axis) off += pos[d] * xstride[d];
    }
    for (size_t row = r0; row < r1; ++row) {
      const I* ir = idx + row * inner;
      T* yr = y + row * inner;
      if (axis == r - 1) {
        for (size_t j = 0; j < inner; ++j) {
          const int64_t i = int64_t(ir[j]);
          yr[j] = x[off + size_t(i < 0 ? i + dim : i)];
        }
      } else {
        for (size_t j = 0; j < inner; ++j) {
          const int64_t i = int64_t(ir[j]);
          yr[j] = x[off + j + size_t(i < 0 ? i + dim : i) * astride];
        }
      }
      for (size_t d = r - 1; d-- > 0;) {
        if (d != axis) off += xstride[d];
        if (++pos[d] < size_t(oshape[d])) break;
        if (d != axis) off -= size_t(oshape[d]) * xstride[d];
        pos[d] = 0;
      }
    }
  };
  if (rows * inner < elementwise_parallel_min() || rows == 1) run(0, rows);
  else parallel_for_ranges(rows, run);
}

std::unique_ptr<Step> make_gather_elements(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers&) {
  const TensorDesc& x = n.in(0);
  const size_t axis = gather_axis(n);
  const std::vector<size_t> xstride = contiguous_strides(x.shape);
  const std::vector<int64_t> oshape = out[0].shape;
  const size_t count = out[0].elements(), esize = dtype_size(x.dtype);
  const int64_t dim = x.shape[axis];
  const DType it = n.in(1).dtype;
  const std::string where = n.where();
  return fn_step([=](const StepData& d) {
    if (count == 0) return;
    check_run_indices(where, it, d.in(1), count, dim, axis);
    with_word(esize, [&](auto w) {
      using T = decltype(w);
      if (it == DType::i32) gather_elements(d.in<T>(0), d.in<int32_t>(1), d.out<T>(0), oshape, xstride, axis, dim);
      else gather_elements(d.in<T>(0), d.in<int64_t>(1), d.out<T>(0), oshape, xstride, axis, dim);
    });
  });
}

}  // namespace

void register_graph_ops_gather() {
  register_op("Gather", {infer_gather, make_gather});
  register_op("GatherElements", {infer_gather_elements, make_gather_elements});
}

}  // namespace nnkern::graph
