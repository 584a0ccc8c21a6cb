// The GEMM-based FP32 convolutions (ops/conv/algorithm.h): "im2col" (the baseline, seed O8; auto takes it for
// pointwise layers, a plain GEMM over the input rows; it runs the dispatched GEMM kernel) and "indirect" (the last
// entry: it applies to every layer; a test may name its GEMM kernel).
#include <algorithm>
#include <mutex>
#include <vector>

#include "core/checked.h"
#include "core/kernel_family.h"
#include "core/threadpool.h"
#include "core/workspace.h"
#include "kernels/f32_gemm_list.h"
#include "ops/conv/layer.h"

namespace nnkern {
namespace {

// The im2col matrix is built and multiplied in blocks of rows of about this size (at least kMinBlockRows), so a
// large batch never needs a KH*KW-times copy of its whole input, and each block's output is still in cache for
// the sigmoid / SiLU post-op.
constexpr size_t kColsBlockBytes = size_t(4) << 20;
constexpr size_t kMinBlockRows = 256;
// Pixel tiles per indirect task: enough work per task to amortize its set-up, small enough to balance.
constexpr size_t kTilesPerTask = 16;

// The GEMM kernel a test named (a kernel of the f32_gemm family, or an ISA level's), else the dispatched one.
const F32GemmKernel& gemm_kernel(const ConvCall& c) { return f32_gemm_family().named_or_dispatched(c.kernel); }

// The post-op over rows [r0, r1) of the output, n channels from channel c0, threaded over rows.
void post_rows(const ConvCall& c, size_t r0, size_t r1, size_t c0, size_t n) {
  parallel_for_ranges(r1 - r0, [&](size_t b, size_t e) {
    c.L.post_ops(c, c.y + (r0 + b) * c.ldc + c0, e - b, n);
  });
}

class Im2col final : public ConvAlgorithm {
 public:
  explicit Im2col(const PackedConv2d& layer) : ConvAlgorithm("im2col", layer) {}

  bool applicable(const ConvCall&) const override { return true; }
  bool preferred(const ConvCall&) const override { return L.geometry().pointwise(); }
  size_t workspace_bytes(const ConvCall& c) const override { return Layout(c).l.bytes; }

  void run(const ConvCall& c, void* workspace) const override {
    const ConvGeometry& geo = L.geometry();
    const Layout lay(c);
    unsigned char* ws = static_cast<unsigned char*>(workspace);
    const bool pw = geo.pointwise();
    const size_t icg = geo.icg(), ocg = geo.ocg(), K = geo.kg(), IC = geo.IC, OC = geo.OC, M = c.M();
    const size_t tap = icg * sizeof(float);
    float* zero = reinterpret_cast<float*>(ws + lay.zero_off);
    float* cols = reinterpret_cast<float*>(ws + lay.cols_off);
    if (!pw) std::fill(zero, zero + icg, 0.0f);
    const std::vector<std::unique_ptr<PackedF32Gemm>>& w = weights();
    for (size_t r0 = 0; r0 < M; r0 += lay.rows) {
      const size_t m = std::min(lay.rows, M - r0);
      for (size_t g = 0; g < geo.groups; ++g) {
        F32Epilogue ep = L.epilogue(c);
        ep.bias = L.bias() ? L.bias() + g * ocg : nullptr;
        float* y = c.y + r0 * c.ldc + g * ocg;
        if (pw) {  // the input rows themselves, at the group's channel offset
          w[g]->run(m, c.x + r0 * IC + g * icg, IC, y, c.ldc, ep);
          continue;
        }
        conv_im2col(geo, c.s, reinterpret_cast<const unsigned char*>(c.x + g * icg), IC * sizeof(float), tap,
                    reinterpret_cast<const unsigned char*>(zero), r0, r0 + m, reinterpret_cast<unsigned char*>(cols));
        w[g]->run(m, cols, K, y, c.ldc, ep);
      }
      post_rows(c, r0, r0 + m, 0, OC);
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

  // Each group's weights packed for PackedF32Gemm (W[ocg, kg] row-major: C = X_cols W^T), which runs the kernel
  // dispatched at each call (repacking per call under another ISA cap).
  const std::vector<std::unique_ptr<PackedF32Gemm>>& weights() const {
    std::lock_guard<std::mutex> lock(mu_);
    if (packed_.empty()) {
      const ConvGeometry& geo = L.geometry();
      for (size_t g = 0; g < geo.groups; ++g)
        packed_.push_back(
            std::make_unique<PackedF32Gemm>(L.raw() + g * geo.ocg() * geo.kg(), geo.ocg(), geo.kg(), geo.kg()));
    }
    return packed_;
  }

  mutable std::mutex mu_;
  mutable std::vector<std::unique_ptr<PackedF32Gemm>> packed_;
};

class Indirect final : public ConvAlgorithm {
 public:
  explicit Indirect(const PackedConv2d& layer) : ConvAlgorithm("indirect", layer) {}

  bool applicable(const ConvCall&) const override { return true; }

  void run(const ConvCall& c, void*) const override {
    const F32GemmKernel& k = gemm_kernel(c);
    const ConvGeometry& geo = L.geometry();
    const ConvTapWeights& w = weights(size_t(k.mr));
    const size_t MR = size_t(k.mr), NR = size_t(k.nr), ks = geo.ks(), icg = geo.icg(), ocg = geo.ocg();
    const size_t M = c.M(), tiles = (M + NR - 1) / NR, blocks = (tiles + kTilesPerTask - 1) / kTilesPerTask;
    const std::shared_ptr<const ConvIndirection> ind = L.indirection(c.s, NR);
    const F32Epilogue base_ep = L.epilogue(c);
    parallel_for_3d(geo.groups, w.panels, blocks, [&](size_t g, size_t panel, size_t block) {
      const size_t i = panel * MR, mi = std::min(MR, ocg - i);
      F32Epilogue ep = base_ep;
      ep.bias = L.bias() ? L.bias() + g * ocg + i : nullptr;
      const float* a = w.w.data() + (g * w.panels + panel) * w.panel_floats;
      const size_t b_offset = reinterpret_cast<size_t>(c.x + g * icg) - kConvNominalBase;
      const size_t t0 = block * kTilesPerTask, t1 = std::min(tiles, t0 + kTilesPerTask);
      for (size_t tile = t0; tile < t1; ++tile) {
        const size_t p0 = tile * NR, nj = std::min(NR, M - p0);
        k.igemm(mi, nj, icg, ks, a, reinterpret_cast<const float* const*>(ind->ptrs.data() + tile * ks * NR),
                ind->zero.data(), b_offset, c.y + p0 * c.ldc + g * ocg + i, c.ldc, &ep);
      }
      const size_t p0 = t0 * NR, p1 = std::min(M, t1 * NR);
      L.post_ops(c, c.y + p0 * c.ldc + g * ocg + i, p1 - p0, mi);
    });
  }

 private:
  const ConvTapWeights& weights(size_t MR) const {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& p : packed_)
      if (p->mr == MR) return *p;
    packed_.push_back(conv_pack_taps(L, MR, false));
    return *packed_.back();
  }

  mutable std::mutex mu_;
  mutable std::vector<std::unique_ptr<ConvTapWeights>> packed_;  // one per kernel tile height used
};

}  // namespace

std::unique_ptr<ConvAlgorithm> make_conv_im2col(const PackedConv2d& layer) { return std::make_unique<Im2col>(layer); }
std::unique_ptr<ConvAlgorithm> make_conv_indirect(const PackedConv2d& layer) {
  return std::make_unique<Indirect>(layer);
}

}  // namespace nnkern
