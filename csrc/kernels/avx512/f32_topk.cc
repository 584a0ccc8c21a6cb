// AVX-512 top-k for k <= 16 (seed I21, example 7-13): the best 16 (key, index) pairs live sorted in
// two registers; a candidate is compared with all 16 at once (a mask of the form 0...01...1 in lane
// order: the lanes it beats), the beaten tail shifts one lane down by a permute and the candidate is
// blended in at the first beaten lane. A vector filter skips the (vast majority of) elements that do not
// beat the current k-th value: 4 compares and one mask test per 64 elements.
// Order and ties as in kernels/f32_topk.h: keys are order-preserving int32 (NaN = INT32_MAX, -0 = +0),
// a candidate enters only if strictly greater, so earlier (lower-index) equals stay ahead.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/f32_topk.h"

namespace nnkern {
namespace {

int32_t key_of(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  if (v != v) return INT32_MAX;
  if (v == 0.0f) return 0;
  return int32_t(b ^ ((uint32_t(int32_t(b) >> 31)) & 0x7FFFFFFFu));
}

float float_of_key(int32_t key) {  // inverse of key_of (NaN -> 0x7FFFFFFF, 0 -> +0)
  const uint32_t b = uint32_t(key) ^ ((uint32_t(key >> 31)) & 0x7FFFFFFFu);
  float v;
  std::memcpy(&v, &b, 4);
  return v;
}

struct Best16 {
  __m512i keys = _mm512_set1_epi32(INT32_MIN), ids = _mm512_setzero_si512();
  __m512i shift = _mm512_setr_epi32(0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14);
  unsigned last_bit;  // 1 << (k - 1)

  explicit Best16(size_t k) : last_bit(1u << (k - 1)) {}

  // Returns true if inserted.
  bool insert(int32_t key, int32_t index) {
    const __mmask16 beaten = _mm512_cmpgt_epi32_mask(_mm512_set1_epi32(key), keys);
    if (!(beaten & last_bit)) return false;
    const __mmask16 first = __mmask16(beaten & (0u - unsigned(beaten)));
    keys = _mm512_mask_permutexvar_epi32(keys, beaten, shift, keys);
    ids = _mm512_mask_permutexvar_epi32(ids, beaten, shift, ids);
    keys = _mm512_mask_set1_epi32(keys, first, key);
    ids = _mm512_mask_set1_epi32(ids, first, index);
    return true;
  }
  int32_t kth_key(size_t k) const {
    alignas(64) int32_t tmp[16];
    _mm512_store_si512(tmp, keys);
    return tmp[k - 1];
  }
};

void topk16(size_t n, const float* x, size_t k, float* values, int64_t* indices) {
  if (k == 0) return;
  Best16 best(k);
  for (size_t j = 0; j < k; ++j) best.insert(key_of(x[j]), int32_t(j));
  int32_t kth = best.kth_key(k);
  __m512 thr = _mm512_set1_ps(float_of_key(kth));
  bool done = kth == INT32_MAX;  // k NaNs: nothing later can beat them

  // Candidates of a block: x > thr or NaN (NLE_UQ), then the exact key test in insert().
  auto handle = [&](size_t base, __mmask16 m) {
    while (m && !done) {
      const unsigned b = unsigned(__builtin_ctz(m));
      m = __mmask16(m & (m - 1));
      if (best.insert(key_of(x[base + b]), int32_t(base + b))) {
        kth = best.kth_key(k);
        thr = _mm512_set1_ps(float_of_key(kth));
        done = kth == INT32_MAX;
      }
    }
  };
  size_t j = k;
  for (; j + 64 <= n && !done; j += 64) {
    const __mmask16 m0 = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + j), thr, _CMP_NLE_UQ);
    const __mmask16 m1 = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + j + 16), thr, _CMP_NLE_UQ);
    const __mmask16 m2 = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + j + 32), thr, _CMP_NLE_UQ);
    const __mmask16 m3 = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + j + 48), thr, _CMP_NLE_UQ);
    if ((m0 | m1 | m2 | m3) == 0) continue;
    handle(j, m0);
    // thr may have risen: re-test the later blocks against it
    handle(j + 16, _mm512_mask_cmp_ps_mask(m1, _mm512_loadu_ps(x + j + 16), thr, _CMP_NLE_UQ));
    handle(j + 32, _mm512_mask_cmp_ps_mask(m2, _mm512_loadu_ps(x + j + 32), thr, _CMP_NLE_UQ));
    handle(j + 48, _mm512_mask_cmp_ps_mask(m3, _mm512_loadu_ps(x + j + 48), thr, _CMP_NLE_UQ));
  }
  for (; j < n && !done; j += 16) {
    const __mmask16 tail = n - j >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - j)) - 1);
    handle(j, _mm512_mask_cmp_ps_mask(tail, _mm512_maskz_loadu_ps(tail, x + j), thr, _CMP_NLE_UQ));
  }
  alignas(64) int32_t ids[16];
  _mm512_store_si512(ids, best.ids);
  for (size_t i = 0; i < k; ++i) {
    indices[i] = ids[i];
    values[i] = x[ids[i]];
  }
}

}  // namespace

const F32TopkKernel f32_topk_16__avx512 = {"f32_topk_16__avx512", 16, topk16};

}  // namespace nnkern
