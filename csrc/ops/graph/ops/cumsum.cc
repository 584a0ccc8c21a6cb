// CumSum: running sums along an axis (a constant scalar input), exclusive (each sum leaves its own element out)
// and reverse (from the end). float32, float64 sum in their type one element after the other, as onnxruntime;
// int32, int64, uint32, uint64 wrap as two's complement (summed in the unsigned type). Inner positions of a tile
// advance together, so the loop over them is contiguous.
#include <type_traits>

#include "ops/graph/ops/axis_loops.h"
#include "ops/graph/ops/common.h"
#include "ops/graph/ops/typed.h"

namespace nnkern::graph {

namespace {

struct CumSum {
  AxisSplit s;
  bool exclusive = false, reverse = false;
};

CumSum cumsum_of(const NodeSpec& n) {
  n.require_types({0}, {DType::f32, DType::f64, DType::i32, DType::i64, DType::u32, DType::u64});
  n.require_types({1}, {DType::i32, DType::i64});
  const TensorDesc& x = n.in(0);
  if (x.rank() == 0) n.invalid("needs an input of rank >= 1, got a scalar");
  const std::vector<int64_t> axis = n.need_constant(1, "axis").ints();
  if (axis.size() != 1 || n.in(1).rank() > 1) n.invalid("axis must be a scalar");
  CumSum c;
  c.s = split_at_axis(x.shape, normalize_axis(axis[0], x.rank(), "axis"));
  c.exclusive = n.attr_int("exclusive", 0) != 0;
  c.reverse = n.attr_int("reverse", 0) != 0;
  return c;
}

std::vector<TensorDesc> infer_cumsum(const NodeSpec& n) {
  cumsum_of(n);
  return {n.in(0)};
}

template <typename T, bool = std::is_integral_v<T>>
struct SumTypeOf {
  using type = T;
};
template <typename T>
struct SumTypeOf<T, true> {
  using type = std::make_unsigned_t<T>;
};
template <typename T>
using SumType = typename SumTypeOf<T>::type;

template <typename T>
void cumsum(const CumSum& c, const T* x, T* y) {
  using A = SumType<T>;
  const size_t n = c.s.n, inner = c.s.inner;
  for_axis_tiles(c.s, [&](size_t o, size_t j0, size_t j1) {
    const size_t len = j1 - j0;
    const T* xo = x + o * n * inner + j0;
    T* yo = y + o * n * inner + j0;
    A acc[kTile];
    for (size_t j = 0; j < len; ++j) acc[j] = A(0);
    for (size_t step = 0; step < n; ++step) {
      const size_t i = c.reverse ? n - 1 - step : step;
      const T* xi = xo + i * inner;
      T* yi = yo + i * inner;
      if (c.exclusive) {
        for (size_t j = 0; j < len; ++j) {
          const A v = A(xi[j]);
          yi[j] = T(acc[j]);
          acc[j] += v;
        }
      } else {
        for (size_t j = 0; j < len; ++j) {
          acc[j] += A(xi[j]);
          yi[j] = T(acc[j]);
        }
      }
    }
  });
}

std::unique_ptr<Step> make_cumsum(const NodeSpec& n, const std::vector<TensorDesc>&, SharedLayers&) {
  const CumSum c = cumsum_of(n);
  return dispatch_types<float, double, int32_t, int64_t, uint32_t, uint64_t>(n.in(0).dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return fn_step([c](const StepData& d) { cumsum(c, d.in<T>(0), d.out<T>(0)); });
  });
}

}  // namespace

void register_graph_ops_cumsum() { register_op("CumSum", {infer_cumsum, make_cumsum}); }

}  // namespace nnkern::graph
