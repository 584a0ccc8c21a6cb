// The "im2col" convolution: per group, each output pixel's KH*KW input rows (their IC/groups slice, or the
// zero row for padding taps) are copied side by side into a workspace matrix of M x kg, which the packed
// INT8 GEMM driver (ops/qgemm/driver.h) multiplies by the group's prepacked weights. A pointwise
// convolution (1x1, stride 1, no padding) skips the copy: the driver reads the input rows in place.
#include <algorithm>

#include "core/checked.h"
#include "core/workspace.h"
#include "ops/qconv/layer.h"
#include "ops/qgemm/driver.h"
#include "ops/qgemm/pack.h"

namespace nnkern {
namespace {

// Output pixels per im2col task (ops/conv/lowering.cc) and the least rows of a block.
constexpr size_t kPixelsPerTask = 256;
// The im2col matrix is built and multiplied in blocks of rows of about this size (and at least
// kPixelsPerTask rows), so a large batch never needs a KH*KW-times copy of its whole input.
constexpr size_t kColsBlockBytes = size_t(4) << 20;

size_t block_rows(const QConvCall& c) {
  const size_t row = c.L.geometry().kg() * qgemm_a_elem_size(c.k);
  return std::min(c.M(), std::max(kPixelsPerTask, kColsBlockBytes / std::max<size_t>(row, 1)));
}

struct Im2colLayout {
  WorkspaceLayout l;
  size_t input_off, zero_off, cols_off;
  explicit Im2colLayout(const QConvCall& c) {
    const QConvGeometry& geo = c.L.geometry();
    const size_t esz = qgemm_a_elem_size(c.k);
    input_off = l.add(qconv_input_bytes(c));
    zero_off = l.add(geo.pointwise() ? 0 : geo.icg() * esz);
    cols_off = l.add(geo.pointwise() ? 0 : checked_mul(block_rows(c), geo.kg(), esz));
  }
};

// The driver's tile hook for a fused stage: the plan's tile (row j of block r0, channel i of group g) as the
// call's pixel / channel; slot = the NR-aligned pixel tile (tiles start at multiples of NR in each block).
struct FusedHookCtx {
  QConvFused* fuse;
  size_t p_base, c_base, NR;
};

void fused_hook(void* ctx, const QTile& t) {
  const FusedHookCtx& h = *static_cast<const FusedHookCtx*>(ctx);
  const size_t p0 = h.p_base + t.j0;
  h.fuse->commit(p0 / h.NR, p0, t.n, h.c_base + t.i0, t.m, t.c, t.ldc);
}

}  // namespace

size_t qconv_im2col_workspace(const QConvCall& c) { return Im2colLayout(c).l.bytes; }

void qconv_im2col_run(const QConvCall& c, void* workspace) {
  const QGemmKernel& k = c.k;
  const QConvGeometry& geo = c.L.geometry();
  const Im2colLayout lay(c);
  uint8_t* ws = static_cast<uint8_t*>(workspace);
  const QConvInput in = qconv_prepare_input(c, ws + lay.input_off);
  const QConvWeights& w = c.L.weights(k);
  const size_t esz = qgemm_a_elem_size(k), K = geo.kg(), ocg = geo.ocg();
  const bool pw = geo.pointwise();
  if (!pw) qconv_fill_zero_row(k, in.za, geo.icg(), ws + lay.zero_off);
  const size_t M = c.M(), rows = pw ? M : block_rows(c);
  // Fused: a block's last tile and the next block's first may share a slot (blocks need not start at a
  // multiple of NR); the blocks run one after the other, so the slot still adds its pixels in a fixed order.
  if (c.o.fuse) c.o.fuse->begin(c.OH, c.OW, qgemm_ceil_div(M, size_t(k.nr)));
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
      P.packed = w.gemm.data() + g * w.gemm_group_bytes;
      P.colsum = w.colsum.data() + g * w.panels * size_t(k.mr);
      P.b_type = QType::s8;
      P.out = c.o.out;
      P.c_elem = qout_elem_size(c.o.out);
      P.c = c.o.fuse ? nullptr : static_cast<uint8_t*>(c.o.c) + (r0 * geo.OC + g * ocg) * P.c_elem;
      P.ldc = geo.OC;
      P.scale = c.L.factor(g);
      P.bias = c.L.offset(g);
      P.relu = c.o.relu;
      P.lo = c.o.lo;
      P.hi = c.o.hi;
      FusedHookCtx hook{c.o.fuse, r0, g * ocg, size_t(k.nr)};
      if (c.o.fuse) {
        P.hook = &fused_hook;
        P.hook_ctx = &hook;
      }
      qgemm_execute(P);
    }
}

}  // namespace nnkern
