#include "testing/guard.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <new>
#include <stdexcept>

#include "core/threadpool.h"
#include "core/workspace.h"

namespace nnkern {

GuardedBuffer::GuardedBuffer(size_t bytes) : bytes_(bytes) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  const size_t data_pages = (bytes + page - 1) / page;
  map_bytes_ = (data_pages + 2) * page;  // a guard page before and after
  map_ = mmap(nullptr, map_bytes_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map_ == MAP_FAILED) throw std::bad_alloc();
  char* first = static_cast<char*>(map_) + page;
  if (data_pages && mprotect(first, data_pages * page, PROT_READ | PROT_WRITE) != 0) {
    munmap(map_, map_bytes_);
    throw std::bad_alloc();
  }
  data_ = first + data_pages * page - bytes;  // the end touches the trailing guard page
}

GuardedBuffer::~GuardedBuffer() { munmap(map_, map_bytes_); }

void workspace_overrun_probe(bool scratch, size_t bytes, size_t overrun, size_t tasks) {
  // The overrun lands in the guard itself, never past the block: only with guards on.
  if (!workspace_guards() || overrun > kWorkspaceGuardBytes)
    throw std::invalid_argument("workspace_overrun_probe: guards on, overrun <= kWorkspaceGuardBytes");
  if (!scratch) {
    Workspace ws(bytes);
    if (ws.data()) std::memset(ws.data(), 0x5A, bytes + overrun);
    return;
  }
  parallel_for_scratch(tasks, bytes, [&](size_t, void* slice) { std::memset(slice, 0x5A, bytes + overrun); });
}

}  // namespace nnkern
