// The im2col convolutions (ops/conv/algorithm.h): windows copied into rows, in blocks of rows, multiplied by the
// weights of each group packed once for a row GEMM; a 1x1, stride-1, unpadded layer multiplies the input rows
// themselves. One template over the GEMM: "im2col" on the FP32 one (ops/conv/gemm.cc), "bf16" on the bf16 one
// (ops/conv/bf16.cc). A Gemm policy provides
//   Gemm::Packed                       the packed weights of one group
//   Gemm::kName                        the table entry's name
//   Gemm::kAddsResidual                run adds the epilogue's residual (else the post-ops do)
//   Gemm::preferred(layer, call)       auto's rule
//   Gemm::pack(w, ocg, kg)             W[ocg, kg] row-major -> a new Packed
//   Gemm::run(packed, m, x, ldx, y, ldc, ep)   y = epilogue(x W^T) for m rows of x, ldx floats apart
#pragma once
#include <algorithm>
#include <memory>
#include <mutex>
#include <vector>

#include "core/checked.h"
#include "core/threadpool.h"
#include "core/workspace.h"
#include "ops/conv/layer.h"

namespace nnkern {

template <class Gemm>
class Im2colConv final : public ConvAlgorithm {
 public:
  explicit Im2colConv(const PackedConv2d& layer) : ConvAlgorithm(Gemm::kName, layer) {}

  bool applicable(const ConvCall&) const override { return true; }
  bool preferred(const ConvCall& c) const override { return Gemm::preferred(L, c); }
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
    const std::vector<std::unique_ptr<typename Gemm::Packed>>& w = weights();
    for (size_t r0 = 0; r0 < M; r0 += lay.rows) {
      const size_t m = std::min(lay.rows, M - r0);
      for (size_t g = 0; g < geo.groups; ++g) {
        F32Epilogue ep = L.epilogue(c, Gemm::kAddsResidual);
        ep.bias = L.bias() ? L.bias() + g * ocg : nullptr;
        float* y = c.y + r0 * c.ldc + g * ocg;
        if (Gemm::kAddsResidual) ep.residual = L.residual_at(c, y);
        if (pw) {  // the input rows themselves, at the group's channel offset
          Gemm::run(*w[g], m, c.x + r0 * IC + g * icg, IC, y, c.ldc, ep);
          continue;
        }
        conv_im2col(geo, c.s, reinterpret_cast<const unsigned char*>(c.x + g * icg), IC * sizeof(float),
                    icg * sizeof(float), reinterpret_cast<const unsigned char*>(zero), r0, r0 + m,
                    reinterpret_cast<unsigned char*>(cols));
        Gemm::run(*w[g], m, cols, K, y, c.ldc, ep);
      }
      // The post-op over the block's rows, threaded over rows.
      parallel_for_ranges(m, [&](size_t b, size_t e) {
        L.post_ops(c, c.y + (r0 + b) * c.ldc, e - b, OC, Gemm::kAddsResidual);
      });
    }
  }

 private:
  // The im2col matrix is built and multiplied in blocks of rows of about this size (at least kMinBlockRows), so a
  // large batch never needs a KH*KW-times copy of its whole input, and each block's output is still in cache for
  // the sigmoid / SiLU post-op.
  static constexpr size_t kColsBlockBytes = size_t(4) << 20;
  static constexpr size_t kMinBlockRows = 256;

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

  // Each group's weights (W[ocg, kg] row-major: C = X_cols W^T), packed on the first call; the GEMMs run the kernel
  // dispatched at each call (repacking per call under another ISA cap).
  const std::vector<std::unique_ptr<typename Gemm::Packed>>& weights() const {
    std::lock_guard<std::mutex> lock(mu_);
    if (packed_.empty()) {
      const ConvGeometry& geo = L.geometry();
      for (size_t g = 0; g < geo.groups; ++g)
        packed_.push_back(Gemm::pack(L.raw() + g * geo.ocg() * geo.kg(), geo.ocg(), geo.kg()));
    }
    return packed_;
  }

  mutable std::mutex mu_;
  mutable std::vector<std::unique_ptr<typename Gemm::Packed>> packed_;
};

}  // namespace nnkern
