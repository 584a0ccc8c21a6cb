#include "core/workspace.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
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

std::atomic<bool> g_guards{false};
std::atomic<size_t> g_violations{0};
constexpr unsigned char kGuardByte = 0xA5;

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
  guarded_ = g_guards.load(std::memory_order_relaxed);
  if (guarded_) bytes = checked_add(bytes, kWorkspaceGuardBytes);
  try {
    if (d >= kKeptDepths) {  // deeper than anything nnkern nests: a block of its own
      data_ = allocate(bytes);
      owned_ = true;
      if (guarded_) workspace_guard_fill(static_cast<char*>(data_) + bytes_);
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
  if (guarded_) workspace_guard_fill(static_cast<char*>(data_) + bytes_);
}

Workspace::~Workspace() {
  if (guarded_) workspace_guard_intact(static_cast<char*>(data_) + bytes_);
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

bool Workspace::guard_intact() const {
  if (!guarded_ || !data_) return true;
  const unsigned char* g = static_cast<const unsigned char*>(data_) + bytes_;
  for (size_t i = 0; i < kWorkspaceGuardBytes; ++i)
    if (g[i] != kGuardByte) return false;
  return true;
}

void set_workspace_guards(bool on) { g_guards.store(on, std::memory_order_relaxed); }
bool workspace_guards() { return g_guards.load(std::memory_order_relaxed); }
void workspace_guard_fill(void* end) { std::memset(end, kGuardByte, kWorkspaceGuardBytes); }
bool workspace_guard_intact(const void* end) {
  const unsigned char* g = static_cast<const unsigned char*>(end);
  for (size_t i = 0; i < kWorkspaceGuardBytes; ++i)
    if (g[i] != kGuardByte) {
      g_violations.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
  return true;
}
size_t workspace_guard_violations(bool reset) {
  return reset ? g_violations.exchange(0, std::memory_order_relaxed) : g_violations.load(std::memory_order_relaxed);
}
size_t workspace_retained_bytes() { return arena.retained(); }

}  // namespace nnkern
