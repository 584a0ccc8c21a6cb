// The packed FP32 convolution layer (ops/conv2d.h): weight packing, the indirection-buffer cache, the
// post-ops and the "conv2d" algorithm table.
#include "ops/conv2d.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "core/algorithm.h"
#include "core/workspace.h"
#include "kernels/f32_conv_list.h"
#include "ops/f32_activation.h"

namespace nnkern {
namespace {

// Input shapes whose indirection buffers a layer keeps (a model calls a layer on a few shapes at most).
constexpr size_t kIndirectionCacheEntries = 8;

// mGEMM's kernels share the inputs of adjacent kernel columns between adjacent pixels: stride == dilation along W.
bool mgemm_applies(const ConvCall& c) {
  const ConvGeometry& g = c.L.geometry();
  return g.sw == g.dw && (c.conv ? c.conv->wf > 1 : f32_conv_mgemm_kernel() != nullptr);
}

const AlgorithmTable<ConvCall>& conv_algorithms() {
  // auto: im2col for the pointwise case (a plain GEMM over the input rows, no copy), indirect otherwise.
  static const AlgorithmTable<ConvCall> table("conv2d", {
      {"im2col", [](const ConvCall&) { return true; },
       [](const ConvCall& c) { return c.L.geometry().pointwise(); }, &conv_im2col_workspace,
       [](const ConvCall& c, const Workspace& ws) { conv_im2col_run(c, ws.data()); }},
      {"indirect", [](const ConvCall&) { return true; }, nullptr, nullptr,
       [](const ConvCall& c, const Workspace&) { conv_indirect_run(c); }},
      {"direct", [](const ConvCall& c) { return !c.conv || c.conv->wf == 1 || mgemm_applies(c); },
       [](const ConvCall&) { return false; }, nullptr,
       [](const ConvCall& c, const Workspace&) { conv_tiles_run(c, c.conv ? *c.conv : f32_conv_direct_kernel()); }},
      {"mgemm", &mgemm_applies, [](const ConvCall&) { return false; }, nullptr,
       [](const ConvCall& c, const Workspace&) { conv_tiles_run(c, c.conv ? *c.conv : *f32_conv_mgemm_kernel()); }},
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
  if (bias) {
    bias_.resize(geo.OC);
    std::copy(bias, bias + geo.OC, bias_.data());
  }
  for (size_t g = 0; g < geo.groups; ++g)  // W[ocg, kg] row-major per group: C = X_cols W^T
    gemm_.push_back(std::make_unique<PackedF32Gemm>(raw_.data() + g * geo.ocg() * geo.kg(), geo.ocg(), geo.kg(), geo.kg()));
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
  const F32UnaryUkernel sigmoid = f32_activation_kernels().sigmoid[int(method_)];
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

const PackedF32Gemm& PackedConv2d::gemm(size_t g) const { return *gemm_[g]; }

const ConvTapWeights& PackedConv2d::tap_weights(size_t MR) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& p : taps_)
    if (p->mr == MR) return *p;
  auto p = std::make_unique<ConvTapWeights>();
  const size_t ocg = geo_.ocg(), kg = geo_.kg();
  p->mr = MR;
  p->panels = (ocg + MR - 1) / MR;
  p->panel_floats = kg * MR;
  p->w.resize(geo_.groups * p->panels * p->panel_floats);
  float* dst = p->w.data();
  for (size_t g = 0; g < geo_.groups; ++g)
    for (size_t panel = 0; panel < p->panels; ++panel)
      for (size_t q = 0; q < kg; ++q)  // q = t * icg + c: the raw row's own order
        for (size_t i = 0; i < MR; ++i) {
          const size_t o = panel * MR + i;
          *dst++ = o < ocg ? raw_.data()[(g * ocg + o) * kg + q] : 0.0f;
        }
  taps_.push_back(std::move(p));
  return *taps_.back();
}

std::shared_ptr<const ConvIndirection> PackedConv2d::indirection(const ConvInputShape& s, size_t NR) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < indirect_.size(); ++i) {
    const auto e = indirect_[i];
    if (e->shape.N == s.N && e->shape.H == s.H && e->shape.W == s.W && e->NR == NR) {
      indirect_.erase(indirect_.begin() + ptrdiff_t(i));  // most recently used last
      indirect_.push_back(e);
      return e;
    }
  }
  // Held by shared_ptr: a call still using an evicted buffer keeps it alive.
  auto e = std::make_shared<ConvIndirection>();
  e->shape = s;
  e->NR = NR;
  e->zero.resize(std::max<size_t>(geo_.icg(), 1));
  std::fill(e->zero.data(), e->zero.data() + e->zero.size(), 0.0f);
  const size_t M = s.N * geo_.OH(s.H) * geo_.OW(s.W);
  e->ptrs.resize(std::max<size_t>((M + NR - 1) / NR * geo_.ks() * NR, 1));
  conv_fill_indirection(geo_, s, NR, geo_.IC * sizeof(float), e->zero.data(), e->ptrs.data());
  ++builds_;
  if (indirect_.size() >= kIndirectionCacheEntries) indirect_.erase(indirect_.begin());
  indirect_.push_back(e);
  return e;
}

size_t PackedConv2d::indirection_builds() const {
  std::lock_guard<std::mutex> lock(mu_);
  return builds_;
}

const char* PackedConv2d::run(size_t N, size_t H, size_t W, const float* x, float* y, const std::string& algorithm,
                              const F32GemmKernel* kern, const F32ConvKernel* conv) const {
  const size_t OH = geo_.OH(H), OW = geo_.OW(W);
  if (!H || !W || !OH || !OW) throw std::invalid_argument("conv2d: the kernel does not fit the padded input");
  const ConvCall call{*this, kern ? *kern : f32_gemm_kernel(), {N, H, W}, OH, OW, x, y, conv};
  const Algorithm<ConvCall>& a = conv_algorithms().select(call, algorithm);  // errors before any work
  if (N == 0) return a.name;
  Workspace ws(a.workspace_bytes ? a.workspace_bytes(call) : 0);
  a.run(call, ws);
  return a.name;
}

const char* PackedConv2d::auto_algorithm(size_t N, size_t H, size_t W) const {
  const ConvCall call{*this, f32_gemm_kernel(), {N, H, W}, geo_.OH(H), geo_.OW(W), nullptr, nullptr};
  return conv_algorithms().select(call, "auto").name;
}

size_t PackedConv2d::workspace_bytes(size_t N, size_t H, size_t W, const std::string& algorithm) const {
  const ConvCall call{*this, f32_gemm_kernel(), {N, H, W}, geo_.OH(H), geo_.OW(W), nullptr, nullptr};
  const Algorithm<ConvCall>& a = conv_algorithms().select(call, algorithm);
  return a.workspace_bytes ? a.workspace_bytes(call) : 0;
}

}  // namespace nnkern
