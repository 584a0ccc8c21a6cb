// The "indirect" convolution (QNNPACK q8conv / XNNPACK igemm): each tile of NR output pixels reads its ks = KH*KW
// input rows per pixel through an indirection buffer, built once per input shape and cached by the layer, and
// reduces taps x channels in registers (kernels/qgemm.h, the indirect form). The buffer holds byte offsets into the
// prepared input (from a nominal base), the kernel adds the call's base (b_offset): the same buffer serves every
// input address, and every group (the group's channel offset goes into b_offset too). The last entry of the table:
// it applies to every layer and auto takes it where nothing before prefers the call.
#include <algorithm>
#include <mutex>
#include <vector>

#include "core/checked.h"
#include "core/threadpool.h"
#include "ops/qconv/layer.h"
#include "ops/qgemm/pack.h"

namespace nnkern {
namespace {

// Pixel tiles per task: enough work per task to amortize its set-up, small enough to balance.
constexpr size_t kTilesPerTask = 16;

// Every group's tap panels (each tap padded to the kernel's group, kernels/qgemm.h) and column sums, for one kernel.
struct TapWeights {
  const QGemmKernel* kern;
  size_t panels, group_bytes;
  AlignedBuffer<uint8_t> panel;
  AlignedBuffer<int32_t> colsum;  // [groups][panels * MR]
};

class Indirect final : public QConvAlgorithm {
 public:
  explicit Indirect(const PackedQConv2d& layer) : QConvAlgorithm("indirect", layer) {}

  bool applicable(const QConvCall&) const override { return true; }
  size_t workspace_bytes(const QConvCall& c) const override { return qconv_input_bytes(c, kernel(c)); }

  void run(const QConvCall& c, QConvStage& out, void* workspace) const override {
    const QGemmKernel& k = kernel(c);
    const QConvGeometry& geo = L.geometry();
    const QConvInput in = qconv_prepare_input(c, k, static_cast<uint8_t*>(workspace));
    const TapWeights& w = weights(k);
    const std::shared_ptr<const QConvIndirection> ind = L.indirection(c.N, c.H, c.W, &k, c.x_type, in.za);
    const size_t MR = size_t(k.mr), NR = size_t(k.nr), esz = qgemm_a_elem_size(k), ks = geo.ks();
    const size_t icg = geo.icg(), ocg = geo.ocg(), M = c.M(), tiles = qgemm_ceil_div(M, NR);
    const size_t blocks = qgemm_ceil_div(tiles, kTilesPerTask), panel_bytes = qgemm_panel_bytes(k, icg, ks);
    const bool compensate = in.za != 0 && !k.zero_points_in_kernel;
    const QEpilogue ep0 = qconv_epilogue(out);
    const bool in_place = out.in_place();
    const size_t tile_bytes = MR * NR * out.tile_elem();  // buffered: the tiles through a buffer, slot = tile
    if (!in_place) out.begin(c.OH, c.OW, tiles);
    parallel_for_3d(geo.groups, w.panels, blocks, [&](size_t g, size_t panel, size_t block) {
      const size_t i = panel * MR, mi = std::min(MR, ocg - i);
      const int32_t* cs = w.colsum.data() + g * w.panels * MR + i;
      alignas(64) int32_t comp[64];  // MR <= 64
      QEpilogue ep = ep0;
      if (compensate) {  // sum (x - za) w = sum x w - za colsum (weights symmetric: no row sums)
        for (size_t ii = 0; ii < MR; ++ii) comp[ii] = ii < mi ? int32_t(0u - uint32_t(in.za) * uint32_t(cs[ii])) : 0;
        ep.col_comp = comp;
      }
      if (k.zero_points_in_kernel) ep.x_zero = in.za;
      ep.scale = L.factor(g) ? L.factor(g) + i : nullptr;
      ep.bias = L.offset(g) ? L.offset(g) + i : nullptr;
      const uint8_t* a = w.panel.data() + g * w.group_bytes + panel * panel_bytes;
      const size_t b_offset = reinterpret_cast<size_t>(in.base) + g * icg * esz - kQConvNominalBase;
      const size_t t0 = block * kTilesPerTask, t1 = std::min(tiles, (block + 1) * kTilesPerTask);
      if (in_place) {
        for (size_t tile = t0; tile < t1; ++tile) {
          const size_t p0 = tile * NR, nj = std::min(NR, M - p0);
          k.run(mi, nj, icg, ks, a, ind->ptrs.data() + tile * ks * NR, ind->zero.data(), b_offset,
                out.at(p0, g * ocg + i), out.ldc(), &ep);
        }
      } else {
        // The task's tiles into one buffer, then committed: interleaving each tile's commit with the kernels
        // made the AMX kernel's tile stores wait.
        AlignedBuffer<uint8_t> buf(tile_bytes * (t1 - t0) + kQConvTileSlack);
        for (size_t tile = t0; tile < t1; ++tile) {
          const size_t p0 = tile * NR, nj = std::min(NR, M - p0);
          k.run(mi, nj, icg, ks, a, ind->ptrs.data() + tile * ks * NR, ind->zero.data(), b_offset,
                buf.data() + (tile - t0) * tile_bytes, MR, &ep);
        }
        for (size_t tile = t0; tile < t1; ++tile) {
          const size_t p0 = tile * NR;
          out.commit(tile, p0, std::min(NR, M - p0), g * ocg + i, mi, buf.data() + (tile - t0) * tile_bytes, MR);
        }
      }
      if (k.finish) k.finish();
    });
  }

 private:
  // The kernel suits the depth of the indirect form's reduction: KH*KW taps of IC/groups.
  const QGemmKernel& kernel(const QConvCall& c) const {
    return qconv_gemm_kernel(c, L.geometry().icg(), L.geometry().ks());
  }

  const TapWeights& weights(const QGemmKernel& k) const {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& p : packed_)
      if (p->kern == &k) return *p;
    const QConvGeometry& geo = L.geometry();
    const size_t MR = size_t(k.mr), G = geo.groups, N = geo.ocg(), icg = geo.icg(), ks = geo.ks(), K = geo.kg();
    auto p = std::make_unique<TapWeights>();
    p->kern = &k;
    p->panels = qgemm_ceil_div(N, MR);
    p->group_bytes = p->panels * qgemm_panel_bytes(k, icg, ks);
    p->panel.resize(checked_mul(G, p->group_bytes));
    p->colsum.resize(checked_mul(G, p->panels, MR));
    for (size_t g = 0; g < G; ++g) {
      const int8_t* b = L.raw_weights() + g * K * N;  // K x N row-major
      for (size_t i = 0; i < p->panels; ++i)  // with the sums over all kg weights of each channel
        qgemm_pack_panel_taps(k, QType::s8, p->panel.data() + g * p->group_bytes + i * qgemm_panel_bytes(k, icg, ks),
                              b, N, icg, ks, icg * N, i * MR, std::min(MR, N - i * MR),
                              p->colsum.data() + (g * p->panels + i) * MR);
    }
    packed_.push_back(std::move(p));
    return *packed_.back();
  }

  mutable std::mutex mu_;
  mutable std::vector<std::unique_ptr<TapWeights>> packed_;  // one per kernel used, never dropped
};

}  // namespace

std::shared_ptr<const QConvIndirection> qconv_build_indirection(const QConvGeometry& geo, size_t N, size_t H,
                                                                size_t W, const QGemmKernel* k, QType x_type,
                                                                int32_t za_eff) {
  auto e = std::make_shared<QConvIndirection>();
  e->N = N, e->H = H, e->W = W, e->kern = k, e->x_type = x_type;
  // Depthwise (k null): one pixel per "tile", rows of OC uint8 (the input, channels repeated m times).
  const size_t esz = k ? qgemm_a_elem_size(*k) : 1, NR = k ? size_t(k->nr) : 1, ks = geo.ks();
  const size_t OH = geo.OH(H), OW = geo.OW(W), M = N * OH * OW, tiles = qgemm_ceil_div(M, NR);
  const size_t zero_n = k ? geo.icg() : geo.OC;
  e->zero.resize(std::max<size_t>(zero_n * esz, 1));
  if (k) qconv_fill_zero_row(*k, za_eff, zero_n, e->zero.data());
  else std::fill(e->zero.data(), e->zero.data() + zero_n, uint8_t(za_eff));
  e->ptrs.resize(std::max<size_t>(checked_mul(tiles, ks, NR), 1));
  conv_fill_indirection(geo, {N, H, W}, NR, k ? geo.IC * esz : geo.OC, e->zero.data(), e->ptrs.data());
  return e;
}

std::unique_ptr<QConvAlgorithm> make_qconv_indirect(const PackedQConv2d& layer) {
  return std::make_unique<Indirect>(layer);
}

}  // namespace nnkern
