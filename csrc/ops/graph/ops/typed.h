// The switch from a tensor's element type to a C++ type: visit_dtype(dtype, TypeList<...>{}, f) (or
// dispatch_types<...>(dtype, f)) calls f(Type<T>{}) for the listed T whose DType is `dtype`, one instantiation of f
// per listed type. Infer has checked the type, so a miss is a logic_error. Baseline header.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "ops/graph/ops/convert.h"
#include "ops/graph/tensor.h"

namespace nnkern::graph {

template <typename T>
struct Type {
  using type = T;
};
template <typename... Ts>
struct TypeList {};

using FloatTypes = TypeList<float, double>;
using SignedTypes = TypeList<int8_t, int16_t, int32_t, int64_t>;
using IntTypes = TypeList<int8_t, uint8_t, int16_t, uint16_t, int32_t, uint32_t, int64_t, uint64_t>;
using NumericTypes = TypeList<float, double, int8_t, uint8_t, int16_t, uint16_t, int32_t, uint32_t, int64_t, uint64_t>;
using AllTypes = TypeList<float, double, int8_t, uint8_t, int16_t, uint16_t, int32_t, uint32_t, int64_t, uint64_t, bool>;

// The element type of each C++ type (bool: one byte holding 0 or 1; float16: Half, its bits).
template <typename T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::f32;
  else if constexpr (std::is_same_v<T, double>) return DType::f64;
  else if constexpr (std::is_same_v<T, int8_t>) return DType::i8;
  else if constexpr (std::is_same_v<T, uint8_t>) return DType::u8;
  else if constexpr (std::is_same_v<T, int16_t>) return DType::i16;
  else if constexpr (std::is_same_v<T, uint16_t>) return DType::u16;
  else if constexpr (std::is_same_v<T, int32_t>) return DType::i32;
  else if constexpr (std::is_same_v<T, uint32_t>) return DType::u32;
  else if constexpr (std::is_same_v<T, int64_t>) return DType::i64;
  else if constexpr (std::is_same_v<T, uint64_t>) return DType::u64;
  else if constexpr (std::is_same_v<T, bool>) return DType::boolean;
  else if constexpr (std::is_same_v<T, Half>) return DType::f16;
  else static_assert(sizeof(T) == 0, "not an element type");
}

template <typename T0, typename... Ts, typename F>
auto visit_dtype(DType t, TypeList<T0, Ts...>, F&& f) -> decltype(f(Type<T0>{})) {
  if (t == dtype_of<T0>()) return f(Type<T0>{});
  if constexpr (sizeof...(Ts) > 0) {
    return visit_dtype(t, TypeList<Ts...>{}, static_cast<F&&>(f));
  } else {
    throw std::logic_error(std::string("graph op instantiated for an unchecked element type ") + dtype_name(t));
  }
}

template <typename... Ts, typename F>
auto dispatch_types(DType t, F&& f) {
  return visit_dtype(t, TypeList<Ts...>{}, static_cast<F&&>(f));
}

}  // namespace nnkern::graph
