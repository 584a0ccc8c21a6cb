// The byte table lookup of nnkern.Lookup (ops/graph/ops/lookup.cc): y[i] = table[x[i]] for a table of 256 bytes,
// x and y bytes (y may be x: in place). Baseline header: no intrinsics; static, so each kernel file compiles its
// own copy.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace nnkern {

using LookupFn = void (*)(const uint8_t* table, const uint8_t* x, uint8_t* y, size_t n);

// Eight entries per 64-bit load and store: the loads of the table then need not wait for the stores before them
// (a byte store may alias the table for the compiler), and a store per element becomes one per eight.
static inline void lookup_loop(const uint8_t* t, const uint8_t* x, uint8_t* y, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v, r = 0;
    std::memcpy(&v, x + i, 8);
    for (int k = 0; k < 8; ++k) r |= uint64_t(t[(v >> (8 * k)) & 255]) << (8 * k);
    std::memcpy(y + i, &r, 8);
  }
  for (; i < n; ++i) y[i] = t[x[i]];
}

}  // namespace nnkern
