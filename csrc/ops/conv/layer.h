// FP32 2-D convolution (NHWC float32 activations, (OC, KH, KW, IC/groups) weights) as a packed layer: its geometry,
// weights, bias and activation, and one object per algorithm of the table (ops/conv/algorithm.h), each packing the
// weights for its kernels on its first call; indirection buffers are built once per input shape:
//   im2col    the baseline: each output pixel's window copied into a workspace row, then the packed FP32 GEMM
//             (ops/gemm/gemm.h PackedF32Gemm); a 1x1, stride-1, unpadded convolution reads its input rows in
//             place (a plain GEMM, no copy).
//   indirect  the FP32 GEMM kernels' indirect form (kernels/f32_gemm.h): ks = KH*KW taps of input-row
//             pointers from a cached indirection buffer, a shared zero row for padding taps.
//   direct    the direct kernels (kernels/f32_conv.h, seeds C1-C4): output channels x pixels of a row in
//   mgemm     registers, straight from the input with strides, taps clipped to the image (no padding read,
//             no workspace); mgemm's kernels also keep the inputs of adjacent kernel columns in registers
//             (seeds G1-G3; stride == dilation along W, SIMD levels only). ops/conv/tiles.cc.
//   depthwise (groups == IC == OC) the same driver on the depthwise kernels: channels in vector lanes.
//   dot       the same driver on the dot kernels (seed C2): a few output channels, input channels in lanes.
// Post-ops: bias and relu / relu6 in the kernels' epilogue; sigmoid and SiLU through nnkern's sigmoid kernels
// on each block of output just stored (still in cache).
#pragma once
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "kernels/f32_activation.h"
#include "kernels/f32_conv.h"
#include "kernels/f32_gemm.h"
#include "ops/conv/geometry.h"
#include "ops/gemm/gemm.h"
#include "ops/conv/algorithm.h"
#include "ops/conv/indirection_cache.h"

namespace nnkern {

enum class ConvActivation : int {
  none = 0, relu = 1, relu6 = 2, sigmoid = 3, silu = 4, hardswish = 5, hardsigmoid = 6, leaky_relu = 7, tanh = 8
};
constexpr ConvActivation kLastConvActivation = ConvActivation::tanh;

// The activation fused after the convolution, with its parameters: alpha of leaky_relu, alpha and beta of
// hardsigmoid (ops/activation/pointwise.h; unused by the others).
struct ConvPostOp {
  ConvActivation act = ConvActivation::none;
  float alpha = 0.0f, beta = 0.0f;
};


// The weights in blocks of MR output channels per group, each ks * icg rows of MR floats (row t * icg + c:
// tap t = kh * KW + kw, input channel c), channels past ocg zero: the indirect GEMM kernels' packed A and the
// direct / mGEMM kernels' packed weights alike.
// Depthwise layers (groups == IC == OC) pack their single input channel per group the other way round: blocks
// of MR channels, each ks rows of MR floats (row t: tap t), channel b * MR + i, the depthwise kernels' layout.
struct ConvTapWeights {
  size_t mr = 0;
  bool depthwise = false;
  size_t panels = 0, panel_floats = 0;  // per group
  AlignedBuffer<float> w;               // [groups][panels][ks * icg][MR]
};

// An indirection buffer for one input shape and tile width NR (ops/conv/geometry.h conv_fill_indirection,
// rows of IC floats), with the zero row of icg floats the padding taps read.
struct ConvIndirection {
  ConvInputShape shape{};
  size_t NR = 0;
  AlignedBuffer<const void*> ptrs;
  AlignedBuffer<float> zero;
  size_t bytes() const { return ptrs.size() * sizeof(void*) + zero.size() * sizeof(float); }
};

class PackedConv2d {
 public:
  // w: OC x KH x KW x icg float32 (each group's rows g * ocg .. contiguous); bias: OC floats or null. The layer
  // keeps the weights as given (raw()) for the algorithms that pack on first use: a copy, or, where w_owner owns w
  // (a graph constant, read-only for its life), w itself, kept alive through w_owner.
  PackedConv2d(const ConvGeometry& geo, const float* w, const float* bias, ConvPostOp post, ActMethod method,
               std::shared_ptr<const void> w_owner = nullptr);
  ~PackedConv2d();

  // y = conv(x (N x H x W x IC)) through `algorithm` ("auto" or a table entry; std::invalid_argument if unknown or
  // not applicable): y N x OH x OW x OC with ldc floats between pixels (0: OC; a channel slice of a wider buffer
  // where larger). kernel: "" or a kernel's name (tests). precision: what "auto" may pick (core/precision.h).
  // residual: null, or N x OH x OW x OC floats added to the convolution (with its bias) before the activation,
  // not overlapping y. up_h, up_w > 1: x is N x H / up_h x W / up_w, convolved as its nearest upsampling to
  // H x W (ops/conv/geometry.h ConvInputShape; the indirect algorithm only). Returns the name of the algorithm
  // that ran.
  const char* run(size_t N, size_t H, size_t W, const float* x, float* y, const std::string& algorithm,
                  const std::string& kernel = "", size_t ldc = 0,
                  Float32Precision precision = Float32Precision::highest, const float* residual = nullptr,
                  size_t up_h = 1, size_t up_w = 1) const;
  // What "auto" picks for this input at `precision`.
  const char* auto_algorithm(size_t N, size_t H, size_t W, Float32Precision precision = Float32Precision::highest,
                             size_t up_h = 1, size_t up_w = 1) const;
  std::vector<std::string> applicable_algorithms(size_t N, size_t H, size_t W) const;  // the entries that apply
  size_t workspace_bytes(size_t N, size_t H, size_t W, const std::string& algorithm,
                         Float32Precision precision = Float32Precision::highest) const;

  const ConvGeometry& geometry() const { return geo_; }
  ConvActivation activation() const { return post_.act; }
  const ConvPostOp& post_op() const { return post_; }
  ActMethod method() const { return method_; }
  size_t indirection_builds() const { return indirect_.builds(); }  // the tests' cache probe
  size_t indirection_bytes() const { return indirect_.bytes(); }    // what the cache holds (ops/conv/indirection_cache.h)

  // What the algorithms share.
  const float* raw() const { return raw_.get(); }  // the weights as given
  bool finite_weights() const { return finite_; }     // no weight is Inf or NaN
  const float* bias() const { return bias_.size() ? bias_.data() : nullptr; }
  // The kernels' epilogue for the call: bias (added per group by the caller) and the relu / relu6 clamp. Where
  // the call has a residual, the clamp waits for the post-ops, unless the algorithm's kernels add the residual
  // themselves (kernels_add_residual: the f32_gemm tiles; ep.ldr set, ep.residual = residual_at(c, y) per block).
  F32Epilogue epilogue(const ConvCall& c, bool kernels_add_residual = false) const;
  // The residual's element of output element y (c.y + pixel * c.ldc + channel), or null without one.
  const float* residual_at(const ConvCall& c, const float* y) const;
  // What the epilogue left, on each block of output just stored (`rows` rows of n floats, c.ldc apart, at y): the
  // residual (unless the kernels added it) and the clamp after it, then the other activations (sigmoid, SiLU,
  // HardSwish, HardSigmoid, LeakyRelu).
  void post_ops(const ConvCall& c, float* y, size_t rows, size_t n, bool kernels_added_residual = false) const;
  std::shared_ptr<const ConvIndirection> indirection(const ConvInputShape& s, size_t NR) const;

 private:
  // The call of an N x H x W input, its sizes checked (std::invalid_argument if the kernel does not fit,
  // std::length_error if a size overflows).
  ConvCall call(size_t N, size_t H, size_t W, const float* x, float* y, size_t ldc, const std::string& kernel,
                Float32Precision precision = Float32Precision::highest, size_t up_h = 1, size_t up_w = 1) const;
  const ConvAlgorithm& select(const ConvCall& c, const std::string& algorithm) const;

  ConvGeometry geo_;
  ConvPostOp post_;
  ActMethod method_;
  std::shared_ptr<const float> raw_;
  AlignedBuffer<float> bias_;
  bool finite_ = true;
  std::vector<std::unique_ptr<ConvAlgorithm>> algorithms_;  // the table's order
  IndirectionCache<ConvIndirection> indirect_;
};

// The layer's weights in the layout of ConvTapWeights for MR-channel blocks (the tile kernels and the indirect GEMM
// kernels pack their own copies with it).
std::unique_ptr<ConvTapWeights> conv_pack_taps(const PackedConv2d& L, size_t MR, bool depthwise);

}  // namespace nnkern
