#include "core/workspace.h"

#include <cstdlib>
#include <new>

namespace nnkern {
namespace {

struct Arena {
  void* block = nullptr;  // kept between calls
  size_t size = 0;
  bool in_use = false;
  int depth = 0;         // Workspaces alive on this thread
  size_t call_bytes = 0;  // summed over the outermost call
  size_t last_bytes = 0;
  ~Arena() { std::free(block); }
};

thread_local Arena arena;

void* allocate(size_t bytes) {
  void* p = std::aligned_alloc(64, workspace_align(bytes));
  if (!p) throw std::bad_alloc();
  return p;
}

}  // namespace

Workspace::Workspace(size_t bytes) : bytes_(bytes) {
  if (arena.depth++ == 0) arena.call_bytes = 0;
  arena.call_bytes += bytes;
  if (bytes == 0) return;
  try {
    if (arena.in_use) {  // nested: a block of its own
      data_ = allocate(bytes);
      owned_ = true;
      return;
    }
    if (arena.size < bytes) {
      std::free(arena.block);
      arena.block = nullptr;
      arena.size = 0;
      arena.block = allocate(bytes);
      arena.size = bytes;
    }
  } catch (...) {
    if (--arena.depth == 0) arena.last_bytes = arena.call_bytes;
    throw;
  }
  data_ = arena.block;
  arena.in_use = true;
}

Workspace::~Workspace() {
  if (owned_) {
    std::free(data_);
  } else if (data_) {
    arena.in_use = false;
    if (arena.size > kWorkspaceRetainBytes) {  // a huge call leaves no huge buffer behind
      std::free(arena.block);
      arena.block = nullptr;
      arena.size = 0;
    }
  }
  if (--arena.depth == 0) arena.last_bytes = arena.call_bytes;
}

size_t workspace_last_bytes() { return arena.last_bytes; }
size_t workspace_retained_bytes() { return arena.size; }

}  // namespace nnkern
