// A tiny test harness for the native C++ tests: CHECK counts, a closing "N passed, N failed" line
// (the form CI readers accept) and the exit status. Header-only, baseline code (no intrinsics).
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/isa.h"
#include "core/kernel_list.h"

namespace nnkern_test {

// The tests' deterministic draws: an LCG, so that no test depends on the C++ library's RNG. 24 bits.
inline uint32_t next_random(uint32_t& s) {
  s = s * 1664525u + 1013904223u;
  return s >> 8;
}
// A float in [-1, 1) from the same draws.
inline float next_unit(uint32_t& s) { return float(next_random(s)) / float(1u << 23) - 1.0f; }

inline long& passed() { static long n = 0; return n; }
inline long& failed() { static long n = 0; return n; }

// Records one check; prints the message (printf-style) only when it fails, at most 50 times.
inline bool check(bool ok, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
inline bool check(bool ok, const char* fmt, ...) {
  if (ok) {
    ++passed();
    return true;
  }
  if (++failed() <= 50) {
    std::va_list args;
    va_start(args, fmt);
    std::fputs("FAIL ", stdout);
    std::vprintf(fmt, args);
    std::fputc('\n', stdout);
    va_end(args);
  }
  return false;
}

inline int finish() {
  std::printf("%ld passed, %ld failed\n", passed(), failed());
  return failed() == 0 ? 0 : 1;
}

// Runs fn() in a forked child; returns the signal that ended it, 0 if it exited normally. Used to
// prove that an instruction really traps on a CPU without the feature (so refusing it matters).
template <typename F>
int child_signal(F fn) {
  std::fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    fn();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

// EXPECT_FEATURES="neon=1,neondot=0": lets each ctest entry assert what the (emulated) CPU reports,
// so a wrong QEMU_CPU cannot go unnoticed. Returns -1 if `name` is not listed.
inline int expected_feature(const char* name) {
  const char* env = std::getenv("EXPECT_FEATURES");
  if (!env) return -1;
  std::string s = std::string(",") + env + ",", key = std::string(",") + name + "=";
  size_t at = s.find(key);
  if (at == std::string::npos) return -1;
  return s[at + key.size()] == '1' ? 1 : 0;
}

// Calls fn(kernel, level) for every kernel of `list` this CPU can run, after checking that each is listed
// under its own name; prints a skip line, naming the ISA, for the others. Returns how many ran.
template <typename K, typename F>
int for_each_runnable(const nnkern::KernelList<K>& list, F fn) {
  int ran = 0;
  for (size_t i = 0; i < list.kernels.size(); ++i) {
    const K& kern = *list.kernels[i];
    const nnkern::KernelInfo& info = list.info[i];
    check(std::strcmp(kern.name, info.name) == 0, "kernel %s is listed as %s", kern.name, info.name);
    if (!nnkern::isa_supported(info.level)) {
      std::printf("skip %s: this CPU lacks %s\n", info.name, nnkern::isa_name(info.level));
      continue;
    }
    fn(kern, info.level);
    ++ran;
  }
  return ran;
}

}  // namespace nnkern_test
