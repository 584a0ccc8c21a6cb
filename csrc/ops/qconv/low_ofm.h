// The "low_ofm" convolution algorithm (ops/qconv/low_ofm.cc, seed I11): groups == 1 and at most
// kQConvLowOfmMaxOc output channels, output pixels in vector lanes (kernels/qconv_low_ofm.h). Its packed
// weights live in PackedQConv2d (ops/qconv/layer.h), packed on the first "low_ofm" call. Baseline header.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/buffer.h"
#include "kernels/qconv_low_ofm.h"
#include "ops/conv/geometry.h"

namespace nnkern {

struct QConvCall;

// [ks taps][G = ceil(IC / 4) groups][4 channels][4 bytes] int8, zero-padded in both; row_sum[kh][4]: the
// weights of tap row kh summed (over kw and channels), so the driver can fold the input zero point of the
// taps it passes and leave out padding rows exactly; factor / offset padded to 4 (empty for int32 output).
struct QConvLowOfmWeights {
  size_t groups4 = 0;
  AlignedBuffer<int8_t> w;
  AlignedBuffer<int32_t> row_sum;
  AlignedBuffer<float> factor, offset;
};

std::unique_ptr<QConvLowOfmWeights> qconv_pack_low_ofm(const ConvGeometry& geo, const int8_t* w, const float* factor,
                                                       const float* offset);
bool qconv_low_ofm_applies(const QConvCall& c);
// auto's rule (ops/qconv/layer.cc): applies and a vectorized kernel runs (not the scalar one of aarch64).
bool qconv_low_ofm_preferred(const QConvCall& c);
size_t qconv_low_ofm_workspace(const QConvCall& c);
void qconv_low_ofm_run(const QConvCall& c, void* workspace);
// Whether the dispatched kernel is a SIMD one (ops/qconv/low_ofm_kernels.cc).
bool qconv_low_ofm_vectorized();

}  // namespace nnkern
