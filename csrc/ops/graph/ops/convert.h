// Scalar conversions and integer arithmetic of the elementwise graph ops, every one defined for every input (no
// undefined behaviour in C++, the same result on every CPU):
// - float -> integer: truncation toward zero where the value fits; NaN and out-of-range values give what x86's
//   conversion instructions give ("integer indefinite", INT_MIN, converted through int32 / int64 the way compilers
//   do for the narrower and unsigned types), which is what onnxruntime's x86 builds return. ONNX leaves these
//   cases undefined.
// - integer -> narrower integer: the low bits (two's complement), as ONNX's Cast specifies.
// - +, -, * and negation of signed integers wrap (two's complement) instead of overflowing.
// - float16 <-> float32 / float64: exact widening, narrowing rounded to nearest even.
// Baseline header.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace nnkern::graph {

// float16's storage: its bits.
struct Half {
  uint16_t bits;
};

// std::nearbyint (ties to even, the default rounding mode) for |v| < 2^22, as two additions the compiler
// vectorizes: on baseline x86-64 (SSE2, no round instruction) std::nearbyint is a library call per element.
inline float rint_small(float v) { return (v + 12582912.0f) - 12582912.0f; }

// The unsigned type integer arithmetic on T wraps in (at least unsigned int, so nothing promotes to int).
template <typename T>
using wrap_t = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <typename T>
inline T wrap_add(T a, T b) { return T(wrap_t<T>(a) + wrap_t<T>(b)); }
template <typename T>
inline T wrap_sub(T a, T b) { return T(wrap_t<T>(a) - wrap_t<T>(b)); }
template <typename T>
inline T wrap_mul(T a, T b) { return T(wrap_t<T>(a) * wrap_t<T>(b)); }
template <typename T>
inline T wrap_neg(T a) { return T(wrap_t<T>(0) - wrap_t<T>(a)); }

// Truncation toward zero into int32 / int64, INT_MIN where the value does not fit or is NaN.
template <typename F>
inline int32_t trunc_i32(F x) {
  return x > F(-2147483649.0) && x < F(2147483648.0) ? int32_t(x) : std::numeric_limits<int32_t>::min();
}
template <typename F>
inline int64_t trunc_i64(F x) {
  return x > F(-9223372036854775809.0) && x < F(9223372036854775808.0) ? int64_t(x)
                                                                          : std::numeric_limits<int64_t>::min();
}

// A float or double converted to an integer type or bool (see the top of the file).
template <typename To, typename F>
inline To float_to(F x) {
  static_assert(std::is_floating_point_v<F>);
  if constexpr (std::is_same_v<To, bool>) {
    return x != F(0);
  } else if constexpr (std::is_floating_point_v<To>) {
    return To(x);
  } else if constexpr (sizeof(To) < 4 || std::is_same_v<To, int32_t>) {
    return To(trunc_i32(x));  // the narrower types keep int32's low bits
  } else if constexpr (std::is_same_v<To, int64_t>) {
    return trunc_i64(x);
  } else if constexpr (std::is_same_v<To, uint32_t>) {
    constexpr F two31 = F(2147483648.0);
    return x >= two31 ? uint32_t(trunc_i32(x - two31)) ^ 0x80000000u : uint32_t(trunc_i32(x));
  } else {
    static_assert(std::is_same_v<To, uint64_t>);
    constexpr F two63 = F(9223372036854775808.0);
    return x >= two63 ? uint64_t(trunc_i64(x - two63)) ^ (uint64_t(1) << 63) : uint64_t(trunc_i64(x));
  }
}

inline float half_to_float(Half h) {
  const uint32_t sign = uint32_t(h.bits & 0x8000u) << 16, exp = (h.bits >> 10) & 0x1fu, man = h.bits & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {  // zero or subnormal: man * 2^-24, exact in float32
    const float v = float(man) * 5.9604644775390625e-08f;
    std::memcpy(&bits, &v, 4);
  } else if (exp == 31) {
    bits = 0x7f800000u | (man << 13);  // infinity, or NaN keeping its payload
  } else {
    bits = ((exp + 112) << 23) | (man << 13);
  }
  bits |= sign;
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

// Rounded to nearest even straight from F (float or double: no double rounding through float32).
template <typename F>
inline Half float_to_half(F x) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const F a = std::fabs(x);
  if (a != a) return Half{uint16_t(sign | 0x7e00)};
  if (a >= F(65520.0)) return Half{uint16_t(sign | 0x7c00)};  // 65520 is halfway past the largest, 65504
  if (a < F(6.103515625e-05)) {                                 // below 2^-14: a multiple of 2^-24
    const F m = std::nearbyint(a * F(16777216.0));              // 1024 carries into the smallest normal
    return Half{uint16_t(sign | uint16_t(m))};
  }
  int e;
  const F f = std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1)
  const uint32_t m = uint32_t(std::nearbyint(std::ldexp(f, 11)));  // 1024..2048; 2048 carries into the exponent
  return Half{uint16_t(sign | ((uint32_t(e + 14) << 10) + m - 1024))};
}

// Any supported element type converted to any other, as ONNX's Cast (and onnxruntime) does.
template <typename To, typename From>
inline To convert(From x) {
  if constexpr (std::is_same_v<From, Half>) {
    return convert<To>(half_to_float(x));
  } else if constexpr (std::is_same_v<To, Half>) {
    if constexpr (std::is_floating_point_v<From>) return float_to_half(x);
    else return float_to_half(double(x));  // exact for every integer that does not round to infinity
  } else if constexpr (std::is_same_v<From, bool>) {
    return To(x ? 1 : 0);
  } else if constexpr (std::is_floating_point_v<From>) {
    return float_to<To>(x);
  } else if constexpr (std::is_same_v<To, bool>) {
    return x != 0;
  } else {
    return To(x);  // integer -> integer: the low bits; integer -> float: rounded to nearest
  }
}

}  // namespace nnkern::graph
