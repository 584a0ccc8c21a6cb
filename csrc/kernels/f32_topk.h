// Top-k of one float32 row (seed I21). Baseline header: no intrinsics.
//
//   values[0..k) and indices[0..k) = the k largest elements of x[0..n) (k <= n), in descending order.
//   Order: NaN (either sign) > +inf > ... > -inf; -0 == +0; equal elements rank by ascending index
//   (a stable descending sort). values[i] = x[indices[i]] bit for bit (NaN payload, sign of zero kept).
#pragma once
#include <cstddef>
#include <cstdint>

namespace nnkern {

using F32TopkUkernel = void (*)(size_t n, const float* x, size_t k, float* values, int64_t* indices);

struct F32TopkKernel {
  const char* name;
  size_t max_k;  // the kernel handles k <= max_k (and n < 2^31); the general path takes the rest
  F32TopkUkernel run;
};

// General path, any k and n < 2^32: a min-heap of the best k (key, index) pairs behind a scalar
// threshold test, then a sort of the k.
extern const F32TopkKernel f32_topk__scalar;
// AVX-512: the best 16 keys sorted in one register, insertion by compare + shift-permute + blend (I21),
// behind a 64-element vector threshold filter. k <= 16.
extern const F32TopkKernel f32_topk_16__avx512;

}  // namespace nnkern
