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

// Writes `bytes + overrun` bytes into a Workspace of `bytes` (scratch = false), or into each thread's slice of a
// parallel_for_scratch of `bytes` per thread over `tasks` tasks (scratch = true): the probe of the workspace guards
// (core/workspace.h), which must count (or, for scratch, throw on) any overrun > 0.
void workspace_overrun_probe(bool scratch, size_t bytes, size_t overrun, size_t tasks);

}  // namespace nnkern
