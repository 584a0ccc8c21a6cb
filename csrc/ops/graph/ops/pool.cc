// Pooling on NHWC tensors, the layout the plan keeps feature maps in (the Python side lowers ONNX's NCHW pooling
// onto these): nnkern.MaxPool, nnkern.AveragePool (float32; MaxPool also uint8 / int8) and nnkern.GlobalAveragePool,
// nnkern.GlobalMaxPool (float32), and nnkern.QGlobalAveragePool (8-bit, fuse_qdq's). Windows follow ONNX's
// attributes (kernel_shape, strides, pads as top, left, bottom, right, dilations, ceil_mode, auto_pad,
// count_include_pad); the output size is torch's rule, which ONNX's ceil_mode follows: a last window starting in the
// trailing padding is dropped. Where nnkern's pool2d kernels take the window (no dilation, padding at most half the
// window) they run; otherwise a plain loop over the taps.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/checked.h"
#include "core/threadpool.h"
#include "ops/graph/ops/common.h"
#include "ops/graph/ops/window.h"
#include "ops/pool/pool2d.h"
#include "ops/quant/quantize.h"

namespace nnkern::graph {

namespace {

struct Window {
  size_t kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
  bool ceil_mode, include_pad;
  size_t oh, ow;
};

size_t out_size(const NodeSpec& n, size_t in, size_t k, size_t s, size_t d, size_t p0, size_t p1, bool ceil_mode) {
  const size_t span = checked_add(checked_mul(d, k - 1), 1), padded = checked_add(in, p0, p1);
  if (padded < span) n.invalid("the window does not fit the padded input");
  size_t out = (padded - span) / s + 1;
  if (ceil_mode && (padded - span) % s) {
    ++out;
    if ((out - 1) * s >= in + p0) --out;  // the last window would start in the trailing padding
  }
  return out;
}

Window window_of(const NodeSpec& n, bool average) {
  const TensorDesc& x = n.in(0);
  if (x.rank() != 4) n.invalid("expects an NHWC input of rank 4");
  const auto k = n.attr_ints("kernel_shape");
  if (k.size() != 2) n.invalid("a 2-D window needs 2 kernel sizes");
  for (int64_t v : k) if (v < 1) n.invalid("kernel_shape must be >= 1");
  const size_t H = size_t(x.shape[1]), W = size_t(x.shape[2]);
  const Window2d a = window_attrs(n, H, W, size_t(k[0]), size_t(k[1]));
  Window w{size_t(k[0]), size_t(k[1]), a.sh, a.sw, a.dh, a.dw, a.pt, a.pl, a.pb, a.pr,
           n.attr_int("ceil_mode", 0) != 0, average && n.attr_int("count_include_pad", 0) != 0, 0, 0};
  if (w.pt >= w.kh * w.dh || w.pb >= w.kh * w.dh || w.pl >= w.kw * w.dw || w.pr >= w.kw * w.dw)
    n.invalid("padding must be smaller than the window");
  w.oh = out_size(n, H, w.kh, w.sh, w.dh, w.pt, w.pb, w.ceil_mode);
  w.ow = out_size(n, W, w.kw, w.sw, w.dw, w.pl, w.pr, w.ceil_mode);
  return w;
}

std::vector<TensorDesc> infer_pool(const NodeSpec& n, bool average) {
  if (average) n.require_types({0}, {DType::f32});
  else n.require_types({0}, {DType::f32, DType::u8, DType::i8});
  if (n.num_outputs > 1) n.unsupported("the Indices output of MaxPool is not supported");
  if (n.attr_int("storage_order", 0) != 0) n.unsupported("storage_order 1");
  const Window w = window_of(n, average);
  const TensorDesc& x = n.in(0);
  return one(x.dtype, {x.shape[0], int64_t(w.oh), int64_t(w.ow), x.shape[3]});
}
std::vector<TensorDesc> infer_max(const NodeSpec& n) { return infer_pool(n, false); }
std::vector<TensorDesc> infer_avg(const NodeSpec& n) { return infer_pool(n, true); }

// The taps' loop, channels innermost: rows (image, output row) across the pool.
template <typename T, bool Average>
void pool_taps(const Window& w, size_t N, size_t H, size_t W, size_t C, const T* x, T* y) {
  parallel_for(N * w.oh, [&](size_t row) {
    const size_t n = row / w.oh, oh = row % w.oh;
    std::vector<float> acc(C);
    for (size_t ow = 0; ow < w.ow; ++ow) {
      std::fill(acc.begin(), acc.end(), Average ? 0.0f : -std::numeric_limits<float>::infinity());
      size_t taps = 0, padded_taps = 0;
      for (size_t kh = 0; kh < w.kh; ++kh) {
        const size_t ihp = oh * w.sh + kh * w.dh;  // in the padded input
        const bool in_pad_h = ihp < H + w.pt + w.pb;
        const bool row_in = ihp >= w.pt && ihp - w.pt < H;
        for (size_t kw = 0; kw < w.kw; ++kw) {
          const size_t iwp = ow * w.sw + kw * w.dw;
          if (in_pad_h && iwp < W + w.pl + w.pr) ++padded_taps;
          if (!row_in || iwp < w.pl || iwp - w.pl >= W) continue;
          ++taps;
          const T* px = x + ((n * H + ihp - w.pt) * W + iwp - w.pl) * C;
          for (size_t c = 0; c < C; ++c) {
            const float v = float(px[c]);
            if (Average) acc[c] += v;
            else acc[c] = v > acc[c] || v != v ? v : acc[c];
          }
        }
      }
      T* py = y + (row * w.ow + ow) * C;
      const float div = float(w.include_pad ? padded_taps : taps);
      for (size_t c = 0; c < C; ++c) py[c] = T(Average ? acc[c] / div : acc[c]);
    }
  });
}

template <bool Average>
std::unique_ptr<Step> make_pool(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers&) {
  const Window w = window_of(n, Average);
  const TensorDesc& x = n.in(0);
  const size_t N = size_t(x.shape[0]), H = size_t(x.shape[1]), W = size_t(x.shape[2]), C = size_t(x.shape[3]);
  if (out[0].elements() == 0)
    return fn_step([](const StepData&) {});
  const bool kernel_fits = w.dh == 1 && w.dw == 1 && w.pt <= w.kh / 2 && w.pb <= w.kh / 2 && w.pl <= w.kw / 2 &&
                           w.pr <= w.kw / 2 && pool2d_output_size(H, w.kh, w.sh, w.pt, w.pb, w.ceil_mode) == w.oh &&
                           pool2d_output_size(W, w.kw, w.sw, w.pl, w.pr, w.ceil_mode) == w.ow;
  if (kernel_fits) {
    Pool2dParams p{};
    p.average = Average;
    p.dtype = x.dtype == DType::f32 ? PoolDtype::f32 : x.dtype == DType::u8 ? PoolDtype::u8 : PoolDtype::s8;
    p.n = N; p.h = H; p.w = W; p.c = C; p.oh = w.oh; p.ow = w.ow;
    p.kh = w.kh; p.kw = w.kw; p.sh = w.sh; p.sw = w.sw;
    p.pt = w.pt; p.pb = w.pb; p.pl = w.pl; p.pr = w.pr;
    p.count_include_pad = w.include_pad;
    return fn_step([p](const StepData& d) { pool2d(p, d.in(0), d.out(0)); }, "pool2d");
  }
  switch (x.dtype) {
    case DType::u8: return fn_step([=](const StepData& d) { pool_taps<uint8_t, false>(w, N, H, W, C, d.in<uint8_t>(0), d.out<uint8_t>(0)); }, "taps");
    case DType::i8: return fn_step([=](const StepData& d) { pool_taps<int8_t, false>(w, N, H, W, C, d.in<int8_t>(0), d.out<int8_t>(0)); }, "taps");
    default: return fn_step([=](const StepData& d) { pool_taps<float, Average>(w, N, H, W, C, d.in<float>(0), d.out<float>(0)); }, "taps");
  }
}

std::vector<TensorDesc> infer_global(const NodeSpec& n) {
  n.require_types({0}, {DType::f32});
  const TensorDesc& x = n.in(0);
  if (x.rank() != 4) n.invalid("expects an NHWC input of rank 4");
  return one(DType::f32, {x.shape[0], 1, 1, x.shape[3]});
}

template <bool Average>
std::unique_ptr<Step> make_global(const NodeSpec& n, const std::vector<TensorDesc>&, SharedLayers&) {
  const TensorDesc& x = n.in(0);
  const size_t N = size_t(x.shape[0]), P = size_t(x.shape[1] * x.shape[2]), C = size_t(x.shape[3]);
  return fn_step([N, P, C](const StepData& d) {
    const float* x = d.in<float>(0);
    float* y = d.out<float>(0);
    // Channel blocks of each image across the pool: every output is one task's sum in pixel order.
    constexpr size_t kBlock = 64;
    const size_t blocks = ceil_div(C, kBlock);
    parallel_for(N * blocks, [&](size_t t) {
      const size_t n = t / blocks, c0 = t % blocks * kBlock, c1 = std::min(C, c0 + kBlock);
      float acc[kBlock];
      for (size_t c = c0; c < c1; ++c) acc[c - c0] = Average ? 0.0f : -std::numeric_limits<float>::infinity();
      for (size_t p = 0; p < P; ++p) {
        const float* px = x + (n * P + p) * C;
        for (size_t c = c0; c < c1; ++c) {
          const float v = px[c];
          if (Average) acc[c - c0] += v;
          else acc[c - c0] = v > acc[c - c0] || v != v ? v : acc[c - c0];
        }
      }
      for (size_t c = c0; c < c1; ++c) y[n * C + c] = Average ? (P ? acc[c - c0] / float(P) : NAN) : acc[c - c0];
    });
  });
}

// nnkern.QGlobalAveragePool, fuse_qdq's DequantizeLinear -> GlobalAveragePool -> QuantizeLinear (per tensor) on the
// 8-bit NHWC tensor: inputs x (uint8 / int8), x_scale, x_zero_point, y_scale, y_zero_point (its type is the
// output's; uint8 without one). No float tensor is written: each channel sums (x - x_zero_point) * x_scale in pixel
// order, divides by the pixel count and quantizes with the QuantizeLinear kernels: the float operations of the
// three steps in their order, so their bits.
std::vector<TensorDesc> infer_qglobal(const NodeSpec& n) {
  n.require_types({0, 2, 4}, {DType::u8, DType::i8});
  n.require_types({1, 3}, {DType::f32});
  const TensorDesc& x = n.in(0);
  if (x.rank() != 4) n.invalid("expects an NHWC input of rank 4");
  if (!n.has_input(1) || !n.has_input(3)) n.invalid("x_scale and y_scale are required");
  if (n.has_input(2) && n.in(2).dtype != x.dtype) n.invalid("x_zero_point must have x's type");
  for (size_t i = 1; i <= 4; ++i)
    if (n.has_input(i) && n.in(i).elements() != 1) n.unsupported("a scale or zero point per channel");
  return one(n.has_input(4) ? n.in(4).dtype : DType::u8, {x.shape[0], 1, 1, x.shape[3]});
}

std::unique_ptr<Step> make_qglobal(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers&) {
  const TensorDesc& x = n.in(0);
  const size_t N = size_t(x.shape[0]), P = size_t(x.shape[1] * x.shape[2]), C = size_t(x.shape[3]);
  const bool x_signed = x.dtype == DType::i8, y_signed = out[0].dtype == DType::i8;
  return fn_step([=](const StepData& d) {
    const uint8_t* x = d.in<uint8_t>(0);
    uint8_t* y = d.out<uint8_t>(0);
    const float sx = *d.in<float>(1), sy = *d.in<float>(3);
    const float zx = float(zero_point8(d, 2, x_signed));  // DequantizeLinear's (float(q) - float(zp)) * s
    const int32_t zy = zero_point8(d, 4, y_signed);
    // Every channel's sum is one task's, in pixel order (as the float op: the blocks change which task sums a
    // channel, not how). Blocks of 256 channels (whole cache lines of bytes per pixel) on one thread; on more, of
    // 64 (one line), which spreads a squeeze-and-excite's pooling at batch 1 evenly over the threads.
    constexpr size_t kBlock = 256;
    const size_t block = get_num_threads() > 1 ? 64 : kBlock;
    const size_t blocks = ceil_div(C, block);
    parallel_for(N * blocks, [&](size_t t) {
      const size_t n = t / blocks, c0 = t % blocks * block, c1 = std::min(C, c0 + block);
      float acc[kBlock] = {};
      const auto sum = [&](auto type) {  // the element type a template parameter: one plain loop to vectorize
        using T = decltype(type);
        for (size_t p = 0; p < P; ++p) {
          const T* px = reinterpret_cast<const T*>(x) + (n * P + p) * C;
          for (size_t c = c0; c < c1; ++c) acc[c - c0] += (float(px[c]) - zx) * sx;
        }
      };
      if (x_signed) sum(int8_t{});
      else sum(uint8_t{});
      for (size_t c = c0; c < c1; ++c) acc[c - c0] = P ? acc[c - c0] / float(P) : NAN;
      quantize(acc, y + n * C + c0, 1, 1, c1 - c0, &sy, &zy, y_signed);
    });
  });
}

}  // namespace

void register_graph_ops_pool() {
  register_op("nnkern.MaxPool", {infer_max, make_pool<false>});
  register_op("nnkern.AveragePool", {infer_avg, make_pool<true>});
  register_op("nnkern.GlobalAveragePool", {infer_global, make_global<true>});
  register_op("nnkern.GlobalMaxPool", {infer_global, make_global<false>});
  register_op("nnkern.QGlobalAveragePool", {infer_qglobal, make_qglobal});
}

}  // namespace nnkern::graph
