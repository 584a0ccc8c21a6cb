// The bf16 FP32 convolution (ops/conv/algorithm.h, float32 precision "medium"): windows copied into rows (im2col, in
// blocks of rows; pointwise stride-1 unpadded layers read the input rows themselves), each row rounded to bf16 as
// the packed bf16 GEMM reads it (ops/bf16/bf16.h), the weights rounded and packed once per group. auto takes it at
// precision "medium" for every layer the depthwise entry does not take; its bound is the GEMM's over the rounded
// operands (nnkern.Conv2d's docstring).
#include <algorithm>
#include <mutex>
#include <vector>

#include "core/checked.h"
#include "core/threadpool.h"
#include "core/workspace.h"
#include "ops/bf16/bf16.h"
#include "ops/conv/layer.h"

namespace nnkern {
namespace {

// As the im2col entry (ops/conv/gemm.cc): blocks of rows of about this size, at least kMinBlockRows.
constexpr size_t kColsBlockBytes = size_t(4) << 20;
constexpr size_t kMinBlockRows = 256;

class Bf16Conv final : public ConvAlgorithm {
 public:
  explicit Bf16Conv(const PackedConv2d& layer) : ConvAlgorithm("bf16", layer) {}

  bool applicable(const ConvCall&) const override { return true; }
  bool preferred(const ConvCall& c) const override { return c.precision == Float32Precision::medium; }
  size_t workspace_bytes(const ConvCall& c) const override { return Layout(c).l.bytes; }

  void run(const ConvCall& c, void* workspace) const override {
    const ConvGeometry& geo = L.geometry();
    const Layout lay(c);
    unsigned char* ws = static_cast<unsigned char*>(workspace);
    const bool pw = geo.pointwise();
    const size_t icg = geo.icg(), ocg = geo.ocg(), K = geo.kg(), IC = geo.IC, OC = geo.OC, M = c.M();
    float* zero = reinterpret_cast<float*>(ws + lay.zero_off);
    float* cols = reinterpret_cast<float*>(ws + lay.cols_off);
    if (!pw) std::fill(zero, zero + icg, 0.0f);
    const std::vector<std::unique_ptr<PackedBf16Gemm>>& w = weights();
    for (size_t r0 = 0; r0 < M; r0 += lay.rows) {
      const size_t m = std::min(lay.rows, M - r0);
      for (size_t g = 0; g < geo.groups; ++g) {
        F32Epilogue ep = L.epilogue(c);
        ep.bias = L.bias() ? L.bias() + g * ocg : nullptr;
        Bf16Operand x;
        x.cs = 1;
        if (pw) {  // the input rows themselves, at the group's channel offset
          x.data = c.x + r0 * IC + g * icg;
          x.rs = IC;
        } else {
          conv_im2col(geo, c.s, reinterpret_cast<const unsigned char*>(c.x + g * icg), IC * sizeof(float),
                      icg * sizeof(float), reinterpret_cast<const unsigned char*>(zero), r0, r0 + m,
                      reinterpret_cast<unsigned char*>(cols));
          x.data = cols;
          x.rs = K;
        }
        w[g]->run(m, x, c.y + r0 * c.ldc + g * ocg, c.ldc, ep);
      }
      parallel_for_ranges(m, [&](size_t b, size_t e) { L.post_ops(c, c.y + (r0 + b) * c.ldc, e - b, OC); });
    }
  }

 private:
  struct Layout {
    WorkspaceLayout l;
    size_t rows, zero_off, cols_off;
    explicit Layout(const ConvCall& c) {
      const ConvGeometry& geo = c.L.geometry();
      const size_t row = geo.kg() * sizeof(float);
      rows = std::min(c.M(), std::max(kMinBlockRows, kColsBlockBytes / row));
      zero_off = l.add(geo.pointwise() ? 0 : geo.icg() * sizeof(float));
      cols_off = l.add(geo.pointwise() ? 0 : checked_mul(rows, geo.kg(), sizeof(float)));
    }
  };

  // Each group's weights W[ocg, kg] rounded and packed on the first call (repacked per call under another cap).
  const std::vector<std::unique_ptr<PackedBf16Gemm>>& weights() const {
    std::lock_guard<std::mutex> lock(mu_);
    if (packed_.empty()) {
      const ConvGeometry& geo = L.geometry();
      for (size_t g = 0; g < geo.groups; ++g) {
        Bf16Operand w;
        w.data = L.raw() + g * geo.ocg() * geo.kg();
        w.rs = geo.kg();
        w.cs = 1;
        packed_.push_back(std::make_unique<PackedBf16Gemm>(w, geo.ocg(), geo.kg()));
      }
    }
    return packed_;
  }

  mutable std::mutex mu_;
  mutable std::vector<std::unique_ptr<PackedBf16Gemm>> packed_;
};

}  // namespace

std::unique_ptr<ConvAlgorithm> make_conv_bf16(const PackedConv2d& layer) { return std::make_unique<Bf16Conv>(layer); }

}  // namespace nnkern
