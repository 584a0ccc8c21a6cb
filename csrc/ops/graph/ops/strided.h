// Copies of the data-movement ops, by element size (every element type moves as 1-, 2-, 4- or 8-byte words):
// an output walked in order while the input is read through strides (Slice, Expand, Tile, Transpose,
// DepthToSpace, SpaceToDepth), rows copied between two row strides (Concat, Split), and two rows interleaved
// (ChannelShuffle, a 2-row Transpose). Baseline header.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace nnkern::graph {

// y[2q] = a[q], y[2q + 1] = b[q] for q < n. Bytes: 8 and then 4 pairs at a time through generic vectors (SSE2's
// punpcklbw, NEON's zip1), since a ShuffleNet row of 12 or 24 pairs is too short for the compiler's own vector
// loop over bytes (docs/performance.md: "ONNX: ShuffleNet's split and shuffle"). Wider elements: the plain loop.
template <typename T>
inline void interleave(const T* a, const T* b, T* y, size_t n) {
  size_t q = 0;
  if constexpr (sizeof(T) == 1) {
    typedef uint8_t V4 __attribute__((vector_size(4)));
    typedef uint8_t V8 __attribute__((vector_size(8)));
    typedef uint8_t V16 __attribute__((vector_size(16)));
    for (; q + 8 <= n; q += 8) {
      V8 va, vb;
      std::memcpy(&va, a + q, 8);
      std::memcpy(&vb, b + q, 8);
      const V16 z = __builtin_shufflevector(va, vb, 0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
      std::memcpy(y + 2 * q, &z, 16);
    }
    if (q + 4 <= n) {
      V4 va, vb;
      std::memcpy(&va, a + q, 4);
      std::memcpy(&vb, b + q, 4);
      const V8 z = __builtin_shufflevector(va, vb, 0, 4, 1, 5, 2, 6, 3, 7);
      std::memcpy(y + 2 * q, &z, 8);
      q += 4;
    }
  }
  for (; q < n; ++q) {
    y[2 * q] = a[q];
    y[2 * q + 1] = b[q];
  }
}

// Three rows of n words into n triples and back: y[3q + k] = row k's [q] (an image's 3 channel planes into NHWC
// pixels), and rows[k][q] = x[3q + k]. Four triples at a time through generic vectors of 4 words (SSE2's and NEON's
// shuffles): the compiler leaves the plain loops with a stride of 3 scalar. Each direction is written in the form
// of the two tried that ran faster (bench/decisions.md "ONNX: an image's channel planes into pixels").
template <typename T>
inline void interleave3(const T* a, const T* b, const T* c, T* y, size_t n) {
  typedef T V4 __attribute__((vector_size(4 * sizeof(T))));
  size_t q = 0;
  for (; q + 4 <= n; q += 4) {
    V4 va, vb, vc;
    std::memcpy(&va, a + q, sizeof(V4));
    std::memcpy(&vb, b + q, sizeof(V4));
    std::memcpy(&vc, c + q, sizeof(V4));
    const V4 ab0 = __builtin_shufflevector(va, vb, 0, 4, 1, 5);  // a0 b0 a1 b1
    const V4 ab2 = __builtin_shufflevector(va, vb, 2, 6, 3, 7);  // a2 b2 a3 b3
    const V4 bc1 = __builtin_shufflevector(ab0, vc, 3, 5, 3, 5);  // b1 c1 b1 c1
    const V4 y0 = __builtin_shufflevector(ab0, vc, 0, 1, 4, 2);   // a0 b0 c0 a1
    const V4 y1 = __builtin_shufflevector(bc1, ab2, 0, 1, 4, 5);  // b1 c1 a2 b2
    const V4 y2 = __builtin_shufflevector(vc, ab2, 2, 6, 7, 3);   // c2 a3 b3 c3
    std::memcpy(y + 3 * q, &y0, sizeof(V4));
    std::memcpy(y + 3 * q + 4, &y1, sizeof(V4));
    std::memcpy(y + 3 * q + 8, &y2, sizeof(V4));
  }
  for (; q < n; ++q) {
    y[3 * q] = a[q];
    y[3 * q + 1] = b[q];
    y[3 * q + 2] = c[q];
  }
}

template <typename T>
inline void deinterleave3(const T* x, T* a, T* b, T* c, size_t n) {
  typedef T V4 __attribute__((vector_size(4 * sizeof(T))));
  typedef T V8 __attribute__((vector_size(8 * sizeof(T))));
  size_t q = 0;
  for (; q + 4 <= n; q += 4) {
    V8 v01;  // a0 b0 c0 a1 b1 c1 a2 b2
    V4 v2;   // c2 a3 b3 c3
    std::memcpy(&v01, x + 3 * q, sizeof(V8));
    std::memcpy(&v2, x + 3 * q + 8, sizeof(V4));
    const V8 v22 = __builtin_shufflevector(v2, v2, 0, 1, 2, 3, 0, 1, 2, 3);
    const V4 va = __builtin_shufflevector(v01, v22, 0, 3, 6, 9);
    const V4 vb = __builtin_shufflevector(v01, v22, 1, 4, 7, 10);
    const V4 vc = __builtin_shufflevector(v01, v22, 2, 5, 8, 11);
    std::memcpy(a + q, &va, sizeof(V4));
    std::memcpy(b + q, &vb, sizeof(V4));
    std::memcpy(c + q, &vc, sizeof(V4));
  }
  for (; q < n; ++q) {
    a[q] = x[3 * q];
    b[q] = x[3 * q + 1];
    c[q] = x[3 * q + 2];
  }
}

// Calls f(T{}) with T the unsigned integer of `esize` bytes (1, 2, 4 or 8): loops over elements of any type.
template <typename F>
decltype(auto) with_word(size_t esize, F&& f) {
  switch (esize) {
    case 1: return f(uint8_t{});
    case 2: return f(uint16_t{});
    case 4: return f(uint32_t{});
    default: return f(uint64_t{});
  }
}

// y[i_0, ..., i_k] = x[base + sum_d i_d * stride_d] for every index of `shape` (C order): strides in elements,
// 0 for a broadcast dimension, negative for a reversed one. Built once; run by any number of threads at once.
class StridedCopy {
 public:
  StridedCopy() = default;
  // Dimensions of size 1 are dropped and dimensions that are contiguous in the input merged, so the inner loop
  // runs as long as it can.
  StridedCopy(const std::vector<int64_t>& shape, const std::vector<int64_t>& stride, int64_t base, size_t esize);
  void run(const void* x, void* y) const;
  size_t elements() const { return elements_; }
  // The input is read in order (a plain copy of `elements()` elements from base).
  bool contiguous() const { return shape_.size() == 1 && stride_[0] == 1; }

 private:
  template <typename T>
  void run_t(const T* x, T* y) const;
  std::vector<size_t> shape_;
  std::vector<int64_t> stride_;
  int64_t base_ = 0;
  size_t esize_ = 1, elements_ = 0;
};

// `rows` rows of `row_bytes` bytes: row r from src + r * src_stride to dst + r * dst_stride (bytes), across the
// pool when large.
void copy_rows(const void* src, size_t src_stride, void* dst, size_t dst_stride, size_t rows, size_t row_bytes);

// The input strides of a transpose: element strides of `shape` (C order) taken in `perm` order.
std::vector<int64_t> permuted_strides(const std::vector<int64_t>& shape, const std::vector<int64_t>& perm);

}  // namespace nnkern::graph
