// The "direct" and "mgemm" FP32 convolutions (ops/conv/layer.h): one task per (group, block of MR output channels,
// band of output rows of one image), no workspace, no padding read (kernels/f32_conv.h):
//   - a row's kernel rows are clipped to the image; the pixels of a row whose windows lie inside the image
//     along W run in tiles of the kernel's nr pixels over all KW columns;
//   - in the band's rows whose windows lie inside along H, the columns those tiles leave over (the edges, whose
//     windows cross the left / right border, and the remainder of the row) run as column tiles: one column's
//     pixels down the band, each column with its kernel columns clipped, on the kernel's run_any (wf = 1);
//   - the rows whose windows cross the top / bottom border (at most a few per image) run the leftover columns
//     pixel by pixel (each with its own clipped window) and the remainder of the row as smaller tiles.
// A 13 x 13 layer thus runs 11 of its 13 rows as one 8-pixel tile + 5 column tiles of up to 8 pixels instead
// of 8 + 2 + 1 + two one-pixel tiles, each of which streams the whole weight block.
#include <algorithm>

#include "core/checked.h"
#include "core/threadpool.h"
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

}  // namespace

void conv_tiles_run(const ConvCall& c, const F32ConvKernel& k) {
  const ConvGeometry& geo = c.L.geometry();
  // Depthwise kernels see one "group" of OC channels with ic = 1; dot kernels read the layer's own weight rows
  // (kernels/f32_conv.h).
  const bool dw = k.depthwise, dot = k.dot;
  const size_t MR = size_t(k.mr), IC = geo.IC, OC = geo.OC, groups = dw ? 1 : geo.groups;
  const size_t icg = dw ? 0 : geo.icg(), ocg = dw ? OC : geo.ocg(), ic = dw ? 1 : icg;
  const size_t H = c.s.H, W = c.s.W, OH = c.OH, OW = c.OW, KH = geo.KH, KW = geo.KW;
  const ConvTapWeights* packed = dot ? nullptr : &c.L.tap_weights(MR, dw);
  const size_t panels = packed ? packed->panels : ceil_div(ocg, MR);
  const size_t w_col = dot ? ic : ic * MR;  // floats from one kernel column to the next in w
  size_t ow_lo, ow_hi, oh_lo, oh_hi;
  inside_range(OW, W, KW, geo.sw, geo.dw, geo.pl, &ow_lo, &ow_hi);
  inside_range(OH, H, KH, geo.sh, geo.dh, geo.pt, &oh_lo, &oh_hi);
  const size_t band = size_t(k.nr_any_for(std::min(MR, ocg))), bands = ceil_div(OH, band);
  const F32Epilogue base_ep = c.L.epilogue();
  parallel_for_2d(groups * panels, c.s.N * bands, [&](size_t gb, size_t nb) {
    const size_t g = gb / panels, o0 = gb % panels * MR, m = std::min(MR, ocg - o0);
    const size_t n = nb / bands, b0 = nb % bands * band, b1 = std::min(OH, b0 + band);
    const size_t NR = size_t(k.nr_for(m)), NRc = size_t(k.nr_any_for(m));
    F32Epilogue ep = base_ep;
    ep.bias = c.L.bias() ? c.L.bias() + g * ocg + o0 : nullptr;
    const float* x_img = c.x + n * H * W * IC + (dw ? o0 : g * icg);
    const float* w_blk = packed ? packed->w.data() + gb * packed->panel_floats : c.L.raw() + (g * ocg + o0) * geo.kg();
    float* y_img = c.y + n * OH * OW * OC + g * ocg + o0;
    F32ConvArgs a{};
    a.m = m;
    a.ic = ic;
    a.x_kw = geo.dw * IC;
    a.x_kh = geo.dh * W * IC;
    a.w_kh = KW * w_col;
    a.w_oc = geo.kg();
    a.ep = &ep;
    // Full-window rows leave columns [0, ow_lo) and [ow_tiles, OW) to the column tiles.
    const size_t ow_tiles = ow_lo + (ow_hi - ow_lo) / NR * NR;
    const size_t f0 = std::max(b0, oh_lo), f1 = std::max(f0, std::min(b1, oh_hi));
    for (size_t oh = b0; oh < b1; ++oh) {
      const bool full = oh >= f0 && oh < f1;
      size_t kh0, kh1;
      clip_taps(oh, geo.sh, geo.dh, geo.pt, H, KH, &kh0, &kh1);
      a.kh_n = kh1 > kh0 ? kh1 - kh0 : 0;
      // Input row ih0 (only formed when a kernel row is inside).
      const float* x_row = a.kh_n ? x_img + (oh * geo.sh + kh0 * geo.dh - geo.pt) * W * IC : x_img;
      const float* w_row = w_blk + kh0 * a.w_kh;
      float* y_row = y_img + oh * OW * OC;
      a.y_pix = OC;
      const auto one_pixel = [&](size_t ow) {
        size_t kw0, kw1;
        clip_taps(ow, geo.sw, geo.dw, geo.pl, W, KW, &kw0, &kw1);
        a.n = 1;
        a.kw_n = kw1 > kw0 ? kw1 - kw0 : 0;
        a.x = a.kw_n ? x_row + (ow * geo.sw + kw0 * geo.dw - geo.pl) * IC : x_row;
        a.x_pix = a.x_kw;  // one pixel: the mGEMM kernels' x_pix == x_kw holds trivially
        a.w = w_row + kw0 * w_col;
        a.y = y_row + ow * OC;
        k.run(a);
      };
      if (!full)
        for (size_t ow = 0; ow < ow_lo; ++ow) one_pixel(ow);
      a.kw_n = KW;
      a.x_pix = geo.sw * IC;
      a.w = w_row;
      for (size_t ow = ow_lo; ow < (full ? ow_tiles : ow_hi); ow += NR) {
        a.n = std::min(NR, ow_hi - ow);
        a.x = x_row + (ow * geo.sw - geo.pl) * IC;
        a.y = y_row + ow * OC;
        k.run(a);
      }
      if (!full)
        for (size_t ow = ow_hi; ow < OW; ++ow) one_pixel(ow);
    }
    // The column tiles of the full-window rows [f0, f1): down the band, on the wf = 1 kernel.
    a.kh_n = KH;
    a.x_pix = geo.sh * W * IC;
    a.y_pix = OW * OC;
    const auto column = [&](size_t ow) {
      size_t kw0, kw1;
      clip_taps(ow, geo.sw, geo.dw, geo.pl, W, KW, &kw0, &kw1);
      a.kw_n = kw1 > kw0 ? kw1 - kw0 : 0;
      a.w = w_blk + kw0 * w_col;
      for (size_t oh = f0; oh < f1; oh += NRc) {
        a.n = std::min(NRc, f1 - oh);
        a.x = a.kw_n ? x_img + ((oh * geo.sh - geo.pt) * W + ow * geo.sw + kw0 * geo.dw - geo.pl) * IC : x_img;
        a.y = y_img + (oh * OW + ow) * OC;
        k.run_any(a);
      }
    };
    if (f1 > f0) {
      for (size_t ow = 0; ow < ow_lo; ++ow) column(ow);
      for (size_t ow = ow_tiles; ow < OW; ++ow) column(ow);
    }
    c.L.post_activation(y_img + b0 * OW * OC, (b1 - b0) * OW, m, OC);
  });
}

}  // namespace nnkern
