// The "indirect" convolution (QNNPACK q8conv / XNNPACK igemm): each tile of NR output pixels reads its ks = KH*KW
// input rows per pixel through an indirection buffer, built once per input shape and cached by the layer, and
// reduces taps x channels in registers (kernels/qgemm.h, the indirect form). The buffer holds byte offsets into the
// prepared input (from a nominal base), the kernel adds the call's base (b_offset): the same buffer serves every
// input address, and every group (the group's channel offset goes into b_offset too). The last entry of the table:
// it applies to every layer and auto takes it where nothing before prefers the call, and for pointwise layers of
// fewer than kQConvPointwiseIndirectBelow input channels per group on kernels without a whole-panel form. Its
// tiles run one panel per call: several taps already repay a call, and the whole-panel form's loop around the tap
// loop made the 3x3 layers slower (bench/decisions.md "INT8 GEMM: whole panels in one call").
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
// A task's panels should store whole cache lines of each pixel: 16 channels of 8-bit output are a quarter line,
// which tasks of single panels left to four tasks, on any threads.
constexpr size_t kLineBytes = 64;

// Panels per task: enough for a cache line of each pixel's output, fewer where the tasks would not feed every
// thread several times.
size_t panels_per_task(size_t MR, size_t elem, size_t panels, size_t other_tasks) {
  size_t chunk = std::max<size_t>(1, kLineBytes / (MR * elem));
  const size_t want = 4 * size_t(std::max(1, get_num_threads()));
  while (chunk > 1 && qgemm_ceil_div(panels, chunk) * other_tasks < want) chunk /= 2;
  return std::min(chunk, std::max<size_t>(panels, 1));
}

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
    const size_t tiles = qgemm_ceil_div(c.M(), size_t(k.nr)), blocks = qgemm_ceil_div(tiles, kTilesPerTask);
    QEpilogue ep0 = qconv_epilogue(out);
    ep0.k_overread = icg_tail(k);
    if (!out.in_place()) out.begin(c.OH, c.OW, tiles);
    const size_t chunk = panels_per_task(size_t(k.mr), out.tile_elem(), w.panels, geo.groups * blocks);
    // Buffered stages: each task's tiles go through one buffer (slot = tile), allocated once per task.
    const size_t buf_bytes = out.in_place() ? 0 : size_t(k.mr) * size_t(k.nr) * out.tile_elem() * kTilesPerTask;
    parallel_for_3d(geo.groups, qgemm_ceil_div(w.panels, chunk), blocks, [&](size_t g, size_t ch, size_t block) {
      AlignedBuffer<uint8_t> buf(buf_bytes ? buf_bytes + kQConvTileSlack : 0);
      const size_t p0 = block * kTilesPerTask, p1 = std::min(tiles, (block + 1) * kTilesPerTask);
      const size_t panel0 = ch * chunk, panel1 = std::min(w.panels, (ch + 1) * chunk);
      for (size_t panel = panel0; panel < panel1; ++panel)
        run_panel(c, k, in, w, *ind, out, ep0, g, panel, p0, p1, buf.data());
      if (k.finish) k.finish();
      if (out.in_place()) {
        const size_t MR = size_t(k.mr), c0 = panel0 * MR, px0 = p0 * size_t(k.nr);
        out.stored(px0, std::min(c.M(), p1 * size_t(k.nr)) - px0, g * geo.ocg() + c0,
                   std::min(geo.ocg(), panel1 * MR) - c0);
      }
    });
  }

 private:
  // Whether each tap's channels end in a partial group of the kernel (3 of 4: an image's first layer), which the
  // kernel then reads whole (QEpilogue::k_overread) except where it could pass the input's end.
  bool icg_tail(const QGemmKernel& k) const { return L.geometry().icg() % size_t(std::max(k.kgroup, 1)) != 0; }

  // The first output pixel whose taps may point at the input's last pixel, past which nothing is readable: the
  // last image's output rows whose windows reach its last input row. Pixels before it read whole groups.
  static size_t first_edge_pixel(const QConvGeometry& geo, const QConvCall& c) {
    const size_t reach = (geo.KH - 1) * geo.dh, limit = c.H - 1 + geo.pt;  // padded row of the last input row
    const size_t rows = limit > reach ? std::min(c.OH, (limit - reach + geo.sh - 1) / geo.sh) : 0;
    return (c.N - 1) * c.OH * c.OW + rows * c.OW;
  }

  // One panel (MR output channels) of group g over the pixel tiles [t0, t1); buf: the task's tile buffer
  // (buffered stages).
  void run_panel(const QConvCall& c, const QGemmKernel& k, const QConvInput& in, const TapWeights& w,
                 const QConvIndirection& ind, QConvStage& out, const QEpilogue& ep0, size_t g, size_t panel,
                 size_t t0, size_t t1, uint8_t* buf) const {
    const QConvGeometry& geo = L.geometry();
    const size_t MR = size_t(k.mr), NR = size_t(k.nr), esz = qgemm_x_elem_size(k), ks = geo.ks(), M = c.M();
    const size_t icg = geo.icg(), ocg = geo.ocg(), i = panel * MR, mi = std::min(MR, ocg - i);
    const int32_t* cs = w.colsum.data() + g * w.panels * MR + i;
    alignas(64) int32_t comp[64];  // MR <= 64
    QEpilogue ep = ep0;
    if (in.za != 0 && !k.zero_points_in_kernel) {  // sum (x - za) w = sum x w - za colsum (weights symmetric)
      for (size_t ii = 0; ii < MR; ++ii) comp[ii] = ii < mi ? int32_t(0u - uint32_t(in.za) * uint32_t(cs[ii])) : 0;
      ep.col_comp = comp;
    }
    if (k.zero_points_in_kernel) ep.x_zero = in.za;
    ep.scale = L.factor(g) ? L.factor(g) + i : nullptr;
    ep.bias = L.offset(g) ? L.offset(g) + i : nullptr;
    const uint8_t* a = w.panel.data() + g * w.group_bytes + panel * qgemm_panel_bytes(k, icg, ks);
    const size_t b_offset = reinterpret_cast<size_t>(in.base) + g * icg * esz - kQConvNominalBase;
    QEpilogue ep_edge = ep;  // the tiles at the input's end: their taps' last words byte by byte
    ep_edge.k_overread = false;
    const size_t edge = ep.k_overread ? first_edge_pixel(geo, c) : M;
    const auto tile_ep = [&](size_t p0, size_t nj) { return p0 + nj > edge ? &ep_edge : &ep; };
    if (out.in_place()) {
      for (size_t tile = t0; tile < t1; ++tile) {
        const size_t p0 = tile * NR, nj = std::min(NR, M - p0);
        k.run(mi, nj, icg, ks, a, ind.ptrs.data() + tile * ks * NR, ind.zero.data(), b_offset,
              out.at(p0, g * ocg + i), out.ldc(), tile_ep(p0, nj));
      }
      return;
    }
    // The tiles into one buffer, then committed: interleaving each tile's commit with the kernels made the AMX
    // kernel's tile stores wait.
    const size_t tile_bytes = MR * NR * out.tile_elem();
    for (size_t tile = t0; tile < t1; ++tile) {
      const size_t p0 = tile * NR, nj = std::min(NR, M - p0);
      k.run(mi, nj, icg, ks, a, ind.ptrs.data() + tile * ks * NR, ind.zero.data(), b_offset,
            buf + (tile - t0) * tile_bytes, MR, tile_ep(p0, nj));
    }
    for (size_t tile = t0; tile < t1; ++tile) {
      const size_t p0 = tile * NR;
      out.commit(tile, p0, std::min(NR, M - p0), g * ocg + i, mi, buf + (tile - t0) * tile_bytes, MR);
    }
  }

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
  const size_t esz = k ? qgemm_x_elem_size(*k) : 1, NR = k ? size_t(k->nr) : 1, ks = geo.ks();
  const size_t OH = geo.OH(H), OW = geo.OW(W), M = N * OH * OW, tiles = qgemm_ceil_div(M, NR);
  // The GEMM kernels' zero row: a whole group past the channels (a tap's last group may be read whole).
  const size_t zero_n = k ? geo.icg() + size_t(std::max(k->kgroup, 1)) : geo.OC;
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
