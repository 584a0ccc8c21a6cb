// INT8 2-D convolution (NHWC activations, uint8 or int8; int8 weights per output channel) as a packed
// layer: the weights are packed once per micro-kernel, the indirection buffers once per input shape, and a
// call runs one entry of the "qconv2d" algorithm table (ops/qconv/layer.cc):
//   im2col    rows of K = KH*KW*IC/groups activations copied into the call's workspace, then the packed
//             INT8 GEMM driver (ops/qgemm/driver.h); a 1x1, stride-1, unpadded convolution reads its input
//             rows in place (a plain GEMM, no copy).
//   indirect  the kernels' indirect form (kernels/qgemm.h): ks = KH*KW taps of input-row pointers from a
//             cached indirection buffer, a shared zero row for padding taps.
//   depthwise (groups == IC only) the depthwise kernels (kernels/qdwconv.h): channels in vector lanes, taps in
//             the loop, one output row per call, through a pixel-major indirection buffer (ops/qconv/depthwise.cc).
//   direct    (groups == 1) the direct kernels (kernels/qconv_direct.h): a padded uint8 copy of
//             the input walked with strides, pixels x output channels in registers (ops/qconv/direct.cc).
//   low_ofm   (groups == 1, OC <= 4) the low-output-channel kernels (kernels/qconv_low_ofm.h): output pixels in
//             vector lanes, their input gathered in place (ops/qconv/low_ofm.cc).
// Other groups are a loop over per-group GEMMs on the IC/groups slice of each row.
// Exact: sum over taps and channels of (x - zx) w in int32, which the caller has bounded (K limit).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "kernels/qconv_direct.h"
#include "ops/conv/geometry.h"
#include "ops/conv/indirection_cache.h"
#include "ops/qconv/fused.h"
#include "ops/qconv/low_ofm.h"
#include "kernels/qdwconv.h"
#include "kernels/qgemm.h"
#include "ops/qgemm/qgemm.h"

namespace nnkern {

using QConvGeometry = ConvGeometry;
struct QConvCall;

// The weights packed for one micro-kernel, every group: the GEMM panels (K = kg rounded to the kernel's
// group once) for im2col, the tap panels (each tap padded, kernels/qgemm.h) for indirect, and the column
// sums (over all kg weights of a channel, the same for both) that fold the input zero point.
struct QConvWeights {
  const QGemmKernel* kern = nullptr;
  size_t panels = 0;                       // per group
  size_t gemm_group_bytes = 0, taps_group_bytes = 0;
  AlignedBuffer<uint8_t> gemm, taps;
  AlignedBuffer<int32_t> colsum;           // [groups][panels * MR]
};

// An indirection buffer for one input shape and kernel: for output pixel p = tile * NR + j (all images of
// the batch) and tap t, entry [(tile * ks + t) * NR + j] is a nominal base (kQConvNominalBase) plus the byte
// offset of its input row in the prepared input, as a pointer, or the zero row's address for a padding tap.
// Immutable once built. kern == null: the depthwise layout (NR = 1, rows of OC bytes, the zero row OC bytes
// of the uint8 zero point; ops/qconv/depthwise.cc).
struct QConvIndirection {
  size_t N = 0, H = 0, W = 0;
  const QGemmKernel* kern = nullptr;
  QType x_type = QType::u8;
  AlignedBuffer<const void*> ptrs;
  AlignedBuffer<uint8_t> zero;  // icg elements of the input zero point in the kernel's operand domain
  size_t bytes() const { return ptrs.size() * sizeof(void*) + zero.size(); }
};

// The output stage, as QLinear's (ops/qgemm/qgemm.h QOutput) with per-group padded factor / offset.
struct QConvOutput {
  QOut out = QOut::i32;
  void* c = nullptr;  // N x OH x OW x OC, C-contiguous
  bool relu = false;
  float lo = 0.0f, hi = 0.0f;
  // residual (N x OH x OW x OC uint8 / int8, or null), added before the clamp / ReLU (ops/qconv/residual.cc):
  //   y = fl(t + fl(float(r - residual_zero) * residual_factor)),  t = fma(float(acc), factor, offset)
  // then f32: relu ? max(y, 0) : y;  u8/s8: rint(min(max(y, lo), hi)). Not for int32 output.
  const void* residual = nullptr;
  QType residual_type = QType::u8;
  int32_t residual_zero = 0;
  float residual_factor = 0.0f;
  // A fused output stage (ops/qconv/fused.h: global average pooling or pixel shuffle), or null. Not with a
  // residual. The algorithms then store each tile into a stack buffer and commit it to `fuse` (c unused).
  QConvFused* fuse = nullptr;
  // c (and residual) planar, N x OC x OH x OW: written so by "low_ofm", by the others through an NHWC copy.
  // Not with a fused stage.
  bool planar = false;
};

// factor / offset (OC floats each, or null: int32 output) into dst_factor / dst_offset, padded with zeros to cpad;
// both left empty for null. The per-layer copies of the depthwise and direct weights.
void qconv_padded_factors(const float* factor, const float* offset, size_t OC, size_t cpad,
                          AlignedBuffer<float>* dst_factor, AlignedBuffer<float>* dst_offset);

// The weights packed for the depthwise kernels (kernels/qdwconv.h), shared by all of them: int32 [ks][cpad]
// (output channel oc = g * m + j at column oc), the per-channel weight sums that fold the input zero point,
// and the factor / offset contiguous over OC (the GEMM paths keep them per group). Padding is zero.
struct QConvDwWeights {
  size_t cpad = 0;
  AlignedBuffer<int32_t> w, wsum;
  AlignedBuffer<float> factor, offset;  // empty for int32 output
};

// The weights packed for the direct kernels (kernels/qconv_direct.h, ops/qconv/direct.cc): blocks of
// kQConvDirectOcBlock output channels, block_bytes each (ks taps x icp / 4 groups x 64 lanes x 4 bytes), and the
// column sums / factor / offset over blocks * kQConvDirectOcBlock channels, padding zero.
struct QConvDirectWeights {
  size_t blocks = 0, icp = 0, block_bytes = 0;
  AlignedBuffer<int8_t> w;
  AlignedBuffer<int32_t> colsum;
  AlignedBuffer<float> factor, offset;  // empty for int32 output
};

constexpr size_t kQConvNominalBase = kConvNominalBase;  // ops/conv/geometry.h

class PackedQConv2d {
 public:
  // w: groups x kg x ocg int8 (row (kh * KW + kw) * icg + c, column o: weight of output channel
  // g * ocg + o); factor / offset: OC floats or null (int32 output).
  PackedQConv2d(const QConvGeometry& geo, const int8_t* w, const float* factor, const float* offset, int32_t x_zero);

  // out = conv(x) through the algorithm `algorithm` ("auto", "im2col", "indirect", "depthwise", "direct";
  // std::invalid_argument if unknown or not applicable) on the micro-kernel `kern` (null: the dispatched 8-bit
  // one) or, for "depthwise", `dw` / for "direct", `direct` (null: the dispatched one). x: N x H x W x IC.
  // Returns the name of the algorithm that ran.
  const char* run(size_t N, size_t H, size_t W, QType x_type, const void* x, const QConvOutput& o,
                  const std::string& algorithm, const QGemmKernel* kern = nullptr,
                  const QDwconvKernel* dw = nullptr, const QConvDirectKernel* direct = nullptr,
                  const QConvLowOfmKernel* low_ofm = nullptr) const;
  // The algorithm "auto" picks for an input of this size, and the table's entries that apply to it.
  const char* auto_algorithm(size_t N, size_t H, size_t W) const;
  std::vector<std::string> applicable_algorithms(size_t N, size_t H, size_t W) const;

  const QConvGeometry& geometry() const { return geo_; }
  const char* kernel_name() const { return kernel_->name; }
  size_t indirection_builds() const { return indirect_.builds(); }  // the tests' cache probe
  size_t indirection_bytes() const { return indirect_.bytes(); }    // what the cache holds (ops/conv/indirection_cache.h)

  // Used by the algorithms (ops/qconv/*.cc).
  const QConvWeights& weights(const QGemmKernel& k) const;  // packed on first use for k, then kept
  // k == null: the depthwise layout (see QConvIndirection).
  std::shared_ptr<const QConvIndirection> indirection(size_t N, size_t H, size_t W, const QGemmKernel* k, QType x_type,
                                                      int32_t za_eff) const;
  const QConvDwWeights& dw_weights() const;  // depthwise layers: packed on first use, then kept
  const QConvDirectWeights& direct_weights() const;  // groups == 1: packed on first "direct" call, then kept
  const QConvLowOfmWeights& low_ofm_weights() const;  // OC <= 4: packed on first "low_ofm" call, then kept
  const float* factor(size_t g) const { return factor_.size() ? factor_.data() + g * pad_ : nullptr; }
  const float* offset(size_t g) const { return offset_.size() ? offset_.data() + g * pad_ : nullptr; }
  int32_t x_zero() const { return x_zero_; }

 private:
  // A call of an N x H x W input with the dispatched kernel and no data, its sizes checked: the rule queries.
  QConvCall shape_call(size_t N, size_t H, size_t W, const QConvOutput& o) const;

  QConvGeometry geo_;
  const QGemmKernel* kernel_;
  int32_t x_zero_;
  size_t pad_;                              // qgemm_padded_n(ocg): the kernels read whole vectors
  AlignedBuffer<int8_t> raw_;               // the weights as given, for packing under another kernel
  AlignedBuffer<float> factor_, offset_;    // [groups][pad_]
  mutable std::mutex mu_;                   // guards the weight caches below
  mutable std::vector<std::unique_ptr<QConvWeights>> packed_;  // one per kernel used, never dropped
  mutable std::unique_ptr<QConvDwWeights> dw_;
  mutable std::unique_ptr<QConvDirectWeights> direct_;
  mutable std::unique_ptr<QConvLowOfmWeights> low_ofm_;
  IndirectionCache<QConvIndirection> indirect_;
};

// One call as the algorithm table sees it (ops/qconv/layer.cc).
struct QConvCall {
  const PackedQConv2d& L;
  const QGemmKernel& k;
  size_t N, H, W, OH, OW;
  QType x_type;
  const void* x;
  const QConvOutput& o;
  const QDwconvKernel* dw = nullptr;  // "depthwise": the kernel asked for (null: the dispatched one)
  const QConvDirectKernel* direct = nullptr;  // "direct": the kernel asked for (null: the dispatched one)
  const QConvLowOfmKernel* low_ofm = nullptr;  // "low_ofm": the kernel asked for (null: the dispatched one)
  size_t M() const { return N * OH * OW; }
};

// The input in the kernel's operand domain (qgemm_prepare_a: x itself, or its shifted / widened copy in buf of
// qconv_input_bytes): row r (pixel r of the batch, IC channels) at base + r * row_bytes; za the effective
// zero point (what the zero row holds).
struct QConvInput {
  const uint8_t* base;
  size_t row_bytes;
  int32_t za;
};
size_t qconv_input_bytes(const QConvCall& c);
QConvInput qconv_prepare_input(const QConvCall& c, uint8_t* buf);

// The algorithms' bodies: im2col / plain GEMM (ops/qconv/im2col.cc) and indirect (ops/qconv/indirect.cc).
// Both start from the input prepared in the kernel's operand domain (qgemm_prepare_a: shifted / widened copy,
// or x itself) and fill the zero row with the effective zero point.
size_t qconv_im2col_workspace(const QConvCall& c);
void qconv_im2col_run(const QConvCall& c, void* workspace);
size_t qconv_indirect_workspace(const QConvCall& c);
void qconv_indirect_run(const QConvCall& c, void* workspace);
// The residual stage: out (count elements of o.out, at o.c) from the float32 pre-activation t (same layout)
// and o.residual, as QConvOutput says.
void qconv_add_residual(const float* t, size_t count, const QConvOutput& o);
size_t qconv_depthwise_workspace(const QConvCall& c);
void qconv_depthwise_run(const QConvCall& c, void* workspace);
// Packs a depthwise layer's weights (ops/qconv/depthwise.cc): w as PackedQConv2d takes it, factor / offset
// OC floats or null.
std::unique_ptr<QConvDwWeights> qconv_pack_depthwise(const QConvGeometry& geo, const int8_t* w, const float* factor,
                                                     const float* offset);
// The "direct" algorithm (ops/qconv/direct.cc): applies with groups == 1 where its padded copy stays within a
// few times the call's input and reads; auto may pick it where its kernel allows (the VNNI ones); and its
// weight packing (w, factor, offset as for qconv_pack_depthwise).
bool qconv_direct_applies(const QConvCall& c);
bool qconv_direct_auto_pick(const QConvCall& c);
size_t qconv_direct_workspace(const QConvCall& c);
void qconv_direct_run(const QConvCall& c, void* workspace);
std::unique_ptr<QConvDirectWeights> qconv_pack_direct(const QConvGeometry& geo, const int8_t* w, const float* factor,
                                                      const float* offset);
// Builds the indirection buffer of one input shape (ops/qconv/indirect.cc); k == null: the depthwise layout.
std::shared_ptr<const QConvIndirection> qconv_build_indirection(const QConvGeometry& geo, size_t N, size_t H,
                                                                size_t W, const QGemmKernel* k, QType x_type,
                                                                int32_t za_eff);
// The zero row: n elements of za_eff in k's operand domain (int16 for the s16 kernels, else one byte).
void qconv_fill_zero_row(const QGemmKernel& k, int32_t za_eff, size_t n, uint8_t* dst);

}  // namespace nnkern
