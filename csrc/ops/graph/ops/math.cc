// Elementwise math of one input: Sqrt, Exp, Log, Erf, Sin, Cos, Reciprocal, Floor, Ceil, Round (float32,
// float64); Abs, Sign (every numeric type); Neg (floats, signed integers); IsNaN, IsInf (floats -> bool); Not
// (bool). Integer Abs and Neg wrap (Abs(INT_MIN) = INT_MIN). Floor, Ceil and Round (half to even) are written
// without library calls, so that they vectorize on the baseline ISA: the exact integer part comes from adding and
// subtracting 2^23 (2^52) in the default rounding mode, below which every float has a fraction.
#include <cmath>
#include <limits>
#include <type_traits>

#include "ops/activation/activation.h"
#include "ops/graph/ops/common.h"
#include "ops/graph/ops/elementwise.h"

namespace nnkern::graph {

namespace {

template <typename T>
inline T round_half_even(T x) {
  constexpr T big = std::is_same_v<T, float> ? T(8388608.0) : T(4503599627370496.0);  // 2^23, 2^52
  const T a = std::fabs(x);
  const T r = (a + big) - big;
  return a < big ? std::copysign(r, x) : x;  // NaN, infinities and large values are integers already
}

template <typename T>
struct Sqrt { T operator()(T x) const { return std::sqrt(x); } };
template <typename T>
struct Exp { T operator()(T x) const { return std::exp(x); } };
template <typename T>
struct Log { T operator()(T x) const { return std::log(x); } };
template <typename T>
struct Erf { T operator()(T x) const { return std::erf(x); } };
template <typename T>
struct Sin { T operator()(T x) const { return std::sin(x); } };
template <typename T>
struct Cos { T operator()(T x) const { return std::cos(x); } };
template <typename T>
struct Reciprocal { T operator()(T x) const { return T(1) / x; } };
template <typename T>
struct Round { T operator()(T x) const { return round_half_even(x); } };
template <typename T>
struct Floor {
  T operator()(T x) const {
    const T r = round_half_even(x);
    return r > x ? r - T(1) : r;
  }
};
template <typename T>
struct Ceil {
  T operator()(T x) const {
    const T r = round_half_even(x);
    return r < x ? r + T(1) : r;
  }
};

template <typename T>
struct Abs {
  T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) return std::fabs(x);
    else if constexpr (std::is_signed_v<T>) return x < T(0) ? wrap_neg(x) : x;
    else return x;
  }
};

template <typename T>
struct Neg {
  T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) return -x;
    else return wrap_neg(x);
  }
};

template <typename T>
struct Sign {
  T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) return x > T(0) ? T(1) : x < T(0) ? T(-1) : x;  // +-0, NaN kept
    else if constexpr (std::is_signed_v<T>) return T((x > T(0)) - (x < T(0)));
    else return T(x > T(0));
  }
};

template <template <typename> class Op, typename Types>
OpDef same_type_op() {
  auto infer = [](const NodeSpec& n) -> std::vector<TensorDesc> {
    require_types(n, {0}, Types{});
    return {n.in(0)};
  };
  auto make = [](const NodeSpec& n, const std::vector<TensorDesc>&, SharedLayers&) {
    return visit_dtype(n.in(0).dtype, Types{}, [&](auto t) {
      using T = typename decltype(t)::type;
      return map_step<T, T>(n.in(0).elements(), Op<T>{});
    });
  };
  return {infer, make};
}

using NegTypes = TypeList<float, double, int8_t, int16_t, int32_t, int64_t>;

// ---- to bool

std::vector<TensorDesc> infer_float_test(const NodeSpec& n) {
  require_types(n, {0}, FloatTypes{});
  return one(DType::boolean, n.in(0).shape);
}

std::unique_ptr<Step> make_isnan(const NodeSpec& n, const std::vector<TensorDesc>&, SharedLayers&) {
  return visit_dtype(n.in(0).dtype, FloatTypes{}, [&](auto t) {
    using T = typename decltype(t)::type;
    return map_step<T, bool>(n.in(0).elements(), [](T x) { return x != x; });
  });
}

std::unique_ptr<Step> make_isinf(const NodeSpec& n, const std::vector<TensorDesc>&, SharedLayers&) {
  const bool neg = n.attr_int("detect_negative", 1) != 0, pos = n.attr_int("detect_positive", 1) != 0;
  return visit_dtype(n.in(0).dtype, FloatTypes{}, [&](auto t) {
    using T = typename decltype(t)::type;
    constexpr T inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
    const T lo = neg ? -inf : nan, hi = pos ? inf : nan;  // NaN equals nothing: that side is not detected
    return map_step<T, bool>(n.in(0).elements(), [lo, hi](T x) { return (x == lo) | (x == hi); });
  });
}

std::vector<TensorDesc> infer_not(const NodeSpec& n) {
  n.require_types({0}, {DType::boolean});
  return {n.in(0)};
}

std::unique_ptr<Step> make_not(const NodeSpec& n, const std::vector<TensorDesc>&, SharedLayers&) {
  return map_step<bool, bool>(n.in(0).elements(), [](bool x) { return !x; });
}

}  // namespace

void register_graph_ops_math() {
  register_op("Sqrt", same_type_op<Sqrt, FloatTypes>());
  register_op("Exp", same_type_op<Exp, FloatTypes>());
  register_op("Log", same_type_op<Log, FloatTypes>());
  // float32 through the erf kernel (kernels/f32_erf.h: at most 2.7 ulp, the same bits on every ISA)
  register_op("Erf", {same_type_op<Erf, FloatTypes>().infer,
                      [](const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers& layers) {
                        if (n.in(0).dtype != DType::f32) return same_type_op<Erf, FloatTypes>().make(n, out, layers);
                        const size_t count = n.in(0).elements();
                        return in_place_step(
                            [count](const StepData& d) { f32_erf(count, d.in<float>(0), d.out<float>(0)); }, 0, "");
                      }});
  register_op("Sin", same_type_op<Sin, FloatTypes>());
  register_op("Cos", same_type_op<Cos, FloatTypes>());
  register_op("Reciprocal", same_type_op<Reciprocal, FloatTypes>());
  register_op("Floor", same_type_op<Floor, FloatTypes>());
  register_op("Ceil", same_type_op<Ceil, FloatTypes>());
  register_op("Round", same_type_op<Round, FloatTypes>());
  register_op("Abs", same_type_op<Abs, NumericTypes>());
  register_op("Neg", same_type_op<Neg, NegTypes>());
  register_op("Sign", same_type_op<Sign, NumericTypes>());
  register_op("IsNaN", {infer_float_test, make_isnan});
  register_op("IsInf", {infer_float_test, make_isinf});
  register_op("Not", {infer_not, make_not});
}

}  // namespace nnkern::graph
