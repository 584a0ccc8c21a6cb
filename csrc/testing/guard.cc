#include "testing/guard.h"

#include <sys/mman.h>
#include <unistd.h>

#include <new>

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

}  // namespace nnkern
