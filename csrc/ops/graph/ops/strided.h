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
