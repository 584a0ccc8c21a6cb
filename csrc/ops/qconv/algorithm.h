// The algorithms of QConv2d. Each is one object per layer (ops/qconv/layer.h holds them, in the table's order) that
// owns its kernel family, its packed weights (packed on its first call, per kernel), its applicability rule, its
// workspace size and its run; every one stores through the layer's output stage (ops/qconv/stage.h). Adding one is
// a file defining `std::unique_ptr<QConvAlgorithm> make_qconv_<name>(const PackedQConv2d&)` and a line in
// NNKERN_QCONV_ALGORITHMS.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "ops/qconv/stage.h"
#include "ops/qgemm/qgemm.h"

// The table, in the order "auto" tries it: the first entry that applies and prefers the call (core/algorithm.h).
//   depthwise  groups == IC: channels in vector lanes, taps in the loop (ops/qconv/depthwise.cc)
//   low_ofm    groups == 1, OC <= 4: output pixels in vector lanes (ops/qconv/low_ofm.cc)
//   direct     groups == 1: a padded copy walked with strides, pixels x channels in registers (ops/qconv/direct.cc)
//   im2col     windows copied into rows of a GEMM; 1x1 stride-1 unpadded: the input rows themselves
//   indirect   the GEMM kernels' indirect form over a cached indirection buffer (ops/qconv/indirect.cc)
// direct before im2col: both take the large windows over 1-3 channels (stems), direct where it has a SIMD kernel.
#define NNKERN_QCONV_ALGORITHMS(X) X(depthwise) X(low_ofm) X(direct) X(im2col) X(indirect)

namespace nnkern {

// Pointwise layers run "im2col" (the GEMM on the input rows), but those of fewer input channels per group run
// "indirect" with a kernel that has no whole-panel form (QGemmKernel::run_panels): at K = 16-24 the GEMM driver's
// per-panel calls cost more than the indirection (bench/decisions.md "QConv2d: pointwise layers of few channels",
// "INT8 GEMM: whole panels in one call").
constexpr size_t kQConvPointwiseIndirectBelow = 32;

class PackedQConv2d;

// One call as the algorithms see it: the layer, the input and the kernel a test asked for by name ("" for the
// dispatched ones; an algorithm uses it where it is a kernel of its own family, its dispatched kernel otherwise).
struct QConvCall {
  const PackedQConv2d& L;
  size_t N, H, W, OH, OW;
  QType x_type;
  const void* x;
  std::string kernel;  // a copy: calls from shapes alone pass a temporary ""
  size_t M() const { return N * OH * OW; }
};

class QConvAlgorithm {
 public:
  QConvAlgorithm(const char* name, const PackedQConv2d& layer) : name(name), L(layer) {}
  virtual ~QConvAlgorithm() = default;
  QConvAlgorithm(const QConvAlgorithm&) = delete;
  QConvAlgorithm& operator=(const QConvAlgorithm&) = delete;

  virtual bool applicable(const QConvCall& c) const = 0;
  virtual bool preferred(const QConvCall& c) const { return true; }  // auto's rule, where it applies
  virtual size_t workspace_bytes(const QConvCall& c) const { return 0; }
  virtual void run(const QConvCall& c, QConvStage& out, void* workspace) const = 0;

  const char* const name;

 protected:
  const PackedQConv2d& L;
};

#define NNKERN_QCONV_DECLARE_(name) std::unique_ptr<QConvAlgorithm> make_qconv_##name(const PackedQConv2d& layer);
NNKERN_QCONV_ALGORITHMS(NNKERN_QCONV_DECLARE_)
#undef NNKERN_QCONV_DECLARE_

}  // namespace nnkern
