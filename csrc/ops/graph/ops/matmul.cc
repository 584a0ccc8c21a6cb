// Matrix products: MatMul (numpy.matmul semantics: 1-D operands, broadcast batch dimensions) and Gemm
// (alpha op(A) op(B) + beta C). float32 runs on nnkern's FP32 GEMM: a constant B is packed once per session
// (PackedF32Gemm, shared by the plans of every input shape) and A's batch rows go through it as one GEMM; a B known
// only while running goes through sgemm per batch matrix. Integer and float64 products run a plain loop (exact for
// integers). The plan's fusion pass may add `activation` ("relu") to a float32 MatMul or Gemm, a third input to a
// float32 MatMul (a bias of N elements, the Add after it, added in the epilogue: acc + bias, the Add's one
// rounding), and the session `precision` ("medium": bf16 products summed in float32, on PackedBf16Gemm /
// bf16_gemm, ops/bf16/bf16.h).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/precision.h"
#include "core/threadpool.h"
#include "ops/bf16/bf16.h"
#include "ops/gemm/gemm.h"
#include "ops/graph/ops/common.h"
#include "ops/graph/ops/elementwise.h"

namespace nnkern::graph {

namespace {

F32Epilogue activation_epilogue(const NodeSpec& n) {
  F32Epilogue ep;
  const std::string act = n.attr_string("activation", "none");
  if (act == "relu") {
    ep.clamp = true;
    ep.clamp_min = 0.0f;
    ep.clamp_max = INFINITY;
  } else if (act != "none") {
    n.unsupported("activation '" + act + "'");
  }
  return ep;
}

bool bf16_products(const NodeSpec& n) {
  return float32_precision_from_name(n.attr_string("precision", "highest")) == Float32Precision::medium;
}

// ---- MatMul

struct MatMulShape {
  std::vector<int64_t> a, b;        // operands as matrices (1-D promoted), batch dims included
  std::vector<int64_t> batch;       // broadcast batch dims
  size_t M, N, K;
  std::vector<int64_t> out;         // the output shape (promoted dims removed)
};

MatMulShape matmul_shape(const NodeSpec& n) {
  const TensorDesc &A = n.in(0), &B = n.in(1);
  if (A.rank() == 0 || B.rank() == 0) n.invalid("operands must have rank >= 1");
  MatMulShape s;
  s.a = A.shape;
  s.b = B.shape;
  if (s.a.size() == 1) s.a.insert(s.a.begin(), 1);
  if (s.b.size() == 1) s.b.push_back(1);
  s.M = size_t(s.a[s.a.size() - 2]);
  s.K = size_t(s.a.back());
  s.N = size_t(s.b.back());
  if (size_t(s.b[s.b.size() - 2]) != s.K) n.invalid("inner dimensions differ: " + A.str() + " @ " + B.str());
  const std::vector<int64_t> ba(s.a.begin(), s.a.end() - 2), bb(s.b.begin(), s.b.end() - 2);
  try {
    s.batch = broadcast_shapes(ba, bb);
  } catch (const std::invalid_argument&) {
    n.invalid("batch dimensions do not broadcast: " + A.str() + " @ " + B.str());
  }
  s.out = s.batch;
  if (A.rank() > 1) s.out.push_back(int64_t(s.M));
  if (B.rank() > 1) s.out.push_back(int64_t(s.N));
  return s;
}

std::vector<TensorDesc> infer_matmul(const NodeSpec& n) {
  n.require_types({0, 1}, {DType::f32, DType::f64, DType::i32, DType::i64, DType::u32, DType::u64});
  if (n.in(0).dtype != n.in(1).dtype) n.invalid("operands of different types");
  if (n.in(0).dtype != DType::f32) activation_epilogue(n);
  const MatMulShape s = matmul_shape(n);
  if (n.has_input(2)) {
    if (n.in(0).dtype != DType::f32 || n.in(2).dtype != DType::f32) n.invalid("a bias needs float32 operands");
    if (n.in(2).elements() != s.N)
      n.invalid("the bias has " + n.in(2).str() + ", not N = " + std::to_string(s.N) + " elements");
  }
  return one(n.in(0).dtype, s.out);
}

// The offsets (in matrices) of each batch's A and B within their own batch dims.
void batch_offsets(const MatMulShape& s, std::vector<size_t>& ao, std::vector<size_t>& bo) {
  const std::vector<int64_t> ba(s.a.begin(), s.a.end() - 2), bb(s.b.begin(), s.b.end() - 2);
  const Broadcast bc = plan_broadcast({ba, bb}, s.batch);
  const size_t outer = bc.outer(), inner = bc.inner;
  for (size_t o = 0; o < outer; ++o) {
    size_t off[2];
    bc.offsets(o, off);
    for (size_t i = 0; i < inner; ++i) {
      ao.push_back(off[0] + i * bc.inner_step[0]);
      bo.push_back(off[1] + i * bc.inner_step[1]);
    }
  }
}

template <typename T>
void naive_matmul(const T* a, const T* b, T* c, size_t M, size_t N, size_t K) {
  parallel_for_ranges(M, [&](size_t m0, size_t m1) {
    for (size_t m = m0; m < m1; ++m) {
      T* row = c + m * N;
      std::fill(row, row + N, T(0));
      for (size_t k = 0; k < K; ++k) {
        const T v = a[m * K + k];
        const T* brow = b + k * N;
        for (size_t j = 0; j < N; ++j) row[j] += v * brow[j];
      }
    }
  });
}

template <typename T>
std::unique_ptr<Step> make_naive_matmul(const MatMulShape& s) {
  std::vector<size_t> ao, bo;
  batch_offsets(s, ao, bo);
  const size_t M = s.M, N = s.N, K = s.K;
  return fn_step([=](const StepData& d) {
    for (size_t i = 0; i < ao.size(); ++i)
      naive_matmul(d.in<T>(0) + ao[i] * M * K, d.in<T>(1) + bo[i] * K * N, d.out<T>(0) + i * M * N, M, N, K);
  });
}

std::unique_ptr<Step> make_matmul(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers& layers) {
  const MatMulShape s = matmul_shape(n);
  const size_t M = s.M, N = s.N, K = s.K;
  switch (n.in(0).dtype) {
    case DType::f64: return make_naive_matmul<double>(s);
    case DType::i32: return make_naive_matmul<int32_t>(s);
    case DType::i64: return make_naive_matmul<int64_t>(s);
    case DType::u32: return make_naive_matmul<uint32_t>(s);
    case DType::u64: return make_naive_matmul<uint64_t>(s);
    default: break;
  }
  const F32Epilogue ep = activation_epilogue(n);
  const bool has_bias = n.has_input(2);
  // The epilogue of one run: the bias input's pointer where there is one.
  const auto with_bias = [has_bias, ep](const StepData& d) {
    F32Epilogue e = ep;
    if (has_bias) e.bias = d.in<float>(2);
    return e;
  };
  const Constant* b = n.constant(1);
  const bool b_matrix = s.b.size() == 2;
  const bool bf16 = bf16_products(n);
  if (bf16 && b && b_matrix && M * K * N) {  // W(n, k) = B(k, n), rounded and packed once
    auto packed = layers.get<PackedBf16Gemm>(n, [&] {
      return std::make_shared<PackedBf16Gemm>(Bf16Operand::matrix(b->as<float>(), N, true), N, K);
    });
    size_t rows = M;
    for (int64_t d : s.batch) rows *= size_t(d);
    return fn_step([packed, rows, K, N, with_bias](const StepData& d) {
      packed->run(rows, Bf16Operand::matrix(d.in<float>(0), K, false), d.out<float>(0), N, with_bias(d));
    }, std::string("packed ") + packed->kernel_name());
  }
  if (b && b_matrix && M * K * N) {
    // One GEMM over every row of A (its batch dims are rows too): B^T packed once.
    auto packed = layers.get<PackedF32Gemm>(n, [&] {
      std::vector<float> wt(K * N);
      const float* w = b->as<float>();
      for (size_t k = 0; k < K; ++k)
        for (size_t j = 0; j < N; ++j) wt[j * K + k] = w[k * N + j];
      return std::make_shared<PackedF32Gemm>(wt.data(), N, K, K);
    });
    size_t rows = M;
    for (int64_t d : s.batch) rows *= size_t(d);
    return fn_step(
        [packed, rows, K, N, with_bias](const StepData& d) {
          packed->run(rows, d.in<float>(0), K, d.out<float>(0), N, with_bias(d));
        },
        std::string("packed ") + packed->kernel_name());
  }
  std::vector<size_t> ao, bo;
  batch_offsets(s, ao, bo);
  return fn_step([=](const StepData& d) {
    const F32Epilogue e = with_bias(d);
    for (size_t i = 0; i < ao.size(); ++i) {
      float* c = d.out<float>(0) + i * M * N;
      if (K == 0) {  // an empty sum through the kernels' epilogue: the bias (or 0), clamped
        for (size_t r = 0; r < M; ++r)
          for (size_t j = 0; j < N; ++j) c[r * N + j] = f32_epilogue_scalar(0.0f, nullptr, j, e);
        continue;
      }
      if (M == 0 || N == 0) continue;
      if (bf16) {
        bf16_gemm(M, N, K, Bf16Operand::matrix(d.in<float>(0) + ao[i] * M * K, K, false),
                  Bf16Operand::matrix(d.in<float>(1) + bo[i] * K * N, N, false), c, N, e);
        continue;
      }
      SgemmArgs g;
      g.M = M; g.N = N; g.K = K;
      g.a = d.in<float>(0) + ao[i] * M * K; g.lda = K;
      g.b = d.in<float>(1) + bo[i] * K * N; g.ldb = N;
      g.c = c; g.ldc = N;
      g.ep = e;
      sgemm(g);
    }
  });
}

// ---- Gemm

struct GemmShape {
  size_t M, N, K;
  bool ta, tb;
  float alpha, beta;
};

GemmShape gemm_shape(const NodeSpec& n) {
  n.require_types({0, 1, 2}, {DType::f32});
  const TensorDesc &A = n.in(0), &B = n.in(1);
  if (A.rank() != 2 || B.rank() != 2) n.invalid("A and B must be matrices");
  GemmShape g;
  g.ta = n.attr_int("transA", 0) != 0;
  g.tb = n.attr_int("transB", 0) != 0;
  g.alpha = n.attr_float("alpha", 1.0f);
  g.beta = n.attr_float("beta", 1.0f);
  g.M = size_t(g.ta ? A.shape[1] : A.shape[0]);
  g.K = size_t(g.ta ? A.shape[0] : A.shape[1]);
  const size_t kb = size_t(g.tb ? B.shape[1] : B.shape[0]);
  g.N = size_t(g.tb ? B.shape[0] : B.shape[1]);
  if (kb != g.K) n.invalid("inner dimensions differ: " + A.str() + " and " + B.str());
  if (n.has_input(2)) {
    const TensorDesc& C = n.in(2);
    if (C.rank() > 2) n.invalid("C must have rank <= 2");
    try {
      if (broadcast_shapes(C.shape, {int64_t(g.M), int64_t(g.N)}) != std::vector<int64_t>{int64_t(g.M), int64_t(g.N)})
        throw std::invalid_argument("");
    } catch (const std::invalid_argument&) {
      n.invalid("C " + C.str() + " does not broadcast to (M, N)");
    }
  }
  return g;
}

std::vector<TensorDesc> infer_gemm(const NodeSpec& n) {
  const GemmShape g = gemm_shape(n);
  activation_epilogue(n);
  return one(DType::f32, {int64_t(g.M), int64_t(g.N)});
}

std::unique_ptr<Step> make_gemm(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers& layers) {
  const GemmShape g = gemm_shape(n);
  const size_t M = g.M, N = g.N, K = g.K;
  F32Epilogue ep = activation_epilogue(n);
  ep.alpha = g.alpha;
  // C: a per-column vector with beta 1 is the kernels' bias; anything else is broadcast into Y first (beta * Y).
  const bool has_c = n.has_input(2) && g.beta != 0.0f;
  const TensorDesc c_desc = has_c ? n.in(2) : TensorDesc{};
  const bool c_is_bias = has_c && g.beta == 1.0f && c_desc.elements() == N && (c_desc.rank() == 1 || c_desc.shape[0] == 1) &&
                         N > 1;
  Broadcast cb;
  if (has_c && !c_is_bias) {
    cb = plan_broadcast({c_desc.shape, c_desc.shape}, {int64_t(M), int64_t(N)});  // C as both inputs
    ep.beta = g.beta;
  }
  auto fill_c = [cb, has_c, c_is_bias](const StepData& d) {
    if (!has_c || c_is_bias) return;
    const float* c = d.in<float>(2);
    broadcast2(cb, c, c, d.out<float>(0), [](float v, float) { return v; });
  };
  const Constant* b = n.constant(1);
  const bool bf16 = bf16_products(n);
  if (bf16 && b && !g.ta && M * K * N) {  // W = op(B)^T, rounded and packed once
    auto packed = layers.get<PackedBf16Gemm>(n, [&] {
      return std::make_shared<PackedBf16Gemm>(Bf16Operand::matrix(b->as<float>(), g.tb ? K : N, !g.tb), N, K);
    });
    return fn_step(
        [packed, M, K, N, ep, fill_c, c_is_bias](const StepData& d) {
          fill_c(d);
          F32Epilogue e = ep;
          if (c_is_bias) e.bias = d.in<float>(2);
          packed->run(M, Bf16Operand::matrix(d.in<float>(0), K, false), d.out<float>(0), N, e);
        },
        std::string("packed ") + packed->kernel_name());
  }
  if (b && !g.ta && M * K * N) {
    auto packed = layers.get<PackedF32Gemm>(n, [&] {
      if (g.tb) return std::make_shared<PackedF32Gemm>(b->as<float>(), N, K, K);
      std::vector<float> wt(K * N);
      const float* w = b->as<float>();
      for (size_t k = 0; k < K; ++k)
        for (size_t j = 0; j < N; ++j) wt[j * K + k] = w[k * N + j];
      return std::make_shared<PackedF32Gemm>(wt.data(), N, K, K);
    });
    return fn_step(
        [packed, M, K, N, ep, fill_c, c_is_bias](const StepData& d) {
          fill_c(d);
          F32Epilogue e = ep;
          if (c_is_bias) e.bias = d.in<float>(2);
          packed->run(M, d.in<float>(0), K, d.out<float>(0), N, e);
        },
        std::string("packed ") + packed->kernel_name());
  }
  const size_t lda = size_t(n.in(0).shape[1]), ldb = size_t(n.in(1).shape[1]);
  return fn_step([=](const StepData& d) {
    fill_c(d);
    float* y = d.out<float>(0);
    if (M == 0 || N == 0) return;
    if (K == 0) {  // alpha * 0 + beta C (already in y) + bias, clamped
      for (size_t i = 0; i < M; ++i)
        for (size_t j = 0; j < N; ++j) {
          float v = (has_c && !c_is_bias ? g.beta * y[i * N + j] : 0.0f) + (c_is_bias ? d.in<float>(2)[j] : 0.0f);
          y[i * N + j] = ep.clamp ? (v != v ? v : std::min(std::max(v, ep.clamp_min), ep.clamp_max)) : v;
        }
      return;
    }
    if (bf16) {
      F32Epilogue e = ep;
      if (c_is_bias) e.bias = d.in<float>(2);
      bf16_gemm(M, N, K, Bf16Operand::matrix(d.in<float>(0), lda, g.ta),
                Bf16Operand::matrix(d.in<float>(1), ldb, g.tb), y, N, e);
      return;
    }
    SgemmArgs a;
    a.M = M; a.N = N; a.K = K;
    a.a = d.in<float>(0); a.lda = lda; a.trans_a = g.ta;
    a.b = d.in<float>(1); a.ldb = ldb; a.trans_b = g.tb;
    a.c = y; a.ldc = N;
    a.ep = ep;
    if (c_is_bias) a.ep.bias = d.in<float>(2);
    sgemm(a);
  });
}

}  // namespace

void register_graph_ops_matmul() {
  register_op("MatMul", {infer_matmul, make_matmul});
  register_op("Gemm", {infer_gemm, make_gemm});
}

}  // namespace nnkern::graph
