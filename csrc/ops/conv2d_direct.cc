// The "direct" and "mgemm" FP32 convolutions (ops/conv2d.h): one task per (group, block of MR output channels,
// output row). A row's kernel rows are clipped to the image once; its output pixels whose windows lie inside
// the image along W run in tiles of the kernel's nr pixels over all KW columns, and each pixel whose window
// crosses the left or right edge is a one-pixel tile over its own columns, so no padding is ever read or
// copied and the call needs no workspace (kernels/f32_conv.h).
#include <algorithm>

#include "core/threadpool.h"
#include "ops/conv2d.h"

namespace nnkern {
namespace {

size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

// The taps k < K along one axis whose input position o * s + k * d - p lies in [0, size): [k0, k1), empty if
// k1 <= k0.
void clip_taps(size_t o, size_t s, size_t d, size_t p, size_t size, size_t K, size_t* k0, size_t* k1) {
  const size_t start = o * s;
  *k0 = start >= p ? 0 : ceil_div(p - start, d);
  *k1 = std::min(K, ceil_div(size + p - std::min(size + p, start), d));
}

}  // namespace

void conv_tiles_run(const ConvCall& c, const F32ConvKernel& k) {
  const ConvGeometry& geo = c.L.geometry();
  const size_t MR = size_t(k.mr), IC = geo.IC, OC = geo.OC, icg = geo.icg(), ocg = geo.ocg();
  const size_t H = c.s.H, W = c.s.W, OH = c.OH, OW = c.OW;
  const ConvTapWeights& w = c.L.tap_weights(MR);
  // Output columns whose windows lie inside the image along W: [ow_lo, ow_hi).
  const size_t span = (geo.KW - 1) * geo.dw;
  const size_t ow_lo = std::min(OW, ceil_div(geo.pl, geo.sw));
  const size_t ow_hi = std::max(ow_lo, W + geo.pl > span ? std::min(OW, (W + geo.pl - span - 1) / geo.sw + 1) : 0);
  const F32Epilogue base_ep = c.L.epilogue();
  parallel_for_2d(geo.groups * w.panels, c.s.N * OH, [&](size_t gb, size_t row) {
    const size_t g = gb / w.panels, o0 = gb % w.panels * MR, m = std::min(MR, ocg - o0);
    const size_t n = row / OH, oh = row % OH;
    F32Epilogue ep = base_ep;
    ep.bias = c.L.bias() ? c.L.bias() + g * ocg + o0 : nullptr;
    size_t kh0, kh1;
    clip_taps(oh, geo.sh, geo.dh, geo.pt, H, geo.KH, &kh0, &kh1);
    F32ConvArgs a{};
    a.m = m;
    a.kh_n = kh1 > kh0 ? kh1 - kh0 : 0;
    a.ic = icg;
    a.x_kw = geo.dw * IC;
    a.x_kh = geo.dh * W * IC;
    a.w_kh = geo.KW * icg * MR;
    a.y_pix = OC;
    a.ep = &ep;
    // Row n, ih0 of the input at the group's first channel (only formed when a kernel row is inside).
    const float* x_row = a.kh_n ? c.x + (n * H + oh * geo.sh + kh0 * geo.dh - geo.pt) * W * IC + g * icg : c.x;
    const float* w_blk = w.w.data() + gb * w.panel_floats + kh0 * a.w_kh;
    float* y_row = c.y + (n * OH + oh) * OW * OC + g * ocg + o0;
    const auto edge_pixel = [&](size_t ow) {
      size_t kw0, kw1;
      clip_taps(ow, geo.sw, geo.dw, geo.pl, W, geo.KW, &kw0, &kw1);
      a.n = 1;
      a.kw_n = kw1 > kw0 ? kw1 - kw0 : 0;
      a.x = a.kw_n ? x_row + (ow * geo.sw + kw0 * geo.dw - geo.pl) * IC : x_row;
      a.x_pix = a.x_kw;  // one pixel: the mGEMM kernels' x_pix == x_kw holds trivially
      a.w = w_blk + kw0 * icg * MR;
      a.y = y_row + ow * OC;
      k.run(a);
    };
    for (size_t ow = 0; ow < ow_lo; ++ow) edge_pixel(ow);
    const size_t NR = size_t(k.nr_for(m));
    a.kw_n = geo.KW;
    a.x_pix = geo.sw * IC;
    a.w = w_blk;
    for (size_t ow = ow_lo; ow < ow_hi; ow += NR) {
      a.n = std::min(NR, ow_hi - ow);
      a.x = x_row + (ow * geo.sw - geo.pl) * IC;
      a.y = y_row + ow * OC;
      k.run(a);
    }
    for (size_t ow = ow_hi; ow < OW; ++ow) edge_pixel(ow);
    c.L.post_activation(y_row, OW, m, OC);
  });
}

}  // namespace nnkern
