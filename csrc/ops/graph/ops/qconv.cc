// nnkern.QConv: an INT8 convolution on NHWC tensors through PackedQConv2d (ops/qconv/layer.h) with the
// requantization fused. Its inputs are QLinearConv's: X (uint8 / int8), x_scale, x_zero_point, W (constant, int8 or
// uint8, in the layer's layout (groups, KH, KW, IC / groups, OC / groups), which the Python side makes from ONNX's
// OIHW: W - w_zero_point must fit int8, exact), w_scale (per tensor or per output channel),
// w_zero_point, y_scale, y_zero_point, B (int32, scale x_scale * w_scale). The Python side lowers QLinearConv,
// ConvInteger and the QDQ pattern DequantizeLinear -> Conv -> QuantizeLinear onto it. Attributes: Conv's geometry,
// activation ("none" / "relu") and output: "" (uint8 / int8 as y_zero_point's type), "int32" (the exact sums,
// ConvInteger), "float32" (dequantized: a QDQ Conv whose output stays float); clip_min / clip_max (real units: a Clip
// folded in); tune (1: the algorithm is the fastest of the applicable ones timed when the step is made, instead of
// auto's rule); algorithm (one of the layer's applicable algorithms by name, instead of auto's rule or tune). B may
// also be float32 in real units (a QDQ Conv whose bias is a float constant).
// A QLinearAdd after it (fuse_quantized_residual_add): inputs 9-15 are the other operand R (NHWC, the output's
// shape and type), then the add's A_scale, A_zero_point (the convolution's operand), B_scale, B_zero_point (R's),
// C_scale, C_zero_point, attribute add_activation ("none" / "relu"): the output is QLinearAdd(y, R), each tile
// added as it is stored (ops/qconv/stage.h QConvAddStage), the bits of the two steps.
// An nnkern.Lookup after it (fuse_lookup): input 16, its constant table of 256 entries of the output's type,
// applied to each block the convolution stores (ops/qconv/stage.h QConvTableStage), the bits of the two steps.
// Rounding: y = rint(clamp(fma(acc, x_scale * w_scale / y_scale, B * factor + y_zero_point))) in float32 (ties to
// even); onnxruntime adds B to the int32 sum and y_zero_point after rounding, so the two differ by one step where
// the value lies within float32 rounding of a half.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

#include "core/checked.h"
#include "core/kernel_family.h"
#include "core/workspace.h"
#include "ops/conv/geometry.h"
#include "kernels/quantize_list.h"
#include "ops/graph/ops/byte_table.h"
#include "ops/graph/ops/common.h"
#include "ops/graph/ops/qbinary_params.h"
#include "ops/graph/ops/window.h"
#include "ops/qgemm/qgemm.h"
#include "ops/qconv/layer.h"
#include "ops/qconv/stage.h"

namespace nnkern::graph {

namespace {

struct QConvParams {
  QConvGeometry geo;
  QType x_type;
  int32_t x_zero;
  QConvRequant rq;
  // groups x kg x ocg: W - w_zero_point, or (general) W as int8 (uint8 shifted by 128). The constant itself where
  // that is W (int8, zero points 0): the weights are then held once, by the plan.
  std::shared_ptr<const int8_t> w;
  bool general = false;        // W - w_zero_point does not fit int8: im2col + qgemm with per-column zero points
  std::vector<int32_t> w_zero;  // general: per output channel, in the shifted int8 terms
  std::vector<float> factor, offset;
};

int32_t scalar_int(const Constant& c) {
  if (c.desc.elements() != 1) throw std::invalid_argument("expected a scalar");
  return int32_t(c.ints()[0]);
}

QConvGeometry geometry(const NodeSpec& n, const TensorDesc& x, const TensorDesc& w) {
  QConvGeometry g;
  const int64_t group = n.attr_int("group", 1);
  if (group < 1) n.invalid("group must be >= 1");
  if (w.shape[0] != group) n.invalid("weight " + w.str() + " is not laid out for group " + std::to_string(group));
  g.OC = size_t(w.shape[0] * w.shape[4]); g.KH = size_t(w.shape[1]); g.KW = size_t(w.shape[2]);
  g.IC = size_t(x.shape[3]); g.groups = size_t(group);
  const Window2d win = window_attrs(n, size_t(x.shape[1]), size_t(x.shape[2]), g.KH, g.KW);
  g.sh = win.sh; g.sw = win.sw; g.dh = win.dh; g.dw = win.dw;
  g.pt = win.pt; g.pl = win.pl; g.pb = win.pb; g.pr = win.pr;
  if (!g.valid() || size_t(w.shape[3]) * g.groups != g.IC)
    n.invalid("weight " + w.str() + " does not fit input " + x.str() + " with group " + std::to_string(group));
  return g;
}

// Everything but the packed weights' factors needs only shapes; `full` also reads the constants' values.
QConvParams params(const NodeSpec& n, bool full) {
  n.require_types({0}, {DType::u8, DType::i8});
  n.require_types({3, 5}, {DType::u8, DType::i8});
  n.require_types({1, 4, 6}, {DType::f32});
  n.require_types({8}, {DType::i32, DType::f32});
  const TensorDesc& x = n.in(0);
  const Constant& wc = n.need_constant(3, "weight");
  if (x.rank() != 4 || wc.desc.rank() != 5)
    n.invalid("expects an NHWC input and weights (groups, KH, KW, IC / groups, OC / groups) of rank 5");
  QConvParams p;
  p.geo = geometry(n, x, wc.desc);
  const QConvGeometry& g = p.geo;
  p.x_type = x.dtype == DType::u8 ? QType::u8 : QType::s8;
  const std::string output = n.attr_string("output", "");
  const std::string act = n.attr_string("activation", "none");
  if (act != "none" && act != "relu") n.unsupported("activation '" + act + "'");
  p.rq.relu = act == "relu";
  if (output == "int32") p.rq.out = QOut::i32;
  else if (output == "float32") p.rq.out = QOut::f32;
  else if (output.empty()) p.rq.out = n.has_input(7) && n.in(7).dtype == DType::i8 ? QOut::s8 : QOut::u8;
  else n.invalid("output '" + output + "'");
  if (p.rq.out == QOut::i32 && p.rq.relu) n.unsupported("relu on int32 output");
  const int32_t lo8 = x.dtype == DType::u8 ? 0 : -128, hi8 = x.dtype == DType::u8 ? 255 : 127;
  p.x_zero = n.has_input(2) ? scalar_int(n.need_constant(2, "x_zero_point")) : 0;
  if (p.x_zero < lo8 || p.x_zero > hi8) n.invalid("x_zero_point out of range");
  const size_t OC = g.OC;
  for (size_t i : {size_t(4), size_t(5)})
    if (n.has_input(i)) {
      const size_t e = n.in(i).elements();
      if (e != 1 && e != OC) n.invalid("w_scale / w_zero_point: one value or one per output channel");
    }
  if (n.has_input(8) && n.need_constant(8, "bias").desc.elements() != OC) n.invalid("B must have one value per output channel");
  static const char* const kNames[] = {"", "x_scale", "", "", "w_scale", "w_zero_point", "y_scale", "y_zero_point"};
  for (size_t i : {size_t(1), size_t(4), size_t(5), size_t(6), size_t(7)})  // what the requantization is made of
    if (n.has_input(i) && !(p.rq.out == QOut::i32 && (i == 1 || i == 4 || i == 6 || i == 7))) n.need_constant(i, kNames[i]);
  if (!full) return p;
  // Weights minus their zero point, in PackedQConv2d's layout; each must fit int8 (exact).
  std::vector<int64_t> wz(OC, 0);
  if (n.has_input(5)) {
    const std::vector<int64_t> z = n.need_constant(5, "w_zero_point").ints();
    for (size_t o = 0; o < OC; ++o) wz[o] = z.size() == 1 ? z[0] : z[o];
  }
  const size_t ocg = g.ocg(), kg = g.kg(), size = g.groups * kg * ocg;
  // Element i of W is output channel (i / (kg * ocg)) * ocg + i % ocg.
  const auto channel = [&](size_t i) { return i / (kg * ocg) * ocg + i % ocg; };
  for (size_t i = 0; i < size && !p.general; ++i) {
    const int64_t v = wc.int8_at(i) - wz[channel(i)];
    p.general = v < -128 || v > 127;
  }
  // The general form keeps W as int8 (uint8 weights shifted by 128, their zero points alike) with the zero points
  // per column for qgemm; otherwise the zero points are subtracted here.
  const int64_t shift = p.general && wc.desc.dtype == DType::u8 ? 128 : 0;
  if (p.general)
    for (size_t o = 0; o < OC; ++o) p.w_zero.push_back(int32_t(wz[o] - shift));
  const bool zero_points_0 = std::all_of(wz.begin(), wz.end(), [](int64_t z) { return z == 0; });
  const bool as_is = wc.desc.dtype == DType::i8 && (p.general || zero_points_0);
  if (as_is) {
    p.w = std::shared_ptr<const int8_t>(wc.data, wc.as<int8_t>());
  } else {
    std::shared_ptr<int8_t[]> w(new int8_t[size]);
    for (size_t i = 0; i < size; ++i) w[i] = int8_t(wc.int8_at(i) - (p.general ? shift : wz[channel(i)]));
    p.w = std::shared_ptr<const int8_t>(w, w.get());
  }
  if (p.rq.out == QOut::i32) return p;
  const double sx = n.need_constant(1, "x_scale").reals().at(0);
  const std::vector<double> sw = n.need_constant(4, "w_scale").reals();
  // B: int32 at scale x_scale * w_scale (QLinearConv), or float32 in real units (a QDQ Conv with a float bias).
  std::vector<double> bias(OC, 0.0);
  const bool real_bias = n.has_input(8) && n.in(8).dtype == DType::f32;
  if (n.has_input(8)) bias = n.need_constant(8, "bias").reals();
  double sy = 1.0, zy = 0.0;
  if (p.rq.out != QOut::f32) {
    sy = n.need_constant(6, "y_scale").reals().at(0);
    zy = n.has_input(7) ? double(scalar_int(n.need_constant(7, "y_zero_point"))) : 0.0;
    p.rq.lo = p.rq.out == QOut::u8 ? 0.0f : -128.0f;
    p.rq.hi = p.rq.out == QOut::u8 ? 255.0f : 127.0f;
    if (p.rq.relu) p.rq.lo = std::max(p.rq.lo, float(zy));
    // clip_min / clip_max: a Clip between the convolution and its QuantizeLinear, in real units.
    if (n.has("clip_min")) p.rq.lo = std::max(p.rq.lo, float(double(n.attr_float("clip_min", 0)) / sy + zy));
    if (n.has("clip_max")) p.rq.hi = std::min(p.rq.hi, float(double(n.attr_float("clip_max", 0)) / sy + zy));
  }
  p.factor.resize(OC);
  p.offset.resize(OC);
  for (size_t o = 0; o < OC; ++o) {
    const double f = sx * (sw.size() == 1 ? sw[0] : sw[o]) / sy;
    p.factor[o] = float(f);
    p.offset[o] = float(real_bias ? bias[o] / sy + zy : bias[o] * f + zy);
    if (!std::isfinite(p.factor[o]) || !std::isfinite(p.offset[o]) || !(f > 0))
      n.invalid("the requantization factor x_scale * w_scale / y_scale must be finite and positive");
  }
  return p;
}

constexpr size_t kAddInput = 9;  // R, then the QLinearAdd's six scales and zero points

bool has_add(const NodeSpec& n) { return n.has_input(kAddInput); }

constexpr size_t kTableInput = 16;  // a fused nnkern.Lookup's table

bool has_table(const NodeSpec& n) { return n.has_input(kTableInput); }

// The fused table, indexed by the output's bits (its type is the table's: infer checks it).
ByteTable output_table(const NodeSpec& n) {
  const Constant& c = n.need_constant(kTableInput, "table");
  return byte_table(c, c.desc.dtype == DType::i8);
}

// A fused QLinearAdd's parameters as its own step reads them, the convolution's output as operand a.
QBinaryParams add_params(const StepData& d, bool is_signed, bool relu) {
  constexpr size_t k = kAddInput;
  return qbinary_params(d, {k + 1, k + 2, k + 3, k + 4, k + 5, k + 6}, is_signed, false, relu);
}

std::vector<TensorDesc> infer(const NodeSpec& n) {
  const QConvParams p = params(n, false);
  const TensorDesc& x = n.in(0);
  const size_t OH = p.geo.OH(size_t(x.shape[1])), OW = p.geo.OW(size_t(x.shape[2]));
  if (OH == 0 || OW == 0) n.invalid("the kernel does not fit the padded input " + x.str());
  const DType out = p.rq.out == QOut::i32 ? DType::i32 : p.rq.out == QOut::f32 ? DType::f32
                    : p.rq.out == QOut::s8 ? DType::i8 : DType::u8;
  const std::vector<int64_t> shape{x.shape[0], int64_t(OH), int64_t(OW), int64_t(p.geo.OC)};
  if (has_add(n)) {
    if (out != DType::u8 && out != DType::i8) n.invalid("a fused QLinearAdd needs an 8-bit output");
    if (n.in(kAddInput).dtype != out || n.in(kAddInput).shape != shape)
      n.invalid("the added operand must have the output's shape and type");
    for (size_t i = kAddInput + 1; i <= kAddInput + 6; ++i) {
      if (!n.has_input(i)) {
        if (i % 2 == 1) continue;  // an absent zero point is 0 (scales are inputs 10, 12, 14)
        n.invalid("a fused QLinearAdd needs its three scales");
      }
      if (n.in(i).elements() != 1) n.unsupported("a fused QLinearAdd with per-axis scales or zero points");
      if (i % 2 == 0 ? n.in(i).dtype != DType::f32 : n.in(i).dtype != out)
        n.invalid("a fused QLinearAdd's scales are float32, its zero points of the output's type");
    }
    const std::string act = n.attr_string("add_activation", "none");
    if (act != "none" && act != "relu") n.unsupported("add_activation '" + act + "'");
  }
  if (has_table(n)) {
    if (has_add(n)) n.unsupported("a fused table after a fused QLinearAdd");
    const TensorDesc& t = n.need_constant(kTableInput, "table").desc;
    if (t.dtype != out || t.elements() != 256)
      n.invalid("a fused table needs 256 entries of the 8-bit output's type, got " + t.str());
  }
  return one(out, shape);
}

// The general form: per image and group, the windows copied (im2col, padding taps at the input zero point), qgemm
// with the weights' per-column zero points, then the output stage per element as QOutput states it.
struct GeneralConv {
  QConvParams p;
  size_t N, H, W, OH, OW;
  void run(const StepData& d) const;
};

void GeneralConv::run(const StepData& d) const {
  const QConvGeometry& g = p.geo;
  const size_t M = OH * OW, kg = g.kg(), ocg = g.ocg(), icg = g.icg(), esz = qout_elem_size(p.rq.out);
  const size_t col_bytes = checked_round_up(checked_mul(M, kg), 64);
  Workspace ws(checked_add(col_bytes, checked_mul(M, ocg, 4), checked_round_up(icg, 64)));
  uint8_t* cols = ws.as<uint8_t>();
  int32_t* acc = ws.as<int32_t>(col_bytes);
  uint8_t* zero = ws.as<uint8_t>(col_bytes + checked_mul(M, ocg, 4));
  std::fill(zero, zero + icg, uint8_t(p.x_zero));
  const size_t in_bytes = H * W * g.IC;
  for (size_t img = 0; img < N; ++img) {
    const uint8_t* x = d.in<uint8_t>(0) + img * in_bytes;
    uint8_t* y = d.out<uint8_t>(0) + img * M * g.OC * esz;
    for (size_t grp = 0; grp < g.groups; ++grp) {
      conv_im2col(g, ConvInputShape{1, H, W}, x + grp * icg, g.IC, icg, zero, 0, M, cols);
      QgemmArgs a;
      a.M = M; a.N = ocg; a.K = kg;
      a.a_type = p.x_type; a.a = cols; a.lda = kg; a.a_zero = p.x_zero;
      a.b_type = QType::s8; a.b = p.w.get() + grp * kg * ocg; a.ldb = ocg; a.b_zero = p.w_zero.data() + grp * ocg;
      a.c = acc; a.ldc = ocg;
      qgemm(a);
      for (size_t m = 0; m < M; ++m)
        for (size_t o = 0; o < ocg; ++o) {
          const size_t oc = grp * ocg + o;
          const int32_t v = acc[m * ocg + o];
          uint8_t* dst = y + (m * g.OC + oc) * esz;
          if (p.rq.out == QOut::i32) {
            std::memcpy(dst, &v, 4);
            continue;
          }
          float t = std::fma(float(v), p.factor[oc], p.offset[oc]);
          if (p.rq.out == QOut::f32) {
            t = p.rq.relu ? std::max(t, 0.0f) : t;
            std::memcpy(dst, &t, 4);
          } else {
            t = std::nearbyint(std::min(std::max(t, p.rq.lo), p.rq.hi));
            if (p.rq.out == QOut::u8) *dst = uint8_t(t);
            else *reinterpret_cast<int8_t*>(dst) = int8_t(t);
          }
        }
    }
  }
}

// The fastest of the layer's applicable algorithms on this input shape, timed on a zero input (the integer
// kernels' time does not depend on the values): the best of three runs each, after one that packs its weights
// and builds its indirection. Every algorithm gives the same bits, so the choice never changes a result. Empty
// where there is nothing to choose.
std::string timed_algorithm(const PackedQConv2d& layer, size_t N, size_t H, size_t W, QType x_type,
                            const TensorDesc& x, const TensorDesc& y, const std::string& rule) {
  const std::vector<std::string> names = layer.applicable_algorithms(N, H, W);
  if (names.size() < 2) return "";
  AlignedBuffer<uint8_t> in(std::max<size_t>(x.bytes(), 1)), out(std::max<size_t>(y.bytes(), 1));
  std::fill(in.data(), in.data() + in.size(), uint8_t(0));
  std::string best = rule;
  double best_s = std::numeric_limits<double>::infinity();
  for (const std::string& a : names) {
    double s = std::numeric_limits<double>::infinity();
    try {
      for (int i = 0; i < 4; ++i) {
        QConvNhwcStage stage(layer.requant(), out.data(), layer.geometry().OC);
        const auto t0 = std::chrono::steady_clock::now();
        layer.run(N, H, W, x_type, in.data(), stage, a);
        if (i) s = std::min(s, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
    } catch (const std::exception&) {
      continue;  // not for this call after all (a bound checked only when running)
    }
    if (s < best_s) best_s = s, best = a;
  }
  return best;
}

// A packed INT8 convolution step; its output may be a channel slice of a wider tensor (a Concat's:
// Step::write_rows).
class QConvStep final : public Step {
 public:
  QConvStep(std::shared_ptr<const PackedQConv2d> layer, size_t N, size_t H, size_t W, QType x_type,
            std::string algorithm, size_t out_elem, bool timed)
      : layer_(std::move(layer)), N_(N), H_(H), W_(W), x_type_(x_type), algorithm_(std::move(algorithm)),
        out_elem_(out_elem), ldc_(layer_->geometry().OC), timed_(timed) {}
  void run(const StepData& d) const override {
    if (table_) {
      QConvTableStage stage(layer_->requant(), d.out(0), ldc_, table_->data());
      layer_->run(N_, H_, W_, x_type_, d.in(0), stage, algorithm_);
      return;
    }
    if (!add_) {
      QConvNhwcStage stage(layer_->requant(), d.out(0), ldc_);
      layer_->run(N_, H_, W_, x_type_, d.in(0), stage, algorithm_);
      return;
    }
    QConvAddStage stage(layer_->requant(), d.out(0), ldc_, layer_->geometry().OC, d.in(kAddInput),
                        quantize_family().dispatched().qbinary,
                        add_params(d, layer_->requant().out == QOut::s8, add_relu_));
    layer_->run(N_, H_, W_, x_type_, d.in(0), stage, algorithm_);
  }
  void set_add(bool relu) {
    add_ = true;
    add_relu_ = relu;
  }
  void set_table(const ByteTable& t) { table_ = std::make_unique<ByteTable>(t); }
  std::string detail() const override {
    return algorithm_ + (add_ ? " + residual" : "") + (table_ ? " + table" : "") + (timed_ ? " (timed) " : " ") +
           layer_->kernel_name();
  }
  bool write_rows(size_t out, size_t row_bytes, size_t pitch) override {
    if (out != 0 || row_bytes != layer_->geometry().OC * out_elem_ || pitch % out_elem_) return false;
    ldc_ = pitch / out_elem_;
    return true;
  }

 private:
  std::shared_ptr<const PackedQConv2d> layer_;
  size_t N_, H_, W_;
  QType x_type_;
  std::string algorithm_;
  size_t out_elem_;
  size_t ldc_;  // elements from one output pixel to the next
  bool timed_;  // the algorithm is the fastest timed at plan time, not the rule's
  bool add_ = false, add_relu_ = false;  // a QLinearAdd fused after it (inputs 9-15)
  std::unique_ptr<const ByteTable> table_;  // an nnkern.Lookup fused after it (input 16)
};

std::unique_ptr<Step> make(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers& layers) {
  const TensorDesc& x = n.in(0);
  const QType x_type = x.dtype == DType::u8 ? QType::u8 : QType::s8;
  const size_t N = size_t(x.shape[0]), H = size_t(x.shape[1]), W = size_t(x.shape[2]);
  auto p = layers.get<QConvParams>(n, [&] { return std::make_shared<QConvParams>(params(n, true)); });
  if (p->general) {
    qgemm_check_exact(n.name.c_str(), p->x_type, p->x_zero, p->geo.kg(), 255);
    auto conv = std::make_shared<GeneralConv>(GeneralConv{*p, N, H, W, size_t(out[0].shape[1]), size_t(out[0].shape[2])});
    const bool add = has_add(n), relu = n.attr_string("add_activation", "none") == "relu", table = has_table(n);
    const size_t count = out[0].elements();
    const ByteTable t = table ? output_table(n) : ByteTable{};
    return fn_step(
        [conv, add, relu, count, table, t](const StepData& d) {
          conv->run(d);
          if (add)  // the fused QLinearAdd over the whole output, in place
            quantize_family().dispatched().qbinary(d.out(0), d.in(kAddInput), d.out(0), count,
                                                  add_params(d, conv->p.rq.out == QOut::s8, relu));
          if (table)  // the fused table likewise
            quantize_family().dispatched().lookup(t.data(), d.out<uint8_t>(0), d.out<uint8_t>(0), count);
        },
        std::string("im2col qgemm (weights with zero points)") + (add ? " + residual" : "") +
            (table ? " + table" : ""));
  }
  auto layer = layers.get<PackedQConv2d>(n, [&] {
    // The parameters' weights (the plan's constant or their own, read-only) serve as the layer's weights as given.
    return std::make_shared<PackedQConv2d>(p->geo, p->w.get(), p->factor.empty() ? nullptr : p->factor.data(),
                                           p->offset.empty() ? nullptr : p->offset.data(), p->x_zero, p->rq, p->w);
  });
  std::string rule = layer->auto_algorithm(N, H, W);
  if (n.has("algorithm")) {  // a named algorithm (tests, measurements), one that applies to this shape
    const std::string a = n.attr_string("algorithm", "");
    const std::vector<std::string> names = layer->applicable_algorithms(N, H, W);
    if (std::find(names.begin(), names.end(), a) == names.end())
      n.invalid("algorithm '" + a + "' does not apply to this convolution");
    rule = a;
  }
  const bool tune = n.attr_int("tune", 0) && !n.has("algorithm");
  const std::string timed = tune ? timed_algorithm(*layer, N, H, W, x_type, x, out[0], rule) : "";
  auto step = std::make_unique<QConvStep>(layer, N, H, W, x_type, timed.empty() ? rule : timed,
                                          dtype_size(out[0].dtype), !timed.empty());
  if (has_add(n)) step->set_add(n.attr_string("add_activation", "none") == "relu");
  if (has_table(n)) step->set_table(output_table(n));
  return step;
}

}  // namespace

void register_graph_ops_qconv() { register_op("nnkern.QConv", {infer, make}); }

}  // namespace nnkern::graph
