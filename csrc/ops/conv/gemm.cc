// The GEMM-based FP32 convolutions (ops/conv/layer.h): "im2col" (the baseline, seed O8) and "indirect".
#include <algorithm>

#include "core/checked.h"
#include "core/threadpool.h"
#include "core/workspace.h"
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

size_t block_rows(const ConvCall& c) {
  const size_t row = c.L.geometry().kg() * sizeof(float);
  return std::min(c.M(), std::max(kMinBlockRows, kColsBlockBytes / row));
}

struct Im2colLayout {
  WorkspaceLayout l;
  size_t zero_off, cols_off;
  explicit Im2colLayout(const ConvCall& c) {
    const ConvGeometry& geo = c.L.geometry();
    zero_off = l.add(geo.pointwise() ? 0 : geo.icg() * sizeof(float));
    cols_off = l.add(geo.pointwise() ? 0 : checked_mul(block_rows(c), geo.kg(), sizeof(float)));
  }
};

// The post-op over rows [r0, r1) of the output, n channels from channel c0, threaded over rows.
void post_rows(const ConvCall& c, size_t r0, size_t r1, size_t c0, size_t n) {
  const size_t OC = c.L.geometry().OC;
  parallel_for_ranges(r1 - r0, [&](size_t b, size_t e) { c.L.post_activation(c.y + (r0 + b) * OC + c0, e - b, n, OC); });
}

}  // namespace

size_t conv_im2col_workspace(const ConvCall& c) { return Im2colLayout(c).l.bytes; }

void conv_im2col_run(const ConvCall& c, void* workspace) {
  const ConvGeometry& geo = c.L.geometry();
  const Im2colLayout lay(c);
  unsigned char* ws = static_cast<unsigned char*>(workspace);
  const bool pw = geo.pointwise();
  const size_t icg = geo.icg(), ocg = geo.ocg(), K = geo.kg(), IC = geo.IC, OC = geo.OC, M = c.M();
  const size_t tap = icg * sizeof(float);
  float* zero = reinterpret_cast<float*>(ws + lay.zero_off);
  float* cols = reinterpret_cast<float*>(ws + lay.cols_off);
  if (!pw) std::fill(zero, zero + icg, 0.0f);
  const size_t rows = block_rows(c);
  for (size_t r0 = 0; r0 < M; r0 += rows) {
    const size_t m = std::min(rows, M - r0);
    for (size_t g = 0; g < geo.groups; ++g) {
      F32Epilogue ep = c.L.epilogue();
      ep.bias = c.L.bias() ? c.L.bias() + g * ocg : nullptr;
      float* y = c.y + r0 * OC + g * ocg;
      if (pw) {  // the input rows themselves, at the group's channel offset
        c.L.gemm(g).run(m, c.x + r0 * IC + g * icg, IC, y, OC, ep);
        continue;
      }
      conv_im2col(geo, c.s, reinterpret_cast<const unsigned char*>(c.x + g * icg), IC * sizeof(float), tap,
                  reinterpret_cast<const unsigned char*>(zero), r0, r0 + m, reinterpret_cast<unsigned char*>(cols));
      c.L.gemm(g).run(m, cols, K, y, OC, ep);
    }
    post_rows(c, r0, r0 + m, 0, OC);
  }
}

void conv_indirect_run(const ConvCall& c) {
  const F32GemmKernel& k = c.k;
  const ConvGeometry& geo = c.L.geometry();
  const ConvTapWeights& w = c.L.tap_weights(size_t(k.mr));
  const size_t MR = size_t(k.mr), NR = size_t(k.nr), ks = geo.ks(), icg = geo.icg(), ocg = geo.ocg();
  const size_t OC = geo.OC, M = c.M(), tiles = (M + NR - 1) / NR, blocks = (tiles + kTilesPerTask - 1) / kTilesPerTask;
  const std::shared_ptr<const ConvIndirection> ind = c.L.indirection(c.s, NR);
  const F32Epilogue base_ep = c.L.epilogue();
  parallel_for_3d(geo.groups, w.panels, blocks, [&](size_t g, size_t panel, size_t block) {
    const size_t i = panel * MR, mi = std::min(MR, ocg - i);
    F32Epilogue ep = base_ep;
    ep.bias = c.L.bias() ? c.L.bias() + g * ocg + i : nullptr;
    const float* a = w.w.data() + (g * w.panels + panel) * w.panel_floats;
    const size_t b_offset = reinterpret_cast<size_t>(c.x + g * icg) - kConvNominalBase;
    const size_t t0 = block * kTilesPerTask, t1 = std::min(tiles, t0 + kTilesPerTask);
    for (size_t tile = t0; tile < t1; ++tile) {
      const size_t p0 = tile * NR, nj = std::min(NR, M - p0);
      k.igemm(mi, nj, icg, ks, a, reinterpret_cast<const float* const*>(ind->ptrs.data() + tile * ks * NR),
              ind->zero.data(), b_offset, c.y + p0 * OC + g * ocg + i, OC, &ep);
    }
    const size_t p0 = t0 * NR, p1 = std::min(M, t1 * NR);
    c.L.post_activation(c.y + p0 * OC + g * ocg + i, p1 - p0, mi, OC);
  });
}

}  // namespace nnkern
