// INT8 2-D convolution (NHWC activations, uint8 or int8; int8 weights per output channel, symmetric) as a packed
// layer: its geometry, weights, requantization and input zero point, and one object per algorithm of the table
// (ops/qconv/algorithm.h), each packing its weights for its kernels on first use. A call picks an algorithm (by
// name or by auto's rule), which stores through the call's output stage (ops/qconv/stage.h).
// Exact: sum over taps and channels of (x - zx) w in int32, for K = KH * KW * IC / groups within the exact bound
// (checked here: qgemm_check_exact).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "kernels/qgemm.h"
#include "ops/conv/geometry.h"
#include "ops/conv/indirection_cache.h"
#include "ops/qconv/algorithm.h"
#include "ops/qconv/stage.h"
#include "ops/qgemm/qgemm.h"

namespace nnkern {

using QConvGeometry = ConvGeometry;

constexpr size_t kQConvNominalBase = kConvNominalBase;  // ops/conv/geometry.h

// An indirection buffer for one input shape and kernel: for output pixel p = tile * NR + j (all images of the
// batch) and tap t, entry [(tile * ks + t) * NR + j] is kQConvNominalBase plus the byte offset of its input row in
// the prepared input, as a pointer, or the zero row's address for a padding tap. Immutable once built. kern ==
// null: the depthwise layout (NR = 1, rows of OC bytes, the zero row OC bytes of the uint8 zero point).
struct QConvIndirection {
  size_t N = 0, H = 0, W = 0;
  const QGemmKernel* kern = nullptr;
  QType x_type = QType::u8;
  AlignedBuffer<const void*> ptrs;
  AlignedBuffer<uint8_t> zero;  // icg elements of the input zero point in the kernel's operand domain
  size_t bytes() const { return ptrs.size() * sizeof(void*) + zero.size(); }
};

// Builds the indirection buffer of one input shape (ops/qconv/indirect.cc); k == null: the depthwise layout.
std::shared_ptr<const QConvIndirection> qconv_build_indirection(const QConvGeometry& geo, size_t N, size_t H, size_t W,
                                                                const QGemmKernel* k, QType x_type, int32_t za_eff);

class PackedQConv2d {
 public:
  // w: groups x kg x ocg int8 (row (kh * KW + kw) * icg + c, column o: the weight of output channel g * ocg + o);
  // factor / offset: OC floats, or null for int32 output; requant: the output kind and clamp. The layer keeps w
  // (raw_weights()) for the algorithms that pack on first use: a copy, or w itself where w_owner owns it (read-only
  // for its life), kept alive through w_owner.
  PackedQConv2d(const QConvGeometry& geo, const int8_t* w, const float* factor, const float* offset, int32_t x_zero,
                const QConvRequant& requant, std::shared_ptr<const void> w_owner = nullptr);
  ~PackedQConv2d();

  // out = conv(x), x N x H x W x IC of x_type, through `algorithm` ("auto" or a table entry; std::invalid_argument
  // if unknown or not applicable, or if the input zero point / K is out of the exact range). kernel: "" or a
  // kernel's name (tests). Returns the name of the algorithm that ran.
  const char* run(size_t N, size_t H, size_t W, QType x_type, const void* x, QConvStage& out,
                  const std::string& algorithm, const std::string& kernel = "") const;
  // The algorithm "auto" picks for an input of this size, and the table's entries that apply to it.
  const char* auto_algorithm(size_t N, size_t H, size_t W) const;
  std::vector<std::string> applicable_algorithms(size_t N, size_t H, size_t W) const;

  const QConvGeometry& geometry() const { return geo_; }
  const QConvRequant& requant() const { return requant_; }
  const char* kernel_name() const { return kernel_->name; }  // the GEMM kernel dispatched at construction
  int32_t x_zero() const { return x_zero_; }
  const int8_t* raw_weights() const { return raw_.get(); }  // as given, for each algorithm's packing
  bool narrow_weights() const { return narrow_; }  // all in [-64, 64]: a weight_bits 7 GEMM kernel may run
  // Group g's factor / offset, padded with zeros to padded_ocg() (null for int32 output).
  const float* factor(size_t g) const { return factor_.size() ? factor_.data() + g * pad_ : nullptr; }
  const float* offset(size_t g) const { return offset_.size() ? offset_.data() + g * pad_ : nullptr; }
  size_t padded_ocg() const { return pad_; }

  // The indirection buffer of an input shape for kernel k (null: the depthwise layout), built once and cached
  // (ops/conv/indirection_cache.h).
  std::shared_ptr<const QConvIndirection> indirection(size_t N, size_t H, size_t W, const QGemmKernel* k, QType x_type,
                                                      int32_t za_eff) const;
  size_t indirection_builds() const { return indirect_.builds(); }  // the tests' cache probe
  size_t indirection_bytes() const { return indirect_.bytes(); }

 private:
  QConvCall call(size_t N, size_t H, size_t W, QType x_type, const void* x, const std::string& kernel) const;
  const QConvAlgorithm& select(const QConvCall& c, const std::string& algorithm) const;

  QConvGeometry geo_;
  QConvRequant requant_;
  const QGemmKernel* kernel_;
  int32_t x_zero_;
  size_t pad_;                              // qgemm_padded_n(ocg): the kernels read whole vectors
  std::shared_ptr<const int8_t> raw_;
  bool narrow_ = false;
  AlignedBuffer<float> factor_, offset_;    // [groups][pad_]
  std::vector<std::unique_ptr<QConvAlgorithm>> algorithms_;  // the table's order
  IndirectionCache<QConvIndirection> indirect_;
};

// factor / offset (OC floats each, or null: int32 output) into dst_factor / dst_offset, padded with zeros to cpad;
// both left empty for null. The per-algorithm copies that want them contiguous over OC.
void qconv_padded_factors(const float* factor, const float* offset, size_t OC, size_t cpad,
                          AlignedBuffer<float>* dst_factor, AlignedBuffer<float>* dst_offset);
// The layer's factor / offset contiguous over OC (groups == 1, or depthwise) padded to cpad, as above.
void qconv_contiguous_factors(const PackedQConv2d& L, size_t cpad, AlignedBuffer<float>* dst_factor,
                              AlignedBuffer<float>* dst_offset);

// The GEMM-based algorithms' input in the kernel's operand domain (qgemm_prepare_a: x itself, or its shifted /
// widened copy in a buffer of qconv_input_bytes): row r (pixel r of the batch, IC channels) at base + r * row_bytes;
// za the effective zero point (what the zero row holds).
struct QConvInput {
  const uint8_t* base;
  size_t row_bytes;
  int32_t za;
};
size_t qconv_input_bytes(const QConvCall& c, const QGemmKernel& k);
QConvInput qconv_prepare_input(const QConvCall& c, const QGemmKernel& k, uint8_t* buf);
// The zero row: n elements of za_eff in k's operand domain (int16 for the s16 kernels, else one byte).
void qconv_fill_zero_row(const QGemmKernel& k, int32_t za_eff, size_t n, uint8_t* dst);
// The kernel of the GEMM family the GEMM-based algorithms run for a reduction of ks taps of k: the one the call
// names, else the dispatched one for that depth (ops/qgemm/qgemm.h qgemm_kernel).
const QGemmKernel& qconv_gemm_kernel(const QConvCall& c, size_t k, size_t ks);
// The kernel's epilogue fields from the output stage (kind, relu, clamp); the caller adds scale / bias / sums.
QEpilogue qconv_epilogue(const QConvStage& out);

}  // namespace nnkern
