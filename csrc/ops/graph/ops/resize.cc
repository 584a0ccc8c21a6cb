// Resize (and the older Upsample, rewritten into it on import): modes nearest (every element type), linear and
// cubic (float32, float64) over any set of axes, with antialias, exclude_outside, keep_aspect_ratio_policy, axes
// and every coordinate_transformation_mode (tf_crop_and_resize with its roi and extrapolation_value). Scales or
// sizes (and the roi) are constants: they decide the output's shape.
//
// Interpolation is separable: each resized axis gets a table of taps (input index, weight) per output index,
// built once per plan, the coordinates computed in float32 as onnxruntime does. A run walks the output rows (all
// dimensions but the last): the taps of the resized outer axes give the input rows and their weights. Linear and
// cubic interpolate those rows along the last axis (kept in a small cache, since an upsampling reads each input
// row for several output rows) and blend them. Nearest copies words: a row whose source is the previous row's is
// a copy of the output row just written, and an integer upsampling of the last axis repeats each element (the
// common 2x upsampling of NCHW feature maps).
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "core/threadpool.h"
#include "ops/graph/ops/common.h"
#include "ops/graph/ops/elementwise.h"
#include "ops/graph/ops/strided.h"

namespace nnkern::graph {

namespace {

enum class Mode { nearest, linear, cubic };
enum class Coord {
  half_pixel,
  half_pixel_symmetric,
  pytorch_half_pixel,
  align_corners,
  asymmetric,
  tf_half_pixel_for_nn,
  tf_crop_and_resize
};
enum class Nearest { round_prefer_floor, round_prefer_ceil, floor, ceil };

struct ResizeGeometry {
  Mode mode = Mode::nearest;
  Coord coord = Coord::half_pixel;
  Nearest nearest = Nearest::round_prefer_floor;
  float cubic_a = -0.75f, extrapolation = 0.0f;
  bool exclude_outside = false, antialias = false;
  std::vector<int64_t> in, out;
  std::vector<float> scale, roi_start, roi_end;  // per dimension
  std::vector<bool> resized;                      // per dimension: not the identity
};

template <typename E>
E pick(const NodeSpec& n, const char* attr, const char* dflt, std::initializer_list<std::pair<const char*, E>> values) {
  const std::string v = n.attr_string(attr, dflt);
  std::string names;
  for (const auto& [name, e] : values) {
    if (v == name) return e;
    names += (names.empty() ? "" : ", ") + std::string(name);
  }
  n.invalid(std::string(attr) + " '" + v + "' is not one of " + names);
}

ResizeGeometry resize_geometry(const NodeSpec& n) {
  const TensorDesc& x = n.in(0);
  const size_t r = x.rank();
  ResizeGeometry g;
  g.mode = pick<Mode>(n, "mode", "nearest",
                      {{"nearest", Mode::nearest}, {"linear", Mode::linear}, {"cubic", Mode::cubic}});
  g.coord = pick<Coord>(n, "coordinate_transformation_mode", "half_pixel",
                        {{"half_pixel", Coord::half_pixel},
                         {"half_pixel_symmetric", Coord::half_pixel_symmetric},
                         {"pytorch_half_pixel", Coord::pytorch_half_pixel},
                         {"align_corners", Coord::align_corners},
                         {"asymmetric", Coord::asymmetric},
                         {"tf_half_pixel_for_nn", Coord::tf_half_pixel_for_nn},
                         {"tf_crop_and_resize", Coord::tf_crop_and_resize}});
  g.nearest = pick<Nearest>(n, "nearest_mode", "round_prefer_floor",
                            {{"round_prefer_floor", Nearest::round_prefer_floor},
                             {"round_prefer_ceil", Nearest::round_prefer_ceil},
                             {"floor", Nearest::floor},
                             {"ceil", Nearest::ceil}});
  const std::string policy = n.attr_string("keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
    n.invalid("keep_aspect_ratio_policy '" + policy + "' is not one of stretch, not_larger, not_smaller");
  g.cubic_a = n.attr_float("cubic_coeff_a", -0.75f);
  g.extrapolation = n.attr_float("extrapolation_value", 0.0f);
  g.exclude_outside = n.attr_int("exclude_outside", 0) != 0;
  g.antialias = n.attr_int("antialias", 0) != 0 && g.mode != Mode::nearest;  // nearest has no filter to widen
  if (g.mode != Mode::nearest && x.dtype != DType::f32 && x.dtype != DType::f64)
    n.unsupported("mode " + n.attr_string("mode", "") + " on " + dtype_name(x.dtype) +
                  " (supported: float32, float64; mode nearest takes every type)");
  if (r == 0) n.invalid("cannot resize a scalar");

  std::vector<size_t> axes;
  if (n.has("axes")) {
    std::set<size_t> seen;
    for (int64_t a : n.attr_ints("axes")) {
      axes.push_back(normalize_axis(a, r, "Resize axis"));
      if (!seen.insert(axes.back()).second) n.invalid("axes repeat " + std::to_string(a));
    }
  } else {
    for (size_t a = 0; a < r; ++a) axes.push_back(a);
  }
  const size_t k = axes.size();
  g.in = x.shape;
  g.out = x.shape;
  g.scale.assign(r, 1.0f);
  g.roi_start.assign(r, 0.0f);
  g.roi_end.assign(r, 1.0f);
  if (g.coord == Coord::tf_crop_and_resize) {
    const std::vector<double> roi = n.need_constant(1, "roi").reals();
    if (roi.size() != 2 * k) n.invalid("roi must have 2 entries per resized axis");
    for (size_t i = 0; i < k; ++i) {
      g.roi_start[axes[i]] = float(roi[i]);
      g.roi_end[axes[i]] = float(roi[k + i]);
    }
  }
  const bool has_scales = n.has_input(2) && n.in(2).elements() > 0;
  const bool has_sizes = n.has_input(3) && n.in(3).elements() > 0;
  if (has_scales == has_sizes) n.invalid("needs exactly one of scales and sizes");
  if (has_scales) {
    if (policy != "stretch") n.invalid("keep_aspect_ratio_policy applies to sizes, not scales");
    const std::vector<double> scales = n.need_constant(2, "scales").reals();
    if (scales.size() != k) n.invalid("scales must have one entry per resized axis");
    for (size_t i = 0; i < k; ++i) {
      const size_t a = axes[i];
      const float s = float(scales[i]);
      if (!(s > 0.0f) || !std::isfinite(s)) n.invalid("scales must be positive and finite");
      g.scale[a] = s;
      float extent = s * float(x.shape[a]);  // the resized length, in float32 as onnxruntime computes it
      if (g.coord == Coord::tf_crop_and_resize) extent *= g.roi_end[a] - g.roi_start[a];
      if (!(extent < 9.0e18f)) n.invalid("the resized size is too large");
      g.out[a] = extent > 0.0f ? int64_t(extent) : 0;
    }
  } else {
    const std::vector<int64_t> sizes = n.need_constant(3, "sizes").ints();
    if (sizes.size() != k) n.invalid("sizes must have one entry per resized axis");
    for (size_t i = 0; i < k; ++i)
      if (sizes[i] < 0) n.invalid("sizes must be >= 0");
    float common = policy == "not_larger" ? std::numeric_limits<float>::max() : 0.0f;
    for (size_t i = 0; i < k; ++i) {
      const size_t a = axes[i];
      if (x.shape[a] == 0) {
        if (sizes[i] != 0) n.invalid("cannot resize an empty dimension to " + std::to_string(sizes[i]));
        continue;
      }
      const float s = float(sizes[i]) / float(x.shape[a]);
      g.scale[a] = s;
      g.out[a] = sizes[i];
      common = policy == "not_larger" ? std::min(common, s) : std::max(common, s);
    }
    if (policy != "stretch") {
      for (size_t a : axes) {
        if (x.shape[a] == 0) continue;
        g.scale[a] = common;
        g.out[a] = int64_t(std::round(common * float(x.shape[a])));
      }
    }
  }
  g.resized.assign(r, false);
  for (size_t a : axes) {
    const bool crop = g.coord == Coord::tf_crop_and_resize && (g.roi_start[a] != 0.0f || g.roi_end[a] != 1.0f);
    g.resized[a] = g.out[a] != g.in[a] || g.scale[a] != 1.0f || crop;
    if (g.in[a] == 0 || g.out[a] == 0) g.resized[a] = false;  // nothing to read or nothing to write
  }
  return g;
}

std::vector<TensorDesc> infer_resize(const NodeSpec& n) { return one(n.in(0).dtype, resize_geometry(n).out); }

// The input coordinate of output index o along one axis (float32, as onnxruntime).
float source_coordinate(const ResizeGeometry& g, size_t a, int64_t o) {
  const float x = float(o), s = g.scale[a], L = float(g.in[a]), Lo = float(g.out[a]);
  switch (g.coord) {
    case Coord::half_pixel: return (x + 0.5f) / s - 0.5f;
    case Coord::half_pixel_symmetric: {
      const float adjustment = Lo / (s * L), center = L / 2;
      return center * (1 - adjustment) + (x + 0.5f) / s - 0.5f;
    }
    case Coord::pytorch_half_pixel: return Lo > 1 ? (x + 0.5f) / s - 0.5f : 0.0f;
    case Coord::align_corners: return Lo == 1 ? 0.0f : x * (L - 1) / (Lo - 1);
    case Coord::asymmetric: return x / s;
    case Coord::tf_half_pixel_for_nn: return (x + 0.5f) / s;
    case Coord::tf_crop_and_resize: {
      const float r0 = g.roi_start[a], r1 = g.roi_end[a];
      return Lo > 1 ? r0 * (L - 1) + x * (r1 - r0) * (L - 1) / (Lo - 1) : 0.5f * (r0 + r1) * (L - 1);
    }
  }
  return 0.0f;
}

int64_t nearest_index(Nearest m, float x) {
  switch (m) {
    case Nearest::round_prefer_floor:
      return x == std::floor(x) + 0.5f ? int64_t(std::floor(x)) : int64_t(std::round(x));
    case Nearest::round_prefer_ceil: return int64_t(std::round(x));  // ties away from zero: up, where it matters
    case Nearest::floor: return int64_t(std::floor(x));
    case Nearest::ceil: return int64_t(std::ceil(x));
  }
  return 0;
}

// The filter weights of taps at distances (offset - ratio) for offsets [first, first + count).
std::vector<double> filter_weights(const ResizeGeometry& g, size_t a, double ratio, int64_t first, int64_t count) {
  const double A = g.cubic_a;
  const double scale = g.antialias ? std::min(double(g.scale[a]), 1.0) : 1.0;
  auto cubic = [A](double d) {
    d = std::fabs(d);
    if (d <= 1) return ((A + 2) * d - (A + 3)) * d * d + 1;
    if (d < 2) return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A;
    return 0.0;
  };
  std::vector<double> w;
  double sum = 0;
  for (int64_t i = first; i < first + count; ++i) {
    const double d = (double(i) - ratio) * scale;
    w.push_back(g.mode == Mode::linear ? std::max(0.0, 1.0 - std::fabs(d)) : cubic(d));
    sum += w.back();
  }
  if (g.antialias && sum != 0)
    for (double& v : w) v /= sum;
  return w;
}

// One resized axis: per output index, `K` taps (input index clamped into range, weight) and whether the
// position lies outside the input (tf_crop_and_resize: the extrapolation value).
struct AxisTaps {
  size_t K = 1;
  std::vector<int64_t> idx;
  std::vector<double> w;
  std::vector<uint8_t> outside;
};

AxisTaps axis_taps(const ResizeGeometry& g, size_t a) {
  AxisTaps t;
  const int64_t L = g.in[a], Lo = g.out[a];
  // The filter's half width in taps: 1 (linear) or 2 (cubic), widened by 1 / scale when antialiasing a reduction.
  int64_t first = 0, count = 1;
  if (g.mode != Mode::nearest) {
    const double support = g.mode == Mode::linear ? 1.0 : 2.0;
    const double scale = g.antialias ? std::min(double(g.scale[a]), 1.0) : 1.0;
    first = int64_t(std::floor(-support / scale)) + 1;
    count = 2 - 2 * first;
  }
  t.K = size_t(count);
  t.outside.assign(size_t(Lo), 0);
  for (int64_t o = 0; o < Lo; ++o) {
    float x = source_coordinate(g, a, o);
    if (g.coord == Coord::tf_crop_and_resize && (x < 0 || x > float(L - 1))) t.outside[size_t(o)] = 1;
    // Coordinates far outside the input read its edge alike: bounded, so that the integer conversions hold.
    x = std::clamp(x, -float(count + 2), float(L + count + 2));
    if (g.mode == Mode::nearest) {
      t.idx.push_back(std::clamp<int64_t>(nearest_index(g.nearest, x), 0, L - 1));
      t.w.push_back(1.0);
      continue;
    }
    // base + ratio = x with ratio in (0, 1]: the taps are base + first ... base + first + count - 1.
    const double xd = x;
    double base = std::floor(xd), ratio = xd - base;
    if (ratio == 0) {
      base -= 1;
      ratio = 1;
    }
    std::vector<double> w = filter_weights(g, a, ratio, first, count);
    double sum = 0;
    for (int64_t i = 0; i < count; ++i) {
      const int64_t at = int64_t(base) + first + i;
      if (g.exclude_outside && (at < 0 || at >= L)) w[size_t(i)] = 0;
      sum += w[size_t(i)];
      t.idx.push_back(std::clamp<int64_t>(at, 0, L - 1));
    }
    if (g.exclude_outside && sum != 0)
      for (double& v : w) v /= sum;
    t.w.insert(t.w.end(), w.begin(), w.end());
  }
  return t;
}

// What a run needs: per dimension its stride and, if resized, its taps.
struct ResizePlan {
  std::vector<int64_t> out;
  std::vector<size_t> xstride;
  std::vector<AxisTaps> taps;  // per dimension (empty idx: not resized)
  size_t rows = 0, width = 0;
  size_t ld = 0;               // nearest: elements from one output row to the next (width, or more in a Concat)
  size_t repeat = 0;           // nearest: the last axis is an integer upsampling by this factor (0: it is not)
  bool any_outside = false;
};

ResizePlan resize_plan(const ResizeGeometry& g) {
  ResizePlan p;
  const size_t r = g.in.size();
  p.out = g.out;
  p.xstride = contiguous_strides(g.in);
  p.taps.resize(r);
  for (size_t a = 0; a < r; ++a) {
    if (!g.resized[a]) continue;
    p.taps[a] = axis_taps(g, a);
    for (uint8_t o : p.taps[a].outside) p.any_outside = p.any_outside || o;
  }
  p.width = size_t(g.out[r - 1]);
  size_t total = 1;
  for (int64_t d : g.out) total *= size_t(d);
  p.rows = p.width ? total / p.width : 0;
  p.ld = p.width;
  const AxisTaps& last = p.taps[r - 1];
  if (g.mode == Mode::nearest && !last.idx.empty() && g.in[r - 1] > 0 && g.out[r - 1] % g.in[r - 1] == 0) {
    const size_t f = size_t(g.out[r - 1] / g.in[r - 1]);
    bool rep = f > 1;
    for (size_t o = 0; rep && o < p.width; ++o) rep = size_t(last.idx[o]) == o / f && !last.outside[o];
    if (rep) p.repeat = f;
  }
  return p;
}

// The output rows [r0, r1): calls row(row index, pos) with pos the row's output position over the outer dims.
template <typename F>
void for_rows(const ResizePlan& p, size_t r0, size_t r1, F row) {
  const size_t r = p.out.size();
  std::vector<size_t> pos(r, 0);
  for (size_t d = r - 1, rem = r0; d-- > 0;) {
    pos[d] = rem % size_t(p.out[d]);
    rem /= size_t(p.out[d]);
  }
  for (size_t i = r0; i < r1; ++i) {
    row(i, pos);
    for (size_t d = r - 1; d-- > 0;) {
      if (++pos[d] < size_t(p.out[d])) break;
      pos[d] = 0;
    }
  }
}

template <typename F>
void across_rows(const ResizePlan& p, F run) {
  if (p.rows * p.width < elementwise_parallel_min() || p.rows == 1) run(size_t(0), p.rows);
  else parallel_for_ranges(p.rows, run);
}

template <typename T>
void repeat_row(const T* src, T* dst, size_t in_w, size_t f) {
  if (f == 2) {
    for (size_t j = 0; j < in_w; ++j) dst[2 * j] = dst[2 * j + 1] = src[j];
    return;
  }
  for (size_t j = 0; j < in_w; ++j)
    for (size_t k = 0; k < f; ++k) dst[j * f + k] = src[j];
}

template <typename T>
void resize_nearest(const ResizePlan& p, const T* x, T* y, T fill) {
  const size_t r = p.out.size(), W = p.width;
  const AxisTaps& last = p.taps[r - 1];
  const size_t in_w = last.idx.empty() ? W : (p.repeat ? W / p.repeat : 0);
  across_rows(p, [&](size_t r0, size_t r1) {
    size_t prev = SIZE_MAX;  // the source offset of the previous row written in this range
    for_rows(p, r0, r1, [&](size_t i, const std::vector<size_t>& pos) {
      T* dst = y + i * p.ld;
      size_t off = 0;
      bool outside = false;
      for (size_t d = 0; d + 1 < r; ++d) {
        const AxisTaps& t = p.taps[d];
        if (t.idx.empty()) {
          off += pos[d] * p.xstride[d];
        } else {
          off += size_t(t.idx[pos[d]]) * p.xstride[d];
          outside = outside || t.outside[pos[d]];
        }
      }
      if (outside) {
        for (size_t j = 0; j < W; ++j) dst[j] = fill;
        prev = SIZE_MAX;
        return;
      }
      if (off == prev) {  // the same source row as the row just written
        std::memcpy(dst, dst - p.ld, W * sizeof(T));
        return;
      }
      prev = off;
      const T* src = x + off;
      if (last.idx.empty()) std::memcpy(dst, src, W * sizeof(T));
      else if (p.repeat) repeat_row(src, dst, in_w, p.repeat);
      else
        for (size_t j = 0; j < W; ++j) dst[j] = last.outside[j] ? fill : src[last.idx[j]];
    });
  });
}

// Linear and cubic: the plan and its weights in the element type; max_combos input rows blend into an output row
// (the taps of the resized outer axes multiplied out).
template <typename T>
struct Interpolation {
  ResizePlan plan;
  std::vector<std::vector<T>> w;  // per dimension: its taps' weights in T
  size_t max_combos = 1;
};

// y[j] = sum_k w[j][k] * src[idx[j][k]] over the K taps of the last axis (K = 0: `dynamic` taps).
template <typename T, size_t K>
void interpolate_row(const T* src, const int64_t* idx, const T* w, T* y, size_t W, size_t dynamic = 0) {
  const size_t k_taps = K ? K : dynamic;
  for (size_t j = 0; j < W; ++j) {
    T s = T(0);
    for (size_t k = 0; k < k_taps; ++k) s += w[j * k_taps + k] * src[idx[j * k_taps + k]];
    y[j] = s;
  }
}

// Input rows interpolated along the last axis, kept for the next output rows (an upsampling reads each input row
// for several output rows). Twice as many slots as one output row reads, refilled round robin, never dropping a
// row the current output row uses.
template <typename T>
class RowCache {
 public:
  RowCache(size_t rows_per_output, size_t width)
      : slots_(2 * rows_per_output), width_(width), buf_(slots_ * width), key_(slots_, SIZE_MAX), mark_(slots_, 0) {}
  void next_output_row() { ++stamp_; }
  template <typename Fill>
  const T* get(size_t key, Fill fill) {
    for (size_t s = 0; s < slots_; ++s)
      if (key_[s] == key) {
        mark_[s] = stamp_;
        return buf_.data() + s * width_;
      }
    while (mark_[next_] == stamp_) next_ = (next_ + 1) % slots_;
    const size_t s = next_;
    next_ = (next_ + 1) % slots_;
    key_[s] = key;
    mark_[s] = stamp_;
    fill(buf_.data() + s * width_);
    return buf_.data() + s * width_;
  }

 private:
  size_t slots_, width_, next_ = 0, stamp_ = 1;
  std::vector<T> buf_;
  std::vector<size_t> key_, mark_;
};

template <typename T>
void resize_filter(const Interpolation<T>& ip, const T* x, T* y, T fill) {
  const ResizePlan& p = ip.plan;
  const size_t r = p.out.size(), W = p.width;
  const AxisTaps& last = p.taps[r - 1];
  const std::vector<T>& lw = ip.w[r - 1];
  const size_t KL = last.K;
  const bool last_resized = !last.idx.empty();
  across_rows(p, [&](size_t r0, size_t r1) {
    std::vector<size_t> off, next_off;
    std::vector<T> wt, next_wt;
    std::vector<const T*> rows;
    off.reserve(ip.max_combos);
    wt.reserve(ip.max_combos);
    next_off.reserve(ip.max_combos);
    next_wt.reserve(ip.max_combos);
    rows.reserve(ip.max_combos);
    RowCache<T> cache(last_resized ? ip.max_combos : 0, W);
    for_rows(p, r0, r1, [&](size_t i, const std::vector<size_t>& pos) {
      T* dst = y + i * W;
      off.assign(1, 0);
      wt.assign(1, T(1));
      bool outside = false;
      for (size_t d = 0; d + 1 < r; ++d) {
        const AxisTaps& t = p.taps[d];
        if (t.idx.empty()) {
          for (size_t& o : off) o += pos[d] * p.xstride[d];
          continue;
        }
        outside = outside || t.outside[pos[d]];
        next_off.clear();
        next_wt.clear();
        for (size_t c = 0; c < off.size(); ++c)
          for (size_t k = 0; k < t.K; ++k) {
            const size_t at = pos[d] * t.K + k;
            next_off.push_back(off[c] + size_t(t.idx[at]) * p.xstride[d]);
            next_wt.push_back(wt[c] * ip.w[d][at]);
          }
        off.swap(next_off);
        wt.swap(next_wt);
      }
      if (outside) {
        for (size_t j = 0; j < W; ++j) dst[j] = fill;
        return;
      }
      // The rows to blend: input rows as they are, or interpolated along the last axis (through the cache).
      rows.clear();
      cache.next_output_row();
      for (size_t o : off) {
        const T* src = x + o;
        if (!last_resized) {
          rows.push_back(src);
          continue;
        }
        rows.push_back(cache.get(o, [&](T* h) {
          if (KL == 2) interpolate_row<T, 2>(src, last.idx.data(), lw.data(), h, W);
          else if (KL == 4) interpolate_row<T, 4>(src, last.idx.data(), lw.data(), h, W);
          else interpolate_row<T, 0>(src, last.idx.data(), lw.data(), h, W, KL);
        }));
      }
      if (rows.size() == 2) {
        const T a0 = wt[0], a1 = wt[1];
        const T *h0 = rows[0], *h1 = rows[1];
        for (size_t j = 0; j < W; ++j) dst[j] = a0 * h0[j] + a1 * h1[j];
      } else {
        const T a0 = wt[0];
        const T* h0 = rows[0];
        for (size_t j = 0; j < W; ++j) dst[j] = a0 * h0[j];
        for (size_t c = 1; c < rows.size(); ++c) {
          const T a = wt[c];
          const T* h = rows[c];
          for (size_t j = 0; j < W; ++j) dst[j] += a * h[j];
        }
      }
      if (last_resized && p.any_outside)
        for (size_t j = 0; j < W; ++j)
          if (last.outside[j]) dst[j] = fill;
    });
  });
}

// The extrapolation value as the bits of a `t` element (nearest moves words of any type).
uint64_t fill_bits(DType t, float v) {
  uint64_t bits = 0;
  auto put = [&](auto value) { std::memcpy(&bits, &value, sizeof(value)); };
  auto sat = [v](double lo, double hi) { return std::isnan(v) ? 0.0 : std::min(std::max(double(v), lo), hi); };
  switch (t) {
    case DType::f32: put(v); break;
    case DType::f64: put(double(v)); break;
    case DType::i8: put(int8_t(sat(-128, 127))); break;
    case DType::u8: put(uint8_t(sat(0, 255))); break;
    case DType::i16: put(int16_t(sat(-32768, 32767))); break;
    case DType::u16: put(uint16_t(sat(0, 65535))); break;
    case DType::i32: put(int32_t(sat(-2147483648.0, 2147483647.0))); break;
    case DType::u32: put(uint32_t(sat(0, 4294967295.0))); break;
    case DType::i64: put(int64_t(sat(-9.2e18, 9.2e18))); break;
    case DType::u64: put(uint64_t(sat(0, 1.8e19))); break;
    case DType::boolean: put(uint8_t(v != 0)); break;
    default: break;  // float16: 0 (only tf_crop_and_resize extrapolates)
  }
  return bits;
}

template <typename T>
std::unique_ptr<Step> filter_step(const ResizeGeometry& g, ResizePlan plan) {
  Interpolation<T> ip;
  ip.plan = std::move(plan);
  for (const AxisTaps& t : ip.plan.taps) {
    ip.w.emplace_back(t.w.begin(), t.w.end());
    if (&t != &ip.plan.taps.back() && !t.idx.empty()) ip.max_combos *= t.K;
  }
  const T fill = T(g.extrapolation);
  return fn_step([ip, fill](const StepData& d) { resize_filter(ip, d.in<T>(0), d.out<T>(0), fill); },
                 g.mode == Mode::linear ? "linear" : "cubic");
}

// Nearest: copies of words, so its rows may also be a slice of a wider tensor (a Concat's: Step::write_rows).
class NearestStep final : public Step {
 public:
  NearestStep(ResizePlan plan, DType type, float extrapolation)
      : plan_(std::move(plan)), esize_(dtype_size(type)), fill_(fill_bits(type, extrapolation)) {}
  void run(const StepData& d) const override {
    with_word(esize_, [&](auto w) {
      using T = decltype(w);
      T fill;
      std::memcpy(&fill, &fill_, sizeof(T));
      resize_nearest(plan_, d.in<T>(0), d.out<T>(0), fill);
    });
  }
  std::string detail() const override {
    return plan_.repeat ? "nearest, x" + std::to_string(plan_.repeat) + " repeat" : "nearest";
  }
  bool write_rows(size_t out, size_t row_bytes, size_t pitch) override {
    if (out != 0 || row_bytes != plan_.width * esize_ || pitch % esize_) return false;
    plan_.ld = pitch / esize_;
    return true;
  }

 private:
  ResizePlan plan_;
  size_t esize_;
  uint64_t fill_;
};

std::unique_ptr<Step> make_resize(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers&) {
  const TensorDesc& x = n.in(0);
  const ResizeGeometry g = resize_geometry(n);
  bool any = false;
  for (bool b : g.resized) any = any || b;
  if (!any || out[0].elements() == 0) {
    if (out[0].shape == x.shape) return view_step(x.bytes());
    return fn_step([](const StepData&) {});  // nothing to write
  }
  ResizePlan plan = resize_plan(g);
  if (g.mode == Mode::nearest) return std::make_unique<NearestStep>(std::move(plan), x.dtype, g.extrapolation);
  if (x.dtype == DType::f64) return filter_step<double>(g, std::move(plan));
  return filter_step<float>(g, std::move(plan));
}

}  // namespace

void register_graph_ops_resize() { register_op("Resize", {infer_resize, make_resize}); }

}  // namespace nnkern::graph
