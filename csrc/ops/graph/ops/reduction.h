// Reductions of the graph ops (ReduceSum and family, the statistics of the normalizations), in one fixed order
// of operations per shape, whatever the thread count:
//   - a contiguous run is cut into pieces of kPiece elements; a piece is reduced in kLanes interleaved partials
//     (lane j takes elements j, j + kLanes, ...), which the compiler vectorizes, combined pairwise at its end;
//   - the partials of the pieces (in order) are folded kGroup at a time into a group, and the groups in order into
//     the result: float32 sums round about (kPiece / kLanes + kGroup + pieces / kGroup) times, not n times;
//   - where the reduced elements are not contiguous (the innermost dimension is kept), the kept positions of a
//     tile advance together, one reduced position after another, folded kGroup positions at a time likewise.
// Baseline header: plain loops.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/threadpool.h"
#include "kernels/fixed_order_sum.h"
#include "ops/graph/ops/elementwise.h"

namespace nnkern::graph {

constexpr size_t kLanes = kSumLanes;  // kernels/fixed_order_sum.h: shared with the kernels that sum the same way
constexpr size_t kPiece = kSumPiece;
constexpr size_t kGroup = kSumGroup;
// Kept positions reduced together in column loops (stack arrays of this many accumulators).
constexpr size_t kTile = 1024;

template <typename T>
inline bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) return v != v;
  else return false;
}

// How values combine. A is the accumulator type.
template <typename A_>
struct SumOp {
  using A = A_;
  static A identity() { return A(0); }
  static A combine(A a, A b) { return a + b; }
};
template <typename A_>
struct ProdOp {
  using A = A_;
  static A identity() { return A(1); }
  static A combine(A a, A b) { return a * b; }
};
// Max and Min propagate NaN (either operand).
template <typename A_>
struct MaxOp {
  using A = A_;
  static A identity() {
    if constexpr (std::numeric_limits<A>::has_infinity) return -std::numeric_limits<A>::infinity();
    else return std::numeric_limits<A>::lowest();
  }
  static A combine(A a, A b) { return (b > a || is_nan(b)) ? b : a; }
};
template <typename A_>
struct MinOp {
  using A = A_;
  static A identity() {
    if constexpr (std::numeric_limits<A>::has_infinity) return std::numeric_limits<A>::infinity();
    else return std::numeric_limits<A>::max();
  }
  static A combine(A a, A b) { return (b < a || is_nan(b)) ? b : a; }
};

// Float maxima and minima reduce as integers: an order-preserving key of the bits (-0 below +0), NaN mapped to the
// greatest key for a maximum and the least for a minimum so that it propagates. g++ vectorizes an integer max
// loop; a float one with a NaN test it does not (under -ftrapping-math its compares stay scalar branches).
template <typename F>
struct FloatKey {
  using I = std::conditional_t<sizeof(F) == 4, int32_t, int64_t>;
  static constexpr int kBits = int(8 * sizeof(I));
  static constexpr I kMag = std::numeric_limits<I>::max();  // all bits but the sign
  static I flip(I b) { return b ^ ((b >> (kBits - 1)) & kMag); }  // its own inverse
  static I key(F f) {
    I b;
    std::memcpy(&b, &f, sizeof b);
    return flip(b);
  }
  static F value(I k) {
    const I b = flip(k);
    F f;
    std::memcpy(&f, &b, sizeof f);
    return f;
  }
  // The key of f for a maximum (Max) or minimum, NaN winning: a NaN's sign is cleared for a maximum (a positive
  // NaN keys above +inf) and set for a minimum (below -inf). Arithmetic only, no select, so that it vectorizes.
  template <bool Max>
  static I key_nan(F f) {
    I b;
    std::memcpy(&b, &f, sizeof b);
    const F inf = std::numeric_limits<F>::infinity();
    I inf_bits;
    std::memcpy(&inf_bits, &inf, sizeof inf_bits);
    const I sign = std::numeric_limits<I>::min();
    const I nan = (inf_bits - (b & kMag)) >> (kBits - 1);  // all ones for a NaN
    b = Max ? (b & ~(nan & sign)) : (b | (nan & sign));
    return flip(b);
  }
};

// The reduction of x[0, n), n <= kPiece, of map(x[i]) (see the top of the file for the order).
template <typename C, typename T, typename Map>
typename C::A reduce_piece(const T* x, size_t n, const Map& map) {
  using A = typename C::A;
  if (n < kLanes) {
    A a = C::identity();
    for (size_t i = 0; i < n; ++i) a = C::combine(a, map(x[i]));
    return a;
  }
  A acc[kLanes];
  for (size_t j = 0; j < kLanes; ++j) acc[j] = C::identity();
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (size_t j = 0; j < kLanes; ++j) acc[j] = C::combine(acc[j], map(x[i + j]));
  for (size_t j = 0; i + j < n; ++j) acc[j] = C::combine(acc[j], map(x[i + j]));
  for (size_t w = kLanes / 2; w > 0; w /= 2)
    for (size_t j = 0; j < w; ++j) acc[j] = C::combine(acc[j], acc[j + w]);
  return acc[0];
}

// The pieces' partials folded in order, kGroup at a time.
template <typename C>
struct Fold {
  using A = typename C::A;
  A total = C::identity(), group = C::identity();
  size_t k = 0;
  void add(A v) {
    group = C::combine(group, v);
    if (++k == kGroup) {
      total = C::combine(total, group);
      group = C::identity();
      k = 0;
    }
  }
  A result() const { return C::combine(total, group); }
};

// The reduction of a contiguous run of any length.
template <typename C, typename T, typename Map>
typename C::A reduce_run(const T* x, size_t n, const Map& map) {
  Fold<C> f;
  for (size_t b = 0; b < n; b += kPiece) f.add(reduce_piece<C>(x + b, std::min(kPiece, n - b), map));
  return f.result();
}

// The maximum (Max) or minimum of a contiguous float run, NaN if it holds one; -inf / +inf if empty.
template <bool Max, typename F>
F extreme_run(const F* x, size_t n) {
  using K = FloatKey<F>;
  using I = typename K::I;
  if (n == 0) return Max ? -std::numeric_limits<F>::infinity() : std::numeric_limits<F>::infinity();
  const auto key = [](F v) { return K::template key_nan<Max>(v); };
  return K::value(Max ? reduce_run<MaxOp<I>>(x, n, key) : reduce_run<MinOp<I>>(x, n, key));
}

// A reduction of a tensor over some of its axes, its dimensions of size 1 dropped and neighbours of the same kind
// (kept / reduced) merged.
struct ReducePlan {
  size_t outputs = 0;  // output elements, row-major over the kept dimensions
  size_t count = 0;    // input elements reduced into each output
  bool rows = false;   // the innermost dimension is reduced: each output reduces contiguous runs
  size_t inner = 1;    // the innermost dimension's length (reduced if rows, else kept; 1 if none)
  std::vector<size_t> kept_sizes, kept_strides;  // rows: every kept dim; columns: the kept dims before the inner
  std::vector<size_t> red_sizes, red_strides;    // rows: the reduced dims before the inner; columns: every one
};
ReducePlan plan_reduce(const std::vector<int64_t>& shape, const std::vector<bool>& reduced);

// The element offset of position `index` (row-major) of the dims `sizes` with these strides.
inline size_t offset_of(size_t index, const std::vector<size_t>& sizes, const std::vector<size_t>& strides) {
  size_t off = 0;
  for (size_t d = sizes.size(); d-- > 0;) {
    off += (index % sizes[d]) * strides[d];
    index /= sizes[d];
  }
  return off;
}

// Walks the positions of some dims in row-major order, keeping their element offset.
class Odometer {
 public:
  Odometer(const std::vector<size_t>& sizes, const std::vector<size_t>& strides)
      : sizes_(sizes), strides_(strides), idx_(sizes.size(), 0) {}
  size_t offset() const { return off_; }
  void next() {
    for (size_t d = sizes_.size(); d-- > 0;) {
      off_ += strides_[d];
      if (++idx_[d] < sizes_[d]) return;
      off_ -= strides_[d] * sizes_[d];
      idx_[d] = 0;
    }
  }

 private:
  const std::vector<size_t>& sizes_;
  const std::vector<size_t>& strides_;
  std::vector<size_t> idx_;
  size_t off_ = 0;
};

// Runs a plan: for each output o, finish(o, r) with r the reduction (combine C) of map(x, shift(o)) over o's
// elements. map(T, A) -> A; shift(size_t) -> A (what map subtracts: a maximum, a mean; anything where unused).
// The order of operations is the file's, fixed by the plan; threads split outputs or pieces alike.
// Requires p.outputs > 0 and p.count > 0.
template <typename C, typename T, typename Map, typename Shift, typename Finish>
void run_reduce(const ReducePlan& p, const T* x, const Map& map, const Shift& shift, const Finish& finish) {
  using A = typename C::A;
  const size_t work = p.outputs * p.count;
  if (p.rows) {
    const size_t runs = p.count / p.inner, per_run = (p.inner + kPiece - 1) / kPiece, pieces = runs * per_run;
    auto piece = [&](size_t o, size_t base, size_t run_off, size_t b) {
      const A s = shift(o);
      return reduce_piece<C>(x + base + run_off + b, std::min(kPiece, p.inner - b), [&](T v) { return map(v, s); });
    };
    auto outputs = [&](size_t o0, size_t o1) {
      for (size_t o = o0; o < o1; ++o) {
        const size_t base = offset_of(o, p.kept_sizes, p.kept_strides);
        Fold<C> f;
        Odometer od(p.red_sizes, p.red_strides);
        for (size_t r = 0; r < runs; ++r, od.next())
          for (size_t b = 0; b < p.inner; b += kPiece) f.add(piece(o, base, od.offset(), b));
        finish(o, f.result());
      }
    };
    if (work < elementwise_parallel_min()) {
      outputs(0, p.outputs);
    } else if (p.outputs >= 4 * size_t(get_num_threads())) {
      parallel_for_ranges(p.outputs, outputs);
    } else {
      // Few outputs of many elements: the pieces in parallel, folded after in the same order.
      std::vector<A> partial(p.outputs * pieces);
      parallel_for_ranges(partial.size(), [&](size_t t0, size_t t1) {
        for (size_t t = t0; t < t1; ++t) {
          const size_t o = t / pieces, k = t % pieces;
          partial[t] = piece(o, offset_of(o, p.kept_sizes, p.kept_strides),
                             offset_of(k / per_run, p.red_sizes, p.red_strides), (k % per_run) * kPiece);
        }
      });
      for (size_t o = 0; o < p.outputs; ++o) {
        Fold<C> f;
        for (size_t k = 0; k < pieces; ++k) f.add(partial[o * pieces + k]);
        finish(o, f.result());
      }
    }
    return;
  }
  const size_t tiles = (p.inner + kTile - 1) / kTile, tasks = (p.outputs / p.inner) * tiles;
  auto run_tiles = [&](size_t t0, size_t t1) {
    A total[kTile], group[kTile], sh[kTile];
    for (size_t t = t0; t < t1; ++t) {
      const size_t q = t / tiles, j0 = (t % tiles) * kTile, len = std::min(kTile, p.inner - j0);
      const size_t o0 = q * p.inner + j0;
      const T* base = x + offset_of(q, p.kept_sizes, p.kept_strides) + j0;
      for (size_t j = 0; j < len; ++j) {
        total[j] = group[j] = C::identity();
        sh[j] = shift(o0 + j);
      }
      Odometer od(p.red_sizes, p.red_strides);
      size_t k = 0;
      for (size_t r = 0; r < p.count; ++r, od.next()) {
        const T* row = base + od.offset();
        for (size_t j = 0; j < len; ++j) group[j] = C::combine(group[j], map(row[j], sh[j]));
        if (++k == kGroup) {
          for (size_t j = 0; j < len; ++j) {
            total[j] = C::combine(total[j], group[j]);
            group[j] = C::identity();
          }
          k = 0;
        }
      }
      for (size_t j = 0; j < len; ++j) finish(o0 + j, C::combine(total[j], group[j]));
    }
  };
  if (work < elementwise_parallel_min() || tasks < 2) run_tiles(0, tasks);
  else parallel_for_ranges(tasks, run_tiles);
}

}  // namespace nnkern::graph
