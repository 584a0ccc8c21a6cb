// Pad of any element type, modes constant, reflect, edge and wrap; pads and axes are constants (they decide the
// output's shape), the constant value is read at each run. Negative pads crop: the input is cut first and the
// other modes reflect / repeat / wrap what remains (as onnxruntime does). Each output dimension has a map from
// output to input index (-1: the constant); the rows are filled from those maps, the middle of the last
// dimension copied as one run.
#include <set>

#include "core/checked.h"
#include "core/threadpool.h"
#include "ops/graph/ops/common.h"
#include "ops/graph/ops/elementwise.h"
#include "ops/graph/ops/strided.h"

namespace nnkern::graph {

namespace {

enum class PadMode { constant, reflect, edge, wrap };

struct PadAxis {
  int64_t crop = 0, kept = 0;    // the input range [crop, crop + kept) that stays
  int64_t before = 0, after = 0;  // what is added on each side
  int64_t out() const { return before + kept + after; }
};

struct PadGeometry {
  PadMode mode = PadMode::constant;
  std::vector<PadAxis> axes;  // per input dimension
  std::vector<int64_t> shape;
};

PadMode pad_mode(const NodeSpec& n) {
  const std::string m = n.attr_string("mode", "constant");
  if (m == "constant") return PadMode::constant;
  if (m == "reflect") return PadMode::reflect;
  if (m == "edge") return PadMode::edge;
  if (m == "wrap") return PadMode::wrap;
  n.invalid("mode must be constant, reflect, edge or wrap, not '" + m + "'");
}

PadGeometry pad_geometry(const NodeSpec& n) {
  const TensorDesc& x = n.in(0);
  const size_t r = x.rank();
  PadGeometry g;
  g.mode = pad_mode(n);
  const std::vector<int64_t> pads = n.need_constant(1, "pads").ints();
  std::vector<size_t> axes;
  if (n.has_input(3)) {
    std::set<size_t> seen;
    for (int64_t a : n.need_constant(3, "axes").ints()) {
      axes.push_back(normalize_axis(a, r, "Pad axis"));
      if (!seen.insert(axes.back()).second) n.invalid("axes repeat " + std::to_string(a));
    }
  } else {
    for (size_t a = 0; a < r; ++a) axes.push_back(a);
  }
  const size_t k = axes.size();
  if (pads.size() != 2 * k)
    n.invalid("pads has " + std::to_string(pads.size()) + " entries for " + std::to_string(k) + " axes (2 per axis)");
  if (n.has_input(2)) {
    if (n.in(2).dtype != x.dtype) n.invalid("constant_value must have the data's type");
    if (n.in(2).elements() > 1) n.invalid("constant_value must be a scalar");
  }
  g.axes.resize(r);
  for (size_t d = 0; d < r; ++d) g.axes[d].kept = x.shape[d];
  for (size_t i = 0; i < k; ++i) {
    PadAxis& a = g.axes[axes[i]];
    const int64_t dim = x.shape[axes[i]], pb = pads[i], pe = pads[k + i];
    if (pb + dim + pe < 0 || pb < -dim || pe < -dim)
      n.invalid("pads " + std::to_string(pb) + ", " + std::to_string(pe) + " crop more than the dimension " +
                std::to_string(dim));
    a.crop = pb < 0 ? -pb : 0;
    a.kept = dim - a.crop - (pe < 0 ? -pe : 0);
    a.before = pb > 0 ? pb : 0;
    a.after = pe > 0 ? pe : 0;
    if (a.kept < 0) n.invalid("pads crop more than the dimension " + std::to_string(dim));
    if (a.kept == 0 && (a.before || a.after) && g.mode != PadMode::constant)
      n.invalid("cannot pad an empty dimension in mode " + n.attr_string("mode", "constant"));
  }
  for (const PadAxis& a : g.axes) g.shape.push_back(a.out());
  return g;
}

std::vector<TensorDesc> infer_pad(const NodeSpec& n) { return one(n.in(0).dtype, pad_geometry(n).shape); }

// The input index of each output index along one axis (-1: the constant value).
std::vector<int64_t> axis_map(const PadAxis& a, PadMode mode) {
  std::vector<int64_t> map(size_t(a.out()));
  const int64_t k = a.kept;
  for (int64_t o = 0; o < a.out(); ++o) {
    int64_t i = o - a.before;  // in [0, k) inside
    if (i < 0 || i >= k) {
      switch (mode) {
        case PadMode::constant: i = -1; break;
        case PadMode::edge: i = i < 0 ? 0 : k - 1; break;
        case PadMode::wrap: i = ((i % k) + k) % k; break;
        case PadMode::reflect:
          if (k == 1) {
            i = 0;
          } else {  // reflection without repeating the edge, periodic over 2 (k - 1)
            const int64_t period = 2 * (k - 1);
            i = ((i % period) + period) % period;
            if (i >= k) i = period - i;
          }
          break;
      }
    }
    map[size_t(o)] = i < 0 ? -1 : i + a.crop;
  }
  return map;
}

struct PadPlan {
  std::vector<std::vector<int64_t>> maps;  // per dimension
  std::vector<size_t> xstride;
  std::vector<int64_t> oshape;
  int64_t mid_begin = 0, mid_end = 0, mid_src = 0;  // the last dimension's run copied as is
  size_t rows = 0, width = 0;
};

template <typename T>
void pad_rows(const PadPlan& p, const T* x, T* y, T value) {
  const size_t r = p.oshape.size(), W = p.width;
  const std::vector<int64_t>& last = p.maps[r - 1];
  auto run = [&](size_t r0, size_t r1) {
    std::vector<size_t> pos(r, 0);
    for (size_t d = r - 1, rem = r0; d-- > 0;) {
      pos[d] = rem % size_t(p.oshape[d]);
      rem /= size_t(p.oshape[d]);
    }
    for (size_t row = r0; row < r1; ++row) {
      T* dst = y + row * W;
      bool fill = false;
      size_t off = 0;
      for (size_t d = 0; d + 1 < r; ++d) {
        const int64_t i = p.maps[d][pos[d]];
        if (i < 0) fill = true;
        else off += size_t(i) * p.xstride[d];
      }
      if (fill) {
        for (size_t j = 0; j < W; ++j) dst[j] = value;
      } else {
        const T* src = x + off;
        for (int64_t j = 0; j < p.mid_begin; ++j) dst[j] = last[size_t(j)] < 0 ? value : src[last[size_t(j)]];
        std::memcpy(dst + p.mid_begin, src + p.mid_src, size_t(p.mid_end - p.mid_begin) * sizeof(T));
        for (int64_t j = p.mid_end; j < int64_t(W); ++j) dst[j] = last[size_t(j)] < 0 ? value : src[last[size_t(j)]];
      }
      for (size_t d = r - 1; d-- > 0;) {
        if (++pos[d] < size_t(p.oshape[d])) break;
        pos[d] = 0;
      }
    }
  };
  if (p.rows * W < elementwise_parallel_min() || p.rows == 1) run(0, p.rows);
  else parallel_for_ranges(p.rows, run);
}

std::unique_ptr<Step> make_pad(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers&) {
  const TensorDesc& x = n.in(0);
  const PadGeometry g = pad_geometry(n);
  if (out[0].shape == x.shape && x.rank() > 0) {
    bool none = true;
    for (const PadAxis& a : g.axes) none = none && a.crop == 0;
    if (none) return view_step(x.bytes());
  }
  if (x.rank() == 0) return view_step(x.bytes());
  PadPlan p;
  for (const PadAxis& a : g.axes) p.maps.push_back(axis_map(a, g.mode));
  p.xstride = contiguous_strides(x.shape);
  p.oshape = g.shape;
  const PadAxis& last = g.axes.back();
  p.mid_begin = last.kept > 0 ? last.before : 0;
  p.mid_end = last.kept > 0 ? last.before + last.kept : 0;
  p.mid_src = last.crop;
  p.width = size_t(g.shape.back());
  p.rows = p.width ? out[0].elements() / p.width : 0;
  const size_t esize = dtype_size(x.dtype);
  const bool has_value = n.has_input(2) && n.in(2).elements() == 1;
  return fn_step([p, esize, has_value](const StepData& d) {
    if (p.rows == 0) return;
    with_word(esize, [&](auto w) {
      using T = decltype(w);
      T value = 0;
      if (has_value) std::memcpy(&value, d.in(2), sizeof(T));
      pad_rows(p, d.in<T>(0), d.out<T>(0), value);
    });
  });
}

}  // namespace

void register_graph_ops_pad() { register_op("Pad", {infer_pad, make_pad}); }

}  // namespace nnkern::graph
