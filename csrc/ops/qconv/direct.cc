// The "direct" convolution (seeds I8-I10): no GEMM and no indirection. The input is copied once into the uint8
// domain with its padding materialized: per image the R x C grid of padded pixels the windows reach (R = (OH - 1) *
// sh + (KH - 1) * dh + 1 rows from the top padding on, C likewise), padding pixels holding the effective zero point,
// int8 shifted by +128, channels zero-padded to icp = a multiple of 4. The kernels (kernels/qconv_direct.h) then
// walk the window with plain strides and no bounds test: a padding tap reads za and adds za * w, which the
// column-sum compensation -za * colsum removes exactly, as in the indirect path's zero row. The algorithm applies
// only where that grid is at most kMaxCopyRatio times the input plus the windows' reads, so a huge stride or padding
// never buys a copy larger than the call's work. The weights are packed once per layer in blocks of
// kQConvDirectOcBlock output channels (KH x KW taps of icp / 4 groups of 64 lanes x 4 bytes). Tasks are (OC block,
// image, output row), the block outermost so that a thread's consecutive rows reuse the block's weights from its
// cache. groups == 1 only.
//
// auto takes it for windows of >= 25 taps over 1-3 input channels (7x7 stems, 5x5 input layers), where the GEMM
// kernels' k = 1-3 per tap leaves most of each VNNI group's work to the k % 4 tail and the padded copy makes every
// tap one group; on VNNI kernels only (auto_pick: not the scalar reference). docs/performance.md has the figures.
#include <algorithm>
#include <mutex>
#include <stdexcept>

#include "core/checked.h"
#include "core/kernel_family.h"
#include "core/threadpool.h"
#include "kernels/qconv_direct_list.h"
#include "ops/qconv/layer.h"

namespace nnkern {
namespace {

// The padded copy may hold at most this many times the pixels of the input plus those the windows read.
constexpr double kMaxCopyRatio = 4.0;

size_t icp_of(const QConvGeometry& geo) { return (geo.IC + 3) / 4 * 4; }

// The padded grid of one image the windows reach: rows x cols pixels.
struct CopyGrid {
  size_t rows, cols;
  explicit CopyGrid(const QConvCall& c) {
    const QConvGeometry& g = c.L.geometry();
    rows = (c.OH - 1) * g.sh + (g.KH - 1) * g.dh + 1;
    cols = (c.OW - 1) * g.sw + (g.KW - 1) * g.dw + 1;
  }
};

size_t copy_bytes(const QConvCall& c) {
  const CopyGrid grid(c);
  return checked_round_up(checked_mul(c.N, grid.rows, grid.cols, icp_of(c.L.geometry())), 64);
}

// Blocks of kQConvDirectOcBlock output channels, block_bytes each, and the column sums / factor / offset over
// blocks * kQConvDirectOcBlock channels, padding zero.
struct DirectWeights {
  size_t blocks = 0, icp = 0, block_bytes = 0;
  AlignedBuffer<int8_t> w;
  AlignedBuffer<int32_t> colsum;
  AlignedBuffer<float> factor, offset;  // empty for int32 output
};

class Direct final : public QConvAlgorithm {
 public:
  explicit Direct(const PackedQConv2d& layer) : QConvAlgorithm("direct", layer) {}

  bool applicable(const QConvCall& c) const override {
    const QConvGeometry& g = L.geometry();
    if (g.groups != 1) return false;
    const CopyGrid grid(c);
    const double copied = double(grid.rows) * double(grid.cols);
    const double used = double(c.H) * double(c.W) + double(c.OH) * double(c.OW) * double(g.ks());
    return copied <= kMaxCopyRatio * used;
  }
  bool preferred(const QConvCall& c) const override {
    const QConvGeometry& g = L.geometry();
    return g.icg() <= 3 && g.ks() >= 25 && kernel(c).auto_pick;
  }
  size_t workspace_bytes(const QConvCall& c) const override {
    const size_t cpad = ceil_div(L.geometry().OC, kQConvDirectOcBlock) * kQConvDirectOcBlock;
    return checked_add(copy_bytes(c), checked_round_up(cpad * sizeof(int32_t), 64));
  }

  void run(const QConvCall& c, QConvStage& out, void* workspace) const override {
    const QConvDirectKernel& k = kernel(c);
    const QConvGeometry& geo = L.geometry();
    const DirectWeights& w = weights();
    const size_t IC = geo.IC, OC = geo.OC, icp = w.icp, B = kQConvDirectOcBlock;
    const CopyGrid grid(c);
    const size_t Hp = grid.rows, Wp = grid.cols, OH = c.OH, OW = c.OW;
    uint8_t* xp = static_cast<uint8_t*>(workspace);
    const bool s8 = c.x_type == QType::s8;
    const int32_t za = s8 ? L.x_zero() + 128 : L.x_zero();
    const uint8_t flip = s8 ? 0x80 : 0, zb = uint8_t(za);
    const uint8_t* x = static_cast<const uint8_t*>(c.x);
    // The padded copy, one row of the grid per task (Hp x Wp: the grid's rows and columns).
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
    int32_t* comp = reinterpret_cast<int32_t*>(xp + copy_bytes(c));
    for (size_t oc = 0; oc < w.blocks * B; ++oc)
      comp[oc] = int32_t(0u - uint32_t(za) * uint32_t(w.colsum.data()[oc]));
    const QEpilogue ep0 = qconv_epilogue(out);
    const size_t x_pixel = geo.sw * icp, x_kh = geo.dh * Wp * icp, x_kw = geo.dw * icp;
    // Buffered: each row in chunks of whole pixel blocks through a stack buffer (ld B); slot = (row, chunk).
    const bool in_place = out.in_place();
    const size_t esz = out.tile_elem(), px = size_t(k.pixels), room = kQConvTileBytes - kQConvTileSlack;
    const size_t chunk = in_place ? OW : std::min(OW, std::max(px, room / (B * esz) / px * px));
    const size_t chunks = (OW + chunk - 1) / chunk;
    if (!in_place) {
      if (chunk * B * esz + kQConvTileSlack > kQConvTileBytes)
        throw std::invalid_argument("qconv2d: tile too large for the output stage's buffer");
      out.begin(OH, OW, c.N * OH * chunks);
    }
    parallel_for_3d(w.blocks, c.N, OH, [&](size_t b, size_t n, size_t oh) {
      QEpilogue ep = ep0;
      ep.col_comp = comp + b * B;
      ep.scale = w.factor.size() ? w.factor.data() + b * B : nullptr;
      ep.bias = w.offset.size() ? w.offset.data() + b * B : nullptr;
      const size_t m = std::min(B, OC - b * B);
      const uint8_t* xr = xp + (n * Hp + oh * geo.sh) * Wp * icp;
      const int8_t* wb = w.w.data() + b * w.block_bytes;
      const size_t p0 = (n * OH + oh) * OW;
      if (in_place) {
        k.run(m, OW, xr, x_pixel, x_kh, x_kw, geo.KH, geo.KW, icp, wb, out.at(p0, b * B), out.ldc(), &ep);
        out.stored(p0, OW, b * B, m);
        return;
      }
      alignas(64) uint8_t buf[kQConvTileBytes];
      for (size_t q = 0; q < chunks; ++q) {
        const size_t np = std::min(chunk, OW - q * chunk);
        k.run(m, np, xr + q * chunk * x_pixel, x_pixel, x_kh, x_kw, geo.KH, geo.KW, icp, wb, buf, B, &ep);
        out.commit((n * OH + oh) * chunks + q, p0 + q * chunk, np, b * B, m, buf, B);
      }
    });
  }

 private:
  static const QConvDirectKernel& kernel(const QConvCall& c) {
    const QConvDirectKernel* named = c.kernel.empty() ? nullptr : qconv_direct_family().named(c.kernel);
    return named ? *named : qconv_direct_family().dispatched();
  }

  const DirectWeights& weights() const {
    std::lock_guard<std::mutex> lock(mu_);
    if (packed_) return *packed_;
    const QConvGeometry& geo = L.geometry();
    const size_t OC = geo.OC, IC = geo.IC, ks = geo.ks(), icp = icp_of(geo), B = kQConvDirectOcBlock;
    auto p = std::make_unique<DirectWeights>();
    p->blocks = (OC + B - 1) / B;
    p->icp = icp;
    p->block_bytes = checked_mul(ks, icp, B);
    const size_t cpad = p->blocks * B;
    p->w.resize(checked_mul(p->blocks, p->block_bytes));
    p->colsum.resize(cpad);
    std::fill(p->w.data(), p->w.data() + p->blocks * p->block_bytes, int8_t(0));
    std::fill(p->colsum.data(), p->colsum.data() + cpad, 0);
    // The weights: ks * IC rows (tap t, channel ic at row t * IC + ic) of OC columns (groups == 1).
    const int8_t* raw = L.raw_weights();
    for (size_t t = 0; t < ks; ++t)
      for (size_t ic = 0; ic < IC; ++ic)
        for (size_t oc = 0; oc < OC; ++oc) {
          const int8_t v = raw[(t * IC + ic) * OC + oc];
          p->w.data()[(oc / B) * p->block_bytes + (t * icp + ic / 4 * 4) * B + (oc % B) * 4 + ic % 4] = v;
          p->colsum.data()[oc] += v;
        }
    qconv_contiguous_factors(L, cpad, &p->factor, &p->offset);
    packed_ = std::move(p);
    return *packed_;
  }

  mutable std::mutex mu_;
  mutable std::unique_ptr<DirectWeights> packed_;
};

}  // namespace

std::unique_ptr<QConvAlgorithm> make_qconv_direct(const PackedQConv2d& layer) { return std::make_unique<Direct>(layer); }

}  // namespace nnkern
