// The algorithms of Conv2d (FP32). As for QConv2d (ops/qconv/algorithm.h): one object per layer and table entry
// that owns its kernel family, its packed weights (packed on its first call), its applicability and auto rule, its
// workspace and its run; the layer (ops/conv/layer.h) holds them in the table's order. Adding one is a file defining
// `std::unique_ptr<ConvAlgorithm> make_conv_<name>(const PackedConv2d&)` and a line in NNKERN_CONV_ALGORITHMS.
// conv_algorithm_families() answers which kernel family each entry runs.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/precision.h"
#include "ops/conv/geometry.h"

// The table, in the order "auto" tries it (core/algorithm.h), each entry with the kernel family it runs (the tests
// sweep that family's kernels through it):
//   depthwise  groups == IC == OC: channels in vector lanes (the tile driver, ops/conv/tiles.cc)
//   bf16       im2col rows rounded to bf16 on the bf16 GEMM kernels: auto takes it at precision "medium" only
//              (ops/conv/bf16.cc)
//   winograd   F(4x4, 3x3) on 3x3 stride-1 layers: 4x fewer multiplies, a larger error bound; auto takes it only
//              at precision "high" or below (ops/conv/winograd.cc)
//   winograd_2x2  F(2x2, 3x3): 2.25x fewer multiplies, a tighter bound than F(4x4)
//   im2col     windows copied into rows of the packed FP32 GEMM; 1x1 stride-1 unpadded: the input rows themselves
//   dot        a few output channels in registers, input channels in lanes (tiles)
//   mgemm      output channels x pixels in registers, adjacent kernel columns' inputs reused (tiles)
//   direct     output channels x pixels in registers straight from the input (tiles)
//   indirect   the GEMM kernels' indirect form over a cached indirection buffer (ops/conv/gemm.cc)
#define NNKERN_CONV_ALGORITHMS(X)                                                              \
  X(depthwise, f32_dwconv) X(bf16, bf16_gemm) X(winograd, f32_winograd) X(winograd_2x2, f32_winograd) X(im2col, f32_gemm) \
  X(dot, f32_conv_dot) X(mgemm, f32_conv_mgemm) X(direct, f32_conv_direct) X(indirect, f32_gemm)

namespace nnkern {

class PackedConv2d;

// One call as the algorithms see it: the input, and the output y with ldc floats from one pixel to the next (a
// channel slice of a wider buffer where ldc > OC). kernel: "" or a kernel's name (tests: the algorithm uses it where
// it is one of its family's, or for the GEMM-based ones an ISA level's name).
struct ConvCall {
  const PackedConv2d& L;
  ConvInputShape s;
  size_t OH, OW;
  const float* x;
  float* y;
  size_t ldc;
  std::string kernel;  // a copy: calls from shapes alone pass a temporary ""
  Float32Precision precision = Float32Precision::highest;  // what auto may pick (core/precision.h)
  // Added to the output before the activation (a ResNet shortcut): N x OH x OW x OC floats, or null. The kernels
  // then store without their clamp, and the post-ops add it and apply the activation (PackedConv2d::post_ops).
  const float* residual = nullptr;
  size_t M() const { return s.N * OH * OW; }
};

class ConvAlgorithm {
 public:
  ConvAlgorithm(const char* name, const PackedConv2d& layer) : name(name), L(layer) {}
  virtual ~ConvAlgorithm() = default;
  ConvAlgorithm(const ConvAlgorithm&) = delete;
  ConvAlgorithm& operator=(const ConvAlgorithm&) = delete;

  virtual bool applicable(const ConvCall& c) const = 0;
  virtual bool preferred(const ConvCall& c) const { return true; }  // auto's rule, where it applies
  virtual size_t workspace_bytes(const ConvCall& c) const { return 0; }
  virtual void run(const ConvCall& c, void* workspace) const = 0;

  const char* const name;

 protected:
  const PackedConv2d& L;
};

#define NNKERN_CONV_DECLARE_(name, family) std::unique_ptr<ConvAlgorithm> make_conv_##name(const PackedConv2d& layer);
NNKERN_CONV_ALGORITHMS(NNKERN_CONV_DECLARE_)
#undef NNKERN_CONV_DECLARE_

// Each entry's name and the kernel family it runs (`_C.conv2d_algorithm_families()`), in the table's order.
std::vector<std::pair<std::string, std::string>> conv_algorithm_families();

}  // namespace nnkern
