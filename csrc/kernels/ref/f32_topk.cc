// General top-k (any k): the scalar reference and the path for k beyond the SIMD kernels' register.
#include <algorithm>
#include <cstring>
#include <functional>
#include <vector>

#include "kernels/f32_topk.h"

namespace nnkern {
namespace {

// Order-preserving signed key: NaN -> INT32_MAX, -0 -> 0 (== +0), otherwise sign-magnitude -> two's complement.
uint32_t biased_key(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  int32_t key;
  if (v != v) key = INT32_MAX;
  else if (v == 0.0f) key = 0;
  else key = int32_t(b ^ ((uint32_t(int32_t(b) >> 31)) & 0x7FFFFFFFu));
  return uint32_t(key) ^ 0x80000000u;  // unsigned order == signed key order
}

void topk_general(size_t n, const float* x, size_t k, float* values, int64_t* indices) {
  if (k == 0) return;
  thread_local std::vector<uint64_t> items;
  items.resize(n);
  // Descending on (key, ~index): equal keys put the lower index first.
  for (size_t i = 0; i < n; ++i) items[i] = (uint64_t(biased_key(x[i])) << 32) | uint64_t(0xFFFFFFFFu - uint32_t(i));
  if (k < n) std::nth_element(items.begin(), items.begin() + (k - 1), items.end(), std::greater<uint64_t>());
  std::sort(items.begin(), items.begin() + k, std::greater<uint64_t>());
  for (size_t i = 0; i < k; ++i) {
    const size_t j = 0xFFFFFFFFu - uint32_t(items[i]);
    indices[i] = int64_t(j);
    values[i] = x[j];
  }
}

}  // namespace

const F32TopkKernel f32_topk_ref = {"f32_topk__scalar", size_t(-1), topk_general};

}  // namespace nnkern
