// Low-output-channel INT8 convolution micro-kernel contract (seed I11), shared by every ISA. Baseline header:
// no intrinsics.
//
// For layers with at most kQConvLowOfmMaxOc output channels (an image's RGB output, a segmentation head),
// vector lanes run along output PIXELS, not channels: per tap and group of 4 input channels, the 4 bytes of
// each of L consecutive output pixels' input are brought into one vector (in-register transposes of pixel
// loads, vpgatherdd for leftover groups: kernels/inc/qconv_low_ofm_tile.inc), multiplied by one
// output channel's 4 weights broadcast (vpdpbusd or an exact widening equivalent), one accumulator per output
// channel. One call computes the n output pixels j < n of one output row, m <= 4 output channels:
//   v(o, j) = sum over r < kh_n, kw < KW, p < 4 * G of
//               xb(r, ix0 + j * sw + kw * dw, p) * w[((r * KW + kw) * G + p / 4) * 16 + o * 4 + p % 4]
//             + ep->col_comp[o]                                       int32, modulo 2^32
// G = ceil(IC / 4); xb(r, ix, p) = rows[r][ix * IC + p] for 0 <= ix < W, else byte p % 4 of x_fill (the input
// zero point: padding columns), each byte XORed with 0x80 when flip (int8 input in the uint8 domain). The
// packed weights are zero for p >= IC, so the bytes a kernel reads there (the next pixel's, or up to 3 bytes
// past a row's last pixel, which the driver keeps readable) add nothing. Padding ROWS are not passed at all
// (kh_n, rows and w start at the first valid tap row); the driver folds what they would add into col_comp.
// Output stage per channel o: QEpilogue's (kernels/qgemm.h) with the scalars col_comp[o], scale[o], bias[o]
// (arrays of m entries): C(o, j) at c + (j * m + o) elements when plane == 0 (NHWC, channels interleaved), at
// c + (o * plane + j) when plane > 0 (planar, NCHW: a vector of L pixels of one channel is one store).
// Reads only the pixels' bytes above (none of a padding column), writes exactly the m x n outputs.
//
// Re-laid-out input (q > 0; SIMD kernels, windows wider than one tap, where re-laying out each input row once
// beats doing it per tap): rows[r] then points at int32 entries [G][sw][q] that relayout() made from input row r
// (entry (g, f, i): the 4 bytes of group g of input column i * sw + f - pad_left, x_fill outside [0, W), each
// byte XORed with 0x80 when flip), and the kernel reads xb(r, ix0 + j * sw + kw * dw, 4 g .. 4 g + 3) as entry
// (g, (kw * dw) % sw, j + (kw * dw) / sw) (ix0 = -pad_left here: j counts from output pixel 0), for j below
// n rounded up to the kernel's lanes; the caller sizes q for that. flip is then ignored by run().
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/qgemm.h"

namespace nnkern {

constexpr size_t kQConvLowOfmMaxOc = 4;  // output channels a kernel holds (the packed weights' lanes)

struct QConvLowOfmRow {
  const uint8_t* const* rows;  // kh_n input rows (column 0), the valid tap rows in kh order
  const int8_t* w;             // the packed weights of the first valid tap row: [kh_n][KW][G][4 oc][4 bytes]
  size_t kh_n, KW;
  ptrdiff_t ix0;               // input column of output pixel 0 at kw = 0 (ox0 * sw - pad_left)
  size_t sw, dw, W, IC;        // column stride and dilation, input width, input channels (pixel stride, bytes)
  size_t m, n;                 // output channels 1..4, output pixels
  uint32_t x_fill;             // the input zero point's byte, 4 times (read for columns outside [0, W))
  bool flip;                   // int8 input: XOR every byte (x_fill too) with 0x80
  void* c;
  size_t plane;                // 0: NHWC; else the elements between output channels (planar)
  const QEpilogue* ep;         // out, relu, lo, hi; col_comp / scale / bias of m entries
  size_t q = 0;                // > 0: rows are re-laid out (above), q entries per stride phase
};

using QConvLowOfmUkernel = void (*)(const QConvLowOfmRow& a);

// One input row re-laid out for run() (above): dst[(g * sw + f) * q + i] for g < ceil(IC / 4), f < sw, i < q.
// Reads the row's pixels as run() does (up to 3 bytes past a pixel's last channel).
struct QConvLowOfmRelayout {
  const uint8_t* x;  // the input row, W pixels of IC bytes
  int32_t* dst;
  size_t W, IC, sw, q, pad_left;
  uint32_t x_fill;
  bool flip;
};
using QConvLowOfmRelayoutFn = void (*)(const QConvLowOfmRelayout& r);

struct QConvLowOfmKernel {
  const char* name;  // = its symbol: u8s8_conv_low_ofm_<pixels>x4c4__isa
  int pixels;        // output pixels per register block (the tests sweep widths past it)
  QConvLowOfmUkernel run;
  int lanes = 1;                            // pixels per vector (q must cover n rounded up to it)
  QConvLowOfmRelayoutFn relayout = nullptr;  // or null: run() reads the NHWC input only (the scalar kernel)
};

}  // namespace nnkern
