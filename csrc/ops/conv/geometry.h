// The geometry of a 2-D convolution layer (NHWC activations), shared by the FP32 (ops/conv/layer.h) and INT8
// (ops/qconv/layer.h) layers, and the two lowerings both build on: the im2col matrix and the indirection buffer
// (ops/conv/lowering.cc). Baseline header.
#pragma once
#include <cstddef>
#include <initializer_list>

#include "core/checked.h"

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
  // Output size along one axis; 0 when the dilated kernel does not fit the padded input. Throws
  // std::length_error where the padded input overflows (an `in` no array has; the layer bounds the rest).
  static size_t out_size(size_t in, size_t pad0, size_t pad1, size_t k, size_t stride, size_t dil) {
    const size_t span = checked_add(checked_mul(dil, k - 1), 1), padded = checked_add(in, pad0, pad1);
    return padded < span ? 0 : (padded - span) / stride + 1;
  }
  size_t OH(size_t H) const { return out_size(H, pt, pb, KH, sh, dh); }
  size_t OW(size_t W) const { return out_size(W, pl, pr, KW, sw, dw); }
  // The output pixels of an N x H x W input, after checking that the input and output, at 8 bytes an element,
  // have byte counts that fit 64 bits (std::length_error otherwise): the algorithms' sizes start from these.
  size_t checked_pixels(size_t N, size_t H, size_t W) const {
    checked_mul(N, H, W, IC, 8);
    const size_t M = checked_mul(N, OH(H), OW(W));
    checked_mul(M, OC, 8);
    return M;
  }
  bool padded() const { return pt || pb || pl || pr; }
  bool depthwise() const { return icg() == 1; }  // one input channel per group (multiplier ocg())
  bool pointwise() const {  // a plain GEMM over the input rows
    return KH == 1 && KW == 1 && sh == 1 && sw == 1 && pt == 0 && pb == 0 && pl == 0 && pr == 0;
  }
  // Every parameter within [1 or 0, kMaxParam], the channels divisible by the groups.
  bool valid() const {
    for (size_t v : {OC, IC, KH, KW, groups, sh, sw, dh, dw, pt, pb, pl, pr})
      if (v > kMaxParam) return false;
    return groups && IC && OC && IC % groups == 0 && OC % groups == 0 && KH && KW && sh && sw && dh && dw;
  }
  // The largest channel count, kernel size, stride, dilation or padding a layer takes (as the Python layer):
  // far beyond any model, and small enough that a product of two fits 64 bits.
  static constexpr size_t kMaxParam = (size_t(1) << 31) - 1;
};

// Where the indirection buffers point: entries are offsets from this nominal base rather than from null, so
// no pointer a kernel forms is a non-zero offset applied to a null pointer (undefined behaviour, flagged by
// UBSan); a call's b_offset = its input's address - kConvNominalBase.
constexpr size_t kConvNominalBase = 4096;

// The input of a call: N x H x W pixels. up_h / up_w > 1: the input is a nearest upsampling of the tensor in
// memory (N x H / up_h x W / up_w; output pixel (h, w) is its pixel (h / up_h, w / up_w)), read through the
// indirection buffer without being written out.
struct ConvInputShape {
  size_t N, H, W;
  size_t up_h = 1, up_w = 1;
  bool upsampled() const { return up_h != 1 || up_w != 1; }
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
