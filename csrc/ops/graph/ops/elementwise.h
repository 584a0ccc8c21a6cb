// Elementwise loops of the graph ops: a unary map and numpy broadcasting of two or three inputs, split across the
// pool for large tensors, and the switch from a tensor's element type to a C++ type. The inner loops are plain
// C++ over contiguous runs, which the compiler vectorizes for the baseline ISA. Baseline header.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "core/threadpool.h"
#include "ops/graph/node.h"
#include "ops/graph/ops/common.h"
#include "ops/graph/ops/convert.h"
#include "ops/graph/ops/typed.h"
#include "ops/graph/tensor.h"

namespace nnkern::graph {

// Below this many elements a loop runs on the calling thread (waking the pool costs more); the graph ops' loops
// ask elementwise_parallel_min(), which a measurement may set (0: back to the default).
constexpr size_t kElementwiseParallel = size_t(1) << 16;
size_t elementwise_parallel_min();
void set_elementwise_parallel_min(size_t n);

// fn(begin, end) over [0, n), in contiguous ranges across the pool when n is large.
template <typename Fn>
void for_ranges(size_t n, Fn fn) {
  if (n < elementwise_parallel_min()) {
    if (n) fn(size_t(0), n);
    return;
  }
  parallel_for_ranges(n, [&](size_t b, size_t e) { fn(b, e); });
}

template <typename In, typename Out, typename F>
void map_elements(const In* x, Out* y, size_t n, F f) {
  for_ranges(n, [&](size_t b, size_t e) {
    const F g = f;  // a local copy, as in row2
    for (size_t i = b; i < e; ++i) y[i] = g(x[i]);
  });
}

// A step y = f(x) over n elements of input 0; the output may take over the input's memory where the element
// sizes match.
template <typename In, typename Out, typename F>
std::unique_ptr<Step> map_step(size_t n, F f, std::string detail = "") {
  return in_place_step([n, f](const StepData& d) { map_elements(d.in<In>(0), d.out<Out>(0), n, f); },
                       sizeof(In) == sizeof(Out) ? 0 : -1, std::move(detail));
}

// ---- element types (the switch itself: ops/graph/ops/typed.h)

// NodeSpec::require_types with the element types of a list.
template <typename... Ts>
void require_types(const NodeSpec& n, std::initializer_list<size_t> inputs, TypeList<Ts...>) {
  n.require_types(inputs, {dtype_of<Ts>()...});
}

// ---- broadcasting

// The broadcast of inputs of these shapes onto `out`, as runs: `inner` elements along which each input advances
// by 0 or 1 element, repeated over `outer` positions whose input offsets come from the collapsed outer dims.
struct Broadcast {
  std::vector<int64_t> out;
  size_t inner = 1;
  std::vector<size_t> inner_step;                  // per input: 0 or 1
  std::vector<int64_t> outer_dims;                 // collapsed dims before the inner run
  std::vector<std::vector<size_t>> outer_strides;  // per input, per outer dim (elements; 0 where broadcast)
  size_t total = 0;                                // elements of the output
  size_t outer() const;
  void offsets(size_t outer_index, size_t* off) const;  // each input's element offset at that outer position
};
Broadcast plan_broadcast(const std::vector<std::vector<int64_t>>& inputs, const std::vector<int64_t>& out);

// row(start, off, len) for each run of output elements [start, start + len) within [begin, end) that lies in one
// inner run: input k's element for output `start` is at off[k] (its later ones at off[k] + j * inner_step[k]).
template <size_t K, typename Row>
void for_rows(const Broadcast& bc, size_t begin, size_t end, Row row) {
  const size_t inner = bc.inner, nd = bc.outer_dims.size();
  size_t idx_small[8];
  std::vector<size_t> idx_big(nd > 8 ? nd : 0);
  size_t* idx = nd > 8 ? idx_big.data() : idx_small;
  size_t o = begin / inner, i = begin % inner;
  size_t base[K] = {};
  for (size_t d = nd; d-- > 0;) {
    const size_t extent = size_t(bc.outer_dims[d]);
    idx[d] = o % extent;
    o /= extent;
    for (size_t k = 0; k < K; ++k) base[k] += idx[d] * bc.outer_strides[k][d];
  }
  while (begin < end) {
    const size_t len = std::min(inner - i, end - begin);
    size_t off[K];
    for (size_t k = 0; k < K; ++k) off[k] = base[k] + i * bc.inner_step[k];
    row(begin, static_cast<const size_t*>(off), len);
    begin += len;
    i = 0;
    for (size_t d = nd; d-- > 0;) {  // the next outer position
      for (size_t k = 0; k < K; ++k) base[k] += bc.outer_strides[k][d];
      if (++idx[d] < size_t(bc.outer_dims[d])) break;
      for (size_t k = 0; k < K; ++k) base[k] -= bc.outer_strides[k][d] * size_t(bc.outer_dims[d]);
      idx[d] = 0;
    }
  }
}

// y[0, len) = f(a[j * sa], b[j * sb]): one loop per case, so that each is a plain contiguous loop. f by value: a
// local copy, so stores through y (a uint8_t* may alias anything) cannot change its parameters and the loops
// vectorize.
template <typename A, typename B, typename Out, typename F>
inline void row2(const A* a, const B* b, Out* y, size_t len, bool sa, bool sb, F f) {
  if (sa && sb) {
    for (size_t j = 0; j < len; ++j) y[j] = f(a[j], b[j]);
  } else if (sa) {
    const B vb = b[0];
    for (size_t j = 0; j < len; ++j) y[j] = f(a[j], vb);
  } else if (sb) {
    const A va = a[0];
    for (size_t j = 0; j < len; ++j) y[j] = f(va, b[j]);
  } else {
    const Out v = f(a[0], b[0]);
    for (size_t j = 0; j < len; ++j) y[j] = v;
  }
}

// y = f(a, b) with numpy broadcasting. y may be a or b itself where that input has the output's shape.
template <typename A, typename B, typename Out, typename F>
void broadcast2(const Broadcast& bc, const A* a, const B* b, Out* y, F f) {
  const bool sa = bc.inner_step[0] != 0, sb = bc.inner_step[1] != 0;
  for_ranges(bc.total, [&](size_t begin, size_t end) {
    for_rows<2>(bc, begin, end, [&](size_t start, const size_t* off, size_t len) {
      row2(a + off[0], b + off[1], y + start, len, sa, sb, f);
    });
  });
}

// y = f(a, b, c) with numpy broadcasting (Where).
template <typename A, typename B, typename C, typename Out, typename F>
void broadcast3(const Broadcast& bc, const A* a, const B* b, const C* c, Out* y, F f) {
  const size_t sa = bc.inner_step[0], sb = bc.inner_step[1], sc = bc.inner_step[2];
  for_ranges(bc.total, [&](size_t begin, size_t end) {
    for_rows<3>(bc, begin, end, [&, f](size_t start, const size_t* off, size_t len) {  // f copied, as in row2
      const A* pa = a + off[0];
      const B* pb = b + off[1];
      const C* pc = c + off[2];
      Out* py = y + start;
      if (sa && sb && sc) {
        for (size_t j = 0; j < len; ++j) py[j] = f(pa[j], pb[j], pc[j]);
      } else {
        for (size_t j = 0; j < len; ++j) py[j] = f(pa[j * sa], pb[j * sb], pc[j * sc]);
      }
    });
  });
}

// ---- node helpers of the broadcasting ops

// The broadcast shape of inputs [first, first + count) (ValueError naming the shapes if they do not broadcast);
// ValueError too if their element types differ, unless same_types is false.
std::vector<int64_t> broadcast_inputs(const NodeSpec& n, size_t first, size_t count, bool same_types = true);

// A step y = f(a, b) of inputs 0 and 1 with numpy broadcasting. The output may take over an input of its shape
// and element size.
template <typename A, typename B, typename Out, typename F>
std::unique_ptr<Step> binary_step(const NodeSpec& n, const TensorDesc& out, F f) {
  const Broadcast bc = plan_broadcast({n.in(0).shape, n.in(1).shape}, out.shape);
  int over = -1;
  if (n.in(0).shape == out.shape && sizeof(A) == sizeof(Out)) over = 0;
  else if (n.in(1).shape == out.shape && sizeof(B) == sizeof(Out)) over = 1;
  return in_place_step([bc, f](const StepData& d) { broadcast2(bc, d.in<A>(0), d.in<B>(1), d.out<Out>(0), f); },
                       over);
}

}  // namespace nnkern::graph
