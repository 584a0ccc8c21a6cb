// Ops whose output depends on shapes and constants only: Shape, Size (the input's shape, known when the plan is
// built; the compiler folds them into constants), ConstantOfShape (a fill) and Range (start, limit and delta
// are constants: they decide the length).
#include <cmath>

#include "core/checked.h"
#include "ops/graph/ops/common.h"
#include "ops/graph/ops/elementwise.h"
#include "ops/graph/ops/strided.h"

namespace nnkern::graph {

namespace {

// Shape's [start, end) over the dimensions: negative counts from the end, then clamped to [0, rank].
std::vector<int64_t> shape_values(const NodeSpec& n) {
  const TensorDesc& x = n.in(0);
  const int64_t r = int64_t(x.rank());
  auto clamp = [r](int64_t v) {
    if (v < 0) v += r;
    return v < 0 ? 0 : v > r ? r : v;
  };
  const int64_t start = clamp(n.attr_int("start", 0)), end = clamp(n.attr_int("end", r));
  std::vector<int64_t> values;
  for (int64_t d = start; d < end; ++d) values.push_back(x.shape[size_t(d)]);
  return values;
}

std::vector<TensorDesc> infer_shape(const NodeSpec& n) {
  return one(DType::i64, {int64_t(shape_values(n).size())});
}

std::unique_ptr<Step> make_shape(const NodeSpec& n, const std::vector<TensorDesc>&, SharedLayers&) {
  const std::vector<int64_t> values = shape_values(n);
  return fn_step([values](const StepData& d) {
    if (!values.empty()) std::memcpy(d.out(0), values.data(), values.size() * sizeof(int64_t));
  });
}

std::vector<TensorDesc> infer_size(const NodeSpec& n) {
  n.in(0).elements();
  return one(DType::i64, {});
}

std::unique_ptr<Step> make_size(const NodeSpec& n, const std::vector<TensorDesc>&, SharedLayers&) {
  const int64_t size = int64_t(n.in(0).elements());
  return fn_step([size](const StepData& d) { *d.out<int64_t>(0) = size; });
}

// ConstantOfShape's value: a one-element tensor attribute (float32 0 if absent).
std::pair<DType, uint64_t> fill_value(const NodeSpec& n) {
  if (!n.has("value")) return {DType::f32, 0};
  const Attribute& a = n.attrs.at("value");
  if (a.kind != Attribute::Kind::tensor || !a.tensor) n.invalid("attribute 'value' must be a tensor");
  if (a.tensor->desc.elements() != 1) n.invalid("value must have exactly one element");
  uint64_t bits = 0;
  std::memcpy(&bits, a.tensor->data.get(), dtype_size(a.tensor->desc.dtype));
  return {a.tensor->desc.dtype, bits};
}

std::vector<TensorDesc> infer_constant_of_shape(const NodeSpec& n) {
  if (n.in(0).rank() != 1) n.invalid("the shape input must be 1-D");
  const std::vector<int64_t> shape = n.need_constant(0, "shape").ints();
  for (int64_t d : shape)
    if (d < 0) n.invalid("shape entries must be >= 0");
  return one(fill_value(n).first, shape);
}

std::unique_ptr<Step> make_constant_of_shape(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers&) {
  const uint64_t bits = fill_value(n).second;
  const size_t count = out[0].elements(), esize = dtype_size(out[0].dtype);
  return fn_step([bits, count, esize](const StepData& d) {
    with_word(esize, [&](auto w) {
      using T = decltype(w);
      T v;
      std::memcpy(&v, &bits, sizeof(T));
      T* y = d.out<T>(0);
      for_ranges(count, [&](size_t b, size_t e) {
        for (size_t i = b; i < e; ++i) y[i] = v;
      });
    });
  });
}

// Range: the length max(ceil((limit - start) / delta), 0) and the values start + i * delta, in the type.
template <typename T>
struct RangeOf {
  T start, delta;
  size_t count;
};

template <typename T>
RangeOf<T> range_of(const NodeSpec& n) {
  T v[3];
  const char* names[3] = {"start", "limit", "delta"};
  for (size_t i = 0; i < 3; ++i) {
    const Constant& c = n.need_constant(i, names[i]);
    if (c.desc.elements() != 1) n.invalid(std::string(names[i]) + " must be a scalar");
    v[i] = c.as<T>()[0];
  }
  if (v[2] == T(0)) n.invalid("delta must not be 0");
  const double steps = std::ceil((double(v[1]) - double(v[0])) / double(v[2]));
  if (!(steps < 9.2e18)) n.invalid("the range is too long");
  return {v[0], v[2], steps > 0 ? size_t(steps) : 0};
}

template <typename F>
decltype(auto) with_range_type(const NodeSpec& n, F&& f) {
  switch (n.in(0).dtype) {
    case DType::f32: return f(float{});
    case DType::f64: return f(double{});
    case DType::i16: return f(int16_t{});
    case DType::i32: return f(int32_t{});
    default: return f(int64_t{});
  }
}

std::vector<TensorDesc> infer_range(const NodeSpec& n) {
  n.require_types({0, 1, 2}, {DType::f32, DType::f64, DType::i16, DType::i32, DType::i64});
  if (n.in(1).dtype != n.in(0).dtype || n.in(2).dtype != n.in(0).dtype) n.invalid("inputs of different types");
  const size_t count = with_range_type(n, [&](auto t) { return range_of<decltype(t)>(n).count; });
  return one(n.in(0).dtype, {int64_t(count)});
}

std::unique_ptr<Step> make_range(const NodeSpec& n, const std::vector<TensorDesc>&, SharedLayers&) {
  return with_range_type(n, [&](auto t) {
    using T = decltype(t);
    const RangeOf<T> r = range_of<T>(n);
    return fn_step([r](const StepData& d) {
      T* y = d.out<T>(0);
      for (size_t i = 0; i < r.count; ++i) y[i] = T(r.start + T(i) * r.delta);
    });
  });
}

}  // namespace

void register_graph_ops_shape() {
  register_op("Shape", {infer_shape, make_shape});
  register_op("Size", {infer_size, make_size});
  register_op("ConstantOfShape", {infer_constant_of_shape, make_constant_of_shape});
  register_op("Range", {infer_range, make_range});
}

}  // namespace nnkern::graph
