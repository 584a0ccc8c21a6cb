// The tile algorithms of Conv2d (ops/conv/algorithm.h): "depthwise", "dot", "mgemm" and "direct", one driver over
// their four kernel families (kernels/f32_conv.h). One task per (image, group, block of MR output channels, band of
// output rows; depthwise: a chunk of blocks), no workspace, no padding read:
//   - a row's kernel rows are clipped to the image; the pixels of a row whose windows lie inside the image
//     along W run in tiles of the kernel's nr pixels over all KW columns (in the band's full-window rows, tile
//     columns down the band);
//   - in the band's rows whose windows lie inside along H, the columns those tiles leave over (the edges, whose
//     windows cross the left / right border, and the remainder of the row) run as column tiles: one column's
//     pixels down the band, each column with its kernel columns clipped, on the kernel's run_any (wf = 1);
//   - the rows whose windows cross the top / bottom border (at most a few per image) run the leftover columns
//     pixel by pixel (each with its own clipped window) and the remainder of the row as smaller tiles.
// A 13 x 13 layer thus runs 11 of its 13 rows as one 8-pixel tile + 5 column tiles of up to 8 pixels instead
// of 8 + 2 + 1 + two one-pixel tiles, each of which streams the whole weight block.
// Skipping the padding's taps gives the sums of zero padding while every weight is finite; 0 x Inf or 0 x NaN is
// NaN there, so a padded layer with a non-finite weight runs the algorithms that read a zero row (indirect,
// im2col) instead: these four do not apply to it.
#include <algorithm>
#include <mutex>
#include <vector>

#include "core/checked.h"
#include "core/isa.h"
#include "core/kernel_family.h"
#include "core/threadpool.h"
#include "kernels/f32_conv_list.h"
#include "ops/conv/layer.h"

namespace nnkern {
namespace {


// The taps k < K along one axis whose input position o * s + k * d - p lies in [0, size): [k0, k1), empty if
// k1 <= k0.
void clip_taps(size_t o, size_t s, size_t d, size_t p, size_t size, size_t K, size_t* k0, size_t* k1) {
  const size_t start = o * s;
  *k0 = start >= p ? 0 : ceil_div(p - start, d);
  *k1 = std::min(K, ceil_div(size + p - std::min(size + p, start), d));
}

// The outputs o < O whose windows lie inside [0, size) along one axis: [lo, hi).
void inside_range(size_t O, size_t size, size_t K, size_t s, size_t d, size_t p, size_t* lo, size_t* hi) {
  const size_t span = (K - 1) * d;
  *lo = std::min(O, ceil_div(p, s));
  *hi = std::max(*lo, size + p > span ? std::min(O, (size + p - span - 1) / s + 1) : 0);
}

void conv_tiles_run(const ConvCall& c, const F32ConvKernel& k, const ConvTapWeights* packed) {
  const ConvGeometry& geo = c.L.geometry();
  // Depthwise kernels see one "group" of OC channels with ic = 1; dot kernels read the layer's own weight rows
  // (kernels/f32_conv.h).
  const bool dw = k.depthwise, dot = k.dot;
  const size_t MR = size_t(k.mr), IC = geo.IC, OC = geo.OC, groups = dw ? 1 : geo.groups;
  const size_t icg = dw ? 0 : geo.icg(), ocg = dw ? OC : geo.ocg(), ic = dw ? 1 : icg;
  const size_t H = c.s.H, W = c.s.W, OH = c.OH, OW = c.OW, KH = geo.KH, KW = geo.KW;
  const size_t panels = packed ? packed->panels : ceil_div(ocg, MR);
  const size_t w_col = dot ? ic : ic * MR;  // floats from one kernel column to the next in w
  size_t ow_lo, ow_hi, oh_lo, oh_hi;
  inside_range(OW, W, KW, geo.sw, geo.dw, geo.pl, &ow_lo, &ow_hi);
  inside_range(OH, H, KH, geo.sh, geo.dh, geo.pt, &oh_lo, &oh_hi);
  const size_t band = size_t(k.nr_any_for(std::min(MR, ocg))), bands = ceil_div(OH, band);
  const F32Epilogue base_ep = c.L.epilogue(c);
  // Whole rows of tiles per call (below) where the reduction is short (at most 4 input channels: the stems) or
  // the KH input rows a row of tiles reads and the block's weights fit half of L1 (dot kernels read one channel's
  // weights at a time).
  const size_t l1 = cpu_features().l1d ? cpu_features().l1d : 32 * 1024;
  const bool row_calls = !dw && (ic <= 4 || (KH * W * IC + (dot ? 0 : KH * w_col * KW)) * sizeof(float) <= l1 / 2);
  // Tasks: one image at a time (its input stays in cache while every block of channels reads it; a batch's
  // input is often larger than L3), then a block of MR output channels and a band of rows (the block's weights
  // stay in cache over the image's bands). Depthwise blocks instead read disjoint channels of the same pixels: a
  // task runs a chunk of consecutive blocks at each tile, so each pixel is read whole and in order (block by
  // block, each pass would stride over the image), as few chunks per band as the threads allow. No order or
  // chunk changes a result: each output is the same tile's in any case.
  const size_t full = ocg / MR, bands_all = c.s.N * bands;
  const size_t chunks = dw ? std::min(std::max<size_t>(full, 1), ceil_div(4 * size_t(get_num_threads()), bands_all))
                           : groups * panels;
  const size_t per_chunk = dw ? ceil_div(std::max<size_t>(full, 1), chunks) : 1;
  const size_t slots = dw ? ceil_div(full, per_chunk) + (ocg % MR != 0) : chunks;
  const auto task = [&](size_t n, size_t slot, size_t bi) {
    // Blocks [gb, gb + np) of one group, all m channels wide.
    const bool last = dw && slot * per_chunk >= full;
    const size_t gb = dw ? (last ? full : slot * per_chunk) : slot;
    const size_t np = dw && !last ? std::min(per_chunk, full - gb) : 1;
    const size_t g = gb / panels, o0 = gb % panels * MR, m = std::min(MR, ocg - o0);
    const size_t b0 = bi * band, b1 = std::min(OH, b0 + band);
    const size_t NR = size_t(k.nr_for(m)), NRc = size_t(k.nr_any_for(m));
    F32Epilogue ep = base_ep;
    ep.bias = c.L.bias() ? c.L.bias() + g * ocg + o0 : nullptr;
    const float* x_img = c.x + n * H * W * IC + (dw ? o0 : g * icg);
    const float* w_blk = packed ? packed->w.data() + gb * packed->panel_floats : c.L.raw() + (g * ocg + o0) * geo.kg();
    const size_t ldc = c.ldc;
    float* y_img = c.y + n * OH * OW * ldc + g * ocg + o0;
    F32ConvArgs a{};
    a.m = m;
    a.ic = ic;
    a.x_kw = geo.dw * IC;
    a.x_kh = geo.dh * W * IC;
    a.w_kh = KW * w_col;
    a.w_oc = geo.kg();
    a.ep = &ep;
    const float* bias0 = ep.bias;
    const size_t w_block = packed ? packed->panel_floats : 0;  // np > 1: depthwise, always packed
    // k.run / k.run_any on `a` (set for block gb) for each block of the task: MR channels further each.
    const auto each = [&](F32ConvUkernel fn) {
      const float *x = a.x, *w = a.w;
      float* y = a.y;
      for (size_t p = 0; p < np; ++p) {
        a.x = x + p * MR;
        a.w = w + p * w_block;
        a.y = y + p * MR;
        ep.bias = bias0 ? bias0 + p * MR : nullptr;
        fn(a);
      }
      a.x = x, a.w = w, a.y = y, ep.bias = bias0;
    };
    // Full-window rows leave columns [0, ow_lo) and [ow_tiles, OW) to the column tiles.
    const size_t ow_tiles = ow_lo + (ow_hi - ow_lo) / NR * NR;
    const size_t f0 = std::max(b0, oh_lo), f1 = std::max(f0, std::min(b1, oh_hi));
    // The rows whose windows cross the top / bottom border: row by row, their edge pixels one at a time.
    const auto border_row = [&](size_t oh) {
      size_t kh0, kh1;
      clip_taps(oh, geo.sh, geo.dh, geo.pt, H, KH, &kh0, &kh1);
      a.kh_n = kh1 > kh0 ? kh1 - kh0 : 0;
      // Input row ih0 (only formed when a kernel row is inside).
      const float* x_row = a.kh_n ? x_img + (oh * geo.sh + kh0 * geo.dh - geo.pt) * W * IC : x_img;
      const float* w_row = w_blk + kh0 * a.w_kh;
      float* y_row = y_img + oh * OW * ldc;
      a.y_pix = ldc;
      const auto one_pixel = [&](size_t ow) {
        size_t kw0, kw1;
        clip_taps(ow, geo.sw, geo.dw, geo.pl, W, KW, &kw0, &kw1);
        a.n = 1;
        a.kw_n = kw1 > kw0 ? kw1 - kw0 : 0;
        a.x = a.kw_n ? x_row + (ow * geo.sw + kw0 * geo.dw - geo.pl) * IC : x_row;
        a.x_pix = a.x_kw;  // one pixel: the mGEMM kernels' x_pix == x_kw holds trivially
        a.w = w_row + kw0 * w_col;
        a.y = y_row + ow * ldc;
        each(k.run);
      };
      for (size_t ow = 0; ow < ow_lo; ++ow) one_pixel(ow);
      a.kw_n = KW;
      a.x_pix = geo.sw * IC;
      a.w = w_row;
      for (size_t ow = ow_lo; ow < ow_hi; ow += NR) {
        a.n = std::min(NR, ow_hi - ow);
        a.x = x_row + (ow * geo.sw - geo.pl) * IC;
        a.y = y_row + ow * ldc;
        each(k.run);
      }
      for (size_t ow = ow_hi; ow < OW; ++ow) one_pixel(ow);
    };
    for (size_t oh = b0; oh < f0; ++oh) border_row(oh);
    for (size_t oh = f1; oh < b1; ++oh) border_row(oh);
    // The full-window rows: whole tiles down the band, one column of tiles after another, so that the input
    // rows a tile shares with the tile above it are still in L1 (row after row, they are not once KH input
    // rows outgrow it). Where they fit, or the reduction is short, row after row, each row's tiles in one call:
    // a short reduction pays for a call per tile (docs/performance.md: "Conv2d: AVX2 direct on the stems"), and
    // its few input rows come from L2 at the pace it needs them.
    a.kh_n = KH;
    a.kw_n = KW;
    a.x_pix = geo.sw * IC;
    a.y_pix = ldc;
    a.w = w_blk;
    if (row_calls && ow_tiles > ow_lo) {
      a.n = ow_tiles - ow_lo;
      for (size_t oh = f0; oh < f1; ++oh) {
        a.x = x_img + ((oh * geo.sh - geo.pt) * W + ow_lo * geo.sw - geo.pl) * IC;
        a.y = y_img + (oh * OW + ow_lo) * ldc;
        each(k.run);
      }
    } else {
      a.n = NR;
      for (size_t ow = ow_lo; ow < ow_tiles; ow += NR)
        for (size_t oh = f0; oh < f1; ++oh) {
          a.x = x_img + ((oh * geo.sh - geo.pt) * W + ow * geo.sw - geo.pl) * IC;
          a.y = y_img + (oh * OW + ow) * ldc;
          each(k.run);
        }
    }
    // The column tiles of the full-window rows [f0, f1): down the band, on the wf = 1 kernel.
    a.kh_n = KH;
    a.x_pix = geo.sh * W * IC;
    a.y_pix = OW * ldc;
    const auto column = [&](size_t ow) {
      size_t kw0, kw1;
      clip_taps(ow, geo.sw, geo.dw, geo.pl, W, KW, &kw0, &kw1);
      a.kw_n = kw1 > kw0 ? kw1 - kw0 : 0;
      a.w = w_blk + kw0 * w_col;
      for (size_t oh = f0; oh < f1; oh += NRc) {
        a.n = std::min(NRc, f1 - oh);
        a.x = a.kw_n ? x_img + ((oh * geo.sh - geo.pt) * W + ow * geo.sw + kw0 * geo.dw - geo.pl) * IC : x_img;
        a.y = y_img + (oh * OW + ow) * ldc;
        each(k.run_any);
      }
    };
    if (f1 > f0) {
      for (size_t ow = 0; ow < ow_lo; ++ow) column(ow);
      for (size_t ow = ow_tiles; ow < OW; ++ow) column(ow);
    }
    c.L.post_ops(c, y_img + b0 * OW * ldc, (b1 - b0) * OW, std::min(ocg, o0 + np * MR) - o0);
  };
  if (dw)
    parallel_for_3d(c.s.N, bands, slots, [&](size_t n, size_t bi, size_t slot) { task(n, slot, bi); });
  else
    parallel_for_3d(c.s.N, slots, bands, task);
}

// The rules of auto (docs/performance.md has the measurements behind them):
//   - mgemm where it applies and a row holds at least two whole tiles of its kernel inside the image (with one,
//     its leftover columns cost more than direct's; with none its rows are all leftovers);
//   - else direct, where auto may pick the dispatched direct kernel (AVX-512, NEON; not the scalar or AVX2 ones)
//     and the output is at least 14 pixels wide or has at most 4 input channels per group (narrower outputs are
//     mostly window edges, one-pixel tiles of few FMA chains), and on the ungrouped layers of at most 4 input
//     channels where the kernel is marked for them (AVX2: the stems, where the indirect GEMM's K of 27-147 is short
//     for its tiles; ResNeXt's 4-channel groups stay indirect, faster there); never for a pointwise layer (the
//     plain GEMM scales better with threads, and the rule must not depend on the thread count);
//   - dot for at most 8 output channels per group over 16 or more input channels (whole vectors), where auto may
//     pick its kernel (SIMD levels);
//   - depthwise for every layer it applies to.
enum class Tiles { depthwise, dot, mgemm, direct };

const KernelFamily<F32ConvKernel>& family_of(Tiles t) {
  switch (t) {
    case Tiles::depthwise: return f32_dwconv_family();
    case Tiles::dot: return f32_conv_dot_family();
    case Tiles::mgemm: return f32_conv_mgemm_family();
    case Tiles::direct: break;
  }
  return f32_conv_direct_family();
}

template <Tiles kTiles>
class TileAlgorithm final : public ConvAlgorithm {
 public:
  TileAlgorithm(const char* name, const PackedConv2d& layer) : ConvAlgorithm(name, layer) {}

  bool applicable(const ConvCall& c) const override {
    const ConvGeometry& g = L.geometry();
    if (g.padded() && !L.finite_weights()) return false;  // see above: zero padding's NaN
    if (kTiles == Tiles::depthwise) return g.groups == g.IC && g.groups == g.OC;
    if (kTiles == Tiles::mgemm) return g.sw == g.dw && kernel(c) != nullptr;  // adjacent columns' inputs shared
    return true;
  }

  bool preferred(const ConvCall& c) const override {
    const ConvGeometry& g = L.geometry();
    const F32ConvKernel& k = *kernel(c);
    switch (kTiles) {
      case Tiles::depthwise: return true;
      case Tiles::dot: return g.ocg() <= 8 && g.icg() >= 16 && k.auto_pick;
      case Tiles::direct:
        if (g.pointwise()) return false;
        if (g.icg() <= 4) return k.auto_pick || (k.auto_pick_stems && g.groups == 1);
        return k.auto_pick && c.OW >= 14;
      case Tiles::mgemm: break;
    }
    if (!k.auto_pick || size_t(k.wf) > g.KW) return false;
    const size_t span = (g.KW - 1) * g.dw, W = c.s.W, lo = (g.pl + g.sw - 1) / g.sw;
    const size_t hi = W + g.pl > span ? std::min(c.OW, (W + g.pl - span - 1) / g.sw + 1) : 0;
    return hi > lo && hi - lo >= 2 * size_t(k.nr_for(std::min<size_t>(size_t(k.mr), g.ocg())));
  }

  void run(const ConvCall& c, void*) const override {
    const F32ConvKernel& k = *kernel(c);
    conv_tiles_run(c, k, k.dot ? nullptr : &weights(size_t(k.mr), k.depthwise));
  }

 private:
  // The kernel a test named, where it is of this family, else the dispatched one (mgemm: none without SIMD).
  static const F32ConvKernel* kernel(const ConvCall& c) {
    const KernelFamily<F32ConvKernel>& f = family_of(kTiles);
    const F32ConvKernel* named = c.kernel.empty() ? nullptr : f.named(c.kernel);
    return named ? named : f.dispatched_or_null();
  }

  const ConvTapWeights& weights(size_t MR, bool depthwise) const {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& p : packed_)
      if (p->mr == MR) return *p;
    packed_.push_back(conv_pack_taps(L, MR, depthwise));
    return *packed_.back();
  }

  mutable std::mutex mu_;
  mutable std::vector<std::unique_ptr<ConvTapWeights>> packed_;  // one per kernel tile height used
};

}  // namespace

std::unique_ptr<ConvAlgorithm> make_conv_depthwise(const PackedConv2d& L) {
  return std::make_unique<TileAlgorithm<Tiles::depthwise>>("depthwise", L);
}
std::unique_ptr<ConvAlgorithm> make_conv_dot(const PackedConv2d& L) {
  return std::make_unique<TileAlgorithm<Tiles::dot>>("dot", L);
}
std::unique_ptr<ConvAlgorithm> make_conv_mgemm(const PackedConv2d& L) {
  return std::make_unique<TileAlgorithm<Tiles::mgemm>>("mgemm", L);
}
std::unique_ptr<ConvAlgorithm> make_conv_direct(const PackedConv2d& L) {
  return std::make_unique<TileAlgorithm<Tiles::direct>>("direct", L);
}

}  // namespace nnkern
