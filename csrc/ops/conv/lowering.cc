// The two lowerings of a convolution onto a GEMM (ops/conv/geometry.h), type-blind: rows are bytes.
#include <algorithm>
#include <cstring>

#include "core/threadpool.h"
#include "ops/conv/geometry.h"

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

// Copies n >= 1 bytes. Short runs (the stem's 21 bytes) with fixed-size 16- or 8-byte moves, the last one
// overlapping the one before, instead of a library call of run-time size per run; long ones with memcpy.
inline void copy_short(unsigned char* d, const unsigned char* s, size_t n) {
  if (n > 64) {
    std::memcpy(d, s, n);
  } else if (n >= 16) {
    for (size_t i = 0; i + 16 < n; i += 16) std::memcpy(d + i, s + i, 16);
    std::memcpy(d + n - 16, s + n - 16, 16);
  } else if (n >= 8) {
    std::memcpy(d, s, 8);
    std::memcpy(d + n - 8, s + n - 8, 8);
  } else {
    for (size_t i = 0; i < n; ++i) d[i] = s[i];
  }
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
      const size_t SH = s.H / s.up_h, SW = s.W / s.up_w;  // the tensor in memory
      for (size_t kh = 0; kh < geo.KH; ++kh)
        for (size_t kw = 0; kw < geo.KW; ++kw) {
          size_t ih, iw;
          const bool inside = tap_row(geo, s.H, oh, kh, &ih) && tap_col(geo, s.W, ow, kw, &iw);
          const size_t pixel = (n * SH + ih / s.up_h) * SW + iw / s.up_w;
          col[(kh * geo.KW + kw) * NR] =
              inside ? reinterpret_cast<const void*>(kConvNominalBase + pixel * row_bytes) : zero;
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
    const size_t p0 = r0 + task * kPixelsPerTask, p1 = std::min(r1, p0 + kPixelsPerTask);
    // (n, oh, ow) of pixel p, divided out once per task and then stepped (two divisions per pixel cost
    // as much as the stem's copies).
    size_t n = p0 / (OH * OW), oh = p0 / OW % OH, ow = p0 % OW;
    for (size_t p = p0; p < p1; ++p, ow = ow + 1 < OW ? ow + 1 : 0, oh += ow == 0,
                n += ow == 0 && oh == OH, oh = oh == OH ? 0 : oh) {
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
          // With dilation 1, tap kw is inside when pl <= ow * sw + kw < W + pl.
          const size_t x0 = ow * geo.sw, KW = geo.KW;
          const size_t kw0 = x0 >= geo.pl ? 0 : std::min(KW, geo.pl - x0);
          const size_t kw1 = std::max(kw0, x0 < s.W + geo.pl ? std::min(KW, s.W + geo.pl - x0) : size_t(0));
          for (size_t kw = 0; kw < kw0; ++kw, dst += tap) copy_short(dst, zero, tap);
          if (kw1 > kw0) copy_short(dst, src(kw0), (kw1 - kw0) * tap);
          dst += (kw1 - kw0) * tap;
          for (size_t kw = kw1; kw < KW; ++kw, dst += tap) copy_short(dst, zero, tap);
          continue;
        }
        for (size_t kw = 0; kw < geo.KW; ++kw, dst += tap)
          std::memcpy(dst, row_inside && col_inside(kw) ? src(kw) : zero, tap);
      }
    }
  });
}

}  // namespace nnkern
