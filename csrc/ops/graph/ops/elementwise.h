// Elementwise loops of the graph ops: a unary map and numpy broadcasting of two or three inputs, split across the
// pool for large tensors. The inner loops are plain C++ over contiguous runs, which the compiler vectorizes for
// the baseline ISA. Baseline header.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/threadpool.h"
#include "ops/graph/tensor.h"

namespace nnkern::graph {

// Below this many elements a loop runs on the calling thread (waking the pool costs more).
constexpr size_t kElementwiseParallel = size_t(1) << 16;

// fn(begin, end) over [0, n), in contiguous ranges across the pool when n is large.
template <typename Fn>
void for_ranges(size_t n, Fn fn) {
  if (n < kElementwiseParallel) {
    fn(size_t(0), n);
    return;
  }
  parallel_for_ranges(n, [&](size_t b, size_t e) { fn(b, e); });
}

template <typename In, typename Out, typename F>
void map_elements(const In* x, Out* y, size_t n, F f) {
  for_ranges(n, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) y[i] = f(x[i]);
  });
}

// The broadcast of inputs of these shapes onto `out`, as runs: `inner` elements along which each input advances
// by 0 or 1 element, repeated over `outer` positions whose input offsets come from the collapsed outer dims.
struct Broadcast {
  std::vector<int64_t> out;
  size_t inner = 1;
  std::vector<size_t> inner_step;                // per input: 0 or 1
  std::vector<int64_t> outer_dims;               // collapsed dims before the inner run
  std::vector<std::vector<size_t>> outer_strides;  // per input, per outer dim (elements; 0 where broadcast)
  size_t outer() const;
  void offsets(size_t outer_index, size_t* off) const;  // each input's element offset at that outer position
};
Broadcast plan_broadcast(const std::vector<std::vector<int64_t>>& inputs, const std::vector<int64_t>& out);

// y = f(a, b) with numpy broadcasting.
template <typename A, typename B, typename Out, typename F>
void broadcast2(const Broadcast& bc, const A* a, const B* b, Out* y, F f) {
  const size_t inner = bc.inner, sa = bc.inner_step[0], sb = bc.inner_step[1];
  auto run = [&](size_t o0, size_t o1) {
    size_t off[2];
    for (size_t o = o0; o < o1; ++o) {
      bc.offsets(o, off);
      const A* pa = a + off[0];
      const B* pb = b + off[1];
      Out* py = y + o * inner;
      if (sa && sb) for (size_t i = 0; i < inner; ++i) py[i] = f(pa[i], pb[i]);
      else if (sa) { const B vb = pb[0]; for (size_t i = 0; i < inner; ++i) py[i] = f(pa[i], vb); }
      else if (sb) { const A va = pa[0]; for (size_t i = 0; i < inner; ++i) py[i] = f(va, pb[i]); }
      else { const Out v = f(pa[0], pb[0]); for (size_t i = 0; i < inner; ++i) py[i] = v; }
    }
  };
  const size_t outer = bc.outer();
  if (outer * inner < kElementwiseParallel || outer == 1) {
    if (outer == 1 && inner >= kElementwiseParallel && sa == sb) {
      for_ranges(inner, [&](size_t b0, size_t e0) {
        for (size_t i = b0; i < e0; ++i) y[i] = f(a[sa ? i : 0], b[sb ? i : 0]);
      });
      return;
    }
    run(0, outer);
    return;
  }
  parallel_for_ranges(outer, run);
}

// y = f(a, b, c) with numpy broadcasting (Where, Clip with tensors).
template <typename A, typename B, typename C, typename Out, typename F>
void broadcast3(const Broadcast& bc, const A* a, const B* b, const C* c, Out* y, F f) {
  const size_t inner = bc.inner, sa = bc.inner_step[0], sb = bc.inner_step[1], sc = bc.inner_step[2];
  auto run = [&](size_t o0, size_t o1) {
    size_t off[3];
    for (size_t o = o0; o < o1; ++o) {
      bc.offsets(o, off);
      Out* py = y + o * inner;
      for (size_t i = 0; i < inner; ++i) py[i] = f(a[off[0] + i * sa], b[off[1] + i * sb], c[off[2] + i * sc]);
    }
  };
  const size_t outer = bc.outer();
  if (outer * inner < kElementwiseParallel || outer == 1) run(0, outer);
  else parallel_for_ranges(outer, run);
}

}  // namespace nnkern::graph
