// FP32 direct and mGEMM convolution micro-kernel contract (seeds C3-C4 and G1-G3), shared by every ISA.
// Baseline header: no intrinsics.
//
// A kernel computes one tile of an NHWC output row straight from the NHWC input, with no im2col and no
// indirection buffer: m <= MR output channels (vectors of them in registers) x n output pixels along the
// row, reducing over a rectangle of kh_n x kw_n kernel taps and all ic input channels in registers:
//
//   y[j * y_pix + o] = epilogue( sum_{kh < kh_n, kw < kw_n, c < ic} x[j * x_pix + kh * x_kh + kw * x_kw + c]
//                                                              * w[kh * w_kh + (kw * ic + c) * MR + o] )
//
// The caller (ops/conv/tiles.cc) clips the rectangle to the taps inside the input, so padding is never
// read: top / bottom padding shortens kh_n, and an output pixel whose window crosses the left or right edge
// is a tile of its own (n = 1) with its own kw range. w is the layer's packed block of MR channels (kernel
// row kh, column kw, input channel c, MR floats; channels past the layer's zero), advanced to the first
// tap of the rectangle; rows of w past m are read (they are in the block) and never stored.
//
// Register blocking (seed C3): a kernel holds v = ceil(m / L) channel vectors x nr[v - 1] pixels of
// accumulators, nr chosen per v from the ISA's register file (written down in each kernel file); a tile of
// n < nr pixels runs as pieces of 8, 4, 2 and 1 pixels.
// Input reuse across kernel columns (seeds C4, G1): a kernel with wf > 1 (mGEMM) loads the n + wf - 1
// inputs that wf adjacent kernel columns read for one channel once into registers and feeds all wf columns'
// FMAs from them; this needs x_kw == x_pix (stride == dilation along W; the caller passes x_pix = x_kw for
// a one-pixel tile). wf == 1 (direct) broadcasts each input from memory at its use, for any x_pix: run_any, the
// wf = 1 kernel on the same packed blocks, also takes tiles whose pixels run down a column (x_pix = sh * W * IC),
// which is how the caller batches the columns a row's tiles leave over (edges, remainders).
#pragma once
#include <cstddef>

#include "kernels/f32_gemm.h"

namespace nnkern {

struct F32ConvArgs {
  size_t m, n;                // channels (<= MR) and pixels (any: tiles of nr for ceil(m / L) vectors, then pieces)
  size_t kh_n, kw_n, ic;      // the reduction rectangle and the input channels
  const float* x;             // input of pixel 0 at the rectangle's first tap, channel 0
  size_t x_pix, x_kw, x_kh;   // floats from pixel j to j + 1, from a kernel column / row to the next
  const float* w;             // the packed block at the rectangle's first tap
  size_t w_kh;                // floats from a kernel row to the next in w (KW * ic * MR)
  float* y;                   // output pixel 0, channel 0
  size_t y_pix;               // floats from an output pixel to the next
  const F32Epilogue* ep;      // bias (indexed by the tile's channel o, o < m) and clamp; the rest unused
  size_t w_oc = 0;            // dot kernels only: floats from one output channel's weights to the next
};

using F32ConvUkernel = void (*)(const F32ConvArgs& a);

constexpr int kF32ConvMaxVectors = 4;

struct F32ConvKernel {
  const char* name;
  int mr;                        // channels per packed block: vectors x lanes
  int lanes;                     // floats per vector
  int wf;                        // kernel columns sharing input loads: 1 direct, > 1 mGEMM
  int nr[kF32ConvMaxVectors];    // pixels per tile by vectors used (0: none past mr / lanes)
  F32ConvUkernel run;
  int nr_any[kF32ConvMaxVectors];  // the same for run_any
  F32ConvUkernel run_any;          // wf = 1 on the same blocks: any x_pix (run itself when wf == 1)
  bool depthwise = false;          // the depthwise formula below
  bool dot = false;                // the dot formula below (lanes = 1: nr is indexed by m)
  bool auto_pick = true;           // "auto" may choose this kernel's algorithm (false where measured slower)
  bool auto_pick_stems = false;    // ... on ungrouped layers of at most 4 input channels even where auto_pick is false
  int nr_for(size_t m) const { return nr[(m + size_t(lanes) - 1) / size_t(lanes) - 1]; }
  int nr_any_for(size_t m) const { return nr_any[(m + size_t(lanes) - 1) / size_t(lanes) - 1]; }
};

// Depthwise kernels (depthwise = true, the variant of seed G3; channel multiplier 1): the same arguments with
// ic = 1 and the channels in vector lanes instead of broadcast, output channel o reading input channel o:
//   y[j * y_pix + o] = epilogue( sum_{kh < kh_n, kw < kw_n} x[j * x_pix + kh * x_kh + kw * x_kw + o]
//                                                          * w[kh * w_kh + kw * MR + o] )
// x and y point at the block's first channel; inputs of channels >= m are never read.

// Dot kernels (dot = true, seed C2: few output channels): input channels in vector lanes, each output a
// horizontal sum of its lanes at the end; the weights are the layer's own rows (OC, KH, KW, IC / groups):
//   y[j * y_pix + o] = epilogue( sum_{kh < kh_n, kw < kw_n, c < ic} x[j * x_pix + kh * x_kh + kw * x_kw + c]
//                                                              * w[o * w_oc + kh * w_kh + kw * ic + c] )
// for o < m <= MR (a handful of channels, all in registers) and j < n <= nr[m - 1].

// The oracles (kernels/ref/f32_conv.cc, baseline code), any MR: the formulas in plain loops, taps in the
// kernels' order (kh, kw, c), one float32 accumulator per output.
void f32_conv_reference(const F32ConvArgs& a, size_t MR);
void f32_dwconv_reference(const F32ConvArgs& a, size_t MR);
void f32_dotconv_reference(const F32ConvArgs& a);

// The kernels are listed in kernels/f32_conv_list.h; each is defined in csrc/kernels/<isa>/f32_conv.cc.

}  // namespace nnkern
