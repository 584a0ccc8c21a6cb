// FP32 2-D convolution (NHWC float32 activations, (OC, KH, KW, IC/groups) weights) as a packed layer: the
// weights are packed once per algorithm's layout (on its first call), indirection buffers once per input shape, and a call runs
// one entry of the "conv2d" algorithm table (ops/conv/layer.cc):
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
#include "ops/conv/indirection_cache.h"

namespace nnkern {

enum class ConvActivation : int { none = 0, relu = 1, relu6 = 2, sigmoid = 3, silu = 4 };

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

struct ConvCall;

class PackedConv2d {
 public:
  // w: OC x KH x KW x icg float32 (each group's rows g * ocg .. contiguous); bias: OC floats or null.
  PackedConv2d(const ConvGeometry& geo, const float* w, const float* bias, ConvActivation act, ActMethod method);

  // y (N x OH x OW x OC) = conv(x (N x H x W x IC)) through `algorithm` ("auto" or a table entry;
  // std::invalid_argument if unknown or not applicable) on the GEMM kernel `kern` (null: the dispatched one).
  // Returns the name of the algorithm that ran.
  // "direct" / "mgemm" run `conv` when given (a kernel of that family; null: the dispatched one).
  const char* run(size_t N, size_t H, size_t W, const float* x, float* y, const std::string& algorithm,
                  const F32GemmKernel* kern = nullptr, const F32ConvKernel* conv = nullptr) const;
  const char* auto_algorithm(size_t N, size_t H, size_t W) const;  // what "auto" picks for this input
  std::vector<std::string> applicable_algorithms(size_t N, size_t H, size_t W) const;  // the entries that apply
  size_t workspace_bytes(size_t N, size_t H, size_t W, const std::string& algorithm) const;

  const ConvGeometry& geometry() const { return geo_; }
  ConvActivation activation() const { return act_; }
  ActMethod method() const { return method_; }
  size_t indirection_builds() const { return indirect_.builds(); }  // the tests' cache probe
  size_t indirection_bytes() const { return indirect_.bytes(); }    // what the cache holds (ops/conv/indirection_cache.h)

  // Used by the algorithms (ops/conv2d_*.cc).
  const float* raw() const { return raw_.data(); }  // the weights as given
  bool finite_weights() const { return finite_; }     // no weight is Inf or NaN
  const float* bias() const { return bias_.size() ? bias_.data() : nullptr; }
  F32Epilogue epilogue() const;  // bias (added per group by the caller) and the relu / relu6 clamp
  // The sigmoid / SiLU post-op over `rows` rows of n floats, ld apart (nothing for the other activations).
  void post_activation(float* y, size_t rows, size_t n, size_t ld) const;
  const PackedF32Gemm& gemm(size_t g) const;  // group g's weights packed for PackedF32Gemm (on first use, then kept)
  const ConvTapWeights& tap_weights(size_t mr, bool depthwise = false) const;  // packed on first use, then kept
  std::shared_ptr<const ConvIndirection> indirection(const ConvInputShape& s, size_t NR) const;

 private:
  // The call of an N x H x W input, its sizes checked (std::invalid_argument if the kernel does not fit,
  // std::length_error if a size overflows).
  ConvCall call(size_t N, size_t H, size_t W, const float* x, float* y, const F32GemmKernel* kern = nullptr,
                const F32ConvKernel* conv = nullptr) const;

  ConvGeometry geo_;
  ConvActivation act_;
  ActMethod method_;
  AlignedBuffer<float> raw_, bias_;
  bool finite_ = true;
  mutable std::mutex mu_;  // guards the weight caches below
  mutable std::vector<std::unique_ptr<PackedF32Gemm>> gemm_;
  mutable std::vector<std::unique_ptr<ConvTapWeights>> taps_;
  IndirectionCache<ConvIndirection> indirect_;
};

// One call as the algorithm table sees it.
struct ConvCall {
  const PackedConv2d& L;
  const F32GemmKernel& k;
  ConvInputShape s;
  size_t OH, OW;
  const float* x;
  float* y;
  const F32ConvKernel* conv = nullptr;  // "direct" / "mgemm": the kernel asked for (null: the dispatched one)
  size_t M() const { return s.N * OH * OW; }
};

// The algorithms' bodies (ops/conv/gemm.cc).
size_t conv_im2col_workspace(const ConvCall& c);
void conv_im2col_run(const ConvCall& c, void* workspace);
void conv_indirect_run(const ConvCall& c);
// ops/conv/tiles.cc: "direct" / "mgemm" on kernel k (wf > 1 needs stride == dilation along W).
void conv_tiles_run(const ConvCall& c, const F32ConvKernel& k);

}  // namespace nnkern
