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

// How many of x[0..16) are <= bound. A count, not an any-of, in its own loop: the form GCC vectorizes
// (cmpleps / fcmge); nested in the scan below, it was unrolled into 16 scalar compares first.
[[gnu::noinline]] int count_not_above(const float* x, float bound) {
  int n = 0;
  for (size_t t = 0; t < 16; ++t) n += x[t] <= bound;
  return n;
}

// Candidates that beat the k-th value so far (x > thr or NaN, then the exact item test) are appended to
// a buffer of 2k + 64; when it is full, nth_element keeps the best k and raises the threshold. Each
// candidate costs O(1) amortized and few mispredicted branches (a heap costs ~2 log2 k of them). Blocks
// of 16 are screened first by a test the compiler vectorizes (baseline SSE2 / NEON), so for random data
// the scan costs a few instructions per 16 elements.
void topk_general(size_t n, const float* x, size_t k, float* values, int64_t* indices) {
  if (k == 0) return;
  thread_local std::vector<uint64_t> best;
  const size_t cap = 2 * k + 64;
  best.resize(cap);
  for (size_t i = 0; i < k; ++i) best[i] = item(x, i);
  size_t count = k;
  uint64_t kth = 0;
  float thr = 0.0f;
  bool done = false;
  auto keep_best_k = [&] {  // best[0..k) = the best k of best[0..count), best[k - 1] the k-th
    std::nth_element(best.begin(), best.begin() + (k - 1), best.begin() + count, std::greater<uint64_t>());
    count = k;
    kth = best[k - 1];
    thr = float_of_biased(uint32_t(kth >> 32));
    done = std::isnan(thr);  // k NaNs: nothing later beats them
  };
  keep_best_k();
  auto consider = [&](size_t i) {
    if (x[i] <= thr) return;  // NaN fails the test and goes on
    const uint64_t it = item(x, i);
    if (it <= kth) return;
    best[count++] = it;
    if (count == cap) keep_best_k();
  };
  size_t i = k;
  for (; i + 16 <= n && !done; i += 16) {
    if (count_not_above(x + i, thr) == 16) continue;
    for (size_t t = 0; t < 16 && !done; ++t) consider(i + t);
  }
  for (; i < n && !done; ++i) consider(i);
  std::partial_sort(best.begin(), best.begin() + k, best.begin() + count, std::greater<uint64_t>());
  for (size_t i = 0; i < k; ++i) {
    const size_t j = 0xFFFFFFFFu - uint32_t(best[i]);
    indices[i] = int64_t(j);
    values[i] = x[j];
  }
}

}  // namespace

const F32TopkKernel f32_topk__scalar = {"f32_topk__scalar", size_t(-1), topk_general};

}  // namespace nnkern
