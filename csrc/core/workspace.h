// Scratch memory for one op call, oneDNN's scratchpad model: the op computes the bytes it needs from the
// shape (an algorithm's workspace function), takes ONE block for the whole call on the calling thread and
// hands each task its slice. Nothing is sized by a thread_local that only grows.
//
// Each thread has an arena that keeps one block per nesting depth between calls (a Workspace opened while
// another is alive on the same thread, an op calling an op, uses the next depth's block), up to
// kWorkspaceRetainBytes in all; past that a block is freed when its call ends, so one huge call leaves no
// huge buffer behind. The bytes of every Workspace opened during the outermost one are the call's
// workspace, reported by workspace_last_bytes(). Workspaces must end in reverse order of opening (scopes).
// Baseline code.
#pragma once
#include <cstddef>

#include "core/checked.h"

namespace nnkern {

constexpr size_t kWorkspaceRetainBytes = size_t(8) << 20;

class Workspace {
 public:
  explicit Workspace(size_t bytes);  // 64-byte aligned, uninitialized; bytes == 0 gives a null block
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  // The block viewed as T, from offset_bytes (keep slices 64-byte aligned: round with workspace_align).
  template <typename T>
  T* as(size_t offset_bytes = 0) const {
    return reinterpret_cast<T*>(static_cast<char*>(data_) + offset_bytes);
  }
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  // With guards on: whether nothing was written past bytes() so far (a violation is counted once, at the end).
  bool guard_intact() const;

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  bool owned_ = false;  // nested deeper than the arena keeps: freed at destruction
  bool guarded_ = false;  // a guard follows the bytes (set_workspace_guards)
};

// Rounds a slice size up to the 64-byte alignment of the blocks (std::length_error past 64 bits).
inline size_t workspace_align(size_t bytes) { return checked_round_up(bytes, 64); }

// Lays out several slices of one Workspace: add() each slice's bytes (64-byte aligned offsets), then open
// one Workspace of `bytes` and take each slice at its offset.
struct WorkspaceLayout {
  size_t bytes = 0;
  size_t add(size_t n) {
    const size_t offset = bytes;
    bytes = checked_add(bytes, workspace_align(n));
    return offset;
  }
};

// The workspace of the last outermost call that ended on this thread (bytes of all its Workspaces).
size_t workspace_last_bytes();
// What this thread's arena keeps allocated between calls (<= kWorkspaceRetainBytes).
size_t workspace_retained_bytes();

// Guards (the tests turn them on): kWorkspaceGuardBytes of a known pattern right after every Workspace's bytes and
// every thread's scratch slice (core/threadpool.h), checked when the Workspace ends or the parallel call returns.
// An op that writes past what it asked for is then counted here, whether or not the arena's block was larger.
constexpr size_t kWorkspaceGuardBytes = 64;
void set_workspace_guards(bool on);
bool workspace_guards();
void workspace_guard_fill(void* end);               // the pattern at end .. end + kWorkspaceGuardBytes
bool workspace_guard_intact(const void* end);       // false (and the violation counted) if it changed
size_t workspace_guard_violations(bool reset);      // since the last reset, all threads

}  // namespace nnkern
