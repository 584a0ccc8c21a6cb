// An inverted-residual block (MobileNet-v2's): an optional 1x1 expansion, a depthwise KxK convolution and a 1x1
// projection, each a packed FP32 layer (ops/conv/layer.h) with its own bias and activation, plus an optional residual
// (the block's input added to the projection's output). Run layer by layer, the expanded and depthwise activations
// (e.g. 112 x 112 x 96 floats, 4.8 MB) go to memory and come back; here each band of output rows is computed
// through all three layers while its slices of them (about 1 MB) are still in the cache: the expansion of the
// input rows the band's depthwise windows need, the depthwise rows, then the projection into the output. Bands
// run in parallel, each with its own slices; every layer runs the algorithm and kernel it would run alone, so
// the result is bit for bit the layer-by-layer one.
#pragma once
#include <array>
#include <cstddef>
#include <string>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "ops/conv/layer.h"

namespace nnkern {

class FusedInvertedResidual {
 public:
  // expand: null, or 1x1 / stride 1 / unpadded / groups 1 from IC to the hidden width; dw: depthwise on the hidden
  // width (any window, stride, padding, dilation); project: 1x1 / stride 1 / unpadded / groups 1 to OC. residual:
  // the input is added to the output (needs IC == OC and a depthwise that keeps the spatial size).
  // std::invalid_argument if the layers do not chain.
  // algorithms: the "conv2d" algorithm each layer runs ("auto" or a table entry), in the order expand, dw, project.
  FusedInvertedResidual(std::shared_ptr<const PackedConv2d> expand, std::shared_ptr<const PackedConv2d> dw,
                        std::shared_ptr<const PackedConv2d> project, bool residual,
                        std::array<std::string, 3> algorithms = {"auto", "auto", "auto"});

  // y (N x OH x OW x OC) = block(x (N x H x W x IC)); x and y must not overlap.
  void run(size_t N, size_t H, size_t W, const float* x, float* y) const;
  size_t out_h(size_t H) const { return dw_->geometry().OH(H); }
  size_t out_w(size_t W) const { return dw_->geometry().OW(W); }
  size_t rows_per_band(size_t H, size_t W) const;  // the band height a call on this input uses

 private:
  // The depthwise layer with its vertical padding replaced by (top, bottom): a band's rows see the image border
  // only where the band touches it.
  const PackedConv2d& dw_variant(size_t top, size_t bottom) const;

  std::shared_ptr<const PackedConv2d> expand_, dw_, project_;
  bool residual_;
  std::array<std::string, 3> algorithms_;
  size_t IC_, hidden_, OC_;
  mutable std::mutex mu_;
  mutable std::map<std::pair<size_t, size_t>, std::unique_ptr<PackedConv2d>> variants_;
};

}  // namespace nnkern
