// The "im2col" convolution: per group, each output pixel's KH*KW input rows (their IC/groups slice, or the zero row
// for padding taps) are copied side by side into a workspace matrix of M x kg, which the packed INT8 GEMM driver
// (ops/qgemm/driver.h) multiplies by the group's prepacked weights. A pointwise convolution (1x1, stride 1, no
// padding) skips the copy: the driver reads the input rows in place. auto takes it for pointwise layers (of
// kQConvPointwiseIndirectBelow input channels per group or more, or any with a whole-panel kernel:
// ops/qconv/algorithm.h), and for windows of 25 taps or more over 1-3 channels (stems) where direct has no SIMD
// kernel: the indirect form pads each tap's channels to the kernel's group of 4 and pays a pointer per tap, one
// copy of the window does neither (bench/decisions.md "QConv2d: auto's rule").
#include <algorithm>
#include <mutex>
#include <vector>

#include "core/checked.h"
#include "core/workspace.h"
#include "ops/qconv/layer.h"
#include "ops/qgemm/driver.h"
#include "ops/qgemm/pack.h"

namespace nnkern {
namespace {

// Output pixels per im2col task (ops/conv/lowering.cc) and the least rows of a block.
constexpr size_t kPixelsPerTask = 256;
// The im2col matrix is built and multiplied in blocks of rows of about this size (and at least kPixelsPerTask
// rows), so a large batch never needs a KH*KW-times copy of its whole input.
constexpr size_t kColsBlockBytes = size_t(4) << 20;

// Every group's GEMM panels (K = kg rounded to the kernel's group) and column sums, for one kernel.
struct GemmWeights {
  const QGemmKernel* kern;
  size_t panels, group_bytes;
  AlignedBuffer<uint8_t> panel;
  AlignedBuffer<int32_t> colsum;  // [groups][panels * MR]
};

// The driver's tile hook for a buffered stage: the plan's tile (row j of block r0, channel i of group g) as the
// call's pixel / channel; slot = the NR-aligned pixel tile (tiles start at multiples of NR in each block).
struct HookCtx {
  QConvStage* out;
  size_t p_base, c_base, NR;
};

void commit_tile(void* ctx, const QTile& t) {
  const HookCtx& h = *static_cast<const HookCtx*>(ctx);
  const size_t p0 = h.p_base + t.j0;
  h.out->commit(p0 / h.NR, p0, t.n, h.c_base + t.i0, t.m, t.c, t.ldc);
}

// In place: a task's stored block (channels [i0, i1) x rows [j0, j1) of the plan) to the stage.
void stored_block(void* ctx, size_t i0, size_t i1, size_t j0, size_t j1) {
  const HookCtx& h = *static_cast<const HookCtx*>(ctx);
  h.out->stored(h.p_base + j0, j1 - j0, h.c_base + i0, i1 - i0);
}

class Im2col final : public QConvAlgorithm {
 public:
  explicit Im2col(const PackedQConv2d& layer) : QConvAlgorithm("im2col", layer) {}

  bool applicable(const QConvCall&) const override { return true; }
  bool preferred(const QConvCall& c) const override {
    const QConvGeometry& g = L.geometry();
    return (g.pointwise() && (g.icg() >= kQConvPointwiseIndirectBelow || kernel(c).run_panels)) ||
           (g.icg() <= 3 && g.ks() >= 25);
  }
  size_t workspace_bytes(const QConvCall& c) const override { return Layout(c, kernel(c)).l.bytes; }

  void run(const QConvCall& c, QConvStage& out, void* workspace) const override {
    const QGemmKernel& k = kernel(c);
    const QConvGeometry& geo = L.geometry();
    const Layout lay(c, k);
    uint8_t* ws = static_cast<uint8_t*>(workspace);
    const QConvInput in = qconv_prepare_input(c, k, ws + lay.input_off);
    const GemmWeights& w = weights(k);
    const size_t esz = qgemm_x_elem_size(k), K = geo.kg(), ocg = geo.ocg();
    const bool pw = geo.pointwise();
    if (!pw) qconv_fill_zero_row(k, in.za, geo.icg(), ws + lay.zero_off);
    const size_t M = c.M(), rows = pw ? M : lay.rows;
    const QConvRequant& t = out.tile_epilogue();
    // Buffered: a block's last tile and the next block's first may share a slot (blocks need not start at a
    // multiple of NR); the blocks run one after the other, so the slot still sums its pixels in a fixed order.
    if (!out.in_place()) out.begin(c.OH, c.OW, qgemm_ceil_div(M, size_t(k.nr)));
    for (size_t g = 0; g < geo.groups; ++g)
      for (size_t r0 = 0; r0 < M; r0 += rows) {
        QPlan P{};
        P.kern = &k;
        P.M = std::min(rows, M - r0);
        P.N = ocg;
        P.K = K;
        P.kc = qgemm_choose_kc(k, K);
        if (pw) {  // the input rows themselves, at the group's channel offset
          P.a = in.base + g * K * esz;
          P.a_row_bytes = in.row_bytes;
        } else {
          const size_t tap = geo.icg() * esz;
          conv_im2col(geo, {c.N, c.H, c.W}, in.base + g * tap, in.row_bytes, tap, ws + lay.zero_off, r0, r0 + P.M,
                      ws + lay.cols_off);
          P.a = ws + lay.cols_off;
          P.a_row_bytes = K * esz;
        }
        P.za = in.za;
        P.packed = w.panel.data() + g * w.group_bytes;
        P.colsum = w.colsum.data() + g * w.panels * size_t(k.mr);
        P.b_type = QType::s8;
        P.out = t.out;
        P.c_elem = qout_elem_size(t.out);
        P.c = out.in_place() ? out.at(r0, g * ocg) : nullptr;
        P.ldc = out.ldc();
        P.scale = L.factor(g);
        P.bias = L.offset(g);
        P.relu = t.relu;
        P.lo = t.lo;
        P.hi = t.hi;
        HookCtx hook{&out, r0, g * ocg, size_t(k.nr)};
        if (!out.in_place()) {
          P.hook = &commit_tile;
          P.hook_ctx = &hook;
        } else {
          P.stored = &stored_block;
          P.stored_ctx = &hook;
        }
        qgemm_execute(P);
      }
  }

 private:
  // The GEMM's depth is one row of K = KH*KW*IC/groups (the 7x7 stem's 147, where AMX beats VNNI).
  const QGemmKernel& kernel(const QConvCall& c) const { return qconv_gemm_kernel(c, L.geometry().kg(), 1); }

  struct Layout {
    WorkspaceLayout l;
    size_t rows, input_off, zero_off, cols_off;
    Layout(const QConvCall& c, const QGemmKernel& k) {
      const QConvGeometry& geo = c.L.geometry();
      const size_t esz = qgemm_x_elem_size(k), row = geo.kg() * esz;
      rows = std::min(c.M(), std::max(kPixelsPerTask, kColsBlockBytes / std::max<size_t>(row, 1)));
      input_off = l.add(qconv_input_bytes(c, k));
      zero_off = l.add(geo.pointwise() ? 0 : geo.icg() * esz);
      cols_off = l.add(geo.pointwise() ? 0 : checked_mul(rows, geo.kg(), esz));
    }
  };

  const GemmWeights& weights(const QGemmKernel& k) const {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& p : packed_)
      if (p->kern == &k) return *p;
    const QConvGeometry& geo = L.geometry();
    const size_t MR = size_t(k.mr), G = geo.groups, N = geo.ocg(), K = geo.kg();
    auto p = std::make_unique<GemmWeights>();
    p->kern = &k;
    p->panels = qgemm_ceil_div(N, MR);
    p->group_bytes = p->panels * qgemm_panel_bytes(k, K);
    p->panel.resize(checked_mul(G, p->group_bytes));
    p->colsum.resize(checked_mul(G, p->panels, MR));
    for (size_t g = 0; g < G; ++g)
      qgemm_pack_all(k, QType::s8, L.raw_weights() + g * K * N, N, K, N, p->panel.data() + g * p->group_bytes,
                     p->colsum.data() + g * p->panels * MR);
    packed_.push_back(std::move(p));
    return *packed_.back();
  }

  mutable std::mutex mu_;
  mutable std::vector<std::unique_ptr<GemmWeights>> packed_;  // one per kernel used, never dropped
};

}  // namespace

std::unique_ptr<QConvAlgorithm> make_qconv_im2col(const PackedQConv2d& layer) { return std::make_unique<Im2col>(layer); }

}  // namespace nnkern
