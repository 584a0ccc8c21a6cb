// The "direct" convolution (seeds I8-I10): no GEMM and no indirection. The input is copied once into the
// uint8 domain with its padding materialized (N x (H + pt + pb) x (W + pl + pr) x icp, padding pixels holding
// the effective zero point, int8 shifted by +128, channels zero-padded to icp = a multiple of 4), so the
// kernels (kernels/qconv_direct.h) walk the window with plain strides and no bounds test: a padding tap reads
// za and adds za * w, which the column-sum compensation -za * colsum removes exactly, as in the indirect
// path's zero row (sum (x - za) w, padding taps contributing 0). The weights are packed once per layer in
// blocks of kQConvDirectOcBlock output channels (KH x KW taps of icp / 4 groups of 64 lanes x 4 bytes). Tasks
// are (OC block, image, output row), the block outermost so that a thread's consecutive rows reuse the
// block's weights from its cache. groups == 1 only.
#include <algorithm>
#include <stdexcept>

#include "core/threadpool.h"
#include "kernels/qconv_direct_list.h"
#include "ops/qconv2d.h"

namespace nnkern {
namespace {

size_t round64(size_t n) { return (n + 63) / 64 * 64; }
size_t icp_of(const QConvGeometry& geo) { return (geo.IC + 3) / 4 * 4; }

size_t padded_bytes(const QConvCall& c) {
  const QConvGeometry& geo = c.L.geometry();
  return round64(c.N * (c.H + geo.pt + geo.pb) * (c.W + geo.pl + geo.pr) * icp_of(geo));
}

}  // namespace

std::unique_ptr<QConvDirectWeights> qconv_pack_direct(const QConvGeometry& geo, const int8_t* w, const float* factor,
                                                      const float* offset) {
  auto p = std::make_unique<QConvDirectWeights>();
  const size_t OC = geo.OC, IC = geo.IC, ks = geo.ks(), icp = icp_of(geo), B = kQConvDirectOcBlock;
  p->blocks = (OC + B - 1) / B;
  p->icp = icp;
  p->block_bytes = ks * icp * B;
  const size_t cpad = p->blocks * B;
  p->w.resize(p->blocks * p->block_bytes);
  p->colsum.resize(cpad);
  std::fill(p->w.data(), p->w.data() + p->blocks * p->block_bytes, int8_t(0));
  std::fill(p->colsum.data(), p->colsum.data() + cpad, 0);
  // w: ks * IC rows (tap t, channel ic at row t * IC + ic) of OC columns (groups == 1).
  for (size_t t = 0; t < ks; ++t)
    for (size_t ic = 0; ic < IC; ++ic)
      for (size_t oc = 0; oc < OC; ++oc) {
        const int8_t v = w[(t * IC + ic) * OC + oc];
        p->w.data()[(oc / B) * p->block_bytes + (t * icp + ic / 4 * 4) * B + (oc % B) * 4 + ic % 4] = v;
        p->colsum.data()[oc] += v;
      }
  qconv_padded_factors(factor, offset, OC, cpad, &p->factor, &p->offset);
  return p;
}

bool qconv_direct_applies(const QConvCall& c) {
  return c.L.geometry().groups == 1 && (c.direct || qconv_direct_kernel());
}

size_t qconv_direct_workspace(const QConvCall& c) {
  const size_t cpad = (c.L.geometry().OC + kQConvDirectOcBlock - 1) / kQConvDirectOcBlock * kQConvDirectOcBlock;
  return padded_bytes(c) + round64(cpad * sizeof(int32_t));
}

void qconv_direct_run(const QConvCall& c, void* workspace) {
  const QConvDirectKernel& k = c.direct ? *c.direct : *qconv_direct_kernel();
  const QConvGeometry& geo = c.L.geometry();
  const QConvDirectWeights& w = c.L.direct_weights();
  const size_t IC = geo.IC, OC = geo.OC, icp = w.icp, B = kQConvDirectOcBlock;
  const size_t Hp = c.H + geo.pt + geo.pb, Wp = c.W + geo.pl + geo.pr, OH = c.OH, OW = c.OW;
  uint8_t* xp = static_cast<uint8_t*>(workspace);
  const bool s8 = c.x_type == QType::s8;
  const int32_t za = s8 ? c.L.x_zero() + 128 : c.L.x_zero();
  const uint8_t flip = s8 ? 0x80 : 0, zb = uint8_t(za);
  const uint8_t* x = static_cast<const uint8_t*>(c.x);
  // The padded copy, one padded input row per task.
  parallel_for(c.N * Hp, [&](size_t row) {
    const size_t n = row / Hp, ih = row % Hp;
    uint8_t* d = xp + row * Wp * icp;
    if (ih < geo.pt || ih >= geo.pt + c.H) {
      for (size_t px = 0; px < Wp; ++px) {
        std::fill(d + px * icp, d + px * icp + IC, zb);
        std::fill(d + px * icp + IC, d + (px + 1) * icp, uint8_t(0));
      }
      return;
    }
    const uint8_t* s = x + (n * c.H + (ih - geo.pt)) * c.W * IC;
    for (size_t px = 0; px < Wp; ++px, d += icp) {
      if (px < geo.pl || px >= geo.pl + c.W) {
        std::fill(d, d + IC, zb);
      } else if (flip) {
        for (size_t ic = 0; ic < IC; ++ic) d[ic] = uint8_t(s[ic] ^ flip);
        s += IC;
      } else {
        std::copy(s, s + IC, d);
        s += IC;
      }
      std::fill(d + IC, d + icp, uint8_t(0));
    }
  });
  // sum (x - za) w = sum x w - za * colsum, modulo 2^32; padding lanes 0.
  int32_t* comp = reinterpret_cast<int32_t*>(xp + padded_bytes(c));
  for (size_t oc = 0; oc < w.blocks * B; ++oc)
    comp[oc] = int32_t(0u - uint32_t(za) * uint32_t(w.colsum.data()[oc]));
  QEpilogue ep0;
  ep0.out = c.o.out;
  ep0.relu = c.o.relu;
  ep0.lo = c.o.lo;
  ep0.hi = c.o.hi;
  const size_t c_elem = qout_elem_size(c.o.out);
  uint8_t* out = static_cast<uint8_t*>(c.o.c);
  const size_t x_pixel = geo.sw * icp, x_kh = geo.dh * Wp * icp, x_kw = geo.dw * icp;
  // Fused: each row in chunks of whole pixel blocks through a stack buffer (ld B); slot = (row, chunk).
  QConvFused* fuse = c.o.fuse;
  const size_t px = size_t(k.pixels);
  const size_t room = kQConvFusedTileBytes - kQConvFusedSlack;
  const size_t chunk = fuse ? std::min(OW, std::max(px, room / (B * c_elem) / px * px)) : OW;
  const size_t chunks = (OW + chunk - 1) / chunk;
  if (fuse) {
    if (chunk * B * c_elem + kQConvFusedSlack > kQConvFusedTileBytes)
      throw std::invalid_argument("qconv2d: tile too large to fuse");
    fuse->begin(OH, OW, c.N * OH * chunks);
  }
  parallel_for_3d(w.blocks, c.N, OH, [&](size_t b, size_t n, size_t oh) {
    QEpilogue ep = ep0;
    ep.col_comp = comp + b * B;
    ep.scale = w.factor.size() ? w.factor.data() + b * B : nullptr;
    ep.bias = w.offset.size() ? w.offset.data() + b * B : nullptr;
    const size_t m = std::min(B, OC - b * B);
    const uint8_t* xr = xp + (n * Hp + oh * geo.sh) * Wp * icp;
    const int8_t* wb = w.w.data() + b * w.block_bytes;
    if (!fuse) {
      k.run(m, OW, xr, x_pixel, x_kh, x_kw, geo.KH, geo.KW, icp, wb, out + ((n * OH + oh) * OW * OC + b * B) * c_elem,
            OC, &ep);
      return;
    }
    alignas(64) uint8_t buf[kQConvFusedTileBytes];
    for (size_t q = 0; q < chunks; ++q) {
      const size_t np = std::min(chunk, OW - q * chunk);
      k.run(m, np, xr + q * chunk * x_pixel, x_pixel, x_kh, x_kw, geo.KH, geo.KW, icp, wb, buf, B, &ep);
      fuse->commit((n * OH + oh) * chunks + q, (n * OH + oh) * OW + q * chunk, np, b * B, m, buf, B);
    }
  });
}

}  // namespace nnkern
