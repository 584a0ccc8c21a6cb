// The "depthwise" convolution (groups == IC, multiplier m = OC / IC): XNNPACK's dwconv unipass. The input
// goes to the kernels as uint8 rows of OC channels: x itself for uint8 with m = 1, otherwise one copy that
// shifts int8 by +128 (as the GEMM paths' u8s8 domain) and repeats each channel m times, so output channel
// c * m + j reads lane c * m + j and the kernels need no gather. A pixel-major indirection buffer (cached by
// the layer like the GEMM kernels' ones) gives each output pixel its ks row pointers; each task is one
// output row of one image (parallel_for_2d over batch x rows).
#include <algorithm>

#include "core/checked.h"
#include "core/threadpool.h"
#include "kernels/qdwconv_list.h"
#include "ops/qconv/layer.h"
#include "core/kernel_family.h"

namespace nnkern {
namespace {

size_t round64(size_t n) { return (n + 63) / 64 * 64; }

bool needs_copy(const QConvCall& c) { return c.x_type == QType::s8 || c.L.geometry().ocg() > 1; }

size_t copy_bytes(const QConvCall& c) {
  return needs_copy(c) ? checked_round_up(checked_mul(c.N, c.H, c.W, c.L.geometry().OC), 64) : 0;
}

}  // namespace

std::unique_ptr<QConvDwWeights> qconv_pack_depthwise(const QConvGeometry& geo, const int8_t* w, const float* factor,
                                                     const float* offset) {
  auto p = std::make_unique<QConvDwWeights>();
  const size_t OC = geo.OC, ks = geo.ks(), m = geo.ocg();
  const size_t cpad = (OC + kQDwconvChannelPad - 1) / kQDwconvChannelPad * kQDwconvChannelPad;
  p->cpad = cpad;
  p->w.resize(checked_mul(ks, cpad));
  p->wsum.resize(cpad);
  std::fill(p->w.data(), p->w.data() + ks * cpad, 0);
  std::fill(p->wsum.data(), p->wsum.data() + cpad, 0);
  // w: groups x (ks * 1) x m, so output channel oc = g * m + j, tap t at w[(g * ks + t) * m + j].
  for (size_t oc = 0; oc < OC; ++oc)
    for (size_t t = 0; t < ks; ++t) {
      const int32_t v = w[(oc / m * ks + t) * m + oc % m];
      p->w.data()[t * cpad + oc] = v;
      p->wsum.data()[oc] += v;
    }
  qconv_padded_factors(factor, offset, OC, cpad, &p->factor, &p->offset);
  return p;
}

size_t qconv_depthwise_workspace(const QConvCall& c) {
  const size_t OC = c.L.geometry().OC;
  return copy_bytes(c) + round64((OC + kQDwconvChannelPad) * sizeof(int32_t));
}

void qconv_depthwise_run(const QConvCall& c, void* workspace) {
  const QDwconvKernel& k = c.dw ? *c.dw : qdwconv_family().dispatched();
  const QConvGeometry& geo = c.L.geometry();
  const QConvDwWeights& w = c.L.dw_weights();
  const size_t IC = geo.IC, OC = geo.OC, m = geo.ocg(), ks = geo.ks(), OH = c.OH, OW = c.OW;
  uint8_t* ws = static_cast<uint8_t*>(workspace);
  // The input in the uint8 domain, OC channels per row.
  const bool s8 = c.x_type == QType::s8;
  const int32_t za = s8 ? c.L.x_zero() + 128 : c.L.x_zero();
  const uint8_t* base = static_cast<const uint8_t*>(c.x);
  if (needs_copy(c)) {
    const uint8_t flip = s8 ? 0x80 : 0;  // x ^ 0x80 = x + 128 for int8
    const uint8_t* src = base;
    parallel_for(c.N * c.H, [&](size_t row) {
      const uint8_t* s = src + row * c.W * IC;
      uint8_t* d = ws + row * c.W * OC;
      for (size_t px = 0; px < c.W; ++px, s += IC, d += OC)
        for (size_t ic = 0; ic < IC; ++ic)
          for (size_t j = 0; j < m; ++j) d[ic * m + j] = uint8_t(s[ic] ^ flip);
    });
    base = ws;
  }
  // sum (x - za) w = sum x w - za * wsum, modulo 2^32; padding lanes 0.
  int32_t* comp = reinterpret_cast<int32_t*>(ws + copy_bytes(c));
  for (size_t oc = 0; oc < w.cpad; ++oc) comp[oc] = int32_t(0u - uint32_t(za) * uint32_t(w.wsum.data()[oc]));
  const std::shared_ptr<const QConvIndirection> ind = c.L.indirection(c.N, c.H, c.W, nullptr, c.x_type, za);
  QEpilogue ep;
  ep.col_comp = comp;
  ep.out = c.o.out;
  ep.relu = c.o.relu;
  ep.scale = w.factor.size() ? w.factor.data() : nullptr;
  ep.bias = w.offset.size() ? w.offset.data() : nullptr;
  ep.lo = c.o.lo;
  ep.hi = c.o.hi;
  const size_t b_offset = reinterpret_cast<size_t>(base) - kQConvNominalBase;
  const size_t c_elem = qout_elem_size(c.o.out);
  uint8_t* out = static_cast<uint8_t*>(c.o.c);
  QConvFused* fuse = c.o.fuse;
  if (!fuse) {
    parallel_for_2d(c.N, OH, [&](size_t n, size_t oh) {
      const size_t p0 = (n * OH + oh) * OW;
      k.run(OC, OW, ks, ind->ptrs.data() + p0 * ks, ind->zero.data(), b_offset, w.w.data(), w.cpad,
            out + p0 * OC * c_elem, OC, &ep);
    });
    return;
  }
  // Fused: each row in chunks of pixels through a buffer of about kQConvFusedTileBytes; slot = (row, chunk).
  const size_t chunk = std::min(OW, std::max<size_t>(1, kQConvFusedTileBytes / (OC * c_elem)));
  const size_t chunks = (OW + chunk - 1) / chunk;
  fuse->begin(OH, OW, c.N * OH * chunks);
  parallel_for_2d(c.N, OH, [&](size_t n, size_t oh) {
    AlignedBuffer<uint8_t> buf(chunk * OC * c_elem + kQConvFusedSlack);
    for (size_t q = 0; q < chunks; ++q) {
      const size_t p0 = (n * OH + oh) * OW + q * chunk, np = std::min(chunk, OW - q * chunk);
      k.run(OC, np, ks, ind->ptrs.data() + p0 * ks, ind->zero.data(), b_offset, w.w.data(), w.cpad, buf.data(), OC,
            &ep);
      fuse->commit((n * OH + oh) * chunks + q, p0, np, 0, OC, buf.data(), OC);
    }
  });
}

}  // namespace nnkern
