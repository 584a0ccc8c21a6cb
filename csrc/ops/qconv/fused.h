// Fused output stages of QConv2d (seeds I14, I16): the algorithms store each tile of output pixels x channels
// into a small cache-resident buffer instead of the output (a task's tiles, or one tile / row chunk), and hand
// it to the stage (QConvFused::commit), which
//   pool     adds the tile's per-channel sums into a partial-sum slot (global average pooling): the (N, OH, OW,
//            OC) output is never written, only (N, OC) means at the end;
//   shuffle  copies the tile to its pixel-shuffled places in the (N, OH*r, OW*r, OC/(r*r)) output (torch's
//            order: channel c*r*r + i*r + j of pixel (oh, ow) goes to pixel (oh*r + i, ow*r + j), channel c).
// Baseline code.
//
// Determinism of pooling: a slot is a tile position of the algorithm's fixed tiling (a shape-only function:
// a GEMM tile of NR pixels, a chunk of an output row), each (slot, channel) is committed by one task per
// parallel region, a commit adds its pixels in order, and the slots are reduced in order at the end, so the
// float32 sums (in double) do not depend on the thread count. Integer outputs are summed exactly in int64.
// A pooled call runs one image at a time (PackedQConv2d::run), so no tile spans two images.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/qgemm.h"

namespace nnkern {

// Bytes of a direct / depthwise chunk buffer, and the bytes every tile buffer must have past its last tile
// (commit reads rows with 16-byte loads).
constexpr size_t kQConvFusedTileBytes = 8192;
constexpr size_t kQConvFusedSlack = 16;

struct QConvPoolParams {
  // pooled[n][oc] = ((sum / count) - zero) * scale in double (the mean of the stored outputs in real units:
  // zero / scale the layer's output zero point / scale for uint8 / int8, 0 / 1 for float32 / int32), then
  //   out f32:     float(pooled)
  //   out u8 / s8: rint(min(max(pooled / out_scale + out_zero, lo), hi))  (ties to even)
  double zero = 0.0, scale = 1.0;
  QOut out = QOut::f32;  // f32, u8 or s8
  double out_scale = 1.0, out_zero = 0.0, lo = 0.0, hi = 0.0;
  void* dst = nullptr;  // N x OC of `out`
};

class QConvFused {
 public:
  enum class Kind { pool, shuffle };

  // Pixel shuffle by r of an output of OC channels (OC % (r * r) == 0), output width OW, height OH, into dst.
  // runs: the layer packed its channels as (i, j, c) (oc' = (i * r + j) * C + c, groups == 1) so that r * C
  // consecutive channels land side by side in the output; false: torch's order (oc = c * r * r + i * r + j).
  static QConvFused shuffle(size_t r, size_t OC, QOut out, void* dst, bool runs);
  static QConvFused pool(size_t OC, QOut out, const QConvPoolParams& p);

  Kind kind() const { return kind_; }
  QOut out() const { return out_; }

  // Called by an algorithm before its first commit of a call: the output size and, for pooling, the number
  // of slots (zeroed).
  void begin(size_t OH, size_t OW, size_t slots);
  // The tile of pixels [p0, p0 + n) (of the call: p = (n_img * OH + oh) * OW + ow) and channels [c0, c0 + m),
  // element (j, i) at tile + (j * ld + i) elements of out(). slot: the tile's place in the algorithm's tiling
  // (pooling only; < slots). Tasks may commit concurrently to distinct (slot, channel) pairs / pixels.
  void commit(size_t slot, size_t p0, size_t n, size_t c0, size_t m, const void* tile, size_t ld);
  // Pooling: reduces the slots of the image just run into row n of the pooled output.
  void finish_image(size_t n);

 private:
  Kind kind_ = Kind::pool;
  QOut out_ = QOut::f32;
  size_t OC_ = 0, OH_ = 0, OW_ = 0, slots_ = 0;
  // shuffle
  size_t r_ = 1, C_ = 1;
  bool runs_ = false;
  void* dst_ = nullptr;
  // Per channel (packed order): its element offset from output pixel (oh * r, ow * r), channel 0 (set by
  // begin, which knows OW): i * OW * r * C + j * C + c.
  std::vector<size_t> chan_off_;
  // pool
  QConvPoolParams pool_;
  std::vector<int64_t> isum_;  // slots x OC (integer outputs)
  std::vector<double> fsum_;   // slots x OC (float32 output)
};

}  // namespace nnkern
