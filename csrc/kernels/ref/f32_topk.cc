// General top-k (any k): the scalar reference and the path for k beyond the SIMD kernels' register.
#include <algorithm>
#include <cmath>
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

float float_of_biased(uint32_t bk) {  // inverse of biased_key (NaN -> 0x7FFFFFFF, zero -> +0)
  const int32_t key = int32_t(bk ^ 0x80000000u);
  const uint32_t b = uint32_t(key) ^ (uint32_t(key >> 31) & 0x7FFFFFFFu);
  float v;
  std::memcpy(&v, &b, 4);
  return v;
}

// Items sort descending on (key, ~index): equal keys put the lower index first.
uint64_t item(const float* x, size_t i) { return (uint64_t(biased_key(x[i])) << 32) | uint64_t(0xFFFFFFFFu - uint32_t(i)); }

// A min-heap of the best k items so far; an element is looked at only if it beats the k-th value
// (x > thr or NaN), so for random data the scan is one predictable compare per element.
void topk_general(size_t n, const float* x, size_t k, float* values, int64_t* indices) {
  if (k == 0) return;
  thread_local std::vector<uint64_t> heap;
  heap.resize(k);
  for (size_t i = 0; i < k; ++i) heap[i] = item(x, i);
  std::make_heap(heap.begin(), heap.end(), std::greater<uint64_t>());
  float thr = float_of_biased(uint32_t(heap.front() >> 32));
  bool done = std::isnan(thr);  // k NaNs: nothing later beats them
  for (size_t i = k; i < n && !done; ++i) {
    const float v = x[i];
    if (!(v > thr) && v == v) continue;
    const uint64_t it = item(x, i);
    if (it <= heap.front()) continue;
    std::pop_heap(heap.begin(), heap.end(), std::greater<uint64_t>());
    heap.back() = it;
    std::push_heap(heap.begin(), heap.end(), std::greater<uint64_t>());
    thr = float_of_biased(uint32_t(heap.front() >> 32));
    done = std::isnan(thr);
  }
  std::sort(heap.begin(), heap.end(), std::greater<uint64_t>());
  for (size_t i = 0; i < k; ++i) {
    const size_t j = 0xFFFFFFFFu - uint32_t(heap[i]);
    indices[i] = int64_t(j);
    values[i] = x[j];
  }
}

}  // namespace

const F32TopkKernel f32_topk_ref = {"f32_topk__scalar", size_t(-1), topk_general};

}  // namespace nnkern
