// Copies of the data-movement ops, by element size (every element type moves as 1-, 2-, 4- or 8-byte words):
// an output walked in order while the input is read through strides (Slice, Expand, Tile, Transpose,
// DepthToSpace, SpaceToDepth), and rows copied between two row strides (Concat, Split). Baseline header.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace nnkern::graph {

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
