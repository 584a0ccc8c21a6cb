// The "indirect" convolution (QNNPACK q8conv / XNNPACK igemm): each tile of NR output pixels reads its
// ks = KH*KW input rows per pixel through an indirection buffer, built once per input shape and cached by
// the layer, and reduces taps x channels in registers (kernels/qgemm.h, the indirect form). The buffer holds
// byte offsets into the prepared input (from a nominal base), the kernel adds the call's base (b_offset): the
// same buffer serves every input address, and every group (the group's channel offset goes into b_offset too).
#include <algorithm>

#include "core/checked.h"
#include "core/threadpool.h"
#include "ops/qconv/layer.h"
#include "ops/qgemm/pack.h"

namespace nnkern {
namespace {

// Pixel tiles per task: enough work per task to amortize its set-up, small enough to balance.
constexpr size_t kTilesPerTask = 16;

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

size_t qconv_indirect_workspace(const QConvCall& c) { return qconv_input_bytes(c); }

void qconv_indirect_run(const QConvCall& c, void* workspace) {
  const QGemmKernel& k = c.k;
  const QConvGeometry& geo = c.L.geometry();
  const QConvInput in = qconv_prepare_input(c, static_cast<uint8_t*>(workspace));
  const QConvWeights& w = c.L.weights(k);
  const std::shared_ptr<const QConvIndirection> ind = c.L.indirection(c.N, c.H, c.W, &k, c.x_type, in.za);
  const size_t MR = size_t(k.mr), NR = size_t(k.nr), esz = qgemm_a_elem_size(k), ks = geo.ks();
  const size_t icg = geo.icg(), ocg = geo.ocg(), OC = geo.OC, M = c.M(), tiles = qgemm_ceil_div(M, NR);
  const size_t blocks = qgemm_ceil_div(tiles, kTilesPerTask), panel_bytes = qgemm_panel_bytes(k, icg, ks);
  const size_t c_elem = qout_elem_size(c.o.out);
  const bool compensate = in.za != 0 && !k.zero_points_in_kernel;
  QConvFused* fuse = c.o.fuse;  // fused stage: the tiles through a buffer, slot = tile
  const size_t tile_bytes = MR * NR * c_elem;
  if (fuse) fuse->begin(c.OH, c.OW, tiles);
  parallel_for_3d(geo.groups, w.panels, blocks, [&](size_t g, size_t panel, size_t block) {
    const size_t i = panel * MR, mi = std::min(MR, ocg - i);
    const int32_t* cs = w.colsum.data() + g * w.panels * MR + i;
    alignas(64) int32_t comp[64];  // MR <= 64
    QEpilogue ep;
    if (compensate) {  // sum (x - za) w = sum x w - za colsum (weights symmetric: no row sums)
      for (size_t ii = 0; ii < MR; ++ii) comp[ii] = ii < mi ? int32_t(0u - uint32_t(in.za) * uint32_t(cs[ii])) : 0;
      ep.col_comp = comp;
    }
    if (k.zero_points_in_kernel) ep.x_zero = in.za;
    ep.out = c.o.out;
    ep.relu = c.o.relu;
    ep.scale = c.L.factor(g) ? c.L.factor(g) + i : nullptr;
    ep.bias = c.L.offset(g) ? c.L.offset(g) + i : nullptr;
    ep.lo = c.o.lo;
    ep.hi = c.o.hi;
    const uint8_t* a = w.taps.data() + g * w.taps_group_bytes + panel * panel_bytes;
    const size_t b_offset = reinterpret_cast<size_t>(in.base) + g * icg * esz - kQConvNominalBase;
    uint8_t* out = static_cast<uint8_t*>(c.o.c);
    const size_t t0 = block * kTilesPerTask, t1 = std::min(tiles, (block + 1) * kTilesPerTask);
    if (!fuse) {
      for (size_t tile = t0; tile < t1; ++tile) {
        const size_t p0 = tile * NR, nj = std::min(NR, M - p0);
        k.run(mi, nj, icg, ks, a, ind->ptrs.data() + tile * ks * NR, ind->zero.data(), b_offset,
              out + (p0 * OC + g * ocg + i) * c_elem, OC, &ep);
      }
    } else {
      // Fused: the task's tiles into one buffer, then committed: interleaving each tile's commit with the
      // kernels made the AMX kernel's tile stores wait (21% of the time in them against 10%, 128x128 32->27).
      AlignedBuffer<uint8_t> buf(tile_bytes * (t1 - t0) + kQConvFusedSlack);
      for (size_t tile = t0; tile < t1; ++tile) {
        const size_t p0 = tile * NR, nj = std::min(NR, M - p0);
        k.run(mi, nj, icg, ks, a, ind->ptrs.data() + tile * ks * NR, ind->zero.data(), b_offset,
              buf.data() + (tile - t0) * tile_bytes, MR, &ep);
      }
      for (size_t tile = t0; tile < t1; ++tile) {
        const size_t p0 = tile * NR;
        fuse->commit(tile, p0, std::min(NR, M - p0), g * ocg + i, mi, buf.data() + (tile - t0) * tile_bytes, MR);
      }
    }
    if (k.finish) k.finish();
  });
}

}  // namespace nnkern
