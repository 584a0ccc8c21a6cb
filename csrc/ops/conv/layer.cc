// The packed FP32 convolution layer (ops/conv/layer.h): weight packing, the indirection-buffer cache, the
// post-ops and the "conv2d" algorithm table.
#include "ops/conv/layer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "core/checked.h"
#include "core/algorithm.h"
#include "core/workspace.h"
#include "kernels/f32_conv_list.h"
#include "ops/activation/activation.h"
#include "core/kernel_family.h"
#include "kernels/f32_activation_list.h"
#include "kernels/f32_gemm_list.h"

namespace nnkern {
namespace {

// The tile kernels (direct, mgemm, dot, depthwise) skip the taps that fall in the padding instead of multiplying
// zeros: the same sums while every weight is finite, but 0 x Inf or 0 x NaN is NaN under zero padding. A padded
// layer with a non-finite weight runs the algorithms that read a zero row (indirect, im2col) instead.
bool skipping_padding_exact(const ConvCall& c) { return !c.L.geometry().padded() || c.L.finite_weights(); }
// mGEMM's kernels share the inputs of adjacent kernel columns between adjacent pixels: stride == dilation along W.
bool mgemm_applies(const ConvCall& c) {
  const ConvGeometry& g = c.L.geometry();
  return g.sw == g.dw && skipping_padding_exact(c) &&
         (c.conv ? c.conv->wf > 1 && !c.conv->depthwise && !c.conv->dot : f32_conv_mgemm_family().dispatched_or_null() != nullptr);
}
bool direct_applies(const ConvCall& c) {
  return skipping_padding_exact(c) &&
         (!c.conv || (!c.conv->depthwise && !c.conv->dot && (c.conv->wf == 1 || mgemm_applies(c))));
}
bool dot_applies(const ConvCall& c) { return skipping_padding_exact(c) && (!c.conv || c.conv->dot); }
// One input channel per group and one output channel per group (channel multiplier 1).
bool depthwise_applies(const ConvCall& c) {
  const ConvGeometry& g = c.L.geometry();
  return g.groups == g.IC && g.groups == g.OC && skipping_padding_exact(c) && (!c.conv || c.conv->depthwise);
}

// auto's rule, in the table's order below (depthwise, the plain GEMM for pointwise layers, dot, mgemm, direct,
// indirect), measured on one Sapphire Rapids core (AVX-512, GFLOP/s of mgemm / direct / indirect / im2col, one
// thread, `python -m nnkern bench --op conv`):
//   - mgemm where it applies and a row holds at least two whole tiles of its kernel inside the image (56x56
//     64->64 3x3: 180 / 165 / 154 / 109; 104x104 32->64: 181 / 165 / 157 / 104); with one, its leftover columns
//     cost more than direct's (14x14 256->256: 155 / 176 / 165 / 153), with none its rows are all leftovers (7x7
//     512->512: 111 / 131 / 140 / 135);
//   - else direct, where auto may pick the dispatched direct kernel (AVX-512, NEON by its instruction counts; not
//     the scalar or AVX2 ones) and the output is at least 14 pixels wide or has at most 4 input channels per
//     group: level with indirect on stride-2 layers (56x56 128->128 3x3/2: 171 / 166), ahead on few input
//     channels (224x224 3->64 7x7/2 stem: 162 / 106), no workspace nor indirection buffer; narrower outputs are
//     mostly window edges, one-pixel tiles of few FMA chains (7x7 512->512 above);
//   - pointwise layers: the plain GEMM (im2col without a copy). direct is ahead on one thread for wide outputs
//     (56x56 64->256 1x1: 154 against 133) but scales worse: on two threads the GEMM is ahead (56x56 24->144
//     1x1: 155 direct against 247; 28x28 128->512: 292 / 335), and the rule must not depend on the thread count
//     (results would); depthwise for depthwise ones, dot (below) for few output channels.
bool mgemm_preferred(const ConvCall& c) {
  const ConvGeometry& g = c.L.geometry();
  const F32ConvKernel* k = c.conv ? c.conv : f32_conv_mgemm_family().dispatched_or_null();
  if (!k || !k->auto_pick || size_t(k->wf) > g.KW) return false;
  const size_t span = (g.KW - 1) * g.dw, W = c.s.W, lo = (g.pl + g.sw - 1) / g.sw;
  const size_t hi = W + g.pl > span ? std::min(c.OW, (W + g.pl - span - 1) / g.sw + 1) : 0;
  return hi > lo && hi - lo >= 2 * size_t(k->nr_for(std::min<size_t>(size_t(k->mr), g.ocg())));
}
bool direct_picked(const ConvCall& c) { return (c.conv ? c.conv : &f32_conv_direct_family().dispatched())->auto_pick; }
bool direct_preferred(const ConvCall& c) {
  const ConvGeometry& g = c.L.geometry();
  return direct_picked(c) && !g.pointwise() && (c.OW >= 14 || g.icg() <= 4);
}
bool gemm_preferred(const ConvCall& c) { return c.L.geometry().pointwise() && !direct_preferred(c); }
// dot for a few output channels per group over 16 or more input channels (whole vectors), where auto may pick its
// kernel (SIMD levels):
// 128x128 64->3 3x3 77 GFLOP/s against mgemm's 32 (3 of 16 lanes useful), 56x56 64->8 88 / 79, 224x224 16->3
// 42 / 32.
bool dot_preferred(const ConvCall& c) {
  const ConvGeometry& g = c.L.geometry();
  return g.ocg() <= 8 && g.icg() >= 16 && (c.conv ? c.conv : &f32_conv_dot_family().dispatched())->auto_pick;
}

const AlgorithmTable<ConvCall>& conv_algorithms() {
  static const AlgorithmTable<ConvCall> table("conv2d", {
      {"depthwise", &depthwise_applies, nullptr, nullptr,
       [](const ConvCall& c, const Workspace&) { conv_tiles_run(c, c.conv ? *c.conv : f32_dwconv_family().dispatched()); }},
      {"im2col", [](const ConvCall&) { return true; }, &gemm_preferred, &conv_im2col_workspace,
       [](const ConvCall& c, const Workspace& ws) { conv_im2col_run(c, ws.data()); }},
      {"dot", &dot_applies, &dot_preferred, nullptr,
       [](const ConvCall& c, const Workspace&) { conv_tiles_run(c, c.conv ? *c.conv : f32_conv_dot_family().dispatched()); }},
      {"mgemm", &mgemm_applies, &mgemm_preferred, nullptr,
       [](const ConvCall& c, const Workspace&) { conv_tiles_run(c, c.conv ? *c.conv : *f32_conv_mgemm_family().dispatched_or_null()); }},
      {"direct", &direct_applies, &direct_preferred, nullptr,
       [](const ConvCall& c, const Workspace&) { conv_tiles_run(c, c.conv ? *c.conv : f32_conv_direct_family().dispatched()); }},
      {"indirect", [](const ConvCall&) { return true; }, nullptr, nullptr,
       [](const ConvCall& c, const Workspace&) { conv_indirect_run(c); }},
  });
  return table;
}

[[maybe_unused]] const bool algorithms_registered = (conv_algorithms(), true);

}  // namespace

PackedConv2d::PackedConv2d(const ConvGeometry& geo, const float* w, const float* bias, ConvActivation act,
                           ActMethod method)
    : geo_(geo), act_(act), method_(method) {
  if (!geo.valid()) throw std::invalid_argument("conv2d: bad geometry");
  const size_t n = geo.OC * geo.kg();
  raw_.resize(n);
  std::copy(w, w + n, raw_.data());
  finite_ = std::all_of(w, w + n, [](float v) { return std::isfinite(v); });
  if (bias) {
    bias_.resize(geo.OC);
    std::copy(bias, bias + geo.OC, bias_.data());
  }
}

F32Epilogue PackedConv2d::epilogue() const {
  F32Epilogue ep;
  if (act_ == ConvActivation::relu || act_ == ConvActivation::relu6) {
    ep.clamp = true;
    ep.clamp_min = 0.0f;
    ep.clamp_max = act_ == ConvActivation::relu6 ? 6.0f : std::numeric_limits<float>::infinity();
  }
  return ep;
}

void PackedConv2d::post_activation(float* y, size_t rows, size_t n, size_t ld) const {
  if (act_ != ConvActivation::sigmoid && act_ != ConvActivation::silu) return;
  const F32UnaryUkernel sigmoid = f32_activation_family().dispatched().sigmoid[int(method_)];
  constexpr size_t kChunk = 256;
  alignas(64) float s[kChunk];
  for (size_t r = 0; r < rows; ++r) {
    float* row = y + r * ld;
    if (act_ == ConvActivation::sigmoid) {
      sigmoid(n, row, row);
      continue;
    }
    for (size_t j = 0; j < n; j += kChunk) {  // SiLU: x * sigmoid(x)
      const size_t len = std::min(kChunk, n - j);
      sigmoid(len, row + j, s);
      for (size_t i = 0; i < len; ++i) row[j + i] *= s[i];
    }
  }
}

const PackedF32Gemm& PackedConv2d::gemm(size_t g) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (gemm_.empty())  // W[ocg, kg] row-major per group: C = X_cols W^T
    for (size_t i = 0; i < geo_.groups; ++i)
      gemm_.push_back(std::make_unique<PackedF32Gemm>(raw_.data() + i * geo_.ocg() * geo_.kg(), geo_.ocg(), geo_.kg(),
                                                      geo_.kg()));
  return *gemm_[g];
}

const ConvTapWeights& PackedConv2d::tap_weights(size_t MR, bool depthwise) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& p : taps_)
    if (p->mr == MR && p->depthwise == depthwise) return *p;
  auto p = std::make_unique<ConvTapWeights>();
  const size_t ocg = geo_.ocg(), kg = geo_.kg(), ks = geo_.ks();
  p->mr = MR;
  p->depthwise = depthwise;
  // Element (block, row, i) is raw output channel o's weight r: (group-major blocks of MR channels, rows q of kg)
  // or (blocks of MR depthwise channels, rows of taps).
  const size_t blocks = depthwise ? (geo_.OC + MR - 1) / MR : (ocg + MR - 1) / MR, rows = depthwise ? ks : kg;
  p->panels = blocks;
  p->panel_floats = rows * MR;
  p->w.resize(checked_mul(depthwise ? 1 : geo_.groups, blocks, p->panel_floats));
  float* dst = p->w.data();
  for (size_t g = 0; g < (depthwise ? 1 : geo_.groups); ++g)
    for (size_t b = 0; b < blocks; ++b)
      for (size_t r = 0; r < rows; ++r)  // r = t * icg + c: the raw row's own order
        for (size_t i = 0; i < MR; ++i) {
          const size_t o = b * MR + i;
          *dst++ = o < (depthwise ? geo_.OC : ocg) ? raw_.data()[(g * ocg + o) * kg + r] : 0.0f;
        }
  taps_.push_back(std::move(p));
  return *taps_.back();
}

std::shared_ptr<const ConvIndirection> PackedConv2d::indirection(const ConvInputShape& s, size_t NR) const {
  const auto same = [&](const ConvIndirection& e) {
    return e.shape.N == s.N && e.shape.H == s.H && e.shape.W == s.W && e.NR == NR;
  };
  return indirect_.get(same, [&] {
    auto e = std::make_shared<ConvIndirection>();
    e->shape = s;
    e->NR = NR;
    e->zero.resize(std::max<size_t>(geo_.icg(), 1));
    std::fill(e->zero.data(), e->zero.data() + e->zero.size(), 0.0f);
    const size_t M = checked_mul(s.N, geo_.OH(s.H), geo_.OW(s.W));
    e->ptrs.resize(std::max<size_t>(checked_mul(ceil_div(M, NR), geo_.ks(), NR), 1));
    conv_fill_indirection(geo_, s, NR, geo_.IC * sizeof(float), e->zero.data(), e->ptrs.data());
    return e;
  });
}

ConvCall PackedConv2d::call(size_t N, size_t H, size_t W, const float* x, float* y, const F32GemmKernel* kern,
                            const F32ConvKernel* conv) const {
  const size_t OH = geo_.OH(H), OW = geo_.OW(W);
  if (!H || !W || !OH || !OW) throw std::invalid_argument("conv2d: the kernel does not fit the padded input");
  geo_.checked_pixels(N, H, W);
  return ConvCall{*this, kern ? *kern : f32_gemm_family().dispatched(), {N, H, W}, OH, OW, x, y, conv};
}

const char* PackedConv2d::run(size_t N, size_t H, size_t W, const float* x, float* y, const std::string& algorithm,
                              const F32GemmKernel* kern, const F32ConvKernel* conv) const {
  const ConvCall c = call(N, H, W, x, y, kern, conv);
  const Algorithm<ConvCall>& a = conv_algorithms().select(c, algorithm);  // errors before any work
  if (N == 0) return a.name;
  Workspace ws(a.workspace_bytes ? a.workspace_bytes(c) : 0);
  a.run(c, ws);
  return a.name;
}

const char* PackedConv2d::auto_algorithm(size_t N, size_t H, size_t W) const {
  return conv_algorithms().select(call(N, H, W, nullptr, nullptr), "auto").name;
}

std::vector<std::string> PackedConv2d::applicable_algorithms(size_t N, size_t H, size_t W) const {
  return conv_algorithms().applicable(call(N, H, W, nullptr, nullptr));
}

size_t PackedConv2d::workspace_bytes(size_t N, size_t H, size_t W, const std::string& algorithm) const {
  const ConvCall c = call(N, H, W, nullptr, nullptr);
  const Algorithm<ConvCall>& a = conv_algorithms().select(c, algorithm);
  return a.workspace_bytes ? a.workspace_bytes(c) : 0;
}

}  // namespace nnkern
