// The output stage of QConv2d: where every algorithm's tiles of output pixels x channels go, written once for all
// of them. Two ways in:
//   in place  the kernels' epilogue stores the NHWC output itself: tile element (pixel p, channel c) at
//             at(p, c), ldc() elements between pixels (a channel slice of a wider buffer, e.g. a concatenation);
//             after each task's block the algorithm calls stored(), where a stage may map the values in place
//             while they are in cache (a table);
//   buffered  the algorithm stores each tile into a small cache-resident buffer and commits it here, where it is
//             rearranged (planar output), finished (a residual added, then requantized), reduced (global
//             average pooling) or scattered (pixel shuffle).
// The kernels apply tile_epilogue(): the layer's requantization, or float32 pre-activation where a residual
// stage finishes the tile. Baseline code.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/lookup.h"
#include "kernels/qbinary.h"
#include "kernels/qgemm.h"
#include "ops/qgemm/qgemm.h"

namespace nnkern {

// Bytes of a buffered algorithm's row chunk, and the bytes every tile buffer has past its last tile (a commit
// reads rows with 16-byte loads).
constexpr size_t kQConvTileBytes = 8192;
constexpr size_t kQConvTileSlack = 16;

// A layer's requantization (ops/qgemm/qgemm.h QOutput without its destination): the output kind and clamp.
struct QConvRequant {
  QOut out = QOut::i32;
  bool relu = false;
  float lo = 0.0f, hi = 0.0f;  // uint8 / int8: the clamp, relu folded into lo
};

class QConvStage {
 public:
  explicit QConvStage(const QConvRequant& tile) : tile_(tile) {}
  virtual ~QConvStage() = default;
  QConvStage(const QConvStage&) = delete;
  QConvStage& operator=(const QConvStage&) = delete;

  // What the kernels store: kind, relu and clamp (QEpilogue's fields; scale / bias are the layer's).
  const QConvRequant& tile_epilogue() const { return tile_; }
  size_t tile_elem() const { return qout_elem_size(tile_.out); }

  bool in_place() const { return base_ != nullptr; }
  uint8_t* at(size_t p, size_t c) const { return base_ + (p * ldc_ + c) * tile_elem(); }
  size_t ldc() const { return ldc_; }
  // Planar output that a kernel storing channel-major rows (low_ofm) may write in place: element (p, c) at
  // planar_at(p, c), a channel's pixels planar_plane() elements apart from the next channel's; 0: not planar.
  size_t planar_plane() const { return plane_; }
  uint8_t* planar_at(size_t p, size_t c) const {
    return planar_ + ((p / plane_ * planar_oc_ + c) * plane_ + p % plane_) * tile_elem();
  }

  // Buffered stages: begin() before an algorithm's first commit of a call, with the output size and the number of
  // tile slots of its tiling (only pooling keeps per-slot sums: a slot is a position of a tiling that depends on
  // the shape alone, so its float sums do not depend on the thread count); commit() for each tile, pixels
  // [p0, p0 + n) of the call (p = (image * OH + oh) * OW + ow) and channels [c0, c0 + m), element (j, i) at
  // tile + (j * ld + i) elements. Tasks may commit concurrently to distinct pixels / (slot, channel) pairs.
  virtual void begin(size_t OH, size_t OW, size_t slots) {}
  virtual void commit(size_t slot, size_t p0, size_t n, size_t c0, size_t m, const void* tile, size_t ld) {}
  // Pooling reduces per image: the layer runs it one image at a time and calls finish_image after each.
  virtual bool per_image() const { return false; }
  virtual void finish_image(size_t n) {}
  // In place: the kernels have stored pixels [p0, p0 + n) x channels [c0, c0 + m) (one task's block, all of it
  // final). Tasks call it concurrently for distinct blocks.
  virtual void stored(size_t p0, size_t n, size_t c0, size_t m) const {}

 protected:
  void set_in_place(void* base, size_t ldc) {
    base_ = static_cast<uint8_t*>(base);
    ldc_ = ldc;
  }
  void set_planar(void* base, size_t OC, size_t plane) {
    planar_ = static_cast<uint8_t*>(base);
    planar_oc_ = OC;
    plane_ = plane;
  }

 private:
  QConvRequant tile_;
  uint8_t* base_ = nullptr;
  size_t ldc_ = 0;
  uint8_t* planar_ = nullptr;
  size_t planar_oc_ = 0, plane_ = 0;
};

// NHWC output, in place: pixel p's OC channels at c + p * ldc (ldc >= OC; the channels from `channel` on when
// the output is a slice of a concatenation). An algorithm that stores only whole pixels (low_ofm) buffers its tiles
// where ldc > OC: commit copies them into place, then calls stored().
class QConvNhwcStage : public QConvStage {
 public:
  QConvNhwcStage(const QConvRequant& r, void* c, size_t ldc, size_t channel = 0);
  void commit(size_t slot, size_t p0, size_t n, size_t c0, size_t m, const void* tile, size_t ld) override;
};

// NHWC output, each stored block then mapped through a table of 256 bytes: y = table[y] (an nnkern.Lookup after the
// convolution, the ONNX plan's fuse_lookup: its bits, without a pass over the output of its own). The table is
// indexed by the 8-bit output's bits as uint8 (int8's -128 .. -1 are 128 .. 255).
class QConvTableStage final : public QConvNhwcStage {
 public:
  QConvTableStage(const QConvRequant& r, void* c, size_t ldc, const uint8_t* table);
  void stored(size_t p0, size_t n, size_t c0, size_t m) const override;

 private:
  const uint8_t* table_;
  LookupFn lookup_;
};

// Planar output (N x OC x OH x OW): from buffered tiles, or in place by a kernel that stores channel-major rows.
class QConvPlanarStage final : public QConvStage {
 public:
  QConvPlanarStage(const QConvRequant& r, void* c, size_t OC, size_t OH, size_t OW);
  void commit(size_t slot, size_t p0, size_t n, size_t c0, size_t m, const void* tile, size_t ld) override;

 private:
  uint8_t* c_;
  size_t OC_, plane_;
};

// A residual added to the float32 pre-activation t = fma(acc, factor, offset) the kernels store, then the layer's
// ReLU / requantization (the output uint8 / int8 / float32, never int32):
//   y = fl(t + fl(float(r - residual_zero) * residual_factor)),
//   float32: relu ? max(y, 0) : y;   uint8 / int8: rint(min(max(y, lo), hi)) (ties to even).
// residual and output NHWC, or both planar (N x OC x OH x OW).
class QConvResidualStage final : public QConvStage {
 public:
  QConvResidualStage(const QConvRequant& out, void* c, size_t OC, const void* residual, QType residual_type,
                     int32_t residual_zero, float residual_factor, bool planar);
  void begin(size_t OH, size_t OW, size_t slots) override { plane_ = OH * OW; }
  void commit(size_t slot, size_t p0, size_t n, size_t c0, size_t m, const void* tile, size_t ld) override;

 private:
  QConvRequant out_;
  uint8_t* c_;
  size_t OC_, plane_ = 0;
  const void* r_;
  QType r_type_;
  float r_zero_, r_factor_;
  bool planar_;
};

// A QLinearAdd of the convolution's 8-bit output and a residual of its shape and type (the ONNX plan's
// fuse_quantized_residual_add on an INT8 graph): the kernels store the layer's requantized output in the tile
// buffer, and each committed tile is added to the residual there as the QLinearAdd step would (kernels/qbinary.h
// with its parameters, the tile as operand a: the same operations, so the same bits), the sum stored at
// y + p * ldc + c.
// The residual is NHWC with OC channels per pixel.
class QConvAddStage final : public QConvStage {
 public:
  QConvAddStage(const QConvRequant& r, void* y, size_t ldc, size_t OC, const void* residual, QBinaryFn add,
                const QBinaryParams& p);
  void commit(size_t slot, size_t p0, size_t n, size_t c0, size_t m, const void* tile, size_t ld) override;

 private:
  uint8_t* y_;
  size_t ldc_, OC_;
  const uint8_t* r_;
  QBinaryFn add_;
  QBinaryParams p_;
};

// Global average pooling (seed I14): each tile's per-channel sums into its slot, the (N, OH, OW, OC) output never
// written; finish_image reduces the slots in order into row n of the pooled output:
//   pooled = ((sum / count) - zero) * scale in double (the mean of the stored outputs in real units), then
//   out f32: float(pooled);  u8 / s8: rint(min(max(pooled / out_scale + out_zero, lo), hi)) (ties to even).
// Integer outputs are summed exactly in int64, float32 ones in double in the slots' fixed order.
struct QConvPoolParams {
  double zero = 0.0, scale = 1.0;
  QOut out = QOut::f32;  // f32, u8 or s8
  double out_scale = 1.0, out_zero = 0.0, lo = 0.0, hi = 0.0;
  void* dst = nullptr;  // N x OC of `out`
};

class QConvPoolStage final : public QConvStage {
 public:
  QConvPoolStage(const QConvRequant& r, size_t OC, const QConvPoolParams& p);
  void begin(size_t OH, size_t OW, size_t slots) override;
  void commit(size_t slot, size_t p0, size_t n, size_t c0, size_t m, const void* tile, size_t ld) override;
  bool per_image() const override { return true; }
  void finish_image(size_t n) override;

 private:
  size_t OC_, count_ = 0, slots_ = 0;
  QConvPoolParams p_;
  std::vector<int64_t> isum_;  // slots x OC (integer outputs)
  std::vector<double> fsum_;   // slots x OC (float32 output)
};

// Pixel shuffle by r (seed I16): channel c * r * r + i * r + j of pixel (oh, ow) to pixel (oh * r + i, ow * r + j),
// channel c, of the (N, OH * r, OW * r, OC / (r * r)) output. runs: the layer packed its channels in the order
// (i, j, c), so that r * C consecutive channels land side by side (groups == 1).
class QConvShuffleStage final : public QConvStage {
 public:
  QConvShuffleStage(const QConvRequant& r, size_t OC, size_t factor, void* dst, bool runs);
  void begin(size_t OH, size_t OW, size_t slots) override;
  void commit(size_t slot, size_t p0, size_t n, size_t c0, size_t m, const void* tile, size_t ld) override;

 private:
  size_t OC_, r_, C_, OH_ = 0, OW_ = 0;
  bool runs_;
  uint8_t* dst_;
  std::vector<size_t> chan_off_;  // per channel (packed order): its offset from pixel (oh * r, ow * r), channel 0
};

}  // namespace nnkern
