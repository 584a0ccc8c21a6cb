// The thread pool (core/threadpool.h): every task runs once for 1-, 2- and 3-D loops and ranges,
// nested calls run inline, the first exception reaches the caller and the pool survives it,
// concurrent callers and resizes, fork() children, and idle workers that sleep.
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/threadpool.h"
#include "core/workspace.h"
#include "harness.h"

using namespace nnkern;
using nnkern_test::check;

namespace {

// counts[i] == 1 for every i: each task ran exactly once.
bool all_once(const std::unique_ptr<std::atomic<int>[]>& counts, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (counts[i].load() != 1) return false;
  return true;
}

std::unique_ptr<std::atomic<int>[]> zeros(size_t n) {
  std::unique_ptr<std::atomic<int>[]> c(new std::atomic<int>[n ? n : 1]);
  for (size_t i = 0; i < n; ++i) c[i] = 0;
  return c;
}

void test_split_range() {
  bool ok = true;
  for (size_t n = 0; n <= 40; ++n)
    for (size_t parts = 1; parts <= 9; ++parts) {
      size_t at = 0, lo = SIZE_MAX, hi = 0;
      for (size_t p = 0; p < parts; ++p) {
        const Range r = split_range(n, parts, p);
        ok &= r.begin == at && r.end >= r.begin;
        lo = std::min(lo, r.end - r.begin);
        hi = std::max(hi, r.end - r.begin);
        at = r.end;
      }
      ok &= at == n && hi - lo <= 1;
    }
  check(ok, "split_range: contiguous ranges covering [0, n), sizes within one of each other");
}

void test_every_task_once(int threads) {
  set_num_threads(threads);
  for (size_t n : {0, 1, 2, 3, 7, 64, 1000}) {
    auto c = zeros(n);
    parallel_for(n, [&](size_t t) { c[t]++; });
    check(all_once(c, n), "parallel_for n=%zu threads=%d", n, threads);

    auto r = zeros(n);
    std::atomic<size_t> calls{0};
    parallel_for_ranges(n, [&](size_t b, size_t e) {
      calls++;
      for (size_t i = b; i < e; ++i) r[i]++;
    });
    check(all_once(r, n) && calls == std::min(n, size_t(threads)), "parallel_for_ranges n=%zu threads=%d: %zu calls",
          n, threads, calls.load());
  }
  for (auto [n0, n1] : std::vector<std::pair<size_t, size_t>>{{0, 5}, {5, 0}, {1, 1}, {3, 7}, {17, 2}}) {
    auto c = zeros(n0 * n1);
    bool in_range = true;
    parallel_for_2d(n0, n1, [&](size_t i0, size_t i1) {
      if (i0 >= n0 || i1 >= n1) in_range = false;
      else c[i0 * n1 + i1]++;
    });
    check(in_range && all_once(c, n0 * n1), "parallel_for_2d %zux%zu threads=%d", n0, n1, threads);
  }
  for (auto d : std::vector<std::vector<size_t>>{{0, 2, 3}, {2, 0, 3}, {1, 1, 1}, {2, 3, 5}, {4, 1, 9}}) {
    const size_t n = d[0] * d[1] * d[2];
    auto c = zeros(n);
    bool in_range = true;
    parallel_for_3d(d[0], d[1], d[2], [&](size_t i0, size_t i1, size_t i2) {
      if (i0 >= d[0] || i1 >= d[1] || i2 >= d[2]) in_range = false;
      else c[(i0 * d[1] + i1) * d[2] + i2]++;
    });
    check(in_range && all_once(c, n), "parallel_for_3d %zux%zux%zu threads=%d", d[0], d[1], d[2], threads);
  }
}

// Each thread claims its own share of the tasks first and in order, then what is left of the other shares, in
// turn. The first task a thread runs waits until every thread has one, so each starts on its own share: the
// threads' first tasks are the shares' first ones, and each thread's tasks are ascending runs within shares,
// the shares visited from its own onwards.
void test_shares(int threads) {
  set_num_threads(threads);
  const size_t n = 240;
  std::mutex mu;
  std::vector<std::vector<size_t>> ran;  // per thread, the tasks in the order it ran them
  std::vector<std::thread::id> ids;
  std::atomic<int> started{0};
  parallel_for(n, [&](size_t t) {
    bool first;
    {
      std::lock_guard<std::mutex> lock(mu);
      const size_t at = size_t(std::find(ids.begin(), ids.end(), std::this_thread::get_id()) - ids.begin());
      first = at == ids.size();
      if (first) ids.push_back(std::this_thread::get_id()), ran.emplace_back();
      ran[at].push_back(t);
    }
    if (first) {  // a thread that never joins fails the check below instead of hanging the test
      started++;
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (started.load() < threads && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
    }
  });
  const auto share_of = [&](size_t t) {
    for (size_t p = 0;; ++p)
      if (t < split_range(n, size_t(threads), p).end) return p;
  };
  bool ok = int(ran.size()) == threads;
  std::vector<size_t> firsts;
  size_t total = 0;
  for (const std::vector<size_t>& r : ran) {
    total += r.size();
    const size_t own = share_of(r.front());
    firsts.push_back(r.front());
    ok &= r.front() == split_range(n, size_t(threads), own).begin;
    size_t visited = 0;  // how far past its own share (cyclically) the thread has gone
    for (size_t j = 1; j < r.size(); ++j) {
      const size_t s = share_of(r[j]), d = (s + size_t(threads) - own) % size_t(threads);
      ok &= s == share_of(r[j - 1]) ? r[j] > r[j - 1] : d > visited;
      visited = d;
    }
  }
  std::sort(firsts.begin(), firsts.end());
  ok &= std::unique(firsts.begin(), firsts.end()) == firsts.end();
  check(ok && total == n, "parallel_for threads=%d: each thread starts on its own share, runs it in order, then "
        "the others' in turn", threads);
}

void test_grid_overflow() {
  bool threw = false;
  try {
    parallel_for_2d(SIZE_MAX / 2 + 1, 2, [](size_t, size_t) {});
  } catch (const std::overflow_error&) {
    threw = true;
  }
  check(threw, "parallel_for_2d with more than SIZE_MAX points throws std::overflow_error");
}

void test_nested() {
  set_num_threads(3);
  const size_t outer = 12, inner = 50;
  auto c = zeros(outer * inner);
  parallel_for(outer, [&](size_t o) {
    parallel_for(inner, [&](size_t i) { c[o * inner + i]++; });  // runs inline on this thread
  });
  check(all_once(c, outer * inner), "nested parallel_for: every inner task once");
  std::atomic<int> refused{0};
  parallel_for(4, [&](size_t) {
    try {
      set_num_threads(2);
    } catch (const std::logic_error&) {
      refused++;
    }
  });
  check(refused == 4 && get_num_threads() == 3, "set_num_threads inside a task: std::logic_error, size unchanged");
}

void test_exceptions() {
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    std::string what;
    try {
      parallel_for(100, [](size_t t) {
        if (t % 7 == 3) throw std::runtime_error("task " + std::to_string(t));
      });
    } catch (const std::runtime_error& e) {
      what = e.what();
    }
    const bool named = what.rfind("task ", 0) == 0 && std::stoul(what.substr(5)) % 7 == 3;
    check(named, "threads=%d: one of the tasks' exceptions reaches the caller (got '%s')", threads, what.c_str());
    // Also from a nested call, which ran inline.
    what.clear();
    try {
      parallel_for(4, [](size_t) { parallel_for(4, [](size_t t) { if (t == 2) throw std::runtime_error("inner"); }); });
    } catch (const std::runtime_error& e) {
      what = e.what();
    }
    check(what == "inner", "threads=%d: a nested call's exception reaches the outer caller", threads);
    auto c = zeros(500);
    parallel_for(500, [&](size_t t) { c[t]++; });
    check(all_once(c, 500), "threads=%d: the pool works after exceptions", threads);
  }
}

void test_validation() {
  set_num_threads(2);
  for (int bad : {0, -1, kMaxThreads + 1}) {
    bool threw = false;
    try {
      set_num_threads(bad);
    } catch (const std::invalid_argument&) {
      threw = true;
    }
    check(threw && get_num_threads() == 2, "set_num_threads(%d): std::invalid_argument, size unchanged", bad);
  }
}

// Several threads call at once (one of them owns the pool, the others run inline) while another
// resizes the pool: every call still runs each task once.
void test_concurrent_callers() {
  set_num_threads(2);
  std::atomic<bool> stop{false}, ok{true};
  std::vector<std::thread> callers;
  for (int k = 0; k < 4; ++k)
    callers.emplace_back([&, k] {
      for (int rep = 0; rep < 300; ++rep) {
        const size_t n = 1 + size_t(k * 37 + rep) % 97;
        auto c = zeros(n);
        if (rep % 2) parallel_for(n, [&](size_t t) { c[t]++; });
        else parallel_for_ranges(n, [&](size_t b, size_t e) { for (size_t i = b; i < e; ++i) c[i]++; });
        if (!all_once(c, n)) ok = false;
      }
    });
  std::thread resizer([&] {
    for (int i = 0; !stop; ++i) set_num_threads(1 + i % 3);
  });
  for (auto& t : callers) t.join();
  stop = true;
  resizer.join();
  check(ok, "4 concurrent callers and a resizing thread: every task once");
}

// Runs fn in a fork() child with a 20 s alarm; true if it exited 0 (a hang dies of SIGALRM).
template <typename F>
bool in_child(F fn) {
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    alarm(20);
    _exit(fn() ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

bool child_runs_tasks(int expect_threads) {
  auto c = zeros(1000);
  parallel_for(1000, [&](size_t t) { c[t]++; });
  return all_once(c, 1000) && get_num_threads() == expect_threads;
}

void test_fork() {
  set_num_threads(3);
  parallel_for(100, [](size_t) {});
  check(in_child([] { return child_runs_tasks(3); }), "fork child: a fresh pool of the parent's size");
  check(in_child([] {
          set_num_threads(2);
          return child_runs_tasks(2);
        }),
        "fork child: resize, then run");
  // Fork while another thread keeps the pool busy, so its locks may be held at the fork.
  std::atomic<bool> stop{false};
  std::thread busy([&] {
    while (!stop) parallel_for(64, [](size_t) {});
  });
  bool ok = true;
  for (int i = 0; i < 20; ++i) ok &= in_child([] { return child_runs_tasks(3); });
  stop = true;
  busy.join();
  check(ok, "fork children while another thread runs the pool: all finish");
}

double process_cpu_seconds() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// Shrinking parks workers rather than joining them: growing back starts no thread (the same kernel
// thread ids serve), a parked worker takes no task, and the active ones all do.
void test_shrink_parks_workers() {
  const pid_t caller = pid_t(syscall(SYS_gettid));
  std::vector<pid_t> first_three;
  for (int n : {3, 1, 2, 3, 1, 3}) {
    set_num_threads(n);
    std::mutex m;
    std::vector<pid_t> ids;
    parallel_for(400, [&](size_t) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      const pid_t me = pid_t(syscall(SYS_gettid));
      std::lock_guard<std::mutex> lock(m);
      if (std::find(ids.begin(), ids.end(), me) == ids.end()) ids.push_back(me);
    });
    std::sort(ids.begin(), ids.end());
    const bool caller_ran = std::find(ids.begin(), ids.end(), caller) != ids.end();
    check(int(ids.size()) <= n && caller_ran && (n == 1 || ids.size() >= 2),
          "%d thread(s): tasks ran on %zu threads (caller included: %d)", n, ids.size(), int(caller_ran));
    if (n == 3 && first_three.empty()) first_three = ids;
    else if (n == 3 && ids.size() == 3 && first_three.size() == 3)
      check(ids == first_three, "3 threads again after 1 and 2: the same worker threads serve");
  }
}

void test_idle_workers_sleep() {
  set_num_threads(3);
  for (int i = 0; i < 100; ++i) parallel_for(64, [](size_t) {});
  const double before = process_cpu_seconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const double used = process_cpu_seconds() - before;
  check(used < 0.05, "idle for 0.5 s after calls: %.3f s of CPU (workers should sleep)", used);
}

}  // namespace

// Each thread that takes part gets a slice of its own: a task stamps its slice, works a little and
// finds the stamp intact; the call's workspace is threads x the aligned slice (one slice inline).
void test_scratch(int threads) {
  set_num_threads(threads);
  std::atomic<bool> ok{true};
  std::atomic<size_t> runs{0};
  parallel_for_scratch(200, 100, [&](size_t t, void* scratch) {
    auto* p = static_cast<volatile size_t*>(scratch);
    if (reinterpret_cast<uintptr_t>(scratch) % 64) ok = false;
    p[0] = t;
    for (int i = 0; i < 2000; ++i) (void)p[1];
    if (p[0] != t) ok = false;
    ++runs;
  });
  check(ok && runs == 200, "parallel_for_scratch(%d threads): private aligned slices, every task once", threads);
  const size_t want = threads == 1 ? 100 : size_t(threads) * workspace_align(100);
  check(workspace_last_bytes() == want, "scratch of %d threads reported: %zu, want %zu", threads,
        workspace_last_bytes(), want);
  set_num_threads(2);
  parallel_for(4, [&](size_t) {  // nested: runs inline with one slice, its own block
    parallel_for_scratch(10, 64, [&](size_t t, void* scratch) { static_cast<size_t*>(scratch)[0] = t; });
  });
}

int main() {
  test_split_range();
  for (int threads : {1, 2, 3}) test_scratch(threads);
  for (int threads : {1, 2, 3, 5}) test_every_task_once(threads);
  for (int threads : {2, 3}) test_shares(threads);
  test_grid_overflow();
  test_nested();
  test_exceptions();
  test_validation();
  test_concurrent_callers();
  test_shrink_parks_workers();
  test_fork();
  test_idle_workers_sleep();
  return nnkern_test::finish();
}
