#include "core/threadpool.h"
#include "core/isa.h"
#include "core/workspace.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace nnkern {
namespace {

// True on a pool worker, and on a caller while it works on its own call: a parallel_for from there
// runs inline (handing it to the pool would wait for ourselves).
thread_local bool t_in_pool = false;
// Which participant of the current job this thread is: 0 for the caller, worker id + 1 (scratch slots).
thread_local int t_slot = 0;
// The calling thread's ScopedThreadLimit (0: none).
thread_local int t_limit = 0;

constexpr const char* kScratchOverrun = "parallel_for_scratch: a task wrote past its thread's scratch slice";

// Polls done() for up to kSpinMicros; true as soon as it holds, false if the window passed.
template <typename Pred>
bool spin_until(Pred done) {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + std::chrono::microseconds(kSpinMicros);
  for (;;) {
    for (int i = 0; i < 32; ++i)
      if (done()) return true;
    if (clock::now() >= deadline) return false;
  }
}

// Pool::state_: bits 0-31 count the workers inside the current job, bit 32 closes the job (nobody
// may join any more), bits 33-63 number the job. One word, so that joining can check "still this
// job, still open" and count itself in a single compare-and-swap.
constexpr uint64_t kClosed = uint64_t(1) << 32;
constexpr int kSeqShift = 33;
inline uint64_t seq_of(uint64_t s) { return s >> kSeqShift; }
inline uint32_t joined(uint64_t s) { return uint32_t(s); }

class Pool {
 public:
  // Threads start on first use: importing the module or forking costs nothing.
  explicit Pool(int n) : size_(n) {}
  // Never destroyed (see pool()).

  int size() const { return size_.load(std::memory_order_relaxed); }
  // The threads a call of this thread may use (its ScopedThreadLimit).
  int threads() const { return t_limit > 0 ? std::min(size(), t_limit) : size(); }

  // Shrinking parks the extra workers (asleep, taking no jobs) instead of joining them, so that a
  // count toggled per call (threadpool_limits, a benchmark alternating 1 and 2) does not create a
  // thread each time: a new thread starts on its creator's CPU and shares it for milliseconds.
  void resize(int n) {
    if (t_in_pool) throw std::logic_error("set_num_threads called from inside a parallel_for task");
    std::lock_guard<std::mutex> call(call_mutex_);
    const int before = int(workers_.size()), active_before = active_.load(std::memory_order_relaxed);
    if (n - 1 <= before) {
      active_.store(n - 1, std::memory_order_release);
    } else {
      try {
        start_workers(n - 1);
      } catch (const std::system_error& e) {
        stop_workers_from(before);  // back to exactly the previous workers
        active_.store(active_before, std::memory_order_release);
        throw std::runtime_error("could not start " + std::to_string(n) + " threads (" + e.what() +
                                 "); still using " + std::to_string(size()));
      }
    }
    wake_sleepers();  // a reactivated worker may be asleep
    started_ = true;
    size_.store(n, std::memory_order_relaxed);
  }

  void run(size_t n_tasks, const std::function<void(size_t)>& fn) {
    std::unique_lock<std::mutex> call = acquire(n_tasks);
    if (!call.owns_lock()) {  // one thread, one task, nested, or the pool is busy
      for (size_t t = 0; t < n_tasks; ++t) fn(t);
      return;
    }
    dispatch(n_tasks, fn);
  }

  // run() with `bytes` of scratch per participating thread, all from one Workspace of the caller: the
  // pool knows how many threads take part (1 when it runs inline) and which one runs each task.
  void run_scratch(size_t n_tasks, size_t bytes, const std::function<void(size_t, void*)>& fn) {
    std::unique_lock<std::mutex> call = acquire(n_tasks);
    if (!call.owns_lock()) {
      Workspace ws(bytes);
      for (size_t t = 0; t < n_tasks; ++t) fn(t, ws.data());
      if (!ws.guard_intact()) throw std::logic_error(kScratchOverrun);
      return;
    }
    const bool guards = workspace_guards();
    const size_t stride = checked_add(workspace_align(bytes), guards ? kWorkspaceGuardBytes : 0);
    const size_t slots = size_t(std::min(active_.load(std::memory_order_relaxed) + 1, threads()));
    Workspace ws(checked_mul(stride, slots));
    char* base = ws.as<char>();
    if (guards)
      for (size_t s = 0; s < slots; ++s) workspace_guard_fill(base + s * stride + bytes);
    dispatch(n_tasks, [&](size_t t) {
      if (size_t(t_slot) >= slots) throw std::logic_error("parallel_for_scratch: a thread has no scratch slice");
      fn(t, base + stride * size_t(t_slot));
    });
    if (guards)
      for (size_t s = 0; s < slots; ++s)
        if (!workspace_guard_intact(base + s * stride + bytes))
          throw std::logic_error(kScratchOverrun);
  }

 private:
  // The call lock if this call gets the workers (started on first use), else an empty lock.
  std::unique_lock<std::mutex> acquire(size_t n_tasks) {
    std::unique_lock<std::mutex> call;
    if (n_tasks > 1 && threads() > 1 && !t_in_pool) call = std::unique_lock<std::mutex>(call_mutex_, std::try_to_lock);
    if (call.owns_lock() && !started_) start_lazily();
    if (call.owns_lock() && active_.load(std::memory_order_relaxed) == 0) call.unlock();
    return call;
  }

  // With the call lock held and workers running: the caller and the workers claim the tasks.
  void dispatch(size_t n_tasks, const std::function<void(size_t)>& fn) {
    fn_ = &fn;
    job_threads_.store(threads(), std::memory_order_relaxed);  // workers with id + 1 < this join
    job_isa_cap_ = thread_isa_cap();
    shares_count_ = std::min(n_tasks, size_t(threads()));
    if (shares_capacity_ < shares_count_) {  // no worker is inside a job here
      shares_.reset(new Share[shares_count_]);
      shares_capacity_ = shares_count_;
    }
    for (size_t p = 0; p < shares_count_; ++p) {
      const Range r = split_range(n_tasks, shares_count_, p);
      shares_[p].next.store(r.begin, std::memory_order_relaxed);
      shares_[p].end = r.end;
    }
    error_ = nullptr;
    // Open the next job with nobody inside; release: the fields above are seen by whoever joins.
    state_.store((seq_of(state_.load(std::memory_order_relaxed)) + 1) << kSeqShift, std::memory_order_release);
    wake_sleepers();
    t_in_pool = true;
    t_slot = 0;
    work();
    t_in_pool = false;
    // Close it, then wait for the workers still inside (each finishing its last task).
    if (joined(state_.fetch_or(kClosed, std::memory_order_acq_rel)) != 0) wait_for_workers();
    fn_ = nullptr;
    if (std::exception_ptr e = std::exchange(error_, nullptr)) std::rethrow_exception(e);
  }

  // Each participant first claims the tasks of its own share, in order, then those left in the others'
  // shares. Consecutive steps of a network cut their tasks alike, so a thread mostly reads the rows it wrote
  // in its own cache, where one shared counter would deal the tasks out at random; and claims of different
  // threads touch different cache lines.
  void work() {
    const size_t parts = shares_count_, self = size_t(t_slot) % parts;
    for (size_t i = 0; i < parts; ++i) {
      Share& share = shares_[(self + i) % parts];
      for (size_t t; (t = share.next.fetch_add(1, std::memory_order_relaxed)) < share.end;) {
        try {
          (*fn_)(t);
        } catch (...) {
          std::lock_guard<std::mutex> lock(mutex_);
          if (!error_) error_ = std::current_exception();  // the first one wins
          for (size_t j = 0; j < parts; ++j)  // the call failed: skip what has not started
            shares_[j].next.store(shares_[j].end, std::memory_order_relaxed);
        }
      }
    }
  }

  void worker_loop(int id, uint64_t seen) {
    t_in_pool = true;
    t_slot = id + 1;
    while (wait_for_job(id, &seen)) {
      if (id + 1 < job_threads_.load(std::memory_order_relaxed) && join(seen)) {
        set_thread_isa_cap(job_isa_cap_);  // the caller's own cap, if any: the job's fields hold until we leave
        work();
        set_thread_isa_cap(-1);
        leave();
      }
    }
  }

  // Waits until a job numbered other than *seen is published while this worker is active (*seen
  // becomes its number; true) or this worker is told to exit (false). Polls first, then sleeps.
  bool wait_for_job(int id, uint64_t* seen) {
    auto ready = [&] {
      return id >= live_.load(std::memory_order_acquire) ||
             (id < active_.load(std::memory_order_acquire) &&
              seq_of(state_.load(std::memory_order_acquire)) != *seen);
    };
    if (!spin_until(ready)) {
      std::unique_lock<std::mutex> lock(mutex_);
      ++sleepers_;
      wake_.wait(lock, ready);
      --sleepers_;
    }
    if (id >= live_.load(std::memory_order_acquire)) return false;
    *seen = seq_of(state_.load(std::memory_order_acquire));
    return true;
  }

  // Enters job `seq` if it is still the current job and open. Acquire: the job's fields are then
  // visible, and stay valid until we leave (the caller waits for that).
  bool join(uint64_t seq) {
    uint64_t s = state_.load(std::memory_order_relaxed);
    while (seq_of(s) == seq && !(s & kClosed))
      if (state_.compare_exchange_weak(s, s + 1, std::memory_order_acquire, std::memory_order_relaxed)) return true;
    return false;
  }

  void leave() {
    const uint64_t s = state_.fetch_sub(1, std::memory_order_acq_rel);
    if (joined(s) == 1 && (s & kClosed)) {  // the caller may be asleep in wait_for_workers
      std::lock_guard<std::mutex> lock(mutex_);
      done_.notify_one();
    }
  }

  void wait_for_workers() {
    auto idle = [this] { return joined(state_.load(std::memory_order_acquire)) == 0; };
    if (spin_until(idle)) return;
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, idle);
  }

  // After the store to state_ or live_ that sleepers wait for. A sleeper counts itself and checks
  // its condition under mutex_, so it either sees that store or is already waiting when we look.
  void wake_sleepers() {
    bool any;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      any = sleepers_ > 0;
    }
    if (any) wake_.notify_all();
  }

  // With call_mutex_ held. Grows to n workers; on failure the new ones stay and the exception
  // propagates (the caller decides what to keep).
  void start_workers(int n) {
    live_.store(n, std::memory_order_release);
    active_.store(n, std::memory_order_release);
    const uint64_t seq = seq_of(state_.load(std::memory_order_relaxed));  // fixed while call_mutex_ is held
    while (int(workers_.size()) < n) {
      const int id = int(workers_.size());
      workers_.emplace_back([this, id, seq] { worker_loop(id, seq); });
    }
  }

  // With call_mutex_ held: workers n and up exit and are joined.
  void stop_workers_from(int n) {
    live_.store(n, std::memory_order_release);
    active_.store(std::min(n, active_.load(std::memory_order_relaxed)), std::memory_order_release);
    wake_sleepers();
    for (size_t i = size_t(n); i < workers_.size(); ++i) workers_[i].join();
    workers_.resize(size_t(n));
  }

  // First multi-threaded call: start the workers. If the system refuses threads, run on fewer.
  void start_lazily() {
    started_ = true;
    try {
      start_workers(size() - 1);
    } catch (const std::system_error&) {
      stop_workers_from(int(workers_.size()));
      size_.store(int(workers_.size()) + 1, std::memory_order_relaxed);
    }
  }

  std::mutex call_mutex_;  // held by the call that owns the workers, and by resize
  std::vector<std::thread> workers_;
  bool started_ = false;
  std::atomic<int> size_;
  std::atomic<int> live_{0};    // workers with a smaller id keep running
  std::atomic<int> active_{0};  // workers with a smaller id take jobs (<= live_; the rest are parked)

  std::atomic<uint64_t> state_{kClosed};  // job 0, closed: nothing to join before the first call
  const std::function<void(size_t)>* fn_ = nullptr;
  std::atomic<int> job_threads_{0};  // the threads the current job may use, the caller's included
  int job_isa_cap_ = -1;              // the caller's thread ISA cap
  // The participants' shares of the current job's tasks (shares_count_ of them): each on its own cache line.
  struct alignas(64) Share {
    std::atomic<size_t> next{0};
    size_t end = 0;
  };
  std::unique_ptr<Share[]> shares_;
  size_t shares_capacity_ = 0, shares_count_ = 0;

  std::mutex mutex_;  // for sleeping and waking, and error_
  std::condition_variable wake_, done_;
  int sleepers_ = 0;
  std::exception_ptr error_;
};

std::atomic<Pool*> g_pool{nullptr};

// In a fork() child only the forking thread exists; the parent's workers are gone and its mutexes
// may have been held at the fork. Leave that pool untouched (leaked) and start a fresh one.
void on_fork_child() {
  Pool* old = g_pool.load(std::memory_order_relaxed);
  g_pool.store(new Pool(old->size()), std::memory_order_relaxed);
}

Pool& pool() {
  static const bool ready = [] {
    g_pool.store(new Pool(default_num_threads()));  // never destroyed: workers must not be joined at exit
    pthread_atfork(nullptr, nullptr, on_fork_child);
    return true;
  }();
  (void)ready;
  return *g_pool.load(std::memory_order_acquire);
}

// A thread count from the environment; 0 if unset or not an integer in [1, kMaxThreads].
// OpenMP allows a list ("4,2", one count per nesting level): its first field counts.
int env_num_threads(const char* name, bool list_ok) {
  const char* v = std::getenv(name);
  if (!v) return 0;
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(v, &end, 10);
  if (end == v || errno != 0) return 0;
  while (*end == ' ' || *end == '\t') ++end;
  if (*end != '\0' && !(list_ok && *end == ',')) return 0;
  return n >= 1 && n <= kMaxThreads ? int(n) : 0;
}

size_t grid_size(std::initializer_list<size_t> dims) {
  size_t n = 1;
  for (size_t d : dims) {
    if (d != 0 && n > SIZE_MAX / d) throw std::overflow_error("parallel_for grid larger than SIZE_MAX");
    n *= d;
  }
  return n;
}

}  // namespace

int default_num_threads() {
  if (int n = env_num_threads("NNKERN_NUM_THREADS", false)) return n;
  if (int n = env_num_threads("OMP_NUM_THREADS", true)) return n;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return std::min(n, kMaxThreads);
  }
  unsigned n = std::thread::hardware_concurrency();
  return n ? int(std::min(n, unsigned(kMaxThreads))) : 1;
}

Range split_range(size_t n, size_t parts, size_t part) {
  const size_t q = n / parts, r = n % parts;
  const size_t begin = part * q + std::min(part, r);
  return {begin, begin + q + (part < r ? 1 : 0)};
}

void parallel_for(size_t n_tasks, const std::function<void(size_t)>& fn) {
  if (n_tasks == 0) return;
  pool().run(n_tasks, fn);
}

void parallel_for_scratch(size_t n_tasks, size_t scratch_bytes, const std::function<void(size_t, void*)>& fn) {
  if (n_tasks == 0) return;
  pool().run_scratch(n_tasks, scratch_bytes, fn);
}

void parallel_for_ranges(size_t n, const std::function<void(size_t, size_t)>& fn) {
  const size_t parts = std::min(n, size_t(get_num_threads()));
  parallel_for(parts, [&](size_t p) {
    const Range r = split_range(n, parts, p);
    fn(r.begin, r.end);
  });
}

void parallel_for_2d(size_t n0, size_t n1, const std::function<void(size_t, size_t)>& fn) {
  parallel_for(grid_size({n0, n1}), [&](size_t t) { fn(t / n1, t % n1); });
}

void parallel_for_3d(size_t n0, size_t n1, size_t n2, const std::function<void(size_t, size_t, size_t)>& fn) {
  const size_t plane = n1 * n2;  // cannot overflow when grid_size does not
  parallel_for(grid_size({n0, n1, n2}), [&](size_t t) { fn(t / plane, t % plane / n2, t % n2); });
}

void set_num_threads(int n) {
  if (n < 1 || n > kMaxThreads)
    throw std::invalid_argument("num_threads must be in [1, " + std::to_string(kMaxThreads) + "], got " +
                                std::to_string(n));
  pool().resize(n);
}

int get_num_threads() { return pool().threads(); }

ScopedThreadLimit::ScopedThreadLimit(int n) : previous_(t_limit) {
  if (n < 1) throw std::invalid_argument("a thread limit must be >= 1, got " + std::to_string(n));
  t_limit = previous_ > 0 ? std::min(previous_, n) : n;
}
ScopedThreadLimit::~ScopedThreadLimit() { t_limit = previous_; }

}  // namespace nnkern
