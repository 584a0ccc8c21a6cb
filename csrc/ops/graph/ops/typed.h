// A graph op's step for the element type of a tensor: dispatch_types<float, double, ...>(dtype, f) calls
// f(Tag<T>{}) for the listed T whose DType is `dtype`. Infer has checked the type, so make() never misses.
// (Named apart from the elementwise helpers' dtype_of / visit_dtype on their branch, which do the same: one can
// replace the other once both are merged.)
// Baseline header.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "ops/graph/tensor.h"

namespace nnkern::graph {

template <typename T>
struct Tag {
  using type = T;
};

template <typename T>
constexpr DType dtype_for() {
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
  else static_assert(sizeof(T) == 0, "no DType for this type");
}

template <typename T0, typename... Ts, typename F>
auto dispatch_types(DType t, F&& f) -> decltype(f(Tag<T0>{})) {
  if (t == dtype_for<T0>()) return f(Tag<T0>{});
  if constexpr (sizeof...(Ts) > 0) {
    return dispatch_types<Ts...>(t, static_cast<F&&>(f));
  } else {
    throw std::logic_error(std::string("graph op instantiated for an unchecked element type ") + dtype_name(t));
  }
}

}  // namespace nnkern::graph
