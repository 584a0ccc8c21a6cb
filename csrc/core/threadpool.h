// One persistent pool of worker threads. After a job, workers poll for the next one for a short
// window (kSpinMicros) so that back-to-back calls skip the wake-up, then sleep on a condition
// variable: an idle process uses no CPU once the window has passed.
//
// Contract for every entry point: each task must compute the same thing wherever it runs, so
// results never depend on the thread count or on which thread ran what. Calls are safe from any
// thread: a call that finds the pool busy (another caller, or a call from inside a task) runs its
// tasks inline on the calling thread instead of waiting. The first exception thrown by a task is
// rethrown to the caller once the call is over (tasks not yet started are skipped); the pool stays
// usable. A child process made by fork() starts with a fresh pool of the same size.
#pragma once
#include <cstddef>
#include <functional>

namespace nnkern {

// Workers keep polling for a new job this long after finishing one (and a caller polls this long
// for the workers to finish) before sleeping.
constexpr int kSpinMicros = 300;
// set_num_threads rejects more than this: far above any core count, so a bigger value is a mistake.
constexpr int kMaxThreads = 4096;

// Runs fn(task) for task in [0, n_tasks). Each thread taking part gets a contiguous share of the tasks (as
// split_range cuts them) and claims them one at a time in order; a thread done with its share claims the tasks
// left in the others', so uneven tasks balance.
void parallel_for(size_t n_tasks, const std::function<void(size_t task)>& fn);

// parallel_for with `scratch_bytes` (64-byte aligned) of scratch per thread that takes part: fn(task,
// scratch) gets the slice of the thread running the task. All slices are one Workspace (core/workspace.h)
// of the calling thread, so the call's scratch is reported with it and nothing stays thread_local.
void parallel_for_scratch(size_t n_tasks, size_t scratch_bytes,
                          const std::function<void(size_t task, void* scratch)>& fn);

// Cuts [0, n) into min(n, threads) contiguous ranges of balanced size (split_range) and runs
// fn(begin, end) once per range: each thread gets one contiguous share.
void parallel_for_ranges(size_t n, const std::function<void(size_t begin, size_t end)>& fn);

// fn(i0, i1) for every point of the n0 x n1 grid, claimed one at a time in row-major order.
void parallel_for_2d(size_t n0, size_t n1, const std::function<void(size_t i0, size_t i1)>& fn);
// fn(i0, i1, i2) for every point of the n0 x n1 x n2 grid, row-major. Throws std::overflow_error
// if the grid has more than SIZE_MAX points (also parallel_for_2d).
void parallel_for_3d(size_t n0, size_t n1, size_t n2,
                     const std::function<void(size_t i0, size_t i1, size_t i2)>& fn);

// Part `part` of [0, n) cut into `parts` contiguous ranges whose sizes differ by at most one (the
// first n % parts ranges are the longer ones).
struct Range {
  size_t begin, end;
};
Range split_range(size_t n, size_t parts, size_t part);

// 1 <= n <= kMaxThreads, else std::invalid_argument. Waits for a call in progress. If the threads
// cannot be started, the previous size is kept and std::runtime_error is thrown. Must not be
// called from inside a task (std::logic_error).
void set_num_threads(int n);
// The threads an op may use: the pool's size, or less within a ScopedThreadLimit on the calling thread.
int get_num_threads();

// At most n threads (>= 1) for the calls this thread makes while it lives (an inference session's num_threads);
// the pool's size is unchanged. Scopes nest.
class ScopedThreadLimit {
 public:
  explicit ScopedThreadLimit(int n);
  ~ScopedThreadLimit();
  ScopedThreadLimit(const ScopedThreadLimit&) = delete;
  ScopedThreadLimit& operator=(const ScopedThreadLimit&) = delete;

 private:
  int previous_;
};
// NNKERN_NUM_THREADS, else OMP_NUM_THREADS (its first field), else the CPUs this process may run
// on. A variable that is not an integer in [1, kMaxThreads] is ignored.
int default_num_threads();

}  // namespace nnkern
