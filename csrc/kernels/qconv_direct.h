// Direct INT8 convolution micro-kernel contract (seeds I8-I10), shared by every ISA. Baseline header: no
// intrinsics.
//
// One call computes n output pixels along one output row (pixels j < n) for m <= kQConvDirectOcBlock output
// channels (i < m) of one packed block, the whole reduction over KH x KW taps and icp input channels in
// registers, then QEpilogue's output stage (kernels/qgemm.h; i the channel, as the depthwise kernels use it):
//   v(i, j) = sum over kh < KH, kw < KW, p < icp of
//               x[j * x_pixel + kh * x_kh + kw * x_kw + p] * w[((kh * KW + kw) * icp / 4 + p / 4) * 256 + i * 4 + p % 4]
//             (+ ep->col_comp[i])                                   int32, modulo 2^32 (vpdpbusd, non-saturating)
// x: uint8 (the driver's padded copy: int8 activations shifted by +128, padding pixels holding the effective
// zero point, channels zero-padded to icp = a multiple of 4), so the kernel has no bounds logic at all; the
// strides (bytes) carry the convolution's stride and dilation. w: int8, the c4 layout of the GEMM kernels per
// tap: groups of 4 input channels, kQConvDirectOcBlock lanes x 4 bytes, zero-padded in both channels.
// C(i, j) at c + j * ldc + i elements of the output type; only the m x n tile is written. col_comp / scale /
// bias are read for ceil(m / lanes) * lanes entries (the driver pads them to the block).
// Reads exactly the bytes of x above (icp per tap and pixel) and w for ceil(m / lanes) lane vectors.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/qgemm.h"

namespace nnkern {

constexpr size_t kQConvDirectOcBlock = 64;  // output channels per packed weight block

using QConvDirectUkernel = void (*)(size_t m, size_t n, const uint8_t* x, size_t x_pixel, size_t x_kh, size_t x_kw,
                                    size_t KH, size_t KW, size_t icp, const int8_t* w, void* c, size_t ldc,
                                    const QEpilogue* ep);

struct QConvDirectKernel {
  const char* name;  // = its symbol: u8s8_conv_direct_<pixels>x<channels>c4__isa
  int pixels;        // output pixels per register block (the tests sweep widths past it)
  int channels;      // output channels per register block (vectors x lanes)
  bool auto_pick;    // "auto" may choose the algorithm on it (the VNNI kernels; not the scalar reference)
  QConvDirectUkernel run;
};

}  // namespace nnkern
