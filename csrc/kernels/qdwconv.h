// Depthwise INT8 convolution micro-kernel contract (XNNPACK dwconv unipass, QNNPACK q8dwconv), shared by
// every ISA. Baseline header: no intrinsics.
//
// One call computes `pixels` output pixels of `channels` channels each, channels in vector lanes and the
// ks = KH*KW taps in the loop:
//   v(p, c) = sum over t < ks of x(p, t)[c] * w[t * cpad + c]   (+ ep->col_comp[c])   int32, modulo 2^32
//   x(p, t) = b[p * ks + t] == zero ? zero : (const uint8_t*) b[p * ks + t] + b_offset
// (the indirection rule of kernels/qgemm.h, pixel-major: one pixel's ks row pointers, then the next's).
// x is uint8 (int8 activations arrive shifted by +128), w the packed int32 weights [ks][cpad], each within
// int16 ([-32768, 32767]; the packer's are int8 weights): both are widened exactly before the multiply (no
// saturating vpmaddubsw), and the AVX-512 kernels' vpmaddwd / vpdpwssd on the int32 lanes read w's low word
// only (x's high word is 0). The input zero point is not subtracted in
// the loop: the caller folds -za * sum_t w[t][c] into col_comp, and the zero row holds za, so a padding tap
// adds exactly 0 to sum (x - za) w. The output stage is QEpilogue's (kernels/qgemm.h) with i the channel:
// out / relu / scale[c] / bias[c] / lo / hi; b_zero, row_sum, c_in, c_rows, hook and in-kernel zero points
// are not used. Output pixel p, channel c at c + p * ldc elements (of the output type).
// Reads exactly x(p, t)[0 .. channels-1]; the per-channel arrays (w rows, col_comp, scale, bias) are read
// for cpad entries: cpad is a multiple of kQDwconvChannelPad >= channels, padding zero.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/qgemm.h"

namespace nnkern {

constexpr size_t kQDwconvChannelPad = 16;

using QDwconvUkernel = void (*)(size_t channels, size_t pixels, size_t ks, const void* const* b, const void* zero,
                                size_t b_offset, const int32_t* w, size_t cpad, void* c, size_t ldc,
                                const QEpilogue* ep);

struct QDwconvKernel {
  const char* name;  // = its symbol: u8s8_dwconv_<channel tile>c__isa
  int channel_tile;  // channels per inner-loop block (the tests sweep channels past it)
  QDwconvUkernel run;
};

}  // namespace nnkern
