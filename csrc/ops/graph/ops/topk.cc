// TopK: the k largest (or smallest) elements along an axis and their int64 indices; k a constant input, axis,
// largest, sorted. Order: by value (NaN ranked above every number, -0 equal to +0), equal values by ascending
// index, as onnxruntime breaks ties; sorted = 0 returns them in that order too (any order is allowed).
// float32, largest, along the last axis: nnkern's f32_topk (ops/topk/topk.h, the same order). Otherwise a
// general path per slice: the slice gathered, a partial sort of its indices. Numeric types.
#include <algorithm>
#include <numeric>

#include "ops/graph/ops/axis_loops.h"
#include "ops/graph/ops/common.h"
#include "ops/graph/ops/typed.h"
#include "ops/topk/topk.h"

namespace nnkern::graph {

namespace {

struct TopK {
  AxisSplit s;
  size_t k = 0;
  bool largest = true;
};

TopK topk_of(const NodeSpec& n) {
  n.require_types({0}, {DType::f32, DType::f64, DType::i8, DType::u8, DType::i16, DType::u16, DType::i32, DType::u32,
                        DType::i64, DType::u64});
  n.require_types({1}, {DType::i64});
  const TensorDesc& x = n.in(0);
  if (x.rank() == 0) n.invalid("needs an input of rank >= 1, got a scalar");
  if (n.num_outputs != 2) n.invalid("has values and indices outputs, the node lists " + std::to_string(n.num_outputs));
  const std::vector<int64_t> k = n.need_constant(1, "k").ints();
  if (k.size() != 1) n.invalid("k must have one element");
  TopK t;
  const size_t axis = normalize_axis(n.attr_int("axis", -1), x.rank(), "axis");
  t.s = split_at_axis(x.shape, axis);
  if (k[0] < 0 || k[0] > x.shape[axis])
    n.invalid("k = " + std::to_string(k[0]) + " is not within [0, " + std::to_string(x.shape[axis]) + "]");
  t.k = size_t(k[0]);
  t.largest = n.attr_int("largest", 1) != 0;
  return t;
}

std::vector<TensorDesc> infer_topk(const NodeSpec& n) {
  const TopK t = topk_of(n);
  std::vector<int64_t> shape = n.in(0).shape;
  shape[normalize_axis(n.attr_int("axis", -1), shape.size(), "axis")] = int64_t(t.k);
  return {TensorDesc{n.in(0).dtype, shape}, TensorDesc{DType::i64, shape}};
}

// Whether element (a, ia) ranks before (b, ib).
template <bool Largest, typename T>
inline bool ranks_before(T a, size_t ia, T b, size_t ib) {
  const bool an = is_nan(a), bn = is_nan(b);
  if (an || bn) return an && bn ? ia < ib : (Largest ? an : bn);
  if (a != b) return Largest ? a > b : a < b;
  return ia < ib;
}

template <bool Largest, typename T>
void topk_general(const TopK& t, const T* x, T* values, int64_t* indices) {
  const size_t n = t.s.n, inner = t.s.inner, k = t.k, columns = t.s.outer * inner;
  auto run = [&](size_t c0, size_t c1) {
    std::vector<T> v(n);
    std::vector<size_t> idx(n);
    for (size_t c = c0; c < c1; ++c) {
      const size_t o = c / inner, j = c % inner;
      const T* xc = x + o * n * inner + j;
      for (size_t i = 0; i < n; ++i) v[i] = xc[i * inner];
      std::iota(idx.begin(), idx.end(), size_t(0));
      const auto cmp = [&](size_t a, size_t b) { return ranks_before<Largest>(v[a], a, v[b], b); };
      if (k == n) std::sort(idx.begin(), idx.end(), cmp);
      else std::partial_sort(idx.begin(), idx.begin() + std::ptrdiff_t(k), idx.end(), cmp);
      T* vc = values + o * k * inner + j;
      int64_t* ic = indices + o * k * inner + j;
      for (size_t r = 0; r < k; ++r) {
        vc[r * inner] = v[idx[r]];
        ic[r * inner] = int64_t(idx[r]);
      }
    }
  };
  if (t.s.elements() < elementwise_parallel_min() || columns < 2) run(0, columns);
  else parallel_for_ranges(columns, run);
}

std::unique_ptr<Step> make_topk(const NodeSpec& n, const std::vector<TensorDesc>&, SharedLayers&) {
  const TopK t = topk_of(n);
  const bool kernel = n.in(0).dtype == DType::f32 && t.largest && t.s.inner == 1 && t.s.n < (size_t(1) << 32);
  return dispatch_types<float, double, int8_t, uint8_t, int16_t, uint16_t, int32_t, uint32_t, int64_t, uint64_t>(
      n.in(0).dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        return fn_step(
            [t, kernel](const StepData& d) {
              if (t.k == 0 || t.s.outer == 0 || t.s.inner == 0) return;
              const T* x = d.in<T>(0);
              T* values = d.out<T>(0);
              int64_t* indices = d.out<int64_t>(1);
              if constexpr (std::is_same_v<T, float>) {
                if (kernel) {
                  f32_topk(t.s.outer, t.s.n, x, t.s.n, t.k, values, indices);
                  return;
                }
              }
              if (t.largest) topk_general<true>(t, x, values, indices);
              else topk_general<false>(t, x, values, indices);
            },
            kernel ? "f32_topk" : "general");
      });
}

}  // namespace

void register_graph_ops_topk() { register_op("TopK", {infer_topk, make_topk}); }

}  // namespace nnkern::graph
