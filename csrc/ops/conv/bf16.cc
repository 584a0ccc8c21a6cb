// The bf16 FP32 convolution (ops/conv/algorithm.h, float32 precision "medium"): the im2col template
// (ops/conv/im2col.h) on the packed bf16 GEMM (ops/bf16/bf16.h), each row rounded to bf16 as the GEMM reads it and
// the weights rounded and packed once per group. auto takes it at precision "medium" for every layer the depthwise
// entry does not take; its bound is the GEMM's over the rounded operands (nnkern.Conv2d's docstring).
#include "ops/bf16/bf16.h"
#include "ops/conv/im2col.h"

namespace nnkern {
namespace {

struct Bf16Rows {
  using Packed = PackedBf16Gemm;
  static constexpr const char* kName = "bf16";
  static constexpr bool kAddsResidual = false;  // its kernels take no residual: the post-ops add it
  static bool preferred(const PackedConv2d&, const ConvCall& c) { return c.precision == Float32Precision::medium; }
  static std::unique_ptr<Packed> pack(const float* w, size_t ocg, size_t kg) {
    return std::make_unique<Packed>(Bf16Operand::matrix(w, kg), ocg, kg);
  }
  static void run(const Packed& p, size_t m, const float* x, size_t ldx, float* y, size_t ldc, const F32Epilogue& ep) {
    p.run(m, Bf16Operand::matrix(x, ldx), y, ldc, ep);
  }
};

}  // namespace

std::unique_ptr<ConvAlgorithm> make_conv_bf16(const PackedConv2d& layer) {
  return std::make_unique<Im2colConv<Bf16Rows>>(layer);
}

}  // namespace nnkern
