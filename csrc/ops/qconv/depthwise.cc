// The "depthwise" convolution (groups == IC, multiplier m = OC / IC): XNNPACK's dwconv unipass. The input goes to
// the kernels as uint8 rows of OC channels: x itself for uint8 with m = 1, otherwise one copy that shifts int8 by
// +128 (as the GEMM paths' u8s8 domain) and repeats each channel m times, so output channel c * m + j reads lane
// c * m + j and the kernels need no gather. A pixel-major indirection buffer (cached by the layer like the GEMM
// kernels' ones) gives each output pixel its ks row pointers; each task is one output row of one image. auto takes
// it for every depthwise layer of more than one group (groups == IC: a per-group GEMM would be 1 x ks x m; a single
// input channel is a plain convolution, where the others are faster).
#include <algorithm>
#include <mutex>

#include "core/checked.h"
#include "core/kernel_family.h"
#include "core/threadpool.h"
#include "kernels/qdwconv_list.h"
#include "ops/qconv/layer.h"

namespace nnkern {
namespace {

// int32 [ks][cpad] weights (output channel oc = g * m + j at column oc), the per-channel weight sums that fold the
// input zero point, and the factor / offset contiguous over OC. Padding is zero.
struct DwWeights {
  size_t cpad = 0;
  AlignedBuffer<int32_t> w, wsum;
  AlignedBuffer<float> factor, offset;  // empty for int32 output
};

class Depthwise final : public QConvAlgorithm {
 public:
  explicit Depthwise(const PackedQConv2d& layer) : QConvAlgorithm("depthwise", layer) {}

  bool applicable(const QConvCall&) const override { return L.geometry().depthwise(); }
  bool preferred(const QConvCall&) const override { return L.geometry().groups > 1; }
  size_t workspace_bytes(const QConvCall& c) const override {
    return checked_add(copy_bytes(c), checked_round_up((L.geometry().OC + kQDwconvChannelPad) * sizeof(int32_t), 64));
  }

  void run(const QConvCall& c, QConvStage& out, void* workspace) const override {
    const QDwconvKernel* named = c.kernel.empty() ? nullptr : qdwconv_family().named(c.kernel);
    const QDwconvKernel& k = named ? *named : qdwconv_family().dispatched();
    const QConvGeometry& geo = L.geometry();
    const DwWeights& w = weights();
    const size_t IC = geo.IC, OC = geo.OC, m = geo.ocg(), ks = geo.ks(), OH = c.OH, OW = c.OW;
    uint8_t* ws = static_cast<uint8_t*>(workspace);
    // The input in the uint8 domain, OC channels per row.
    const bool s8 = c.x_type == QType::s8;
    const int32_t za = s8 ? L.x_zero() + 128 : L.x_zero();
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
    const std::shared_ptr<const QConvIndirection> ind = L.indirection(c.N, c.H, c.W, nullptr, c.x_type, za);
    QEpilogue ep = qconv_epilogue(out);
    ep.col_comp = comp;
    ep.scale = w.factor.size() ? w.factor.data() : nullptr;
    ep.bias = w.offset.size() ? w.offset.data() : nullptr;
    const size_t b_offset = reinterpret_cast<size_t>(base) - kQConvNominalBase;
    if (out.in_place()) {
      parallel_for_2d(c.N, OH, [&](size_t n, size_t oh) {
        const size_t p0 = (n * OH + oh) * OW;
        k.run(OC, OW, ks, ind->ptrs.data() + p0 * ks, ind->zero.data(), b_offset, w.w.data(), w.cpad, out.at(p0, 0),
              out.ldc(), &ep);
        out.stored(p0, OW, 0, OC);
      });
      return;
    }
    // Buffered: each row in chunks of pixels through a buffer of about kQConvTileBytes; slot = (row, chunk).
    const size_t esz = out.tile_elem();
    const size_t chunk = std::min(OW, std::max<size_t>(1, kQConvTileBytes / (OC * esz)));
    const size_t chunks = (OW + chunk - 1) / chunk;
    out.begin(OH, OW, c.N * OH * chunks);
    parallel_for_2d(c.N, OH, [&](size_t n, size_t oh) {
      AlignedBuffer<uint8_t> buf(chunk * OC * esz + kQConvTileSlack);
      for (size_t q = 0; q < chunks; ++q) {
        const size_t p0 = (n * OH + oh) * OW + q * chunk, np = std::min(chunk, OW - q * chunk);
        k.run(OC, np, ks, ind->ptrs.data() + p0 * ks, ind->zero.data(), b_offset, w.w.data(), w.cpad, buf.data(), OC,
              &ep);
        out.commit((n * OH + oh) * chunks + q, p0, np, 0, OC, buf.data(), OC);
      }
    });
  }

 private:
  static bool needs_copy(const QConvCall& c) { return c.x_type == QType::s8 || c.L.geometry().ocg() > 1; }
  static size_t copy_bytes(const QConvCall& c) {
    return needs_copy(c) ? checked_round_up(checked_mul(c.N, c.H, c.W, c.L.geometry().OC), 64) : 0;
  }

  const DwWeights& weights() const {
    std::lock_guard<std::mutex> lock(mu_);
    if (packed_) return *packed_;
    const QConvGeometry& geo = L.geometry();
    const size_t OC = geo.OC, ks = geo.ks(), m = geo.ocg();
    auto p = std::make_unique<DwWeights>();
    p->cpad = (OC + kQDwconvChannelPad - 1) / kQDwconvChannelPad * kQDwconvChannelPad;
    p->w.resize(checked_mul(ks, p->cpad));
    p->wsum.resize(p->cpad);
    std::fill(p->w.data(), p->w.data() + ks * p->cpad, 0);
    std::fill(p->wsum.data(), p->wsum.data() + p->cpad, 0);
    // The weights: groups x (ks * 1) x m, so output channel oc = g * m + j, tap t at [(g * ks + t) * m + j].
    const int8_t* raw = L.raw_weights();
    for (size_t oc = 0; oc < OC; ++oc)
      for (size_t t = 0; t < ks; ++t) {
        const int32_t v = raw[(oc / m * ks + t) * m + oc % m];
        p->w.data()[t * p->cpad + oc] = v;
        p->wsum.data()[oc] += v;
      }
    qconv_contiguous_factors(L, p->cpad, &p->factor, &p->offset);
    packed_ = std::move(p);
    return *packed_;
  }

  mutable std::mutex mu_;
  mutable std::unique_ptr<DwWeights> packed_;
};

}  // namespace

std::unique_ptr<QConvAlgorithm> make_qconv_depthwise(const PackedQConv2d& layer) {
  return std::make_unique<Depthwise>(layer);
}

}  // namespace nnkern
