// Arithmetic of two inputs with numpy broadcasting: Add, Sub, Mul, Div, Mod (every numeric type), Pow (float32,
// float64, int32, int64 bases; any numeric exponent), BitShift (integers).
// Integers: +, -, * wrap; Div truncates toward zero (as C++ and onnxruntime), INT_MIN / -1 wraps to INT_MIN; a
// zero divisor of Div or Mod raises ValueError during the run, as onnxruntime fails the run ("Integer division by
// zero"), checked before anything is written. Mod with fmod 0 takes the divisor's sign (numpy's %), with fmod 1
// the dividend's (C's fmod / %); floats with fmod 0 follow opset 28 (numpy's np.mod, signed zeros included).
// Pow: float32 ** float32 in float32 (powf); every other float case in float64, rounded to the output type
// (integer outputs converted as Cast does); integer ** integer exact, wrapping on overflow; a negative integer
// exponent gives the truncated quotient (0 unless the base is +-1; a zero base gives INT_MIN, as onnxruntime's
// conversion of infinity). A one-element exponent of 2 or 3 multiplies (x * x, x * x * x), as onnxruntime does.
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "ops/graph/ops/common.h"
#include "ops/graph/ops/elementwise.h"

namespace nnkern::graph {

namespace {

void no_legacy_broadcast(const NodeSpec& n) {
  if (n.has("axis"))
    n.unsupported("the axis attribute (opset < 7 broadcasting) is not supported: re-export at opset 7 or later");
}

std::vector<TensorDesc> infer_arith(const NodeSpec& n) {
  require_types(n, {0, 1}, NumericTypes{});
  no_legacy_broadcast(n);
  return one(n.in(0).dtype, broadcast_inputs(n, 0, 2));
}

template <typename T> struct AddOp {
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) return wrap_add(a, b);
    else return a + b;
  }
};
template <typename T> struct SubOp {
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) return wrap_sub(a, b);
    else return a - b;
  }
};
template <typename T> struct MulOp {
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) return wrap_mul(a, b);
    else return a * b;
  }
};

template <template <typename> class Op>
std::unique_ptr<Step> make_arith(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers&) {
  return visit_dtype(out[0].dtype, NumericTypes{}, [&](auto t) {
    using T = typename decltype(t)::type;
    return binary_step<T, T, T>(n, out[0], Op<T>{});
  });
}

// ---- Div and Mod: integer divisors are checked for zero before the step writes anything.

template <typename T, typename F>
std::unique_ptr<Step> division_step(const NodeSpec& n, const TensorDesc& out, F f, const char* what) {
  if constexpr (std::is_floating_point_v<T>) {
    return binary_step<T, T, T>(n, out, f);
  } else {
    const Broadcast bc = plan_broadcast({n.in(0).shape, n.in(1).shape}, out.shape);
    const size_t divisors = n.in(1).elements();
    const int over = n.in(0).shape == out.shape ? 0 : n.in(1).shape == out.shape ? 1 : -1;
    const std::string error = n.where() + ": integer " + what + " by zero";
    return in_place_step(
        [bc, f, divisors, error](const StepData& d) {
          const T* b = d.in<T>(1);
          bool zero = false;
          for (size_t i = 0; i < divisors; ++i) zero |= b[i] == T(0);
          if (zero && bc.total) throw std::domain_error(error);
          broadcast2(bc, d.in<T>(0), b, d.out<T>(0), f);
        },
        over);
  }
}

template <typename T>
struct DivOp {
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) return a / b;
    else if constexpr (std::is_signed_v<T>) return b == T(-1) ? wrap_neg(a) : T(a / b);
    else return T(a / b);
  }
};

std::unique_ptr<Step> make_div(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers&) {
  return visit_dtype(out[0].dtype, NumericTypes{}, [&](auto t) {
    using T = typename decltype(t)::type;
    return division_step<T>(n, out[0], DivOp<T>{}, "division");
  });
}

template <typename T>
struct TruncModOp {  // the sign of the dividend
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) return std::fmod(a, b);
    else if constexpr (std::is_signed_v<T>) return b == T(-1) ? T(0) : T(a % b);
    else return T(a % b);
  }
};

template <typename T>
struct FloorModOp {  // the sign of the divisor
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      T r = std::fmod(a, b);
      if (r != T(0)) return (r < T(0)) != (b < T(0)) ? r + b : r;
      return std::copysign(T(0), b);
    } else if constexpr (std::is_signed_v<T>) {
      if (b == T(-1)) return T(0);
      const T r = T(a % b);
      return r != T(0) && ((r < T(0)) != (b < T(0))) ? T(r + b) : r;
    } else {
      return T(a % b);
    }
  }
};

std::vector<TensorDesc> infer_mod(const NodeSpec& n) {
  const int64_t fmod = n.attr_int("fmod", 0);
  if (fmod != 0 && fmod != 1) n.invalid("fmod must be 0 or 1, is " + std::to_string(fmod));
  return infer_arith(n);
}

std::unique_ptr<Step> make_mod(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers&) {
  const bool trunc = n.attr_int("fmod", 0) == 1;
  return visit_dtype(out[0].dtype, NumericTypes{}, [&](auto t) {
    using T = typename decltype(t)::type;
    return trunc ? division_step<T>(n, out[0], TruncModOp<T>{}, "modulo")
                 : division_step<T>(n, out[0], FloorModOp<T>{}, "modulo");
  });
}

// ---- Pow

using PowBaseTypes = TypeList<float, double, int32_t, int64_t>;

template <typename T, typename E>
T int_pow(T x, E y) {
  if constexpr (std::is_signed_v<E>) {
    if (y < E(0)) {
      if (x == T(1)) return T(1);
      if (x == T(-1)) return (y & E(1)) ? T(-1) : T(1);
      return x == T(0) ? std::numeric_limits<T>::min() : T(0);
    }
  }
  T r = T(1);
  for (;;) {  // square and multiply, wrapping
    if (y & E(1)) r = wrap_mul(r, x);
    y = E(y >> 1);
    if (!y) return r;
    x = wrap_mul(x, x);
  }
}

template <typename T, typename E>
struct PowOp {
  T operator()(T x, E y) const {
    if constexpr (std::is_same_v<T, float> && std::is_same_v<E, float>) return std::pow(x, y);
    else if constexpr (std::is_integral_v<T> && std::is_integral_v<E>) return int_pow(x, y);
    else return convert<T>(std::pow(double(x), double(y)));
  }
};

template <typename T>
T mul_n(T x, int times) {  // x * x or x * x * x, integers wrapping
  if constexpr (std::is_integral_v<T>) return times == 2 ? wrap_mul(x, x) : wrap_mul(wrap_mul(x, x), x);
  else return times == 2 ? x * x : x * x * x;
}

std::vector<TensorDesc> infer_pow(const NodeSpec& n) {
  require_types(n, {0}, PowBaseTypes{});
  require_types(n, {1}, NumericTypes{});
  no_legacy_broadcast(n);
  return one(n.in(0).dtype, broadcast_inputs(n, 0, 2, false));
}

std::unique_ptr<Step> make_pow(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers&) {
  return visit_dtype(n.in(0).dtype, PowBaseTypes{}, [&](auto tb) {
    using T = typename decltype(tb)::type;
    return visit_dtype(n.in(1).dtype, NumericTypes{}, [&](auto te) -> std::unique_ptr<Step> {
      using E = typename decltype(te)::type;
      if (n.in(1).elements() != 1 || n.in(0).shape != out[0].shape) return binary_step<T, E, T>(n, out[0], PowOp<T, E>{});
      // One exponent (known only while running when it is a graph input): x * x and x * x * x for 2 and 3.
      const size_t count = out[0].elements();
      return in_place_step(
          [count](const StepData& d) {
            const E y = *d.in<E>(1);
            const T* x = d.in<T>(0);
            if (y == E(2) || y == E(3)) {
              const int times = y == E(2) ? 2 : 3;
              map_elements(x, d.out<T>(0), count, [times](T v) { return mul_n(v, times); });
            } else {
              map_elements(x, d.out<T>(0), count, [y](T v) { return PowOp<T, E>{}(v, y); });
            }
          },
          0);
    });
  });
}

// ---- BitShift

std::vector<TensorDesc> infer_bitshift(const NodeSpec& n) {
  require_types(n, {0, 1}, IntTypes{});
  const std::string dir = n.attr_string("direction", "");
  if (dir != "LEFT" && dir != "RIGHT") n.invalid("direction must be \"LEFT\" or \"RIGHT\", not \"" + dir + "\"");
  return one(n.in(0).dtype, broadcast_inputs(n, 0, 2));
}

// Shifts by a negative amount or by the width or more give what the sign fill alone gives (opset 28).
template <typename T>
bool shift_out_of_range(T y) {
  if constexpr (std::is_signed_v<T>) {
    if (y < T(0)) return true;
  }
  return uint64_t(y) >= sizeof(T) * 8;
}

std::unique_ptr<Step> make_bitshift(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers&) {
  const bool left = n.attr_string("direction", "") == "LEFT";
  return visit_dtype(out[0].dtype, IntTypes{}, [&](auto t) {
    using T = typename decltype(t)::type;
    if (left)
      return binary_step<T, T, T>(n, out[0], [](T x, T y) {
        return shift_out_of_range(y) ? T(0) : T(wrap_t<T>(x) << unsigned(y));
      });
    return binary_step<T, T, T>(n, out[0], [](T x, T y) {
      if (!shift_out_of_range(y)) return T(x >> unsigned(y));
      if constexpr (std::is_signed_v<T>) return x < T(0) ? T(-1) : T(0);
      else return T(0);
    });
  });
}

}  // namespace

void register_graph_ops_binary() {
  register_op("Add", {infer_arith, make_arith<AddOp>});
  register_op("Sub", {infer_arith, make_arith<SubOp>});
  register_op("Mul", {infer_arith, make_arith<MulOp>});
  register_op("Div", {infer_arith, make_div});
  register_op("Mod", {infer_mod, make_mod});
  register_op("Pow", {infer_pow, make_pow});
  register_op("BitShift", {infer_bitshift, make_bitshift});
}

}  // namespace nnkern::graph
