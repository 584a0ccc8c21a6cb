// The GEMM-based FP32 convolutions (ops/conv/algorithm.h): "im2col" (the baseline, seed O8: the template of
// ops/conv/im2col.h on the FP32 GEMM; auto takes it for pointwise layers, a plain GEMM over the input rows) and "indirect" (the last
// entry: it applies to every layer; a test may name its GEMM kernel).
#include <algorithm>
#include <mutex>
#include <vector>

#include "core/checked.h"
#include "core/kernel_family.h"
#include "core/threadpool.h"
#include "core/workspace.h"
#include "kernels/f32_gemm_list.h"
#include "ops/conv/im2col.h"
#include "ops/conv/layer.h"

namespace nnkern {
namespace {

// Pixel tiles per indirect task: enough work per task to amortize its set-up, small enough to balance.
constexpr size_t kTilesPerTask = 16;

// The GEMM kernel a test named (a kernel of the f32_gemm family, or an ISA level's), else the dispatched one.
const F32GemmKernel& gemm_kernel(const ConvCall& c) { return f32_gemm_family().named_or_dispatched(c.kernel); }

// The FP32 row GEMM of the im2col template (ops/conv/im2col.h); auto takes it for pointwise layers.
struct F32Rows {
  using Packed = PackedF32Gemm;
  static constexpr const char* kName = "im2col";
  static constexpr bool kAddsResidual = true;  // its tiles add the epilogue's residual
  static bool preferred(const PackedConv2d& L, const ConvCall&) { return L.geometry().pointwise(); }
  static std::unique_ptr<Packed> pack(const float* w, size_t ocg, size_t kg) {
    return std::make_unique<Packed>(w, ocg, kg, kg);
  }
  static void run(const Packed& p, size_t m, const float* x, size_t ldx, float* y, size_t ldc, const F32Epilogue& ep) {
    p.run(m, x, ldx, y, ldc, ep);
  }
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
    const F32Epilogue base_ep = L.epilogue(c, true);  // the tiles add the residual
    // The tiles of one panel (MR channels) over one block of pixels.
    const auto tiles_of = [&](size_t g, size_t panel, size_t block) {
      const size_t i = panel * MR, mi = std::min(MR, ocg - i);
      F32Epilogue ep = base_ep;
      ep.bias = L.bias() ? L.bias() + g * ocg + i : nullptr;
      const float* a = w.w.data() + (g * w.panels + panel) * w.panel_floats;
      const size_t b_offset = reinterpret_cast<size_t>(c.x + g * icg) - kConvNominalBase;
      const size_t t0 = block * kTilesPerTask, t1 = std::min(tiles, t0 + kTilesPerTask);
      for (size_t tile = t0; tile < t1; ++tile) {
        const size_t p0 = tile * NR, nj = std::min(NR, M - p0);
        float* y = c.y + p0 * c.ldc + g * ocg + i;
        ep.residual = L.residual_at(c, y);
        k.igemm(mi, nj, icg, ks, a, reinterpret_cast<const float* const*>(ind->ptrs.data() + tile * ks * NR),
                ind->zero.data(), b_offset, y, c.ldc, &ep);
      }
    };
    const auto pixels = [&](size_t block) {  // [p0, p1): the block's pixels
      return std::make_pair(block * kTilesPerTask * NR, std::min(M, (block + 1) * kTilesPerTask * NR));
    };
    // Sigmoid, SiLU and tanh run their kernels on what a task stored: with every panel of a block in one task that
    // is the block's whole pixels (all channels: one contiguous run where there is one group), where per panel it
    // is MR channels a pixel, short runs that cost the kernels more than the separate op's pass. Where the blocks
    // alone give every thread four tasks or more.
    const ConvActivation act = L.activation();
    const bool whole_pixels = (act == ConvActivation::sigmoid || act == ConvActivation::silu ||
                               act == ConvActivation::tanh) && w.panels > 1 &&
                              geo.groups * blocks >= 4 * size_t(get_num_threads());
    if (whole_pixels) {
      parallel_for_2d(geo.groups, blocks, [&](size_t g, size_t block) {
        for (size_t panel = 0; panel < w.panels; ++panel) tiles_of(g, panel, block);
        const auto [p0, p1] = pixels(block);
        L.post_ops(c, c.y + p0 * c.ldc + g * ocg, p1 - p0, ocg, true);
      });
    } else {
      parallel_for_3d(geo.groups, w.panels, blocks, [&](size_t g, size_t panel, size_t block) {
        tiles_of(g, panel, block);
        const auto [p0, p1] = pixels(block);
        const size_t i = panel * MR;
        L.post_ops(c, c.y + p0 * c.ldc + g * ocg + i, p1 - p0, std::min(MR, ocg - i), true);
      });
    }
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

std::unique_ptr<ConvAlgorithm> make_conv_im2col(const PackedConv2d& layer) {
  return std::make_unique<Im2colConv<F32Rows>>(layer);
}
std::unique_ptr<ConvAlgorithm> make_conv_indirect(const PackedConv2d& layer) {
  return std::make_unique<Indirect>(layer);
}

}  // namespace nnkern
