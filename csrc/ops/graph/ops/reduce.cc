// Reductions over axes: ReduceSum, ReduceMean, ReduceProd, ReduceMax, ReduceMin, ReduceL1, ReduceL2, ReduceLogSum,
// ReduceLogSumExp, ReduceSumSquare (axes an optional constant input; keepdims; noop_with_empty_axes), and ArgMax /
// ArgMin (axis, keepdims, select_last_index).
//
// Element types: float32, float64, int32, int64, uint32, uint64; ReduceMax / ReduceMin also int8, uint8, bool;
// ReduceLogSumExp float32 and float64 only (its newest schema).
// float32 accumulates in float32, float64 in float64, in the fixed order of ops/graph/ops/reduction.h (whatever the
// thread count). Integers sum, multiply and take absolute values in their unsigned counterpart (wrapping as
// two's complement, no undefined overflow); ReduceL2 and ReduceLogSum of integers accumulate in float64 and
// truncate toward zero, saturating. Over an empty set (a reduced dimension of 0) the results are
// onnxruntime's: Sum, L1, L2, SumSquare and Mean 0, Prod 1, Max -inf or the type's lowest, Min +inf or its
// highest, LogSum and LogSumExp -inf (ReduceLogSum of integers: the lowest integer). Max and Min propagate NaN
// (numpy's and ONNX's reference; onnxruntime skips it); ArgMax / ArgMin take the first NaN (the last with
// select_last_index) as numpy does. With noop_with_empty_axes and no axes each element
// is reduced alone (ReduceL1 gives |x|, ReduceSumSquare x^2, as onnxruntime does).
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/checked.h"
#include "ops/graph/ops/axis_loops.h"
#include "ops/graph/ops/common.h"
#include "ops/graph/ops/reduction.h"
#include "ops/graph/ops/typed.h"

namespace nnkern::graph {

ReducePlan plan_reduce(const std::vector<int64_t>& shape, const std::vector<bool>& reduced) {
  struct Dim {
    size_t size, stride;
    bool red;
  };
  ReducePlan p;
  p.outputs = 1;
  p.count = 1;
  const std::vector<size_t> strides = contiguous_strides(shape);
  std::vector<Dim> dims;
  for (size_t i = 0; i < shape.size(); ++i) {
    const size_t s = size_t(shape[i]);
    if (reduced[i]) p.count = checked_mul(p.count, s);
    else p.outputs = checked_mul(p.outputs, s);
    if (s == 1) continue;
    if (!dims.empty() && dims.back().red == reduced[i]) {
      dims.back().size *= s;
      dims.back().stride = strides[i];
    } else {
      dims.push_back({s, strides[i], bool(reduced[i])});
    }
  }
  if (!dims.empty()) {
    p.rows = dims.back().red;
    p.inner = dims.back().size;
    dims.pop_back();
  }
  for (const Dim& d : dims) {
    (d.red ? p.red_sizes : p.kept_sizes).push_back(d.size);
    (d.red ? p.red_strides : p.kept_strides).push_back(d.stride);
  }
  return p;
}

namespace {

enum class Kind { sum, mean, prod, max, min, l1, l2, log_sum, log_sum_exp, sum_square };

// The unsigned counterpart of an integer type (other types as they are).
template <typename T, bool = std::is_integral_v<T> && !std::is_same_v<T, bool>>
struct Unsigned {
  using type = T;
};
template <typename T>
struct Unsigned<T, true> {
  using type = std::make_unsigned_t<T>;
};

template <typename T, bool = std::is_floating_point_v<T>>
struct KeyOf {
  using type = T;
};
template <typename T>
struct KeyOf<T, true> {
  using type = typename FloatKey<T>::I;
};

constexpr bool is_extreme(Kind k) { return k == Kind::max || k == Kind::min; }

// The accumulator of kind K over elements T (float maxima and minima: integer keys, reduction.h).
template <Kind K, typename T>
using AccOf = std::conditional_t<
    is_extreme(K), typename KeyOf<T>::type,
    std::conditional_t<std::is_floating_point_v<T>, T,
                       std::conditional_t<K == Kind::l2 || K == Kind::log_sum, double,
                                          typename Unsigned<T>::type>>>;

template <Kind K, typename A>
using CombineOf = std::conditional_t<K == Kind::prod, ProdOp<A>,
                                     std::conditional_t<K == Kind::max, MaxOp<A>,
                                                        std::conditional_t<K == Kind::min, MinOp<A>, SumOp<A>>>>;

// What each element contributes.
template <Kind K, typename A>
struct MapOf {
  template <typename T>
  A operator()(T x, A) const {
    if constexpr (K == Kind::l1) {
      if constexpr (std::is_floating_point_v<A>) return std::fabs(A(x));
      else if constexpr (std::is_signed_v<T>) return x < 0 ? A(A(0) - A(x)) : A(x);
      else return A(x);
    } else if constexpr (K == Kind::l2 || K == Kind::sum_square) {
      const A v = A(x);
      return v * v;
    } else if constexpr (is_extreme(K) && std::is_floating_point_v<T>) {
      return FloatKey<T>::template key_nan<K == Kind::max>(x);
    } else {
      return A(x);
    }
  }
};

// A float64 result as an integer: truncated toward zero, saturating (NaN gives 0).
template <typename T>
T saturate(double v) {
  if (v != v) return T(0);
  if (v <= double(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
  if (v >= double(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return T(v);
}

template <Kind K, typename T, typename A>
T finish_value(A r, size_t count) {
  if constexpr (is_extreme(K) && std::is_floating_point_v<T>) {
    return FloatKey<T>::value(r);
  } else if constexpr (K == Kind::mean) {
    if (count == 0) return T(0);
    if constexpr (std::is_floating_point_v<T>) return r / A(count);
    else return T(T(r) / T(count));
  } else if constexpr (K == Kind::l2 || K == Kind::log_sum) {
    const A v = K == Kind::l2 ? std::sqrt(r) : std::log(r);
    if constexpr (std::is_floating_point_v<T>) return v;
    else return saturate<T>(v);
  } else {
    return T(r);
  }
}

// The result over an empty set, as onnxruntime gives it.
template <Kind K, typename T>
T empty_value() {
  if constexpr (K == Kind::max || K == Kind::log_sum || K == Kind::log_sum_exp) {
    if constexpr (std::is_floating_point_v<T>) return -std::numeric_limits<T>::infinity();
    else return std::numeric_limits<T>::lowest();
  } else if constexpr (K == Kind::min) {
    if constexpr (std::is_floating_point_v<T>) return std::numeric_limits<T>::infinity();
    else return std::numeric_limits<T>::max();
  } else {
    return T(K == Kind::prod ? 1 : 0);
  }
}

template <Kind K, typename T>
std::unique_ptr<Step> reduce_step(const ReducePlan& p) {
  using A = AccOf<K, T>;
  return fn_step([p](const StepData& d) {
    const T* x = d.in<T>(0);
    T* y = d.out<T>(0);
    if (p.outputs == 0) return;
    auto no_shift = [](size_t) { return A(0); };
    if (p.count == 0) {
      for (size_t o = 0; o < p.outputs; ++o) y[o] = empty_value<K, T>();
      return;
    }
    if constexpr (K == Kind::log_sum_exp) {
      // The maximum m first (into y), then log(sum of e^(x - m)) + m; an infinite or NaN maximum is the result.
      using M = AccOf<Kind::max, T>;
      run_reduce<MaxOp<M>>(p, x, MapOf<Kind::max, M>{}, [](size_t) { return M(0); },
                           [y](size_t o, M m) { y[o] = finish_value<Kind::max, T, M>(m, 1); });
      run_reduce<SumOp<T>>(
          p, x, [](T v, T m) { return exp_nonpos(v - m); }, [y](size_t o) { return y[o]; },
          [y](size_t o, T s) {
            if (std::isfinite(y[o])) y[o] = std::log(s) + y[o];
          });
    } else {
      using C = CombineOf<K, A>;
      const size_t count = p.count;
      run_reduce<C>(p, x, MapOf<K, A>{}, no_shift,
                    [y, count](size_t o, A r) { y[o] = finish_value<K, T, A>(r, count); });
    }
  });
}

struct ReduceAxes {
  std::vector<bool> reduced;
  std::vector<int64_t> out_shape;
};

ReduceAxes reduce_axes(const NodeSpec& n) {
  const TensorDesc& x = n.in(0);
  std::vector<int64_t> axes;
  if (n.has_input(1)) {
    const Constant& c = n.need_constant(1, "axes");
    if (c.desc.rank() > 1) n.invalid("axes must be a 1-D tensor, got " + c.desc.str());
    axes = c.ints();
  }
  const bool noop = n.attr_int("noop_with_empty_axes", 0) != 0, keepdims = n.attr_int("keepdims", 1) != 0;
  ReduceAxes r;
  r.reduced.assign(x.rank(), axes.empty() && !noop);
  for (int64_t a : axes) {
    const size_t ax = normalize_axis(a, x.rank(), "axes entry");
    if (r.reduced[ax]) n.invalid("axes repeat axis " + std::to_string(a));
    r.reduced[ax] = true;
  }
  for (size_t i = 0; i < x.rank(); ++i) {
    if (!r.reduced[i]) r.out_shape.push_back(x.shape[i]);
    else if (keepdims) r.out_shape.push_back(1);
  }
  return r;
}

template <Kind K>
std::vector<TensorDesc> infer_reduce(const NodeSpec& n) {
  if (K == Kind::log_sum_exp && n.in(0).dtype != DType::f32 && n.in(0).dtype != DType::f64)
    n.unsupported(std::string("ReduceLogSumExp of ") + dtype_name(n.in(0).dtype) +
                  " (float32 and float64: opset 28 removed the integer types, onnxruntime's integer result counts "
                  "the maxima)");
  if (K == Kind::max || K == Kind::min)
    n.require_types({0}, {DType::f32, DType::f64, DType::i32, DType::i64, DType::u32, DType::u64, DType::i8,
                          DType::u8, DType::boolean});
  else
    n.require_types({0}, {DType::f32, DType::f64, DType::i32, DType::i64, DType::u32, DType::u64});
  return one(n.in(0).dtype, reduce_axes(n).out_shape);
}

template <Kind K>
std::unique_ptr<Step> make_reduce(const NodeSpec& n, const std::vector<TensorDesc>&, SharedLayers&) {
  const ReducePlan p = plan_reduce(n.in(0).shape, reduce_axes(n).reduced);
  auto make = [&](auto tag) { return reduce_step<K, typename decltype(tag)::type>(p); };
  const DType t = n.in(0).dtype;
  if constexpr (K == Kind::max || K == Kind::min)
    return dispatch_types<float, double, int32_t, int64_t, uint32_t, uint64_t, int8_t, uint8_t, bool>(t, make);
  else if constexpr (K == Kind::log_sum_exp)
    return dispatch_types<float, double>(t, make);
  else
    return dispatch_types<float, double, int32_t, int64_t, uint32_t, uint64_t>(t, make);
}

// ---- ArgMax / ArgMin

// Whether v replaces the best so far (NaN wins, the first or with Last the last).
template <bool Max, bool Last, typename T>
inline bool better(T v, T best) {
  if constexpr (Last) return (Max ? v >= best : v <= best) || is_nan(v);
  else return (Max ? v > best : v < best) || (is_nan(v) && !is_nan(best));
}

template <bool Max, bool Last, typename T>
void arg_run(const AxisSplit& s, const T* x, int64_t* y) {
  if (s.n == 0) return;  // infer refused an empty axis unless the output is empty
  for_axis_tiles(s, [&](size_t o, size_t j0, size_t j1) {
    const T* xo = x + o * s.n * s.inner;
    int64_t* yo = y + o * s.inner;
    if (s.inner == 1) {
      T best = xo[0];
      int64_t at = 0;
      for (size_t i = 1; i < s.n; ++i)
        if (better<Max, Last>(xo[i], best)) {
          best = xo[i];
          at = int64_t(i);
        }
      yo[0] = at;
      return;
    }
    const size_t len = j1 - j0;
    T best[kTile];
    int64_t at[kTile];
    for (size_t j = 0; j < len; ++j) {
      best[j] = xo[j0 + j];
      at[j] = 0;
    }
    for (size_t i = 1; i < s.n; ++i) {
      const T* r = xo + i * s.inner + j0;
      for (size_t j = 0; j < len; ++j) {
        const bool b = better<Max, Last>(r[j], best[j]);
        best[j] = b ? r[j] : best[j];
        at[j] = b ? int64_t(i) : at[j];
      }
    }
    for (size_t j = 0; j < len; ++j) yo[j0 + j] = at[j];
  });
}

std::vector<TensorDesc> infer_arg(const NodeSpec& n) {
  n.require_types({0}, {DType::f32, DType::f64, DType::i8, DType::u8, DType::i16, DType::u16, DType::i32, DType::u32,
                        DType::i64, DType::u64});
  const TensorDesc& x = n.in(0);
  const size_t axis = normalize_axis(n.attr_int("axis", 0), x.rank(), "axis");
  std::vector<int64_t> shape = x.shape;
  if (n.attr_int("keepdims", 1) != 0) shape[axis] = 1;
  else shape.erase(shape.begin() + std::ptrdiff_t(axis));
  TensorDesc out{DType::i64, shape};
  if (x.shape[axis] == 0 && out.elements() != 0)
    n.invalid("cannot take the index of an extreme over an empty axis of " + x.str());
  return {out};
}

template <bool Max>
std::unique_ptr<Step> make_arg(const NodeSpec& n, const std::vector<TensorDesc>&, SharedLayers&) {
  const TensorDesc& x = n.in(0);
  const AxisSplit s = split_at_axis(x.shape, normalize_axis(n.attr_int("axis", 0), x.rank(), "axis"));
  const bool last = n.attr_int("select_last_index", 0) != 0;
  return dispatch_types<float, double, int8_t, uint8_t, int16_t, uint16_t, int32_t, uint32_t, int64_t, uint64_t>(
      x.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        return fn_step([s, last](const StepData& d) {
          if (last) arg_run<Max, true>(s, d.in<T>(0), d.out<int64_t>(0));
          else arg_run<Max, false>(s, d.in<T>(0), d.out<int64_t>(0));
        });
      });
}

}  // namespace

void register_graph_ops_reduce() {
  register_op("ReduceSum", {infer_reduce<Kind::sum>, make_reduce<Kind::sum>});
  register_op("ReduceMean", {infer_reduce<Kind::mean>, make_reduce<Kind::mean>});
  register_op("ReduceProd", {infer_reduce<Kind::prod>, make_reduce<Kind::prod>});
  register_op("ReduceMax", {infer_reduce<Kind::max>, make_reduce<Kind::max>});
  register_op("ReduceMin", {infer_reduce<Kind::min>, make_reduce<Kind::min>});
  register_op("ReduceL1", {infer_reduce<Kind::l1>, make_reduce<Kind::l1>});
  register_op("ReduceL2", {infer_reduce<Kind::l2>, make_reduce<Kind::l2>});
  register_op("ReduceLogSum", {infer_reduce<Kind::log_sum>, make_reduce<Kind::log_sum>});
  register_op("ReduceLogSumExp", {infer_reduce<Kind::log_sum_exp>, make_reduce<Kind::log_sum_exp>});
  register_op("ReduceSumSquare", {infer_reduce<Kind::sum_square>, make_reduce<Kind::sum_square>});
  register_op("ArgMax", {infer_arg, make_arg<true>});
  register_op("ArgMin", {infer_arg, make_arg<false>});
}

}  // namespace nnkern::graph
