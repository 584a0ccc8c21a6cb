// The geometry of a 2-D convolution layer (NHWC activations), shared by the FP32 (ops/conv2d.h) and INT8
// (ops/qconv2d.h) layers, and the two lowerings both build on: the im2col matrix and the indirection buffer
// (ops/conv_lowering.cc). Baseline header.
#pragma once
#include <cstddef>

namespace nnkern {

// The layer's fixed geometry. Padding may be asymmetric (top, bottom, left, right).
struct ConvGeometry {
  size_t OC = 0, IC = 0, KH = 1, KW = 1, groups = 1;
  size_t sh = 1, sw = 1, dh = 1, dw = 1;
  size_t pt = 0, pb = 0, pl = 0, pr = 0;
  size_t icg() const { return IC / groups; }
  size_t ocg() const { return OC / groups; }
  size_t ks() const { return KH * KW; }
  size_t kg() const { return ks() * icg(); }  // the GEMM's K per group
  // Output size along one axis; 0 when the dilated kernel does not fit the padded input.
  static size_t out_size(size_t in, size_t pad0, size_t pad1, size_t k, size_t stride, size_t dil) {
    const size_t span = dil * (k - 1) + 1, padded = in + pad0 + pad1;
    return padded < span ? 0 : (padded - span) / stride + 1;
  }
  size_t OH(size_t H) const { return out_size(H, pt, pb, KH, sh, dh); }
  size_t OW(size_t W) const { return out_size(W, pl, pr, KW, sw, dw); }
  bool depthwise() const { return icg() == 1; }  // one input channel per group (multiplier ocg())
  bool pointwise() const {  // a plain GEMM over the input rows
    return KH == 1 && KW == 1 && sh == 1 && sw == 1 && pt == 0 && pb == 0 && pl == 0 && pr == 0;
  }
  bool valid() const {
    return groups && IC && OC && IC % groups == 0 && OC % groups == 0 && KH && KW && sh && sw && dh && dw;
  }
};

// Where the indirection buffers point: entries are offsets from this nominal base rather than from null, so
// no pointer a kernel forms is a non-zero offset applied to a null pointer (undefined behaviour, flagged by
// UBSan); a call's b_offset = its input's address - kConvNominalBase.
constexpr size_t kConvNominalBase = 4096;

// One input image shape of a call.
struct ConvInputShape {
  size_t N, H, W;
};

// The indirection buffer of an input shape for tiles of NR output pixels: for output pixel p = tile * NR + j
// (all images of the batch) and tap t, ptrs[(tile * ks + t) * NR + j] = kConvNominalBase + the byte offset of
// its input pixel (pixel index * row_bytes), or `zero` for a padding tap or a pixel past the last. ptrs holds
// ceil(M / NR) * ks * NR entries. Threaded.
void conv_fill_indirection(const ConvGeometry& geo, const ConvInputShape& s, size_t NR, size_t row_bytes,
                           const void* zero, const void** ptrs);

// Rows [r0, r1) of the im2col matrix (output pixel p: its KH * KW taps of tap_bytes side by side, from the input
// pixel at base + pixel index * row_bytes, or `zero` for padding taps) into cols, (r1 - r0) x ks * tap_bytes.
// base already points at the group's first channel. Threaded.
void conv_im2col(const ConvGeometry& geo, const ConvInputShape& s, const unsigned char* base, size_t row_bytes,
                 size_t tap_bytes, const unsigned char* zero, size_t r0, size_t r1, unsigned char* cols);

}  // namespace nnkern
