// The output stages of QConv2d (ops/qconv/stage.h).
#include "ops/qconv/stage.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <type_traits>

#include "core/kernel_family.h"
#include "kernels/quantize_list.h"

namespace nnkern {
namespace {

// Channels a helper takes at once (commit splits wider tiles: the depthwise rows carry every channel).
constexpr size_t kChannels = 256;

// The tile's per-channel sums added to row[0 .. m), pixels in order (so a double sum is reproducible). 8-bit
// values are summed first in 16 bits, 255 pixels at a time (255 * 128 < 2^15), which vectorizes best.
template <typename T, typename A>
void pool_tile(A* row, const void* tile, size_t n, size_t m, size_t ld) {
  const T* t = static_cast<const T*>(tile);
  if constexpr (sizeof(T) == 1) {
    using P = std::conditional_t<std::is_signed_v<T>, int16_t, uint16_t>;
    P part[kChannels];
    for (size_t j0 = 0; j0 < n; j0 += 255) {
      for (size_t i = 0; i < m; ++i) part[i] = 0;
      for (size_t j = j0; j < std::min(n, j0 + 255); ++j, t += ld)
        for (size_t i = 0; i < m; ++i) part[i] = P(part[i] + t[i]);
      for (size_t i = 0; i < m; ++i) row[i] += part[i];
    }
  } else {
    for (size_t j = 0; j < n; ++j, t += ld)
      for (size_t i = 0; i < m; ++i) row[i] += A(t[i]);
  }
}

// Copies `bytes` (> 0) from s to d with at most two fixed-size moves (head and tail may overlap): the runs
// are short (r * C values), where a memcpy call or a byte loop would cost more than the move.
inline void copy_run(unsigned char* d, const unsigned char* s, size_t bytes) {
  auto two = [&](auto word) {
    using W = decltype(word);
    W a, b;
    __builtin_memcpy(&a, s, sizeof(W));
    __builtin_memcpy(&b, s + bytes - sizeof(W), sizeof(W));
    __builtin_memcpy(d, &a, sizeof(W));
    __builtin_memcpy(d + bytes - sizeof(W), &b, sizeof(W));
  };
  struct W16 { uint64_t lo, hi; };
  if (bytes >= 32) {
    std::memcpy(d, s, bytes);
  } else if (bytes >= 16) {
    two(W16{});
  } else if (bytes >= 8) {
    two(uint64_t{});
  } else if (bytes >= 4) {
    two(uint32_t{});
  } else {
    for (size_t k = 0; k < bytes; ++k) d[k] = s[k];
  }
}

// One run of a tile's channels that lands contiguously in the output: bytes [src, src + len) of each pixel's
// tile row go to the pixel's block + dst.
struct Run {
  size_t src, dst, len;
};

// Copies the tile's pixels to their shuffled places: channel ch of a pixel at block + chan_off[ch] (elements
// of esz bytes), the pixel's block at ((img * OH + oh) * r * OW + ow) * r * C; channels whose places follow
// each other form one run. Run by run over the pixels of one output row: a whole run (r * C values, all of
// the pixel's values for that output row) ends where the next pixel's begins, so up to 16 bytes it is moved
// as one 16-byte load and store whose surplus the following pixels overwrite; the row's last pixels, and
// partial runs (a tile ending inside a run: another tile writes the rest), are copied exactly.
void shuffle_tile(unsigned char* dst, size_t esz, const size_t* chan_off, size_t OH, size_t OW, size_t r, size_t C,
                  size_t p0, size_t n, size_t c0, size_t m, const unsigned char* tile, size_t ld) {
  Run runs[kChannels];
  size_t nr = 0;
  for (size_t i = 0; i < m; ++i) {
    const size_t off = chan_off[c0 + i] * esz;
    if (nr && runs[nr - 1].dst + runs[nr - 1].len == off) runs[nr - 1].len += esz;
    else runs[nr++] = {i * esz, off, esz};
  }
  const size_t step = r * C * esz, row = ld * esz;  // the next pixel's block; the next tile row
  size_t ow = p0 % OW, oh = p0 / OW % OH, img = p0 / OW / OH;
  for (size_t j = 0; j < n;) {
    unsigned char* block = dst + ((img * OH + oh) * r * OW + ow) * step;
    const size_t np = std::min(n - j, OW - ow);  // the tile's pixels in this output row
    const unsigned char* t = tile + j * row;
    for (size_t k = 0; k < nr; ++k) {
      unsigned char* d = block + runs[k].dst;
      const unsigned char* sp = t + runs[k].src;
      const size_t len = runs[k].len;
      size_t q = 0;
      // 16-byte moves while they end within the row's last run of this tile ((np - q) * step >= 16); the
      // tile buffers have 16 bytes of slack past the last row (kQConvTileSlack).
      if (len == step && len <= 16)
        for (; q + 1 < np && (np - q) * step >= 16; ++q, d += step, sp += row) {
          unsigned char v[16];
          __builtin_memcpy(v, sp, 16);
          __builtin_memcpy(d, v, 16);
        }
      for (; q < np; ++q, d += step, sp += row) copy_run(d, sp, len);
    }
    j += np;
    ow = 0;
    if (++oh == OH) oh = 0, ++img;
  }
}

// Round half to even of |v| <= 2^22 in plain float arithmetic (the default rounding mode does it on the add): the
// same result as std::nearbyint, which is a library call per element the compiler cannot vectorize.
inline float round_even(float v) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  return (v + kMagic) - kMagic;
}

// Where element (pixel p, channel c) of the output and residual sits: NHWC at p * OC + c, planar at
// (image * OC + c) * plane + pixel (channels plane apart).
struct ResidualLayout {
  size_t OC, plane;
  bool planar;
  size_t at(size_t p, size_t c) const { return planar ? (p / plane * OC + c) * plane + p % plane : p * OC + c; }
  size_t channel_stride() const { return planar ? plane : 1; }
};

// A tile of residual outputs, element (j, i) from t[j * ld + i] and the residual at the same place (plain float32,
// one rounding each: numpy reproduces them bit for bit).
template <typename R, typename C>
void residual_tile(const float* t, size_t ld, const R* r, C* c, const ResidualLayout& lay, size_t p0, size_t n,
                   size_t c0, size_t m, float zr, float f, const QConvRequant& o) {
  const size_t cs = lay.channel_stride();
  for (size_t j = 0; j < n; ++j) {
    const size_t at = lay.at(p0 + j, c0);
    const float* tj = t + j * ld;
    const R* rj = r + at;
    C* cj = c + at;
    for (size_t i = 0; i < m; ++i) {
      const float p = (float(rj[i * cs]) - zr) * f;  // float(r) - zr is exact (|.| < 2^9)
      const float y = tj[i] + p;
      if constexpr (sizeof(C) == 4) {
        cj[i * cs] = o.relu ? (y < 0.0f ? 0.0f : y) : y;
      } else {  // the clamp keeps |y| <= 255 (NaN cannot occur: t and p are finite)
        const float v = y < o.lo ? o.lo : (y > o.hi ? o.hi : y);
        cj[i * cs] = C(int32_t(round_even(v)));
      }
    }
  }
}

template <typename R>
void residual_typed(const float* t, size_t ld, const void* r, void* c, const ResidualLayout& lay, size_t p0, size_t n,
                    size_t c0, size_t m, float zr, float f, const QConvRequant& o) {
  const R* rr = static_cast<const R*>(r);
  switch (o.out) {
    case QOut::f32: residual_tile(t, ld, rr, static_cast<float*>(c), lay, p0, n, c0, m, zr, f, o); break;
    case QOut::u8: residual_tile(t, ld, rr, static_cast<uint8_t*>(c), lay, p0, n, c0, m, zr, f, o); break;
    case QOut::s8: residual_tile(t, ld, rr, static_cast<int8_t*>(c), lay, p0, n, c0, m, zr, f, o); break;
    default: break;  // int32 output takes no residual (the constructor refuses it)
  }
}

// dst[i * ld_dst + j] = src[j * ld_src + i] for j < n pixels, i < m channels.
template <typename T>
void transpose_run(const T* src, size_t ld_src, T* dst, size_t ld_dst, size_t n, size_t m) {
  for (size_t i = 0; i < m; ++i)
    for (size_t j = 0; j < n; ++j) dst[i * ld_dst + j] = src[j * ld_src + i];
}

QConvRequant pre_activation() {  // float32 t = fma(acc, factor, offset), no ReLU: the residual stage finishes it
  QConvRequant t;
  t.out = QOut::f32;
  return t;
}

}  // namespace

QConvNhwcStage::QConvNhwcStage(const QConvRequant& r, void* c, size_t ldc, size_t channel) : QConvStage(r) {
  set_in_place(static_cast<uint8_t*>(c) + channel * qout_elem_size(r.out), ldc);
}

void QConvNhwcStage::commit(size_t, size_t p0, size_t n, size_t c0, size_t m, const void* tile, size_t ld) {
  const size_t esz = tile_elem();
  for (size_t j = 0; j < n; ++j) std::memcpy(at(p0 + j, c0), static_cast<const uint8_t*>(tile) + j * ld * esz, m * esz);
  stored(p0, n, c0, m);
}

QConvTableStage::QConvTableStage(const QConvRequant& r, void* c, size_t ldc, const uint8_t* table)
    : QConvNhwcStage(r, c, ldc), table_(table), lookup_(quantize_family().dispatched().lookup) {
  if (r.out != QOut::u8 && r.out != QOut::s8) throw std::invalid_argument("QConvTableStage: an 8-bit output only");
}

void QConvTableStage::stored(size_t p0, size_t n, size_t c0, size_t m) const {
  if (m == ldc()) {  // whole pixels: one run
    lookup_(table_, at(p0, 0), at(p0, 0), n * m);
    return;
  }
  for (size_t p = p0; p < p0 + n; ++p) lookup_(table_, at(p, c0), at(p, c0), m);
}

QConvPlanarStage::QConvPlanarStage(const QConvRequant& r, void* c, size_t OC, size_t OH, size_t OW)
    : QConvStage(r), c_(static_cast<uint8_t*>(c)), OC_(OC), plane_(OH * OW) {
  set_planar(c, OC, plane_);
}

void QConvPlanarStage::commit(size_t, size_t p0, size_t n, size_t c0, size_t m, const void* tile, size_t ld) {
  // Runs of pixels within one image, each channel's run contiguous in the output.
  for (size_t j = 0; j < n;) {
    const size_t p = p0 + j, img = p / plane_, pix = p % plane_, run = std::min(n - j, plane_ - pix);
    const size_t at = (img * OC_ + c0) * plane_ + pix;
    if (tile_elem() == 1)
      transpose_run(static_cast<const uint8_t*>(tile) + j * ld, ld, c_ + at, plane_, run, m);
    else
      transpose_run(static_cast<const uint32_t*>(tile) + j * ld, ld, reinterpret_cast<uint32_t*>(c_) + at, plane_, run,
                    m);
    j += run;
  }
}

QConvResidualStage::QConvResidualStage(const QConvRequant& out, void* c, size_t OC, const void* residual,
                                       QType residual_type, int32_t residual_zero, float residual_factor, bool planar)
    : QConvStage(pre_activation()), out_(out), c_(static_cast<uint8_t*>(c)), OC_(OC), r_(residual),
      r_type_(residual_type), r_zero_(float(residual_zero)), r_factor_(residual_factor), planar_(planar) {
  if (out.out == QOut::i32) throw std::invalid_argument("qconv2d: no residual with int32 output");
}

void QConvResidualStage::commit(size_t, size_t p0, size_t n, size_t c0, size_t m, const void* tile, size_t ld) {
  const float* t = static_cast<const float*>(tile);
  const ResidualLayout lay{OC_, plane_, planar_};
  if (r_type_ == QType::s8)
    residual_typed<int8_t>(t, ld, r_, c_, lay, p0, n, c0, m, r_zero_, r_factor_, out_);
  else
    residual_typed<uint8_t>(t, ld, r_, c_, lay, p0, n, c0, m, r_zero_, r_factor_, out_);
}

QConvAddStage::QConvAddStage(const QConvRequant& r, void* y, size_t ldc, size_t OC, const void* residual,
                             QBinaryFn add, const QBinaryParams& p)
    : QConvStage(r), y_(static_cast<uint8_t*>(y)), ldc_(ldc), OC_(OC), r_(static_cast<const uint8_t*>(residual)),
      add_(add), p_(p) {
  if (r.out != QOut::u8 && r.out != QOut::s8) throw std::invalid_argument("qconv2d: a QLinearAdd needs 8-bit outputs");
}

void QConvAddStage::commit(size_t, size_t p0, size_t n, size_t c0, size_t m, const void* tile, size_t ld) {
  const uint8_t* t = static_cast<const uint8_t*>(tile);
  if (ld == m && m == OC_ && ldc_ == OC_) {  // whole pixels: one run
    add_(t, r_ + p0 * OC_, y_ + p0 * OC_, n * m, p_);
    return;
  }
  // A tile of a few pixels' channel slices (16 bytes each, say): one call over the tile with the residual's slices
  // gathered next to each other and the sums scattered, not a kernel call per 16 bytes.
  constexpr size_t kBytes = 1024;
  if (ld == m && n * m <= kBytes) {
    alignas(64) uint8_t r[kBytes], y[kBytes];
    for (size_t j = 0; j < n; ++j) copy_run(r + j * m, r_ + (p0 + j) * OC_ + c0, m);
    add_(t, r, y, n * m, p_);
    for (size_t j = 0; j < n; ++j) copy_run(y_ + (p0 + j) * ldc_ + c0, y + j * m, m);
    return;
  }
  for (size_t j = 0; j < n; ++j) add_(t + j * ld, r_ + (p0 + j) * OC_ + c0, y_ + (p0 + j) * ldc_ + c0, m, p_);
}

QConvPoolStage::QConvPoolStage(const QConvRequant& r, size_t OC, const QConvPoolParams& p)
    : QConvStage(r), OC_(OC), p_(p) {
  if (p.out == QOut::i32) throw std::invalid_argument("qconv2d: pooled output is float32, uint8 or int8");
}

void QConvPoolStage::begin(size_t OH, size_t OW, size_t slots) {
  count_ = OH * OW;
  slots_ = slots;
  if (tile_epilogue().out == QOut::f32) fsum_.assign(slots * OC_, 0.0);
  else isum_.assign(slots * OC_, 0);
}

void QConvPoolStage::commit(size_t slot, size_t, size_t n, size_t c0, size_t m, const void* tile, size_t ld) {
  const size_t esz = tile_elem();
  for (size_t i0 = 0; i0 < m; i0 += kChannels) {
    const size_t mi = std::min(kChannels, m - i0), c = c0 + i0;
    const void* t = static_cast<const unsigned char*>(tile) + i0 * esz;
    switch (tile_epilogue().out) {
      case QOut::f32: pool_tile<float>(fsum_.data() + slot * OC_ + c, t, n, mi, ld); break;
      case QOut::i32: pool_tile<int32_t>(isum_.data() + slot * OC_ + c, t, n, mi, ld); break;
      case QOut::u8: pool_tile<uint8_t>(isum_.data() + slot * OC_ + c, t, n, mi, ld); break;
      case QOut::s8: pool_tile<int8_t>(isum_.data() + slot * OC_ + c, t, n, mi, ld); break;
    }
  }
}

void QConvPoolStage::finish_image(size_t n) {
  const QConvPoolParams& p = p_;
  const double count = double(count_);
  for (size_t oc = 0; oc < OC_; ++oc) {
    double sum;
    if (tile_epilogue().out == QOut::f32) {
      sum = 0.0;
      for (size_t s = 0; s < slots_; ++s) sum += fsum_[s * OC_ + oc];
    } else {
      int64_t si = 0;
      for (size_t s = 0; s < slots_; ++s) si += isum_[s * OC_ + oc];
      sum = double(si);  // exact below 2^53: 2^22 pixels of int32 outputs, 2^45 of 8-bit ones
    }
    const double real = (sum / count - p.zero) * p.scale;
    const size_t at = n * OC_ + oc;
    if (p.out == QOut::f32) {
      static_cast<float*>(p.dst)[at] = float(real);
    } else {
      const double q = std::nearbyint(std::min(std::max(real / p.out_scale + p.out_zero, p.lo), p.hi));
      if (p.out == QOut::u8) static_cast<uint8_t*>(p.dst)[at] = uint8_t(q);
      else static_cast<int8_t*>(p.dst)[at] = int8_t(q);
    }
  }
}

QConvShuffleStage::QConvShuffleStage(const QConvRequant& r, size_t OC, size_t factor, void* dst, bool runs)
    : QConvStage(r), OC_(OC), r_(factor), C_(0), runs_(runs), dst_(static_cast<uint8_t*>(dst)) {
  if (factor == 0 || factor > OC || OC % (factor * factor))
    throw std::invalid_argument("qconv2d: pixel shuffle needs OC divisible by r*r");
  C_ = OC / (factor * factor);
}

void QConvShuffleStage::begin(size_t OH, size_t OW, size_t) {
  OH_ = OH, OW_ = OW;
  const size_t r = r_, C = C_;
  chan_off_.resize(OC_);
  for (size_t oc = 0; oc < OC_; ++oc) {
    // (i, j, c) of the channel in the packed order
    const size_t i = runs_ ? oc / (r * C) : oc % (r * r) / r;
    const size_t j = runs_ ? oc / C % r : oc % r;
    const size_t c = runs_ ? oc % C : oc / (r * r);
    chan_off_[oc] = i * OW * r * C + j * C + c;
  }
}

void QConvShuffleStage::commit(size_t, size_t p0, size_t n, size_t c0, size_t m, const void* tile, size_t ld) {
  const size_t esz = tile_elem();
  for (size_t i0 = 0; i0 < m; i0 += kChannels) {
    const size_t mi = std::min(kChannels, m - i0);
    shuffle_tile(dst_, esz, chan_off_.data(), OH_, OW_, r_, C_, p0, n, c0 + i0, mi,
                 static_cast<const unsigned char*>(tile) + i0 * esz, ld);
  }
}

}  // namespace nnkern
