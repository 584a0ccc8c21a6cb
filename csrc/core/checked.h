// Checked size arithmetic: every element count, byte count and offset computed from dimensions a caller gave
// (array shapes, strides, paddings, dilations, batch sizes) goes through these, so that a product or sum that
// would wrap 64 bits throws instead of sizing a buffer too small. std::length_error is a ValueError in Python.
// Baseline header.
#pragma once
#include <cstddef>
#include <stdexcept>

namespace nnkern {

[[noreturn]] inline void throw_size_overflow() {
  throw std::length_error("the sizes of this call overflow 64 bits (a dimension, stride, padding or count is too large)");
}

constexpr size_t checked_mul(size_t a) { return a; }
template <typename... Rest>
size_t checked_mul(size_t a, size_t b, Rest... rest) {
  size_t p;
  if (__builtin_mul_overflow(a, b, &p)) throw_size_overflow();
  return checked_mul(p, size_t(rest)...);
}

constexpr size_t checked_add(size_t a) { return a; }
template <typename... Rest>
size_t checked_add(size_t a, size_t b, Rest... rest) {
  size_t s;
  if (__builtin_add_overflow(a, b, &s)) throw_size_overflow();
  return checked_add(s, size_t(rest)...);
}

// n rounded up to a multiple of `to` (> 0).
inline size_t checked_round_up(size_t n, size_t to) { return checked_add(n, to - 1) / to * to; }

// ceil(n / d), d > 0, without forming n + d - 1.
constexpr size_t ceil_div(size_t n, size_t d) { return n / d + (n % d != 0); }

}  // namespace nnkern
