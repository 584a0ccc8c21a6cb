// The packed INT8 convolution layer (ops/qconv/layer.h): weight packing per kernel, the indirection-buffer
// cache, and the "qconv2d" algorithm table.
#include "ops/qconv/layer.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "core/checked.h"
#include "core/algorithm.h"
#include "core/threadpool.h"
#include "core/workspace.h"
#include "ops/qgemm/driver.h"
#include "ops/qgemm/pack.h"

namespace nnkern {
namespace {

// A residual layer computes its float32 pre-activation for about this many bytes of images at a time
// (at least one image), about half of a core's L2 on the CPUs measured.
constexpr size_t kResidualChunkBytes = size_t(1) << 20;

// auto's one use of "direct": a window of >= 25 taps (5x5 and up) over 1-3 input channels (the ResNet-50 /
// GoogLeNet 7x7 stems, a super-resolution network's 5x5 input layer), where the GEMM kernels' k = 1-3 per tap
// leaves most of each VNNI group's work to the k % 4 tail and the direct kernels' padded copy makes every tap
// one group. Measured on one Sapphire Rapids core (Intel Xeon, GOP/s direct / im2col / indirect):
// 224x224 3->64 7x7/2 324 / 311 / 232; 112x112 3->64 7x7/1 402 / 313 / 230; 128x128 3->64 5x5/1
// 312 / 225 / 213; 2->64 5x5/1 208 / 177 / 163; 1->64 5x5/1 96 / 76 / 69; 1->64 7x7/1 130 / 114 / 80; but
// 5x5/2 ties (222 / 238 / 229), 1->64 7x7/2 prefers im2col (100 / 117 / 80), 3x3 loses (224x224 3->32
// 3x3/2: 73 / 80 / 129; 1->32 3x3/1: 43 / 28 / 46), and 4 channels tie (5x5/1: 441 / 289 / 476).
bool direct_preferred(const QConvCall& c) {
  const QConvGeometry& g = c.L.geometry();
  return g.groups == 1 && g.icg() <= 3 && g.ks() >= 25 && qconv_direct_applies(c) && qconv_direct_auto_pick(c);
}

const AlgorithmTable<QConvCall>& qconv_algorithms() {
  // auto: depthwise for every depthwise layer of more than one group (groups == IC: a per-group GEMM would be
  // 1 x ks x m; one input channel is a plain convolution, where the others run 2-3x faster: 128x128 1->64 5x5
  // direct 102 vs depthwise 34 GOP/s, 1->32 3x3 indirect 48 vs 16 on one Sapphire Rapids core), then
  // low_ofm for groups == 1 and OC <= 4 where a SIMD low_ofm kernel runs (x86: pixels in lanes beat channels
  // in lanes of which OC would fill 4 at most; against AMX only up to 256 input channels, and strided only
  // under 16 of them or with 25 taps or more: qconv_low_ofm_preferred), then
  // im2col for the pointwise case (a plain GEMM over the input rows, no copy), direct for a window of >= 25
  // taps over 1-3 input channels (direct_preferred), indirect otherwise (no KH*KW-fold copy of the input).
  static const AlgorithmTable<QConvCall> table("qconv2d", {
      {"depthwise", [](const QConvCall& c) { return c.L.geometry().depthwise(); },
       [](const QConvCall& c) { return c.L.geometry().groups > 1; },
       &qconv_depthwise_workspace, [](const QConvCall& c, const Workspace& ws) { qconv_depthwise_run(c, ws.data()); }},
      {"low_ofm", &qconv_low_ofm_applies, &qconv_low_ofm_preferred, &qconv_low_ofm_workspace,
       [](const QConvCall& c, const Workspace& ws) { qconv_low_ofm_run(c, ws.data()); }},
      {"im2col", [](const QConvCall&) { return true; },
       [](const QConvCall& c) { return c.L.geometry().pointwise(); }, &qconv_im2col_workspace,
       [](const QConvCall& c, const Workspace& ws) { qconv_im2col_run(c, ws.data()); }},
      {"indirect", [](const QConvCall&) { return true; }, [](const QConvCall& c) { return !direct_preferred(c); },
       &qconv_indirect_workspace,
       [](const QConvCall& c, const Workspace& ws) { qconv_indirect_run(c, ws.data()); }},
      {"direct", &qconv_direct_applies, &direct_preferred, &qconv_direct_workspace,
       [](const QConvCall& c, const Workspace& ws) { qconv_direct_run(c, ws.data()); }},
  });
  return table;
}

[[maybe_unused]] const bool algorithms_registered = (qconv_algorithms(), true);

const QConvGeometry& valid_geometry(const QConvGeometry& geo) {
  if (!geo.valid()) throw std::invalid_argument("qconv2d: bad geometry");
  return geo;
}

// dst (N x OC x P) = src (N x P x OC), elements of esz bytes.
void nhwc_to_planar(const uint8_t* src, uint8_t* dst, size_t N, size_t P, size_t OC, size_t esz) {
  parallel_for(N * OC, [&](size_t t) {
    const uint8_t* s = src + ((t / OC) * P * OC + t % OC) * esz;
    uint8_t* d = dst + t * P * esz;
    for (size_t p = 0; p < P; ++p) std::memcpy(d + p * esz, s + p * OC * esz, esz);
  });
}

// Runs a on the call; a planar output that a does not write itself (all but low_ofm) goes through an NHWC copy.
void run_algorithm(const Algorithm<QConvCall>& a, const QConvCall& c) {
  if (!c.o.planar || std::strcmp(a.name, "low_ofm") == 0) {
    Workspace ws(a.workspace_bytes ? a.workspace_bytes(c) : 0);
    a.run(c, ws);
    return;
  }
  const size_t OC = c.L.geometry().OC, esz = qout_elem_size(c.o.out);
  Workspace tmp(c.M() * OC * esz);
  QConvOutput nhwc = c.o;
  nhwc.planar = false;
  nhwc.c = tmp.data();
  const QConvCall c2{c.L, c.k, c.N, c.H, c.W, c.OH, c.OW, c.x_type, c.x, nhwc, c.dw, c.direct, c.low_ofm};
  {
    Workspace ws(a.workspace_bytes ? a.workspace_bytes(c2) : 0);
    a.run(c2, ws);
  }
  nhwc_to_planar(tmp.as<uint8_t>(), static_cast<uint8_t*>(c.o.c), c.N, c.OH * c.OW, OC, esz);
}

}  // namespace

PackedQConv2d::PackedQConv2d(const QConvGeometry& geo, const int8_t* w, const float* factor, const float* offset,
                             int32_t x_zero)
    : geo_(valid_geometry(geo)), kernel_(&qgemm_kernel(8, geo.icg(), geo.ks())), x_zero_(x_zero),
      pad_(qgemm_padded_n(geo.ocg())) {
  const size_t n = geo.groups * geo.kg() * geo.ocg();
  raw_.resize(n);
  std::copy(w, w + n, raw_.data());
  if (factor) {
    factor_.resize(geo.groups * pad_);
    offset_.resize(geo.groups * pad_);
    for (size_t g = 0; g < geo.groups; ++g)
      for (size_t o = 0; o < pad_; ++o) {
        const bool in = o < geo.ocg();
        factor_.data()[g * pad_ + o] = in ? factor[g * geo.ocg() + o] : 0.0f;
        offset_.data()[g * pad_ + o] = in ? offset[g * geo.ocg() + o] : 0.0f;
      }
  }
  weights(*kernel_);  // the dispatched kernel's panels now, not in the first call
}

const QConvWeights& PackedQConv2d::weights(const QGemmKernel& k) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& p : packed_)
    if (p->kern == &k) return *p;
  auto p = std::make_unique<QConvWeights>();
  const size_t MR = size_t(k.mr), G = geo_.groups, N = geo_.ocg(), icg = geo_.icg(), ks = geo_.ks(), K = geo_.kg();
  p->kern = &k;
  p->panels = qgemm_ceil_div(N, MR);
  p->gemm_group_bytes = p->panels * qgemm_panel_bytes(k, K);
  p->taps_group_bytes = p->panels * qgemm_panel_bytes(k, icg, ks);
  p->gemm.resize(checked_mul(G, p->gemm_group_bytes));
  p->taps.resize(checked_mul(G, p->taps_group_bytes));
  p->colsum.resize(G * p->panels * MR);
  for (size_t g = 0; g < G; ++g) {
    const int8_t* b = raw_.data() + g * K * N;  // K x N row-major
    int32_t* cs = p->colsum.data() + g * p->panels * MR;
    qgemm_pack_all(k, QType::s8, b, N, K, N, p->gemm.data() + g * p->gemm_group_bytes, cs);
    for (size_t i = 0; i < p->panels; ++i)
      qgemm_pack_panel_taps(k, QType::s8, p->taps.data() + g * p->taps_group_bytes + i * qgemm_panel_bytes(k, icg, ks),
                            b, N, icg, ks, icg * N, i * MR, std::min(MR, N - i * MR), nullptr);
  }
  packed_.push_back(std::move(p));
  return *packed_.back();
}

const QConvDwWeights& PackedQConv2d::dw_weights() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!dw_) {
    std::vector<float> f, o;  // OC-contiguous, from the per-group padded copies
    if (factor_.size())
      for (size_t oc = 0; oc < geo_.OC; ++oc) {
        f.push_back(factor_.data()[oc / geo_.ocg() * pad_ + oc % geo_.ocg()]);
        o.push_back(offset_.data()[oc / geo_.ocg() * pad_ + oc % geo_.ocg()]);
      }
    dw_ = qconv_pack_depthwise(geo_, raw_.data(), f.empty() ? nullptr : f.data(), o.empty() ? nullptr : o.data());
  }
  return *dw_;
}

const QConvLowOfmWeights& PackedQConv2d::low_ofm_weights() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!low_ofm_)  // groups == 1: group 0's padded factor / offset are OC-contiguous
    low_ofm_ = qconv_pack_low_ofm(geo_, raw_.data(), factor_.size() ? factor_.data() : nullptr,
                                  offset_.size() ? offset_.data() : nullptr);
  return *low_ofm_;
}

const QConvDirectWeights& PackedQConv2d::direct_weights() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!direct_) {
    std::vector<float> f, o;  // OC-contiguous (groups == 1: group 0's padded copy)
    if (factor_.size()) {
      f.assign(factor_.data(), factor_.data() + geo_.OC);
      o.assign(offset_.data(), offset_.data() + geo_.OC);
    }
    direct_ = qconv_pack_direct(geo_, raw_.data(), f.empty() ? nullptr : f.data(), o.empty() ? nullptr : o.data());
  }
  return *direct_;
}

std::shared_ptr<const QConvIndirection> PackedQConv2d::indirection(size_t N, size_t H, size_t W, const QGemmKernel* k,
                                                                   QType x_type, int32_t za_eff) const {
  const auto same = [&](const QConvIndirection& e) {
    return e.N == N && e.H == H && e.W == W && e.kern == k && e.x_type == x_type;
  };
  return indirect_.get(same, [&] { return qconv_build_indirection(geo_, N, H, W, k, x_type, za_eff); });
}

const char* PackedQConv2d::run(size_t N, size_t H, size_t W, QType x_type, const void* x, const QConvOutput& o,
                               const std::string& algorithm, const QGemmKernel* kern,
                               const QDwconvKernel* dw, const QConvDirectKernel* direct,
                               const QConvLowOfmKernel* low_ofm) const {
  const size_t OH = geo_.OH(H), OW = geo_.OW(W);
  if (!H || !W || !OH || !OW) throw std::invalid_argument("qconv2d: the kernel does not fit the padded input");
  geo_.checked_pixels(N, H, W);
  qgemm_check_exact("qconv2d", x_type, x_zero_, geo_.kg());
  const QConvCall chosen{*this, kern ? *kern : qgemm_kernel(8, geo_.icg(), geo_.ks()), N, H, W, OH, OW, x_type, x, o,
                         dw, direct, low_ofm};
  const Algorithm<QConvCall>& a = qconv_algorithms().select(chosen, algorithm);  // errors before any work
  // The dispatched kernel suits the depth of one call's reduction: KH*KW taps of IC/groups for the indirect
  // form, but one row of K = KH*KW*IC/groups for im2col (the 7x7 stem's 147, where AMX beats VNNI).
  const bool gemm_depth = !kern && std::string_view(a.name) == "im2col";
  const QConvCall call{*this, gemm_depth ? qgemm_kernel(8, geo_.kg()) : chosen.k, N, H, W, OH, OW, x_type, x, o, dw,
                       direct, low_ofm};
  if (N == 0) return a.name;
  if (o.fuse) {
    if (o.residual) throw std::invalid_argument("qconv2d: no residual with fused pooling or pixel shuffle");
    if (o.planar) throw std::invalid_argument("qconv2d: no planar output with fused pooling or pixel shuffle");
    if (o.fuse->kind() == QConvFused::Kind::shuffle) {
      Workspace ws(a.workspace_bytes ? a.workspace_bytes(call) : 0);
      a.run(call, ws);
      return a.name;
    }
    // Pooling: one image at a time, so that no tile spans two images (ops/qconv/fused.h).
    const size_t image_bytes = H * W * geo_.IC;  // 8-bit input
    for (size_t n = 0; n < N; ++n) {
      const QConvCall img{*this, call.k, 1, H, W, OH, OW, x_type, static_cast<const uint8_t*>(x) + n * image_bytes,
                          o, dw, direct, low_ofm};
      Workspace ws(a.workspace_bytes ? a.workspace_bytes(img) : 0);
      a.run(img, ws);
      o.fuse->finish_image(n);
    }
    return a.name;
  }
  if (!o.residual) {
    run_algorithm(a, call);
    return a.name;
  }
  if (o.out == QOut::i32) throw std::invalid_argument("qconv2d: no residual with int32 output");
  // With a residual: the pre-activation t = fma(acc, factor, offset) as float32 first (the f32 epilogue on
  // the same factor / offset), then the residual stage over it; a few images at a time, so that t (4 bytes
  // per output) is read back from cache, not memory. t and the residual are in the output's layout (an image is
  // OH * OW * OC elements either way).
  const size_t image = OH * OW * geo_.OC, per = std::max<size_t>(1, kResidualChunkBytes / (image * sizeof(float)));
  const size_t c_elem = qout_elem_size(o.out);
  Workspace tmp(std::min(N, per) * image * sizeof(float));
  for (size_t n0 = 0; n0 < N; n0 += per) {
    const size_t n = std::min(per, N - n0);
    QConvOutput pre;
    pre.out = QOut::f32;
    pre.c = tmp.data();
    pre.planar = o.planar;
    const void* xn = static_cast<const uint8_t*>(x) + n0 * H * W * geo_.IC;  // 1-byte activations
    const QConvCall pre_call{*this, call.k, n, H, W, OH, OW, x_type, xn, pre, dw, direct, low_ofm};
    run_algorithm(a, pre_call);
    QConvOutput on = o;
    on.c = static_cast<uint8_t*>(o.c) + n0 * image * c_elem;
    on.residual = static_cast<const uint8_t*>(o.residual) + n0 * image;  // 1-byte residual
    qconv_add_residual(tmp.as<float>(), n * image, on);
  }
  return a.name;
}

QConvCall PackedQConv2d::shape_call(size_t N, size_t H, size_t W, const QConvOutput& o) const {
  const size_t OH = geo_.OH(H), OW = geo_.OW(W);
  if (!H || !W || !OH || !OW) throw std::invalid_argument("qconv2d: the kernel does not fit the padded input");
  geo_.checked_pixels(N, H, W);
  return QConvCall{*this, *kernel_, N, H, W, OH, OW, QType::u8, nullptr, o};
}

const char* PackedQConv2d::auto_algorithm(size_t N, size_t H, size_t W) const {
  const QConvOutput o;
  return qconv_algorithms().select(shape_call(N, H, W, o), "auto").name;
}

std::vector<std::string> PackedQConv2d::applicable_algorithms(size_t N, size_t H, size_t W) const {
  const QConvOutput o;
  return qconv_algorithms().applicable(shape_call(N, H, W, o));
}

void qconv_padded_factors(const float* factor, const float* offset, size_t OC, size_t cpad,
                          AlignedBuffer<float>* dst_factor, AlignedBuffer<float>* dst_offset) {
  if (!factor) return;
  for (auto [src, dst] : {std::pair{factor, dst_factor}, std::pair{offset, dst_offset}}) {
    dst->resize(cpad);
    std::fill(dst->data(), dst->data() + cpad, 0.0f);
    std::copy(src, src + OC, dst->data());
  }
}

size_t qconv_input_bytes(const QConvCall& c) {
  return qgemm_prepare_a_bytes(c.k, c.x_type, c.N * c.H * c.W, c.L.geometry().IC, false).buf;
}

QConvInput qconv_prepare_input(const QConvCall& c, uint8_t* buf) {
  QPlan P{};
  const size_t IC = c.L.geometry().IC;
  const int32_t za = qgemm_prepare_a(c.k, c.x_type, c.x, IC, c.N * c.H * c.W, IC, c.L.x_zero(), false, buf, nullptr, &P);
  return {P.a, P.a_row_bytes, za};
}

void qconv_fill_zero_row(const QGemmKernel& k, int32_t za_eff, size_t n, uint8_t* dst) {
  if (k.kind == QKind::s16) {
    int16_t* d = reinterpret_cast<int16_t*>(dst);
    std::fill(d, d + n, int16_t(za_eff));
  } else {
    std::fill(dst, dst + n, uint8_t(za_eff));  // uint8 za, or int8 za - 128 as its byte
  }
}

}  // namespace nnkern
