// The Winograd FP32 convolutions (ops/conv/algorithm.h) of 3x3, stride-1, undilated layers: "winograd" F(4x4, 3x3)
// (36 products per 16 outputs and channel pair against 144: 4x fewer) and "winograd_2x2" F(2x2, 3x3) (16 against
// 36). Weights are transformed once, in double, and packed as the FP32 GEMM kernel's panels, one set per position
// of the alpha x alpha tile. A call runs blocks of T output tiles (and, where there are fewer blocks than threads,
// chunks of the output channels), each on one thread with its own slice of the workspace, sized so the block's
// transformed inputs V and products M stay in L2:
//   1. each tile's input patch (padding read from a zero row) transformed into V[k][t][IC] (kernels/f32_winograd.h);
//   2. per group, position k and panel of MR output channels: M[k][t][oc] = U[k] V[k] on the GEMM micro-kernel
//      (plain form, the whole K = IC / groups in registers, its A panel in L1 for all T tiles);
//   3. each tile's output transform, with the bias and the relu / relu6 clamp, into the output; the other
//      activations over the tile's rows just stored.
// A tile whose transforms met a non-finite value (an Inf or NaN input, or a transform that overflowed) is computed
// again by the direct sum, so NaN and Inf propagate as in the other algorithms. Results do not depend on T or
// the thread count: every M element is one FMA chain over K in the kernel (kernels/f32_gemm.h).
//
// Accuracy (Conv2d's docstring derives it, tests/test_winograd.py checks it against a float64 convolution):
//   |y - exact| <= (2 K + 24) eps |A^T| [ sum_c (|G| |g_c| |G^T|) (.) (|B^T| |d_c| |B|) ] |A| + 2 eps |bias|,
// eps = 2^-24, K = 9 IC / groups as in the direct bound (the products' sum itself is IC / groups long): the direct
// bound with sum |x w| replaced by the magnitudes carried through the transforms, which their constants enlarge
// (F(4x4): up to 8 in A, 5 in B).
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "core/checked.h"
#include "core/kernel_family.h"
#include "core/threadpool.h"
#include "core/workspace.h"
#include "kernels/f32_conv.h"
#include "kernels/f32_gemm_list.h"
#include "kernels/f32_winograd_list.h"
#include "ops/conv/layer.h"

namespace nnkern {

const KernelFamily<F32WinogradKernel>& f32_winograd_family() {
  static const KernelFamily<F32WinogradKernel> family(
      "f32_winograd", "f32_winograd", {NNKERN_F32_WINOGRAD_LIST(NNKERN_KERNEL_ENTRY)},
      [](const F32WinogradKernel& k) {
        KernelInfo info;
        info.mr = k.lanes;  // channels per vector
        info.nr = 1;        // one tile per call
        return info;
      });
  return family;
}
NNKERN_REGISTER_FAMILY(f32_winograd_family)

namespace {

constexpr size_t kMaxTilesPerBlock = 96;

// The cache sizes the blocking and the rule read, with a default where the CPU does not report them.
size_t l2_bytes() { return cpu_features().l2 ? cpu_features().l2 : size_t(512) << 10; }
size_t l3_bytes() { return cpu_features().l3 ? cpu_features().l3 : size_t(16) << 20; }
constexpr size_t kMaxNr = 64;  // the GEMM kernels' widest tile, with room

// G of F(m x m, 3 x 3), alpha x 3 (kernels/f32_winograd.h).
const double kG2[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
const double kG4[6][3] = {{0.25, 0, 0},
                          {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                          {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                          {1.0 / 24, 1.0 / 12, 1.0 / 6},
                          {1.0 / 24, -1.0 / 12, 1.0 / 6},
                          {0, 0, 1}};

// The transformed weights for one GEMM kernel tile height: element (g, k, panel, p, i) is U_k of output channel
// g * ocg + panel * MR + i and input channel p of group g (zero past ocg).
struct WinogradWeights {
  size_t mr = 0, panels = 0;
  AlignedBuffer<float> u;
};

class Winograd final : public ConvAlgorithm {
 public:
  Winograd(const char* name, const PackedConv2d& layer, int size_index)
      : ConvAlgorithm(name, layer), index_(size_index), m_(size_t(kWinogradTiles[size_index])), alpha_(m_ + 2) {}

  bool applicable(const ConvCall&) const override {
    const ConvGeometry& g = L.geometry();
    return g.KH == 3 && g.KW == 3 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1 && L.finite_weights();
  }

  // auto's rule, at precision "high" or below only: channels enough for the GEMMs to reach their speed, an
  // output of at least 4x4, and F(4x4) where its products over the tiles that cover the output (the edge tiles'
  // wasted part included) are at most 0.8x F(2x2)'s, which is tighter: 7x7 and 14x14 outputs F(4x4), 5x5 and 6x6
  // F(2x2); except where its weights (2.25x F(2x2)'s) are many times L2 for at most 16 tiles: a call bound by
  // reading them from L3 or memory (docs/performance.md, "Conv2d: Winograd's auto rule").
  bool preferred(const ConvCall& c) const override {
    if (c.precision == Float32Precision::highest) return false;
    const ConvGeometry& g = L.geometry();
    if (g.icg() < 16 || g.ocg() < 16 || c.OH < 4 || c.OW < 4) return false;
    const auto tiles = [&](size_t m) { return c.s.N * ceil_div(c.OH, m) * ceil_div(c.OW, m); };
    const bool streamed = 36 * g.icg() * g.OC * sizeof(float) > 8 * l2_bytes() && tiles(4) <= 16;
    const bool f4_ahead = 10 * tiles(4) * 36 <= 8 * tiles(2) * 16 && !streamed;
    return m_ == 4 ? f4_ahead : !f4_ahead;
  }

  size_t workspace_bytes(const ConvCall& c) const override { return Plan(c, *this).bytes; }

  void run(const ConvCall& c, void* workspace) const override {
    const F32GemmKernel& gk = f32_gemm_family().dispatched();
    if (size_t(gk.nr) > kMaxNr) throw std::logic_error("winograd: GEMM kernel wider than expected");
    const F32WinogradKernel& tk = f32_winograd_family().named_or_dispatched(c.kernel);  // a test may name one
    const WinogradWeights& w = weights(size_t(gk.mr));
    const Plan plan(c, *this);
    unsigned char* ws = static_cast<unsigned char*>(workspace);
    float* zero = reinterpret_cast<float*>(ws + plan.zero_off);
    std::fill(zero, zero + L.geometry().IC, 0.0f);
    // Tasks (block, chunk of output-channel panels), block-major, claimed one at a time by `parts` loops, each
    // with its own slice of the workspace: uneven counts balance, and a task computes the same wherever it runs.
    const size_t tasks = plan.blocks * plan.splits;
    std::atomic<size_t> next{0};
    parallel_for(plan.parts, [&](size_t part) {
      unsigned char* slice = ws + plan.slice_off + part * plan.slice_bytes;
      for (size_t task = next++; task < tasks; task = next++) {
        const size_t b = task / plan.splits, t0 = b * plan.T, t1 = std::min(plan.tiles, t0 + plan.T);
        const Range panels = split_range(w.panels, plan.splits, task % plan.splits);
        block(c, plan, gk, tk, w, zero, t0, t1, panels.begin, panels.end, reinterpret_cast<float*>(slice),
              reinterpret_cast<float*>(slice + plan.m_off));
      }
    });
  }

 private:
  struct Plan {
    size_t th, tw, tiles, T, blocks, splits, parts;
    size_t zero_off, slice_off, slice_bytes, m_off, bytes;
    Plan(const ConvCall& c, const Winograd& a) {
      const ConvGeometry& g = c.L.geometry();
      const F32GemmKernel& gk = f32_gemm_family().dispatched();
      const size_t P = a.alpha_ * a.alpha_, NR = size_t(gk.nr), MR = size_t(gk.mr);
      th = ceil_div(c.OH, a.m_);
      tw = ceil_div(c.OW, a.m_);
      tiles = checked_mul(c.s.N, th, tw);
      // Blocks small enough that the whole block's V and M stay in L2 while the weights come from L3 (read
      // once per block); weights of a third of L3 or more are mostly read from memory, so then larger blocks that
      // reuse them more (each position's slices of V and M still in L2): docs/performance.md, "Conv2d: Winograd
      // blocks".
      const size_t l2 = l2_bytes(), l3 = l3_bytes();
      const size_t per_tile = checked_mul(P, g.IC + g.OC, sizeof(float));
      T = std::max<size_t>(1, l2 / 2 / per_tile);
      if (checked_mul(P, g.icg(), g.OC, sizeof(float)) > l3 / 3)
        T = std::max(T, l2 / checked_mul(g.IC + g.OC, sizeof(float)));
      T = std::min(T, kMaxTilesPerBlock);
      T = std::max(NR, T / NR * NR);  // whole kernel tiles, at least one
      const size_t threads = size_t(get_num_threads());
      blocks = std::max<size_t>(1, ceil_div(tiles, T));
      splits = 1;
      if (threads > 1 && blocks < 2 * threads) {
        if (g.groups == 1) {
          // Few blocks (a small image at batch 1): the output channels' panels split instead, each chunk reading
          // only its part of the weights and transforming its block's input again (chunks start at a panel, a
          // multiple of the transform's vector, so each channel runs the same code whatever the split).
          splits = std::min(ceil_div(g.OC, MR), ceil_div(2 * threads, blocks));
        } else {  // smaller blocks, as many per thread
          blocks = ceil_div(blocks, threads) * threads;
          T = std::max<size_t>(1, ceil_div(tiles, blocks));
        }
      }
      blocks = ceil_div(tiles, T);
      parts = std::max<size_t>(1, std::min(blocks * splits, threads));
      WorkspaceLayout l;
      zero_off = l.add(g.IC * sizeof(float));
      WorkspaceLayout s;
      s.add(checked_mul(P, T, g.IC, sizeof(float)));
      m_off = s.add(checked_mul(P, T, g.OC, sizeof(float)));
      slice_bytes = s.bytes;
      slice_off = l.add(checked_mul(parts, slice_bytes));
      bytes = l.bytes;
    }
  };

  // Tiles [t0, t1), output-channel panels [q0, q1) (all of them where groups > 1): transforms, GEMMs, output
  // transforms and post-ops.
  void block(const ConvCall& c, const Plan& plan, const F32GemmKernel& gk, const F32WinogradKernel& tk,
             const WinogradWeights& w, const float* zero, size_t t0, size_t t1, size_t q0, size_t q1, float* v,
             float* mm) const {
    const ConvGeometry& g = L.geometry();
    const size_t A = alpha_, P = A * A, m = m_, IC = g.IC, OC = g.OC, icg = g.icg(), ocg = g.ocg();
    const size_t T = plan.T, nt = t1 - t0, MR = w.mr, NR = size_t(gk.nr);
    const size_t H = c.s.H, W = c.s.W;
    bool finite[kMaxTilesPerBlock];
    const float* xp[36];
    for (size_t t = 0; t < nt; ++t) {
      const Tile tile = where(plan, t0 + t);
      for (size_t i = 0; i < A; ++i)
        for (size_t j = 0; j < A; ++j) {
          const ptrdiff_t ih = ptrdiff_t(tile.oh + i) - ptrdiff_t(g.pt), iw = ptrdiff_t(tile.ow + j) - ptrdiff_t(g.pl);
          const bool inside = ih >= 0 && iw >= 0 && size_t(ih) < H && size_t(iw) < W;
          xp[i * A + j] = inside ? c.x + ((tile.n * H + size_t(ih)) * W + size_t(iw)) * IC : zero;
        }
      finite[t] = tk.input[index_](IC, xp, v + t * IC, T * IC);
    }
    const F32Epilogue plain;
    const float* b[kMaxNr];
    for (size_t gi = 0; gi < g.groups; ++gi)
      for (size_t k = 0; k < P; ++k)
        for (size_t q = q0; q < q1; ++q) {
          const float* a = w.u.data() + ((gi * P + k) * w.panels + q) * icg * MR;
          const size_t mi = std::min(MR, ocg - q * MR);
          for (size_t j0 = 0; j0 < nt; j0 += NR) {
            const size_t nj = std::min(NR, nt - j0);
            for (size_t j = 0; j < nj; ++j) b[j] = v + (k * T + j0 + j) * IC + gi * icg;
            gk.run(mi, nj, icg, a, MR, nullptr, b, 1, mm + (k * T + j0) * OC + gi * ocg + q * MR, OC, &plain);
          }
        }
    const F32Epilogue ep = L.epilogue(c);
    const float lo = ep.clamp ? ep.clamp_min : -std::numeric_limits<float>::infinity();
    const float hi = ep.clamp ? ep.clamp_max : std::numeric_limits<float>::infinity();
    const size_t c0 = g.groups == 1 ? q0 * MR : 0, c1 = g.groups == 1 ? std::min(OC, q1 * MR) : OC;
    const float* bias = L.bias() ? L.bias() + c0 : nullptr;
    float* yp[16];
    for (size_t t = 0; t < nt; ++t) {
      const Tile tile = where(plan, t0 + t);
      for (size_t i = 0; i < m; ++i)
        for (size_t j = 0; j < m; ++j) {
          const size_t oh = tile.oh + i, ow = tile.ow + j;
          yp[i * m + j] = oh < c.OH && ow < c.OW ? c.y + ((tile.n * c.OH + oh) * c.OW + ow) * c.ldc + c0 : nullptr;
        }
      const bool fine = tk.output[index_](c1 - c0, mm + t * OC + c0, T * OC, yp, bias, lo, hi);
      if (!finite[t] || !fine) direct_tile(c, tile, c0, c1);
      const size_t cols = std::min(m, c.OW - tile.ow);
      for (size_t i = 0; i < m && tile.oh + i < c.OH; ++i)
        L.post_ops(c, yp[i * m], cols, c1 - c0);
    }
  }

  struct Tile {
    size_t n, oh, ow;  // image, first output row and column
  };
  Tile where(const Plan& plan, size_t t) const {
    const size_t per_image = plan.th * plan.tw, r = t % per_image;
    return {t / per_image, r / plan.tw * m_, r % plan.tw * m_};
  }

  // The tile's outputs of channels [c0, c1) as the direct sum (float32, taps inside the image in (kh, kw, c)
  // order) with the epilogue: where a transform met Inf, NaN or overflow.
  void direct_tile(const ConvCall& c, const Tile& tile, size_t c0, size_t c1) const {
    // The dot formula's oracle (kernels/f32_conv.h) reads the layer's own OHWI rows: one call per pixel and group,
    // its window clipped to the image (padding adds nothing to a finite-weight sum).
    const ConvGeometry& g = L.geometry();
    const size_t icg = g.icg(), ocg = g.ocg(), H = c.s.H, W = c.s.W;
    for (size_t oh = tile.oh; oh < std::min(c.OH, tile.oh + m_); ++oh)
      for (size_t ow = tile.ow; ow < std::min(c.OW, tile.ow + m_); ++ow) {
        const size_t kh0 = oh < g.pt ? g.pt - oh : 0, kh1 = std::min<size_t>(3, H + g.pt - oh);
        const size_t kw0 = ow < g.pl ? g.pl - ow : 0, kw1 = std::min<size_t>(3, W + g.pl - ow);
        const bool taps = kh0 < kh1 && kw0 < kw1;
        for (size_t o0 = c0; o0 < c1;) {
          const size_t gi = o0 / ocg, o1 = std::min(c1, (gi + 1) * ocg);
          F32Epilogue ep = L.epilogue(c);
          ep.bias = L.bias() ? L.bias() + o0 : nullptr;
          F32ConvArgs a;
          a.m = o1 - o0;
          a.n = 1;
          a.kh_n = taps ? kh1 - kh0 : 0;  // no tap inside: the bias alone
          a.kw_n = taps ? kw1 - kw0 : 0;
          a.ic = icg;
          a.x = taps ? c.x + ((tile.n * H + oh + kh0 - g.pt) * W + ow + kw0 - g.pl) * g.IC + gi * icg : c.x;
          a.x_pix = a.x_kw = g.IC;
          a.x_kh = W * g.IC;
          a.w = L.raw() + o0 * 9 * icg + (taps ? (kh0 * 3 + kw0) * icg : 0);
          a.w_oc = 9 * icg;
          a.w_kh = 3 * icg;
          a.y = c.y + ((tile.n * c.OH + oh) * c.OW + ow) * c.ldc + o0;
          a.y_pix = c.ldc;
          a.ep = &ep;
          f32_dotconv_reference(a);
          o0 = o1;
        }
      }
  }

  const WinogradWeights& weights(size_t MR) const {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& p : packed_)
      if (p->mr == MR) return *p;
    packed_.push_back(pack(MR));
    return *packed_.back();
  }

  // U = G g G^T per (output, input channel), in double, rounded once.
  std::unique_ptr<WinogradWeights> pack(size_t MR) const {
    const ConvGeometry& g = L.geometry();
    const size_t A = alpha_, P = A * A, icg = g.icg(), ocg = g.ocg();
    const double(*G)[3] = m_ == 2 ? kG2 : kG4;
    auto p = std::make_unique<WinogradWeights>();
    p->mr = MR;
    p->panels = ceil_div(ocg, MR);
    p->u.resize(checked_mul(g.groups, P, p->panels, icg, MR));
    std::fill(p->u.data(), p->u.data() + p->u.size(), 0.0f);
    for (size_t o = 0; o < g.OC; ++o) {
      const size_t gi = o / ocg, q = (o % ocg) / MR, i = (o % ocg) % MR;
      for (size_t ci = 0; ci < icg; ++ci) {
        double f[3][3], gf[6][3];
        for (size_t kh = 0; kh < 3; ++kh)
          for (size_t kw = 0; kw < 3; ++kw) f[kh][kw] = L.raw()[((o * 3 + kh) * 3 + kw) * icg + ci];
        for (size_t r = 0; r < A; ++r)
          for (size_t kw = 0; kw < 3; ++kw) gf[r][kw] = G[r][0] * f[0][kw] + G[r][1] * f[1][kw] + G[r][2] * f[2][kw];
        for (size_t r = 0; r < A; ++r)
          for (size_t s = 0; s < A; ++s) {
            const double u = gf[r][0] * G[s][0] + gf[r][1] * G[s][1] + gf[r][2] * G[s][2];
            p->u.data()[(((gi * P + r * A + s) * p->panels + q) * icg + ci) * MR + i] = float(u);
          }
      }
    }
    return p;
  }

  const int index_;
  const size_t m_, alpha_;
  mutable std::mutex mu_;
  mutable std::vector<std::unique_ptr<WinogradWeights>> packed_;  // one per GEMM kernel tile height used
};

}  // namespace

std::unique_ptr<ConvAlgorithm> make_conv_winograd(const PackedConv2d& layer) {
  return std::make_unique<Winograd>("winograd", layer, 1);
}
std::unique_ptr<ConvAlgorithm> make_conv_winograd_2x2(const PackedConv2d& layer) {
  return std::make_unique<Winograd>("winograd_2x2", layer, 0);
}

}  // namespace nnkern
