// Integer matrix products: MatMulInteger (int32 sums), QLinearMatMul (requantized) and nnkern.QGemm, the target of the
// QDQ pattern DequantizeLinear -> MatMul / Gemm -> QuantizeLinear: QLinearMatMul's inputs A, a_scale, a_zero_point,
// B, b_scale, b_zero_point, y_scale, y_zero_point, then a bias (int32, scale a_scale * b_scale) and attributes output
// ("" requantized, "float32", "int32") and activation ("none" / "relu"). A constant 2-D B (the weights) is packed once
// (PackedQGemm: B minus its zero points must fit int8, exact) and every row of A's batch goes through one GEMM; a B
// known only while running goes through qgemm per batch matrix. Zero points of A: one per tensor. Rounding as
// nnkern.QConv (ops/graph/ops/qconv.cc).
#include <algorithm>
#include <cmath>

#include "core/checked.h"
#include "core/workspace.h"
#include "ops/graph/ops/common.h"
#include "ops/graph/ops/elementwise.h"
#include "ops/qgemm/qgemm.h"

namespace nnkern::graph {

namespace {

// Where each input sits: QLinearMatMul's order, or MatMulInteger's (A, B, a_zero_point, b_zero_point).
struct Slots {
  size_t a = 0, a_scale = 1, a_zero = 2, b = 3, b_scale = 4, b_zero = 5, y_scale = 6, y_zero = 7, bias = 8;
};
constexpr size_t kNone = size_t(-1);

Slots slots_of(const NodeSpec& n) {
  if (n.op == "MatMulInteger") return Slots{0, kNone, 2, 1, kNone, 3, kNone, kNone, kNone};
  return Slots{};
}

struct QMatMul {
  Slots s;
  size_t M, N, K, batches_a, batches_b;
  std::vector<int64_t> out_shape;
  QOut out;
  bool relu;
  DType a_type, b_type;
};

bool has(const NodeSpec& n, size_t i) { return i != kNone && n.has_input(i); }

QMatMul describe(const NodeSpec& n) {
  QMatMul q;
  q.s = slots_of(n);
  const Slots& s = q.s;
  n.require_types({s.a, s.b}, {DType::u8, DType::i8});
  const TensorDesc &A = n.in(s.a), &B = n.in(s.b);
  if (A.rank() < 1 || B.rank() < 2) n.unsupported("operands of rank >= 1 (A) and >= 2 (B)");
  if (has(n, s.a_zero) && n.in(s.a_zero).elements() != 1) n.unsupported("a per-row zero point of A");
  q.K = size_t(A.shape.back());
  q.M = A.rank() >= 2 ? size_t(A.shape[A.rank() - 2]) : 1;
  q.N = size_t(B.shape.back());
  if (size_t(B.shape[B.rank() - 2]) != q.K) n.invalid("inner dimensions differ: " + A.str() + " and " + B.str());
  q.batches_a = A.rank() >= 2 ? elements_before(A.shape, A.rank() - 2) : 1;
  q.batches_b = elements_before(B.shape, B.rank() - 2);
  if (q.batches_b != 1 && (B.rank() != A.rank() || !std::equal(A.shape.begin(), A.shape.end() - 2, B.shape.begin())))
    n.unsupported("a batched B whose batch dimensions differ from A's");
  q.out_shape = A.shape;
  if (A.rank() == 1) q.out_shape = {int64_t(q.N)};
  else q.out_shape.back() = int64_t(q.N);
  for (size_t i : {s.b_scale, s.b_zero})
    if (has(n, i) && n.in(i).elements() != 1 && n.in(i).elements() != q.N)
      n.invalid("b_scale / b_zero_point: one value or one per column");
  const std::string output = n.op == "MatMulInteger" ? "int32" : n.attr_string("output", "");
  const std::string act = n.attr_string("activation", "none");
  if (act != "none" && act != "relu") n.unsupported("activation '" + act + "'");
  q.relu = act == "relu";
  q.out = output == "int32" ? QOut::i32 : output == "float32" ? QOut::f32
          : has(n, s.y_zero) && n.in(s.y_zero).dtype == DType::i8 ? QOut::s8 : QOut::u8;
  if (!output.empty() && output != "int32" && output != "float32") n.invalid("output '" + output + "'");
  if (q.out == QOut::i32 && q.relu) n.unsupported("relu on int32 output");
  if (has(n, s.bias) && n.in(s.bias).elements() != q.N) n.invalid("the bias needs one value per column");
  if (has(n, s.bias)) n.require_types({s.bias}, {DType::i32, DType::f32});
  q.a_type = A.dtype;
  q.b_type = B.dtype;
  return q;
}

std::vector<TensorDesc> infer(const NodeSpec& n) {
  const QMatMul q = describe(n);
  const DType t = q.out == QOut::i32 ? DType::i32 : q.out == QOut::f32 ? DType::f32 : q.out == QOut::s8 ? DType::i8 : DType::u8;
  return one(t, q.out_shape);
}

std::vector<int32_t> per_column(const NodeSpec& n, size_t i, size_t N) {
  std::vector<int32_t> v(N, 0);
  if (i == kNone || !n.has_input(i)) return v;
  const std::vector<int64_t> c = n.need_constant(i, "zero point").ints();
  for (size_t j = 0; j < N; ++j) v[j] = int32_t(c.size() == 1 ? c[0] : c[j]);
  return v;
}

// The output stage's padded per-column factor and bias, and clamp.
struct Requant {
  std::vector<float> scale, bias;
  float lo = 0, hi = 0;
};

Requant requant_of(const NodeSpec& n, const QMatMul& q) {
  Requant r;
  if (q.out == QOut::i32) return r;
  const size_t padded = qgemm_padded_n(q.N);
  r.scale.assign(padded, 0.0f);
  r.bias.assign(padded, 0.0f);
  const double sa = n.need_constant(q.s.a_scale, "a_scale").reals().at(0);
  const std::vector<double> sb = n.need_constant(q.s.b_scale, "b_scale").reals();
  std::vector<double> bias(q.N, 0.0);  // int32 at scale a_scale * b_scale, or float32 in real units
  const bool real_bias = has(n, q.s.bias) && n.in(q.s.bias).dtype == DType::f32;
  if (has(n, q.s.bias)) bias = n.need_constant(q.s.bias, "bias").reals();
  double sy = 1.0, zy = 0.0;
  if (q.out != QOut::f32) {
    sy = n.need_constant(q.s.y_scale, "y_scale").reals().at(0);
    zy = has(n, q.s.y_zero) ? double(n.need_constant(q.s.y_zero, "y_zero_point").ints().at(0)) : 0.0;
    r.lo = q.out == QOut::u8 ? 0.0f : -128.0f;
    r.hi = q.out == QOut::u8 ? 255.0f : 127.0f;
    if (q.relu) r.lo = std::max(r.lo, float(zy));
    if (n.has("clip_min")) r.lo = std::max(r.lo, float(double(n.attr_float("clip_min", 0)) / sy + zy));
    if (n.has("clip_max")) r.hi = std::min(r.hi, float(double(n.attr_float("clip_max", 0)) / sy + zy));
  }
  for (size_t j = 0; j < q.N; ++j) {
    const double f = sa * (sb.size() == 1 ? sb[0] : sb[j]) / sy;
    r.scale[j] = float(f);
    r.bias[j] = float(real_bias ? bias[j] / sy + zy : bias[j] * f + zy);
    if (!std::isfinite(r.scale[j]) || !std::isfinite(r.bias[j]) || !(f > 0))
      n.invalid("the requantization factor a_scale * b_scale / y_scale must be finite and positive");
  }
  return r;
}

int32_t a_zero_of(const NodeSpec& n, const QMatMul& q) {
  if (!has(n, q.s.a_zero)) return 0;
  return int32_t(n.need_constant(q.s.a_zero, "a_zero_point").ints().at(0));
}

std::unique_ptr<Step> make(const NodeSpec& n, const std::vector<TensorDesc>&, SharedLayers& layers) {
  const QMatMul q = describe(n);
  const Requant r = requant_of(n, q);
  const int32_t za = a_zero_of(n, q);
  const QType at = q.a_type == DType::u8 ? QType::u8 : QType::s8;
  const size_t M = q.M, N = q.N, K = q.K, rows = q.batches_a * q.M;
  const QOut out = q.out;
  const bool relu = q.relu;
  // A constant B whose values minus their zero points fit int8 is packed; otherwise it goes the general way below.
  bool fits = false;
  if (n.constant(q.s.b) && q.batches_b == 1) {
    const Constant& b = n.need_constant(q.s.b, "B");
    const std::vector<int32_t> zb = per_column(n, q.s.b_zero, N);
    fits = true;
    for (size_t i = 0; i < K * N && fits; ++i) fits = b.int8_at(i) - zb[i % N] >= -128 && b.int8_at(i) - zb[i % N] <= 127;
  }
  if (fits) {
    auto packed = layers.get<PackedQGemm>(n, [&] {
      const Constant& b = n.need_constant(q.s.b, "B");
      const std::vector<int32_t> zb = per_column(n, q.s.b_zero, N);
      std::vector<int8_t> w(K * N);
      for (size_t i = 0; i < K * N; ++i) w[i] = int8_t(b.int8_at(i) - zb[i % N]);
      return std::make_shared<PackedQGemm>(w.data(), K, N, N);
    });
    qgemm_check_exact(n.name.c_str(), at, za, K);
    return fn_step(
        [packed, r, at, za, rows, K, N, out, relu](const StepData& d) {
          QOutput o;
          o.out = out;
          o.c = d.out(0);
          o.ldc = N;
          o.scale = r.scale.empty() ? nullptr : r.scale.data();
          o.bias = r.bias.empty() ? nullptr : r.bias.data();
          o.relu = relu;
          o.lo = r.lo;
          o.hi = r.hi;
          if (rows && N) packed->run(rows, at, d.in(0), K, za, o);
        },
        std::string("packed ") + packed->kernel_name());
  }
  // B known only while running: int32 sums by qgemm (B as int8: uint8 shifted by 128 with its zero point), then the
  // output stage per element.
  const bool b_unsigned = q.b_type == DType::u8;
  std::vector<int32_t> zb = per_column(n, q.s.b_zero, N);
  if (b_unsigned)
    for (int32_t& z : zb) z -= 128;
  const size_t batches_b = q.batches_b;
  qgemm_check_exact(n.name.c_str(), at, za, K, 255);
  return fn_step([=](const StepData& d) {
    const size_t b_bytes = checked_round_up(checked_mul(K, N), 64);
    Workspace ws(checked_add(b_bytes, checked_mul(M, N, 4)));
    int8_t* b8 = ws.as<int8_t>();
    int32_t* acc = out == QOut::i32 ? nullptr : ws.as<int32_t>(b_bytes);
    for (size_t bi = 0; bi < q.batches_a; ++bi) {
      const size_t bb = batches_b == 1 ? 0 : bi;
      const uint8_t* braw = d.in<uint8_t>(q.s.b) + bb * K * N;
      if (b_unsigned)
        for (size_t i = 0; i < K * N; ++i) b8[i] = int8_t(int32_t(braw[i]) - 128);
      else
        std::copy(braw, braw + K * N, reinterpret_cast<uint8_t*>(b8));
      int32_t* c = out == QOut::i32 ? d.out<int32_t>(0) + bi * M * N : acc;
      if (M && N) {
        if (K == 0) {
          std::fill(c, c + M * N, 0);
        } else {
          QgemmArgs g;
          g.M = M; g.N = N; g.K = K;
          g.a_type = at; g.a = d.in<uint8_t>(q.s.a) + bi * M * K; g.lda = K; g.a_zero = za;
          g.b_type = QType::s8; g.b = b8; g.ldb = N; g.b_zero = zb.data();
          g.c = c; g.ldc = N;
          qgemm(g);
        }
      }
      if (out == QOut::i32) continue;
      for (size_t i = 0; i < M * N; ++i) {
        const size_t j = i % N;
        float v = std::fma(float(c[i]), r.scale[j], r.bias[j]);
        if (out == QOut::f32) {
          d.out<float>(0)[bi * M * N + i] = relu ? std::max(v, 0.0f) : v;
        } else {
          v = std::nearbyint(std::min(std::max(v, r.lo), r.hi));
          if (out == QOut::u8) d.out<uint8_t>(0)[bi * M * N + i] = uint8_t(v);
          else d.out<int8_t>(0)[bi * M * N + i] = int8_t(v);
        }
      }
    }
  });
}

}  // namespace

void register_graph_ops_qmatmul() {
  register_op("MatMulInteger", {infer, make});
  register_op("QLinearMatMul", {infer, make});
  register_op("nnkern.QGemm", {infer, make});
}

}  // namespace nnkern::graph
