#include "ops/shuffle/pixel_shuffle.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "core/threadpool.h"

namespace nnkern {

namespace {

// Below this many bytes per task, claiming a task costs more than the copy.
constexpr size_t kTaskBytes = 32 << 10;

// The four loops, for element type T and factor R (R = 0: the runtime s.r). A compile-time R lets the
// compiler unroll the j loop and vectorize the interleave (r = 2, 3, 4 cover nearly every model).
// Each `unit` writes its own part of y, so tasks never share output bytes.
template <typename T, size_t R>
struct Loops {
  const PixelShuffleShape& s;
  size_t r() const { return R ? R : s.r; }

  // NCHW shuffle, unit (n, c, h, i): output row h*r+i of channel c interleaves the r input rows
  // c*r*r + i*r + j (j < r), each read contiguously.
  void nchw_shuffle(size_t unit, const T* x, T* y) const {
    const size_t r = this->r(), W = s.w, H = s.h;
    const size_t i = unit % r, h = unit / r % H, nc = unit / r / H;  // nc = n*C + c
    T* out = y + (nc * H * r + h * r + i) * W * r;
    const T* in = x + ((nc * r * r + i * r) * H + h) * W;  // row j is at in + j*H*W
    if constexpr (R != 0) {  // j innermost and unrolled: R contiguous reads interleaved into contiguous writes
      for (size_t w = 0; w < W; ++w)
        for (size_t j = 0; j < R; ++j) out[w * R + j] = in[j * H * W + w];
    } else {
      for (size_t j = 0; j < r; ++j)
        for (size_t w = 0; w < W; ++w) out[w * r + j] = in[j * H * W + w];
    }
  }
  // NCHW unshuffle, unit (n, c, h, i): input row h*r+i of channel c is split into the r output rows
  // (channel c*r*r + i*r + j, row h), each written contiguously.
  void nchw_unshuffle(size_t unit, const T* x, T* y) const {
    const size_t r = this->r(), W = s.w, H = s.h;
    const size_t i = unit % r, h = unit / r % H, nc = unit / r / H;
    const T* in = x + (nc * H * r + h * r + i) * W * r;
    T* out = y + ((nc * r * r + i * r) * H + h) * W;  // row j is at out + j*H*W
    if constexpr (R != 0) {  // a contiguous read de-interleaved into R contiguous writes
      for (size_t w = 0; w < W; ++w)
        for (size_t j = 0; j < R; ++j) out[j * H * W + w] = in[w * R + j];
    } else {
      for (size_t j = 0; j < r; ++j)
        for (size_t w = 0; w < W; ++w) out[j * H * W + w] = in[w * r + j];
    }
  }
  // NHWC shuffle, unit (n, h, i): output row h*r+i. Output pixel w*r+j takes channels i*r+j, r*r+i*r+j,
  // ... of input pixel w: for each c, r consecutive inputs go to r output pixels C apart.
  void nhwc_shuffle(size_t unit, const T* x, T* y) const {
    const size_t r = this->r(), W = s.w, C = s.c;
    const size_t i = unit % r, nh = unit / r;  // nh = n*H + h
    T* out = y + unit * W * r * C;
    const T* in = x + nh * W * C * r * r + i * r;
    for (size_t w = 0; w < W; ++w, out += r * C, in += C * r * r)
      for (size_t c = 0; c < C; ++c)
        for (size_t j = 0; j < r; ++j) out[j * C + c] = in[c * r * r + j];
  }
  // NHWC unshuffle, unit (n, h, i): writes channels c*r*r + i*r + j of output row h from input row h*r+i.
  void nhwc_unshuffle(size_t unit, const T* x, T* y) const {
    const size_t r = this->r(), W = s.w, C = s.c;
    const size_t i = unit % r, nh = unit / r;
    const T* in = x + unit * W * r * C;
    T* out = y + nh * W * C * r * r + i * r;
    for (size_t w = 0; w < W; ++w, in += r * C, out += C * r * r)
      for (size_t c = 0; c < C; ++c)
        for (size_t j = 0; j < r; ++j) out[c * r * r + j] = in[j * C + c];
  }
};

template <typename T, size_t R>
void run(const PixelShuffleShape& s, bool inverse, const void* xv, void* yv) {
  const Loops<T, R> loops{s};
  const T* x = static_cast<const T*>(xv);
  T* y = static_cast<T*>(yv);
  // Units: NCHW (n, c, h, i), W*r elements each; NHWC (n, h, i), W*r*C elements each.
  const size_t units = s.nhwc ? s.n * s.h * s.r : s.n * s.c * s.h * s.r;
  const size_t unit_bytes = (s.nhwc ? s.w * s.r * s.c : s.w * s.r) * sizeof(T);
  const size_t per_task = std::max<size_t>(1, kTaskBytes / std::max<size_t>(unit_bytes, 1));
  parallel_for((units + per_task - 1) / per_task, [&](size_t t) {
    const size_t end = std::min(units, (t + 1) * per_task);
    for (size_t u = t * per_task; u < end; ++u) {
      if (s.nhwc)
        inverse ? loops.nhwc_unshuffle(u, x, y) : loops.nhwc_shuffle(u, x, y);
      else
        inverse ? loops.nchw_unshuffle(u, x, y) : loops.nchw_shuffle(u, x, y);
    }
  });
}

template <typename T>
void run_typed(const PixelShuffleShape& s, bool inverse, const void* x, void* y) {
  switch (s.r) {
    case 2: return run<T, 2>(s, inverse, x, y);
    case 3: return run<T, 3>(s, inverse, x, y);
    case 4: return run<T, 4>(s, inverse, x, y);
    default: return run<T, 0>(s, inverse, x, y);
  }
}

}  // namespace

void pixel_shuffle(const PixelShuffleShape& s, bool inverse, const void* x, void* y) {
  const size_t elems = s.n * s.c * s.r * s.r * s.h * s.w;
  if (elems == 0) return;
  if (s.r == 1) {  // the identity
    std::memcpy(y, x, elems * s.elem_size);
    return;
  }
  switch (s.elem_size) {
    case 1: return run_typed<uint8_t>(s, inverse, x, y);
    case 2: return run_typed<uint16_t>(s, inverse, x, y);
    case 4: return run_typed<uint32_t>(s, inverse, x, y);
    case 8: return run_typed<uint64_t>(s, inverse, x, y);
  }
  throw std::invalid_argument("pixel_shuffle: element size must be 1, 2, 4 or 8");
}

}  // namespace nnkern
