// FP32 Winograd F(m x m, 3 x 3) transform micro-kernels (Lavin & Gray 2016), shared by every ISA. Baseline header:
// no intrinsics.
//
// A 3x3, stride-1 convolution of an m x m output tile is A^T [ sum_c (G g_c G^T) (.) (B^T d_c B) ] A over input
// channels c, with d_c the tile's alpha x alpha input patch (alpha = m + 2) and g_c the 3x3 filter. The weight
// transform G g G^T runs once at packing (ops/conv/winograd.cc, in double); the products and their sum over c are
// alpha^2 independent GEMMs on the FP32 GEMM micro-kernels; these kernels do the two transforms that remain,
// vectorized over channels (the NHWC inner dimension), one tile per call:
//
//   input   x[i * alpha + j]: the n channels of patch pixel (i, j) (a zero row for padding);
//           v[k * v_stride + ch] = (B^T d_ch B)[k], k = i * alpha + j.
//   output  mm[k * m_stride + ch]: the tile's summed products at position k;
//           y[i * m + j]: output pixel (i, j)'s n channels, or null for a pixel outside the image, gets
//           min(max(A^T M_ch A + bias[ch], lo), hi)   (bias null: none; lo / hi: -inf / +inf for no clamp).
//
// Both return whether every value they computed is finite. A non-finite or huge input makes the tile's values
// NaN or Inf where the direct sum would not be (Inf - Inf inside the transform; every output mixes all alpha^2
// positions): the caller recomputes such a tile directly, so Winograd never changes how NaN and Inf propagate.
//
// F(2x2, 3x3), alpha 4:  B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1],  A^T = [1 1 1 0; 0 1 -1 -1],
//                        G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1].
// F(4x4, 3x3), alpha 6:  B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0;
//                               0 4 0 -5 0 1],
//                        A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1],
//                        G = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1].
#pragma once
#include <cstddef>

namespace nnkern {

using F32WinogradInput = bool (*)(size_t n, const float* const* x, float* v, size_t v_stride);
using F32WinogradOutput = bool (*)(size_t n, const float* mm, size_t m_stride, float* const* y, const float* bias,
                                   float lo, float hi);

// The output tile sizes, in the order of F32WinogradKernel's arrays.
constexpr int kWinogradTiles[2] = {2, 4};

struct F32WinogradKernel {
  const char* name;
  int lanes;                     // channels per vector (the rest run one at a time)
  F32WinogradInput input[2];     // F(2x2, 3x3), F(4x4, 3x3)
  F32WinogradOutput output[2];
};

}  // namespace nnkern
