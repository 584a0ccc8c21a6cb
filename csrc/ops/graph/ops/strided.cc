#include "ops/graph/ops/strided.h"

#include "core/checked.h"
#include "ops/graph/ops/elementwise.h"

namespace nnkern::graph {

StridedCopy::StridedCopy(const std::vector<int64_t>& shape, const std::vector<int64_t>& stride, int64_t base,
                         size_t esize)
    : base_(base), esize_(esize) {
  elements_ = 1;
  for (int64_t d : shape) elements_ = checked_mul(elements_, size_t(d));
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    if (!shape_.empty() && stride_.back() == stride[i] * shape[i]) {  // contiguous with the previous: merge
      shape_.back() *= size_t(shape[i]);
      stride_.back() = stride[i];
      continue;
    }
    shape_.push_back(size_t(shape[i]));
    stride_.push_back(stride[i]);
  }
  if (shape_.empty()) {
    shape_.push_back(1);
    stride_.push_back(1);
  }
}

namespace {

// A row of `n` runs of K elements (K a compile-time 2, 3 or 4: the loop unrolls): run a from src + a * a_step,
// its elements `step` apart, to dst + a * K.
template <size_t K, typename T>
void copy_runs(const T* src, T* dst, size_t n, int64_t a_step, int64_t step) {
  for (size_t a = 0; a < n; ++a, src += a_step, dst += K)
    for (size_t j = 0; j < K; ++j) dst[j] = src[int64_t(j) * step];
}

}  // namespace

template <typename T>
void StridedCopy::run_t(const T* x, T* y) const {
  const size_t r = shape_.size();
  // An innermost dimension of 2-4 elements (DepthToSpace's blocks, a broadcast pair) would be a row of its own:
  // rows then span the last two dimensions (when that keeps them short enough to share out), copied as runs of K.
  const size_t K = r >= 2 && shape_[r - 1] >= 2 && shape_[r - 1] <= 4 && shape_[r - 2] <= 4096 ? shape_[r - 1] : 0;
  const size_t outer = K ? r - 2 : r - 1;  // the dimensions the odometer walks
  const size_t inner = K ? K * shape_[r - 2] : shape_[r - 1];
  const int64_t step = stride_[r - 1];
  const size_t rows = elements_ / inner;
  auto run_rows = [&](size_t r0, size_t r1) {
    // The input offset of row r0, then an odometer over the outer dimensions.
    std::vector<size_t> idx(r, 0);
    int64_t off = base_;
    for (size_t d = outer, rem = r0; d-- > 0;) {
      idx[d] = rem % shape_[d];
      rem /= shape_[d];
      off += int64_t(idx[d]) * stride_[d];
    }
    for (size_t row = r0; row < r1; ++row) {
      T* dst = y + row * inner;
      const T* src = x + off;
      if (K == 2) copy_runs<2>(src, dst, shape_[r - 2], stride_[r - 2], step);
      else if (K == 3) copy_runs<3>(src, dst, shape_[r - 2], stride_[r - 2], step);
      else if (K == 4) copy_runs<4>(src, dst, shape_[r - 2], stride_[r - 2], step);
      else if (step == 1) std::memcpy(dst, src, inner * sizeof(T));
      else if (step == 0) { const T v = *src; for (size_t j = 0; j < inner; ++j) dst[j] = v; }
      else for (size_t j = 0; j < inner; ++j) dst[j] = src[int64_t(j) * step];
      for (size_t d = outer; d-- > 0;) {
        off += stride_[d];
        if (++idx[d] < shape_[d]) break;
        off -= int64_t(shape_[d]) * stride_[d];
        idx[d] = 0;
      }
    }
  };
  if (elements_ < elementwise_parallel_min() || rows == 1) {
    if (rows == 1 && !K && elements_ >= elementwise_parallel_min()) {  // one long run: split it
      const T* src = x + base_;
      for_ranges(inner, [&](size_t b, size_t e) {
        for (size_t j = b; j < e; ++j) y[j] = src[int64_t(j) * step];
      });
      return;
    }
    run_rows(0, rows);
    return;
  }
  parallel_for_ranges(rows, run_rows);
}

void StridedCopy::run(const void* x, void* y) const {
  if (elements_ == 0) return;
  with_word(esize_, [&](auto w) {
    using T = decltype(w);
    run_t(static_cast<const T*>(x), static_cast<T*>(y));
  });
}

void copy_rows(const void* src, size_t src_stride, void* dst, size_t dst_stride, size_t rows, size_t row_bytes) {
  if (rows == 0 || row_bytes == 0) return;
  auto s = static_cast<const uint8_t*>(src);
  auto d = static_cast<uint8_t*>(dst);
  auto run = [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r) std::memcpy(d + r * dst_stride, s + r * src_stride, row_bytes);
  };
  // elementwise_parallel_min() counts 4-byte elements: the same amount of memory in bytes.
  if (rows == 1 || rows * row_bytes < 4 * elementwise_parallel_min()) {
    if (rows == 1 && row_bytes >= 4 * elementwise_parallel_min()) {
      for_ranges(row_bytes, [&](size_t b, size_t e) { std::memcpy(d + b, s + b, e - b); });
      return;
    }
    run(0, rows);
    return;
  }
  parallel_for_ranges(rows, run);
}

std::vector<int64_t> permuted_strides(const std::vector<int64_t>& shape, const std::vector<int64_t>& perm) {
  const std::vector<size_t> s = contiguous_strides(shape);
  std::vector<int64_t> out;
  for (int64_t p : perm) out.push_back(int64_t(s[size_t(p)]));
  return out;
}

}  // namespace nnkern::graph
