// 64-byte aligned scratch buffers for packing.
#pragma once
#include <cstddef>
#include <cstdlib>
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

}  // namespace nnkern
