#include "core/threadpool.h"

#include <sched.h>

#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace nnkern {
namespace {

class Pool {
 public:
  ~Pool() { resize(1); }

  int size() const { return n_threads_; }

  void resize(int n) {
    std::lock_guard<std::mutex> call_lock(call_mutex_);
    stop_workers();
    n_threads_ = n < 1 ? 1 : n;
    for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, g = generation_] { worker_loop(g); });
  }

  void run(size_t n_tasks, const std::function<void(size_t)>& fn) {
    if (n_tasks == 0) return;
    std::lock_guard<std::mutex> call_lock(call_mutex_);
    if (n_threads_ == 1 || n_tasks == 1) {
      for (size_t t = 0; t < n_tasks; ++t) fn(t);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      fn_ = &fn;
      n_tasks_ = n_tasks;
      next_.store(0);
      pending_ = workers_.size();
      error_ = nullptr;
      ++generation_;
    }
    wake_.notify_all();
    claim_tasks();  // the calling thread works too
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return pending_ == 0; });
    fn_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void claim_tasks() {
    for (size_t t; (t = next_.fetch_add(1)) < n_tasks_;) {
      try {
        (*fn_)(t);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!error_) error_ = std::current_exception();
      }
    }
  }

  // `seen` is the generation at creation, so a call that starts before the thread runs is not missed.
  void worker_loop(size_t seen) {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
      }
      claim_tasks();
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0) done_.notify_one();
    }
  }

  void stop_workers() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& w : workers_) w.join();
    workers_.clear();
    stop_ = false;
  }

  std::mutex call_mutex_;  // one parallel_for at a time
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  int n_threads_ = 1;
  bool stop_ = false;
  size_t generation_ = 0;
  size_t pending_ = 0;
  const std::function<void(size_t)>* fn_ = nullptr;
  size_t n_tasks_ = 0;
  std::atomic<size_t> next_{0};
  std::exception_ptr error_;
};

Pool& pool() {
  static Pool* p = [] {
    auto* q = new Pool();  // never destroyed: workers must not be joined during interpreter teardown
    q->resize(default_num_threads());
    return q;
  }();
  return *p;
}

}  // namespace

int default_num_threads() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  unsigned n = std::thread::hardware_concurrency();
  return n ? int(n) : 1;
}

void parallel_for(size_t n_tasks, const std::function<void(size_t)>& fn) { pool().run(n_tasks, fn); }
void set_num_threads(int n) { pool().resize(n); }
int get_num_threads() { return pool().size(); }

}  // namespace nnkern
