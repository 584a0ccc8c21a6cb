// 64-byte aligned scratch buffers for packing.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>

#include "core/checked.h"

namespace nnkern {

template <typename T>
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t n) { resize(n); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  AlignedBuffer(AlignedBuffer&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr; o.n_ = 0; }
  ~AlignedBuffer() { std::free(p_); }

  // Grows (never shrinks); contents are not preserved.
  void resize(size_t n) {
    if (n <= n_) return;
    std::free(p_);
    const size_t bytes = checked_round_up(checked_mul(n, sizeof(T)), 64);
    p_ = static_cast<T*>(std::aligned_alloc(64, bytes ? bytes : 64));
    if (!p_) { n_ = 0; throw std::bad_alloc(); }
    n_ = n;
  }
  T* data() const { return p_; }
  size_t size() const { return n_; }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

// The n elements at p kept by a layer: p itself where owner owns them (aliasing shared_ptr: they live as long as
// it, read-only), else an aligned copy.
template <typename T>
std::shared_ptr<const T> shared_or_copy(const T* p, size_t n, std::shared_ptr<const void> owner) {
  if (owner) return std::shared_ptr<const T>(std::move(owner), p);
  auto copy = std::make_shared<AlignedBuffer<T>>(n);
  std::copy(p, p + n, copy->data());
  return std::shared_ptr<const T>(copy, copy->data());
}

}  // namespace nnkern
