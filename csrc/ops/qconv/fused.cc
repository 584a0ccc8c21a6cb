// The fused output stages of QConv2d (ops/qconv/fused.h): per-tile pooling sums and pixel-shuffled stores.
#include "ops/qconv/fused.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <type_traits>

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
      // tile buffers have 16 bytes of slack past the last row (kQConvFusedSlack).
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

}  // namespace

QConvFused QConvFused::shuffle(size_t r, size_t OC, QOut out, void* dst, bool runs) {
  if (r == 0 || OC % (r * r)) throw std::invalid_argument("qconv2d: pixel shuffle needs OC divisible by r*r");
  QConvFused f;
  f.kind_ = Kind::shuffle;
  f.out_ = out;
  f.OC_ = OC;
  f.r_ = r;
  f.C_ = OC / (r * r);
  f.runs_ = runs;
  f.dst_ = dst;
  return f;
}

QConvFused QConvFused::pool(size_t OC, QOut out, const QConvPoolParams& p) {
  if (p.out == QOut::i32) throw std::invalid_argument("qconv2d: pooled output is float32, uint8 or int8");
  QConvFused f;
  f.kind_ = Kind::pool;
  f.out_ = out;
  f.OC_ = OC;
  f.pool_ = p;
  return f;
}

void QConvFused::begin(size_t OH, size_t OW, size_t slots) {
  OH_ = OH, OW_ = OW;
  if (kind_ == Kind::shuffle) {
    const size_t r = r_, C = C_;
    chan_off_.resize(OC_);
    for (size_t oc = 0; oc < OC_; ++oc) {
      // (i, j, c) of the channel in the packed order
      const size_t i = runs_ ? oc / (r * C) : oc % (r * r) / r;
      const size_t j = runs_ ? oc / C % r : oc % r;
      const size_t c = runs_ ? oc % C : oc / (r * r);
      chan_off_[oc] = i * OW * r * C + j * C + c;
    }
    return;
  }
  slots_ = slots;
  if (out_ == QOut::f32) fsum_.assign(slots * OC_, 0.0);
  else isum_.assign(slots * OC_, 0);
}

void QConvFused::commit(size_t slot, size_t p0, size_t n, size_t c0, size_t m, const void* tile, size_t ld) {
  const size_t esz = qout_elem_size(out_);
  for (size_t i0 = 0; i0 < m; i0 += kChannels) {
    const size_t mi = std::min(kChannels, m - i0), c = c0 + i0;
    const void* t = static_cast<const unsigned char*>(tile) + i0 * esz;
    if (kind_ == Kind::shuffle) {
      shuffle_tile(static_cast<unsigned char*>(dst_), esz, chan_off_.data(), OH_, OW_, r_, C_, p0, n, c, mi,
                   static_cast<const unsigned char*>(t), ld);
      continue;
    }
    switch (out_) {
      case QOut::f32: pool_tile<float>(fsum_.data() + slot * OC_ + c, t, n, mi, ld); break;
      case QOut::i32: pool_tile<int32_t>(isum_.data() + slot * OC_ + c, t, n, mi, ld); break;
      case QOut::u8: pool_tile<uint8_t>(isum_.data() + slot * OC_ + c, t, n, mi, ld); break;
      case QOut::s8: pool_tile<int8_t>(isum_.data() + slot * OC_ + c, t, n, mi, ld); break;
    }
  }
}

void QConvFused::finish_image(size_t n) {
  const QConvPoolParams& p = pool_;
  const double count = double(OH_ * OW_);
  for (size_t oc = 0; oc < OC_; ++oc) {
    double sum;
    if (out_ == QOut::f32) {
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

}  // namespace nnkern
