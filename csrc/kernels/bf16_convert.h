// float32 <-> bf16 conversion loops (kernels/bf16.h's element functions: round to nearest even, NaN kept NaN),
// compiled per ISA as plain loops whose vectors the compiler makes under that ISA's flags (the SSE2 baseline has no
// unsigned 32 -> 16-bit pack, and its emulation showed in GEMMs over few output features: bench/decisions.md). Each
// ISA's bf16_convert.cc
// defines its kernel with NNK_BF16_CONVERT_KERNEL. Baseline header: no intrinsics; static, so each kernel file
// compiles its own copy.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/bf16.h"

namespace nnkern {

struct Bf16ConvertKernel {
  const char* name;
  void (*to_bits)(const float* x, uint16_t* y, size_t n);  // y = bf16(x) as bits
  void (*to_values)(const float* x, float* y, size_t n);   // y = bf16(x) as float32 values
  void (*widen)(const uint16_t* x, float* y, size_t n);    // y = the float32 of bits x (exact)
};

static void bf16_to_bits_loop(const float* __restrict x, uint16_t* __restrict y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = f32_to_bf16(x[i]);
}
static void bf16_to_values_loop(const float* __restrict x, float* __restrict y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = f32_round_bf16(x[i]);
}
static void bf16_widen_loop(const uint16_t* __restrict x, float* __restrict y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = bf16_to_f32(x[i]);
}

#define NNK_BF16_CONVERT_KERNEL(sym) \
  const Bf16ConvertKernel sym = {#sym, bf16_to_bits_loop, bf16_to_values_loop, bf16_widen_loop};

}  // namespace nnkern
