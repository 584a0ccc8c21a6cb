// Test helper: memory whose last byte sits right before an unmapped (PROT_NONE) page, so a kernel that
// reads or writes even one element past an array's end faults at once instead of passing silently.
#pragma once
#include <cstddef>

namespace nnkern {

class GuardedBuffer {
 public:
  explicit GuardedBuffer(size_t bytes);
  ~GuardedBuffer();
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;
  void* data() const { return data_; }  // ends exactly at the guard page
  size_t size() const { return bytes_; }

 private:
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace nnkern
