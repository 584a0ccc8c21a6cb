// The two lowerings of a convolution onto a GEMM (ops/conv_geometry.h), type-blind: rows are bytes.
#include <algorithm>
#include <cstring>

#include "core/threadpool.h"
#include "ops/conv_geometry.h"

namespace nnkern {
namespace {

// Output pixels per im2col task.
constexpr size_t kPixelsPerTask = 256;

// The input pixel of output (oh, ow) and tap (kh, kw), or false for a padding tap. Unsigned arithmetic:
// ih = oh * sh + kh * dh - pt, valid when the sum is >= pt and ih < H.
bool tap_row(const ConvGeometry& g, size_t H, size_t oh, size_t kh, size_t* ih) {
  const size_t v = oh * g.sh + kh * g.dh;
  *ih = v - g.pt;
  return v >= g.pt && *ih < H;
}
bool tap_col(const ConvGeometry& g, size_t W, size_t ow, size_t kw, size_t* iw) {
  const size_t v = ow * g.sw + kw * g.dw;
  *iw = v - g.pl;
  return v >= g.pl && *iw < W;
}

}  // namespace

void conv_fill_indirection(const ConvGeometry& geo, const ConvInputShape& s, size_t NR, size_t row_bytes,
                           const void* zero, const void** ptrs) {
  const size_t ks = geo.ks(), OH = geo.OH(s.H), OW = geo.OW(s.W), M = s.N * OH * OW, tiles = (M + NR - 1) / NR;
  // Entries lie below kConvNominalBase + the input's size, the zero row is a heap address: they never coincide.
  parallel_for(tiles, [&](size_t tile) {
    for (size_t j = 0; j < NR; ++j) {
      const size_t p = tile * NR + j;
      const void** col = ptrs + tile * ks * NR + j;
      if (p >= M) {  // past the last pixel: never read, kept valid anyway
        for (size_t t = 0; t < ks; ++t) col[t * NR] = zero;
        continue;
      }
      const size_t n = p / (OH * OW), oh = p / OW % OH, ow = p % OW;
      for (size_t kh = 0; kh < geo.KH; ++kh)
        for (size_t kw = 0; kw < geo.KW; ++kw) {
          size_t ih, iw;
          const bool inside = tap_row(geo, s.H, oh, kh, &ih) && tap_col(geo, s.W, ow, kw, &iw);
          col[(kh * geo.KW + kw) * NR] =
              inside ? reinterpret_cast<const void*>(kConvNominalBase + ((n * s.H + ih) * s.W + iw) * row_bytes) : zero;
        }
    }
  });
}

void conv_im2col(const ConvGeometry& geo, const ConvInputShape& s, const unsigned char* base, size_t row_bytes,
                 size_t tap, const unsigned char* zero, size_t r0, size_t r1, unsigned char* cols) {
  const size_t OH = geo.OH(s.H), OW = geo.OW(s.W);
  // Whole groups with dilation 1 along W: a kernel row's taps are consecutive input pixels, back to back.
  const bool contiguous = geo.dw == 1 && row_bytes == tap;
  parallel_for((r1 - r0 + kPixelsPerTask - 1) / kPixelsPerTask, [&](size_t task) {
    const size_t p1 = std::min(r1, r0 + (task + 1) * kPixelsPerTask);
    for (size_t p = r0 + task * kPixelsPerTask; p < p1; ++p) {
      const size_t n = p / (OH * OW), oh = p / OW % OH, ow = p % OW;
      unsigned char* dst = cols + (p - r0) * geo.ks() * tap;
      for (size_t kh = 0; kh < geo.KH; ++kh) {
        size_t ih, iw;
        const bool row_inside = tap_row(geo, s.H, oh, kh, &ih);
        const auto col_inside = [&](size_t kw) { return tap_col(geo, s.W, ow, kw, &iw); };
        const auto src = [&](size_t kw) {
          tap_col(geo, s.W, ow, kw, &iw);
          return base + ((n * s.H + ih) * s.W + iw) * row_bytes;
        };
        if (row_inside && contiguous) {
          // The taps inside the input form one run of input pixels: one copy of run x IC bytes, not one
          // small copy per tap (the stem's 3 channels: 7 copies of 21 bytes per pixel instead of 49 of 3).
          size_t kw = 0;
          for (; kw < geo.KW && !col_inside(kw); ++kw, dst += tap) std::memcpy(dst, zero, tap);
          size_t kw1 = kw;
          while (kw1 < geo.KW && col_inside(kw1)) ++kw1;
          if (kw1 > kw) std::memcpy(dst, src(kw), (kw1 - kw) * tap);
          dst += (kw1 - kw) * tap;
          for (kw = kw1; kw < geo.KW; ++kw, dst += tap) std::memcpy(dst, zero, tap);
          continue;
        }
        for (size_t kw = 0; kw < geo.KW; ++kw, dst += tap)
          std::memcpy(dst, row_inside && col_inside(kw) ? src(kw) : zero, tap);
      }
    }
  });
}

}  // namespace nnkern
