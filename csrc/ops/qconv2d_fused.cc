// The fused output stages of QConv2d (ops/qconv2d_fused.h): per-tile pooling sums and pixel-shuffled stores.
#include "ops/qconv2d_fused.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace nnkern {
namespace {

// The tile's per-channel sums added to row[0 .. m), pixels in order (so a double sum is reproducible).
template <typename T, typename A>
void pool_tile(A* row, const void* tile, size_t n, size_t m, size_t ld) {
  const T* t = static_cast<const T*>(tile);
  for (size_t j = 0; j < n; ++j, t += ld)
    for (size_t i = 0; i < m; ++i) row[i] += A(t[i]);
}

// Copies the tile's pixels to their shuffled places: channel ch of a pixel at base + chan_off[ch]; channels
// of one run (run consecutive channels from a multiple of run) are contiguous there.
template <typename T>
void shuffle_tile(T* dst, const size_t* chan_off, size_t run, size_t OH, size_t OW, size_t r, size_t C, size_t p0,
                  size_t n, size_t c0, size_t m, const T* tile, size_t ld) {
  size_t ow = p0 % OW, oh = p0 / OW % OH, img = p0 / OW / OH;
  for (size_t j = 0; j < n; ++j, tile += ld) {
    T* base = dst + ((img * OH * r + oh * r) * OW * r + ow * r) * C;
    for (size_t ch = c0; ch < c0 + m;) {
      const size_t end = std::min(c0 + m, (ch / run + 1) * run);
      T* d = base + chan_off[ch];
      const T* s = tile + (ch - c0);
      for (size_t k = 0; k < end - ch; ++k) d[k] = s[k];
      ch = end;
    }
    if (++ow == OW) {
      ow = 0;
      if (++oh == OH) oh = 0, ++img;
    }
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
  f.run_ = runs ? r * f.C_ : 1;
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
  if (kind_ == Kind::shuffle) {
    if (qout_elem_size(out_) == 1)
      shuffle_tile(static_cast<uint8_t*>(dst_), chan_off_.data(), run_, OH_, OW_, r_, C_, p0, n, c0, m,
                   static_cast<const uint8_t*>(tile), ld);
    else
      shuffle_tile(static_cast<uint32_t*>(dst_), chan_off_.data(), run_, OH_, OW_, r_, C_, p0, n, c0, m,
                   static_cast<const uint32_t*>(tile), ld);
    return;
  }
  switch (out_) {
    case QOut::f32: return pool_tile<float>(fsum_.data() + slot * OC_ + c0, tile, n, m, ld);
    case QOut::i32: return pool_tile<int32_t>(isum_.data() + slot * OC_ + c0, tile, n, m, ld);
    case QOut::u8: return pool_tile<uint8_t>(isum_.data() + slot * OC_ + c0, tile, n, m, ld);
    case QOut::s8: return pool_tile<int8_t>(isum_.data() + slot * OC_ + c0, tile, n, m, ld);
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
