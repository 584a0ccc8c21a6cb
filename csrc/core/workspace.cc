#include "core/workspace.h"

#include <cstdlib>
#include <new>

namespace nnkern {
namespace {

// Blocks kept between calls, one per nesting depth (an op calling an op calling an op): each depth
// reuses its own block, so nested scratch costs no allocation either once warm.
constexpr int kKeptDepths = 4;

struct Arena {
  void* block[kKeptDepths] = {};
  size_t size[kKeptDepths] = {};
  int depth = 0;          // Workspaces alive on this thread
  size_t call_bytes = 0;  // summed over the outermost call
  size_t last_bytes = 0;
  ~Arena() {
    for (void* b : block) std::free(b);
  }
  size_t retained() const {
    size_t n = 0;
    for (size_t s : size) n += s;
    return n;
  }
};

thread_local Arena arena;

void* allocate(size_t bytes) {
  void* p = std::aligned_alloc(64, workspace_align(bytes));
  if (!p) throw std::bad_alloc();
  return p;
}

}  // namespace

Workspace::Workspace(size_t bytes) : bytes_(bytes) {
  const int d = arena.depth++;
  if (d == 0) arena.call_bytes = 0;
  arena.call_bytes += bytes;
  if (bytes == 0) return;
  try {
    if (d >= kKeptDepths) {  // deeper than anything nnkern nests: a block of its own
      data_ = allocate(bytes);
      owned_ = true;
      return;
    }
    if (arena.size[d] < bytes) {
      std::free(arena.block[d]);
      arena.block[d] = nullptr;
      arena.size[d] = 0;
      arena.block[d] = allocate(bytes);
      arena.size[d] = bytes;
    }
  } catch (...) {
    if (--arena.depth == 0) arena.last_bytes = arena.call_bytes;
    throw;
  }
  data_ = arena.block[d];
}

Workspace::~Workspace() {
  const int d = --arena.depth;
  if (owned_) {
    std::free(data_);
  } else if (data_ && arena.retained() > kWorkspaceRetainBytes) {  // a huge call leaves no huge buffer behind
    std::free(arena.block[d]);
    arena.block[d] = nullptr;
    arena.size[d] = 0;
  }
  if (d == 0) arena.last_bytes = arena.call_bytes;
}

size_t workspace_last_bytes() { return arena.last_bytes; }
size_t workspace_retained_bytes() { return arena.retained(); }

}  // namespace nnkern
