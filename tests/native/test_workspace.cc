// The workspace arena (core/workspace.h) and the algorithm table (core/algorithm.h).
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

#include "core/algorithm.h"
#include "core/workspace.h"
#include "harness.h"

using namespace nnkern;
using nnkern_test::check;

namespace {

void test_arena() {
  {
    Workspace w(1000);
    check(w.data() != nullptr && reinterpret_cast<uintptr_t>(w.data()) % 64 == 0, "block 64-byte aligned");
    std::memset(w.data(), 1, 1000);
    {
      Workspace nested(300);  // an op calling an op: the next depth's block
      check(nested.data() != w.data() && nested.data() != nullptr, "nested block is separate");
      std::memset(nested.data(), 2, 300);
    }
    check(static_cast<unsigned char*>(w.data())[999] == 1, "nested use leaves the outer block alone");
  }
  check(workspace_last_bytes() == 1300, "last call: outer + nested = 1300, got %zu", workspace_last_bytes());
  check(workspace_retained_bytes() >= 1000, "a small block is kept for the next call");
  void* kept;
  {
    Workspace w(500);
    kept = w.data();
  }
  {
    Workspace w(800);
    check(w.data() == kept, "the kept block is reused");
  }
  check(workspace_last_bytes() == 800, "last call 800, got %zu", workspace_last_bytes());
  {
    Workspace outer(100);
    void* nested_block;
    {
      Workspace nested(200);
      nested_block = nested.data();
    }
    Workspace nested_again(150);
    check(nested_again.data() == nested_block, "each depth reuses its own kept block");
  }
  { Workspace huge(kWorkspaceRetainBytes + 1); }
  check(workspace_retained_bytes() <= kWorkspaceRetainBytes, "a block above the retain limit is freed, %zu kept",
        workspace_retained_bytes());
  { Workspace none(0); }
  check(workspace_last_bytes() == 0, "a call without scratch reports 0");
  size_t other = 1;
  std::thread([&] {
    Workspace w(64);
    other = workspace_retained_bytes();
  }).join();
  check(other == 64, "each thread has its own arena");
  {
    Workspace d0(1), d1(1), d2(1), d3(1), d4(64);  // deeper than the kept depths: a block of its own
    check(d4.data() != nullptr && reinterpret_cast<uintptr_t>(d4.data()) % 64 == 0, "deep block aligned");
  }
}

struct Toy {
  int n;
};

const AlgorithmTable<Toy>& toy_table() {
  static const AlgorithmTable<Toy> table(
      "toy", {{"small", [](const Toy& t) { return t.n < 10; }, nullptr, nullptr,
               [](const Toy&, const Workspace& ws) { check(ws.data() == nullptr, "small: no workspace"); }},
              {"general", [](const Toy&) { return true; }, [](const Toy& t) { return t.n < 100; },
               [](const Toy& t) { return size_t(t.n); },
               [](const Toy& t, const Workspace& ws) { check(ws.bytes() == size_t(t.n), "general: n bytes"); }},
              {"huge", [](const Toy& t) { return t.n >= 100; }, nullptr, nullptr,
               [](const Toy&, const Workspace&) {}}});
  return table;
}

void test_algorithm_table() {
  const auto& t = toy_table();
  check(std::string(t.select({5}).name) == "small", "auto takes the first applicable, preferred entry");
  check(std::string(t.select({50}).name) == "general", "auto skips entries that do not apply");
  check(std::string(t.select({500}).name) == "huge", "auto passes over applicable entries it does not prefer");
  check(std::string(t.select({5}, "general").name) == "general", "a name selects its entry");
  bool threw = false;
  try {
    t.select({50}, "small");
  } catch (const std::invalid_argument& e) {
    threw = std::string(e.what()).find("does not apply") != std::string::npos;
  }
  check(threw, "a named entry that does not apply is an error");
  threw = false;
  try {
    t.select({5}, "fast");
  } catch (const std::invalid_argument& e) {
    threw = std::string(e.what()).find("auto, small, general, huge") != std::string::npos;
  }
  check(threw, "an unknown name is an error that lists the choices");
  t.run({40});
  check(workspace_last_bytes() == 40, "run: the entry's workspace is the call's, got %zu", workspace_last_bytes());
  const auto* names = algorithm_names("toy");
  check(names && names->size() == 3, "the table registered its names");
}

}  // namespace

int main() {
  test_arena();
  test_algorithm_table();
  return nnkern_test::finish();
}
