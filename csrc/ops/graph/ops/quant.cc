// Quantization ops: QuantizeLinear (float32 -> uint8 / int8: saturate(round_half_even(x / scale) + zero_point), the
// division as ONNX specifies it), DequantizeLinear ((x - zero_point) * scale from uint8 / int8 / int32) and
// DynamicQuantizeLinear (onnxruntime's uint8 range rule), per tensor or per axis, on nnkern's quantize kernels
// (ops/quant/quantize.h). Scales and zero points are read at run time.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/kernel_family.h"
#include "kernels/quantize_list.h"
#include "ops/graph/ops/common.h"
#include "ops/graph/ops/elementwise.h"
#include "ops/graph/ops/qbinary_params.h"
#include "ops/quant/quantize.h"

namespace nnkern::graph {

namespace {

// The (outer, C, inner) view of a per-axis parameter (C == 1 per tensor), after checking its shape.
struct AxisView {
  size_t outer, C, inner;
};

AxisView axis_view(const NodeSpec& n, const TensorDesc& x, size_t scale_input) {
  if (n.attr_int("block_size", 0) != 0) n.unsupported("blocked quantization (block_size)");
  const TensorDesc& s = n.in(scale_input);
  if (s.elements() == 1 && s.rank() <= 1) return {1, 1, x.elements()};
  if (s.rank() != 1) n.invalid("scale must be a scalar or 1-D");
  const size_t axis = normalize_axis(n.attr_int("axis", 1), x.rank(), "axis");
  if (s.shape[0] != x.shape[axis]) n.invalid("a per-axis scale needs one value per element of the axis");
  if (n.has_input(scale_input + 1) && n.in(scale_input + 1).elements() != s.elements())
    n.invalid("the zero point must have the scale's shape");
  return {elements_before(x.shape, axis), size_t(x.shape[axis]), elements_from(x.shape, axis + 1)};
}

// Zero points (any 8-bit type, or absent: 0) as int32, C of them.
void zero_points(const StepData& d, size_t input, DType t, size_t C, int32_t* zp) {
  const void* p = d.in(input);
  for (size_t c = 0; c < C; ++c)
    zp[c] = !p ? 0 : t == DType::u8 ? int32_t(static_cast<const uint8_t*>(p)[c])
                   : t == DType::i8 ? int32_t(static_cast<const int8_t*>(p)[c])
                                    : static_cast<const int32_t*>(p)[c];
}

std::vector<TensorDesc> infer_quantize(const NodeSpec& n) {
  n.require_types({0}, {DType::f32});
  n.require_types({1}, {DType::f32});
  n.require_types({2}, {DType::u8, DType::i8, DType::u16, DType::i16});
  DType out = DType::u8;
  if (n.has_input(2)) out = n.in(2).dtype;
  else if (n.has("output_dtype")) out = dtype_from_code(int(n.attr_int("output_dtype", 2)));
  if (out != DType::u8 && out != DType::i8 && out != DType::u16 && out != DType::i16)
    n.unsupported(std::string("output type ") + dtype_name(out) + " (uint8, int8, uint16, int16)");
  axis_view(n, n.in(0), 1);
  return one(out, n.in(0).shape);
}

// 16-bit quantization: the same arithmetic as the 8-bit kernels, in a plain loop.
template <typename T>
std::unique_ptr<Step> quantize16(const AxisView v, bool has_zero) {
  return fn_step([v, has_zero](const StepData& d) {
    const float* x = d.in<float>(0);
    const float* scale = d.in<float>(1);
    const T* zp = has_zero ? d.in<T>(2) : nullptr;
    T* y = d.out<T>(0);
    const float lo = float(std::numeric_limits<T>::min()), hi = float(std::numeric_limits<T>::max());
    for_ranges(v.outer * v.C, [&](size_t r0, size_t r1) {
      for (size_t r = r0; r < r1; ++r) {
        const size_t c = r % v.C;
        const float s = scale[c], z = zp ? float(zp[c]) : 0.0f;
        for (size_t i = 0; i < v.inner; ++i)
          y[r * v.inner + i] = T(std::min(std::max(std::nearbyint(x[r * v.inner + i] / s) + z, lo), hi));
      }
    });
  });
}

template <typename T>
std::unique_ptr<Step> dequantize16(const AxisView v, bool has_zero) {
  return fn_step([v, has_zero](const StepData& d) {
    const T* x = d.in<T>(0);
    const float* scale = d.in<float>(1);
    const T* zp = has_zero ? d.in<T>(2) : nullptr;
    float* y = d.out<float>(0);
    for_ranges(v.outer * v.C, [&](size_t r0, size_t r1) {
      for (size_t r = r0; r < r1; ++r) {
        const size_t c = r % v.C;
        const int32_t z = zp ? int32_t(zp[c]) : 0;
        for (size_t i = 0; i < v.inner; ++i) y[r * v.inner + i] = float(int32_t(x[r * v.inner + i]) - z) * scale[c];
      }
    });
  });
}

std::unique_ptr<Step> make_quantize(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers&) {
  const AxisView v = axis_view(n, n.in(0), 1);
  if (out[0].dtype == DType::u16) return quantize16<uint16_t>(v, n.has_input(2));
  if (out[0].dtype == DType::i16) return quantize16<int16_t>(v, n.has_input(2));
  const bool is_signed = out[0].dtype == DType::i8;
  const DType zt = n.has_input(2) ? n.in(2).dtype : out[0].dtype;
  return fn_step([v, is_signed, zt](const StepData& d) {
    std::vector<int32_t> zp(v.C);
    zero_points(d, 2, zt, v.C, zp.data());
    if (v.outer * v.C * v.inner)
      quantize(d.in<float>(0), d.out<uint8_t>(0), v.outer, v.C, v.inner, d.in<float>(1), zp.data(), is_signed);
  });
}

// nnkern.QuantizeToNhwc: QuantizeLinear of an NCHW float32 tensor of 1-4 channels, one scale, 8-bit, written in
// NHWC order: the plan's fusion of a network input's QuantizeLinear and the layout Transpose after it
// (quantize_to_nhwc: one pass, no byte transpose).
std::vector<TensorDesc> infer_quantize_nhwc(const NodeSpec& n) {
  const std::vector<TensorDesc> q = infer_quantize(n);
  const TensorDesc& x = n.in(0);
  if (x.rank() != 4 || x.shape[1] < 1 || size_t(x.shape[1]) > kQuantizeMaxPlanes)
    n.invalid("the input must be NCHW with 1 to 4 channels");
  if (n.in(1).elements() != 1) n.invalid("the scale must be one value");
  if (q[0].dtype != DType::u8 && q[0].dtype != DType::i8) n.unsupported("a 16-bit output");
  return one(q[0].dtype, {x.shape[0], x.shape[2], x.shape[3], x.shape[1]});
}

std::unique_ptr<Step> make_quantize_nhwc(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers&) {
  const TensorDesc& x = n.in(0);
  const size_t N = size_t(x.shape[0]), C = size_t(x.shape[1]), HW = size_t(x.shape[2] * x.shape[3]);
  const bool is_signed = out[0].dtype == DType::i8;
  const DType zt = n.has_input(2) ? n.in(2).dtype : out[0].dtype;
  return fn_step([N, C, HW, is_signed, zt](const StepData& d) {
    int32_t zp = 0;
    zero_points(d, 2, zt, 1, &zp);
    quantize_to_nhwc(d.in<float>(0), d.out<uint8_t>(0), N, C, HW, d.in<float>(1)[0], zp, is_signed);
  });
}

std::vector<TensorDesc> infer_dequantize(const NodeSpec& n) {
  n.require_types({0}, {DType::u8, DType::i8, DType::u16, DType::i16, DType::i32});
  n.require_types({1}, {DType::f32});
  if (n.has_input(2) && n.in(2).dtype != n.in(0).dtype) n.invalid("the zero point must have x's type");
  axis_view(n, n.in(0), 1);
  return one(DType::f32, n.in(0).shape);
}

std::unique_ptr<Step> make_dequantize(const NodeSpec& n, const std::vector<TensorDesc>&, SharedLayers&) {
  const AxisView v = axis_view(n, n.in(0), 1);
  const DType t = n.in(0).dtype;
  if (t == DType::u16) return dequantize16<uint16_t>(v, n.has_input(2));
  if (t == DType::i16) return dequantize16<int16_t>(v, n.has_input(2));
  return fn_step([v, t](const StepData& d) {
    std::vector<int32_t> zp(v.C);
    zero_points(d, 2, t, v.C, zp.data());
    const float* scale = d.in<float>(1);
    if (v.outer * v.C * v.inner == 0) return;
    if (t != DType::i32) {
      dequantize(d.in<uint8_t>(0), d.out<float>(0), v.outer, v.C, v.inner, scale, zp.data(), t == DType::i8);
      return;
    }
    const int32_t* x = d.in<int32_t>(0);
    float* y = d.out<float>(0);
    for_ranges(v.outer * v.C, [&](size_t r0, size_t r1) {
      for (size_t r = r0; r < r1; ++r) {
        const size_t c = r % v.C;
        for (size_t i = 0; i < v.inner; ++i)
          y[r * v.inner + i] = float(int64_t(x[r * v.inner + i]) - zp[c]) * scale[c];
      }
    });
  });
}

std::vector<TensorDesc> infer_dynamic(const NodeSpec& n) {
  n.require_types({0}, {DType::f32});
  return {TensorDesc{DType::u8, n.in(0).shape}, TensorDesc{DType::f32, {}}, TensorDesc{DType::u8, {}}};
}

std::unique_ptr<Step> make_dynamic(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers&) {
  const size_t count = n.in(0).elements();
  const size_t outputs = out.size();
  return fn_step([count, outputs](const StepData& d) {
    float lo = INFINITY, hi = -INFINITY;
    if (count) minmax(d.in<float>(0), count, &lo, &hi);
    // onnxruntime's rule: the range widened to include 0, scale = range / 255 (1 for an empty range), the zero
    // point round(clip(-lo / scale, 0, 255)), ties to even.
    lo = std::min(lo, 0.0f);
    hi = std::max(hi, 0.0f);
    const float scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
    const float zf = std::nearbyint(std::min(std::max(0.0f - lo / scale, 0.0f), 255.0f));
    const int32_t zp = int32_t(zf);
    if (count) quantize(d.in<float>(0), d.out<uint8_t>(0), 1, 1, count, &scale, &zp, false);
    if (outputs > 1) *d.out<float>(1) = scale;
    if (outputs > 2) *d.out<uint8_t>(2) = uint8_t(zp);
  });
}

// QLinearAdd / QLinearMul (onnxruntime's com.microsoft ops, and the QDQ pattern DequantizeLinear x2 -> Add / Mul
// -> QuantizeLinear): inputs A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale, C_zero_point, numpy
// broadcasting; y = saturate(rint(f((a - za) sa, (b - zb) sb) / sc + zc)) in float32, ties to even; attribute
// activation "relu" clamps at zc. uint8 or int8, one type throughout.
std::vector<TensorDesc> infer_qbinary(const NodeSpec& n) {
  n.require_types({0, 3}, {DType::u8, DType::i8});
  if (n.in(0).dtype != n.in(3).dtype) n.unsupported("A and B of different types");
  for (size_t i : {size_t(1), size_t(2), size_t(4), size_t(5), size_t(6), size_t(7)})
    if (n.has_input(i) && n.in(i).elements() != 1) n.unsupported("per-axis scales or zero points");
  const std::string act = n.attr_string("activation", "none");
  if (act != "none" && act != "relu") n.unsupported("activation '" + act + "'");
  return one(n.in(0).dtype, broadcast_shapes(n.in(0).shape, n.in(3).shape));
}

// The shortest run of a broadcast QLinearAdd / QLinearMul given to the ISA's loop (a call per run), and the bytes
// of the buffer that repeats a broadcast row for it.
constexpr size_t kQBinaryMinRun = 16;
constexpr size_t kQBinaryTile = 4096;

// Which input (0 or 1) is one row (its last axis) repeated at every outer position while the other input has the
// output's shape, so that a buffer of the row repeated lets the ISA's loop run across many rows per call (a
// squeeze-and-excite scale of 16 channels over every pixel: a call per 16 bytes otherwise); -1 if none.
int repeated_row(const Broadcast& bc, const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                 const std::vector<int64_t>& out) {
  if (bc.inner == 0 || bc.inner * 2 > kQBinaryTile || !bc.inner_step[0] || !bc.inner_step[1]) return -1;
  for (int k = 0; k < 2; ++k) {
    if ((k == 0 ? b : a) != out) continue;
    bool repeated = true;
    for (size_t s : bc.outer_strides[size_t(k)]) repeated = repeated && s == 0;
    if (repeated) return k;
  }
  return -1;
}

template <typename T, bool Mul>
std::unique_ptr<Step> qbinary_step(const NodeSpec& n, const TensorDesc& out) {
  const Broadcast bc = plan_broadcast({n.in(0).shape, n.in(3).shape}, out.shape);
  const bool relu = n.attr_string("activation", "none") == "relu";
  const int over = n.in(0).shape == out.shape ? 0 : n.in(3).shape == out.shape ? 3 : -1;
  const bool same = n.in(0).shape == out.shape && n.in(3).shape == out.shape;
  const int row_input = same ? -1 : repeated_row(bc, n.in(0).shape, n.in(3).shape, out.shape);
  const size_t count = out.elements();
  return in_place_step(
      [=](const StepData& d) {
        const QBinaryParams p = qbinary_params(d, {1, 2, 4, 5, 6, 7}, std::is_signed_v<T>, Mul, relu);
        const QBinaryFn f = quantize_family().dispatched().qbinary;
        const T *pa = d.in<T>(0), *pb = d.in<T>(3);
        T* py = d.out<T>(0);
        if (same) {  // the ISA's loop (kernels/qbinary.h): the same operations, vectorized
          for_ranges(count, [&](size_t i0, size_t i1) { f(pa + i0, pb + i0, py + i0, i1 - i0, p); });
          return;
        }
        if (row_input >= 0) {  // one row over whole rows: the row repeated (rows + 1 times), many rows per call
          const size_t c = bc.inner, span = (kQBinaryTile / c - 1) * c;
          for_ranges(count, [&](size_t i0, size_t i1) {
            alignas(64) T rows[kQBinaryTile / sizeof(T)];
            const T* row = row_input == 0 ? pa : pb;
            for (size_t r = 0; r + c <= kQBinaryTile / sizeof(T); r += c) std::memcpy(rows + r, row, c * sizeof(T));
            for (size_t i = i0; i < i1;) {
              const size_t len = std::min(span, i1 - i);
              const T* rep = rows + i % c;
              row_input == 0 ? f(rep, pb + i, py + i, len, p) : f(pa + i, rep, py + i, len, p);
              i += len;
            }
          });
          return;
        }
        // Runs that both operands walk (a bias row added to each row of a matrix): the ISA's loop per run, where
        // the runs are long enough to repay a call each.
        if (bc.inner_step[0] && bc.inner_step[1] && bc.inner >= kQBinaryMinRun) {
          for_ranges(count, [&](size_t i0, size_t i1) {
            for_rows<2>(bc, i0, i1, [&](size_t start, const size_t* off, size_t len) {
              f(pa + off[0], pb + off[1], py + start, len, p);
            });
          });
          return;
        }
        broadcast2(bc, pa, pb, py, [=](T a, T b) {
          const float x = (float(a) - p.za) * p.sa, y = (float(b) - p.zb) * p.sb;
          const float v = (Mul ? x * y : x + y) / p.sc + p.zc;
          // Clamped to the type's range first (a NaN, from a zero or NaN scale, to lo: no undefined conversion).
          return T(rint_small(std::min(std::max(p.lo, v), p.hi)));
        });
      },
      over);
}

template <bool Mul>
std::unique_ptr<Step> make_qbinary(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers&) {
  return n.in(0).dtype == DType::u8 ? qbinary_step<uint8_t, Mul>(n, out[0]) : qbinary_step<int8_t, Mul>(n, out[0]);
}

}  // namespace

void register_graph_ops_quant() {
  register_op("QLinearAdd", {infer_qbinary, make_qbinary<false>});
  register_op("QLinearMul", {infer_qbinary, make_qbinary<true>});
  register_op("QuantizeLinear", {infer_quantize, make_quantize});
  register_op("nnkern.QuantizeToNhwc", {infer_quantize_nhwc, make_quantize_nhwc});
  register_op("DequantizeLinear", {infer_dequantize, make_dequantize});
  register_op("DynamicQuantizeLinear", {infer_dynamic, make_dynamic});
}

}  // namespace nnkern::graph
