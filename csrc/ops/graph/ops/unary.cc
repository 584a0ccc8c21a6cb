// Activations, elementwise over one input: Relu, LeakyRelu, PRelu, Clip, Sigmoid, Tanh, HardSigmoid, HardSwish,
// Gelu, Softplus, Softsign, Elu, Selu, Celu, ThresholdedRelu, Mish. float32 and float64 (Relu, PRelu and Clip also
// integers). float32 Sigmoid and Tanh run nnkern's activation kernels ("accurate": ops/activation/activation.h);
// the others plain loops, with NaN in giving NaN out as onnxruntime does (ThresholdedRelu: 0).
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/activation/activation.h"
#include "ops/activation/pointwise.h"
#include "ops/graph/ops/common.h"
#include "ops/graph/ops/elementwise.h"

namespace nnkern::graph {

namespace {

template <typename T>
inline T softplus(T x) {
  return x > T(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}

// Each op: a functor template over the element type, built from the node (its attributes).
template <typename T>
struct Relu {
  explicit Relu(const NodeSpec&) {}
  T operator()(T x) const { return x < T(0) ? T(0) : x; }
};

template <typename T>
struct LeakyRelu {
  T alpha;
  explicit LeakyRelu(const NodeSpec& n) : alpha(T(n.attr_float("alpha", 0.01f))) {}
  T operator()(T x) const { return leaky_relu(x, alpha); }
};

template <typename T>
struct HardSigmoid {
  T alpha, beta;
  explicit HardSigmoid(const NodeSpec& n) : alpha(T(n.attr_float("alpha", 0.2f))), beta(T(n.attr_float("beta", 0.5f))) {}
  T operator()(T x) const { return hard_sigmoid(x, alpha, beta); }
};

template <typename T>
struct HardSwish {
  explicit HardSwish(const NodeSpec&) {}
  T operator()(T x) const { return hard_swish(x); }
};

template <typename T>
struct Softplus {
  explicit Softplus(const NodeSpec&) {}
  T operator()(T x) const { return softplus(x); }
};

template <typename T>
struct Softsign {  // times the reciprocal, as onnxruntime rounds it
  explicit Softsign(const NodeSpec&) {}
  T operator()(T x) const { return (T(1) / (T(1) + std::fabs(x))) * x; }
};

template <typename T>
struct Elu {
  T alpha;
  explicit Elu(const NodeSpec& n) : alpha(T(n.attr_float("alpha", 1.0f))) {}
  T operator()(T x) const { return x >= T(0) ? x : alpha * std::expm1(x); }
};

template <typename T>
struct Selu {
  T alpha, gamma;
  explicit Selu(const NodeSpec& n)
      : alpha(T(n.attr_float("alpha", 1.67326319217681884765625f))),
        gamma(T(n.attr_float("gamma", 1.05070102214813232421875f))) {}
  T operator()(T x) const { return x > T(0) ? gamma * x : gamma * (alpha * std::exp(x) - alpha); }
};

template <typename T>
struct Celu {
  T alpha;
  explicit Celu(const NodeSpec& n) : alpha(T(n.attr_float("alpha", 1.0f))) {
    if (alpha == T(0)) n.invalid("alpha must not be 0");
  }
  T operator()(T x) const { return x > T(0) ? x : alpha * std::expm1(x / alpha); }
};

template <typename T>
struct ThresholdedRelu {
  T alpha;
  explicit ThresholdedRelu(const NodeSpec& n) : alpha(T(n.attr_float("alpha", 1.0f))) {}
  T operator()(T x) const { return x > alpha ? x : T(0); }
};

template <typename T>
struct Mish {
  explicit Mish(const NodeSpec&) {}
  T operator()(T x) const { return x * std::tanh(softplus(x)); }
};

constexpr double kInvSqrt2 = 0.7071067811865476;  // GELU's 1 / sqrt(2)

template <typename T>
struct Gelu {
  bool tanh_form;
  explicit Gelu(const NodeSpec& n) {
    const std::string a = n.attr_string("approximate", "none");
    if (a != "none" && a != "tanh") n.invalid("approximate must be \"none\" or \"tanh\", not \"" + a + "\"");
    tanh_form = a == "tanh";
  }
  T operator()(T x) const {
    if (tanh_form) {
      const T inner = T(0.7978845608028654) * (x + T(0.044715) * x * x * x);  // sqrt(2 / pi)
      return T(0.5) * x * (T(1) + std::tanh(inner));
    }
    return T(0.5) * x * (T(1) + std::erf(x * T(kInvSqrt2)));
  }
};

template <typename T>
struct Sigmoid {  // float64 only: float32 runs the kernel
  explicit Sigmoid(const NodeSpec&) {}
  T operator()(T x) const { return T(1) / (T(1) + std::exp(-x)); }
};

template <typename T>
struct Tanh {  // float64 only: float32 runs the kernel
  explicit Tanh(const NodeSpec&) {}
  T operator()(T x) const { return std::tanh(x); }
};

using ReluTypes = TypeList<float, double, int8_t, int16_t, int32_t, int64_t>;

template <typename Types>
std::vector<TensorDesc> infer_same(const NodeSpec& n) {
  require_types(n, {0}, Types{});
  return {n.in(0)};
}

template <template <typename> class Op, typename Types>
std::vector<TensorDesc> infer_op(const NodeSpec& n) {
  require_types(n, {0}, Types{});
  visit_dtype(n.in(0).dtype, Types{}, [&](auto t) {  // validates the attributes
    Op<typename decltype(t)::type> op(n);
    (void)op;
    return 0;
  });
  return {n.in(0)};
}

template <template <typename> class Op, typename Types>
std::unique_ptr<Step> make_op(const NodeSpec& n, const std::vector<TensorDesc>&, SharedLayers&) {
  return visit_dtype(n.in(0).dtype, Types{}, [&](auto t) {
    using T = typename decltype(t)::type;
    return map_step<T, T>(n.in(0).elements(), Op<T>(n));
  });
}

template <template <typename> class Op, typename Types = FloatTypes>
OpDef unary_op() {
  return {infer_op<Op, Types>, make_op<Op, Types>};
}

// Sigmoid and Tanh: float32 through nnkern's kernels, float64 a plain loop.
template <void (*Kernel)(ActMethod, size_t, const float*, float*), template <typename> class Op64>
std::unique_ptr<Step> make_kernel_op(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers& layers) {
  if (n.in(0).dtype != DType::f32) return make_op<Op64, TypeList<double>>(n, out, layers);
  const size_t count = n.in(0).elements();
  return in_place_step([count](const StepData& d) { Kernel(ActMethod::accurate, count, d.in<float>(0), d.out<float>(0)); },
                       0, "accurate");
}

// Gelu: float32's exact form (0.5 x (1 + erf(x / sqrt 2))) through the f32_activation kernels' gelu (the erf
// kernel's formula in the same loop), the rest (float64, the tanh form) a plain loop of the Gelu functor.
std::unique_ptr<Step> make_gelu(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers& layers) {
  if (n.in(0).dtype != DType::f32 || Gelu<float>(n).tanh_form) return make_op<Gelu, FloatTypes>(n, out, layers);
  const size_t count = n.in(0).elements();
  return in_place_step(
      [count](const StepData& d) {
        const float* x = d.in<float>(0);
        float* y = d.out<float>(0);
        const F32UnaryUkernel gelu = f32_activation_family().dispatched().gelu;
        for_ranges(count, [&](size_t b, size_t e) { gelu(e - b, x + b, y + b); });
      },
      0, "");
}

// ---- Clip: min and max are optional scalar inputs, read at each run (they may be graph inputs).

std::vector<TensorDesc> infer_clip(const NodeSpec& n) {
  require_types(n, {0}, NumericTypes{});
  const DType t = n.in(0).dtype;
  for (size_t i : {size_t(1), size_t(2)}) {
    if (!n.has_input(i)) continue;
    const DType b = n.in(i).dtype;
    // float32 bounds of a float64 input: the form older opsets' attributes are rewritten into.
    if (b != t && !(t == DType::f64 && b == DType::f32))
      n.invalid(std::string(i == 1 ? "min" : "max") + " is " + dtype_name(b) + ", the input " + dtype_name(t));
    if (n.in(i).elements() != 1) n.invalid(std::string(i == 1 ? "min" : "max") + " must be a scalar, is " + n.in(i).str());
  }
  return {n.in(0)};
}

// How a bound is read: absent (the type's finite extreme), of the input's type, or float32.
enum class Bound { none, same, f32 };

template <typename T>
T read_bound(const StepData& d, size_t i, Bound how, T dflt) {
  if (how == Bound::none) return dflt;
  return how == Bound::f32 ? T(*d.in<float>(i)) : *d.in<T>(i);
}

Bound bound_of(const NodeSpec& n, size_t i) {
  if (!n.has_input(i)) return Bound::none;
  return n.in(i).dtype == n.in(0).dtype ? Bound::same : Bound::f32;
}

std::unique_ptr<Step> make_clip(const NodeSpec& n, const std::vector<TensorDesc>&, SharedLayers&) {
  const size_t count = n.in(0).elements();
  const Bound lo_how = bound_of(n, 1), hi_how = bound_of(n, 2);
  return visit_dtype(n.in(0).dtype, NumericTypes{}, [&](auto t) {
    using T = typename decltype(t)::type;
    // The defaults ONNX specifies (and onnxruntime uses): the type's finite extremes, so that -inf and +inf are
    // clipped to them even with a bound left out.
    constexpr T lowest = std::numeric_limits<T>::lowest(), highest = std::numeric_limits<T>::max();
    return in_place_step(
        [count, lo_how, hi_how](const StepData& d) {
          const T lo = read_bound<T>(d, 1, lo_how, lowest), hi = read_bound<T>(d, 2, hi_how, highest);
          map_elements(d.in<T>(0), d.out<T>(0), count, [lo, hi](T v) { return clamp_keep_nan(v, lo, hi); });
        },
        0);
  });
}

// ---- PRelu: the slope broadcasts to the input's shape (unidirectionally).

using PReluTypes = TypeList<float, double, int32_t, int64_t, uint32_t, uint64_t>;

std::vector<TensorDesc> infer_prelu(const NodeSpec& n) {
  require_types(n, {0}, PReluTypes{});
  if (n.in(1).dtype != n.in(0).dtype)
    n.invalid(std::string("slope is ") + dtype_name(n.in(1).dtype) + ", the input " + dtype_name(n.in(0).dtype));
  std::vector<int64_t> shape;
  try {
    shape = broadcast_shapes(n.in(0).shape, n.in(1).shape);
  } catch (const std::invalid_argument&) {
    shape.clear();
  }
  if (shape != n.in(0).shape) n.invalid("slope " + n.in(1).str() + " does not broadcast to the input " + n.in(0).str());
  return {n.in(0)};
}

std::unique_ptr<Step> make_prelu(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers&) {
  const Broadcast bc = plan_broadcast({n.in(0).shape, n.in(1).shape}, out[0].shape);
  return visit_dtype(n.in(0).dtype, PReluTypes{}, [&](auto t) {
    using T = typename decltype(t)::type;
    return in_place_step(
        [bc](const StepData& d) {
          broadcast2(bc, d.in<T>(0), d.in<T>(1), d.out<T>(0), [](T x, T s) {
            if constexpr (std::is_floating_point_v<T>) return x < T(0) ? s * x : x;
            else return x < T(0) ? wrap_mul(s, x) : x;
          });
        },
        0);
  });
}

}  // namespace

void register_graph_ops_unary() {
  register_op("Relu", unary_op<Relu, ReluTypes>());
  register_op("LeakyRelu", unary_op<LeakyRelu>());
  register_op("PRelu", {infer_prelu, make_prelu});
  register_op("Clip", {infer_clip, make_clip});
  register_op("Sigmoid", {infer_same<FloatTypes>, make_kernel_op<f32_sigmoid, Sigmoid>});
  register_op("Tanh", {infer_same<FloatTypes>, make_kernel_op<f32_tanh, Tanh>});
  register_op("HardSigmoid", unary_op<HardSigmoid>());
  register_op("HardSwish", unary_op<HardSwish>());
  register_op("Gelu", {infer_op<Gelu, FloatTypes>, make_gelu});
  register_op("Softplus", unary_op<Softplus>());
  register_op("Softsign", unary_op<Softsign>());
  register_op("Elu", unary_op<Elu>());
  register_op("Selu", unary_op<Selu>());
  register_op("Celu", unary_op<Celu>());
  register_op("ThresholdedRelu", unary_op<ThresholdedRelu>());
  register_op("Mish", unary_op<Mish>());
}

}  // namespace nnkern::graph
