// The packed FP32 convolution layer (ops/conv/layer.h): its algorithms and the choice among them, the checks of a
// call, the post-ops, the tap-weight packing and the indirection-buffer cache.
#include "ops/conv/layer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "core/algorithm.h"
#include "core/checked.h"
#include "core/kernel_family.h"
#include "core/workspace.h"
#include "kernels/f32_activation_list.h"

namespace nnkern {
namespace {

constexpr size_t kPostChunk = 256;

// fn(p, len) over rows of n floats ld apart, in place: each row whole, but short rows (a channel panel's few floats
// a pixel) gathered into pieces of up to kPostChunk floats and put back, so that a kernel call covers hundreds of
// elements instead of one pixel's panel.
template <typename Fn>
void for_row_chunks(float* y, size_t rows, size_t n, size_t ld, const Fn& fn) {
  if (rows == 1 || n * 4 >= kPostChunk) {
    for (size_t r = 0; r < rows; ++r) fn(y + r * ld, n);
    return;
  }
  alignas(64) float buf[kPostChunk];
  const size_t per = kPostChunk / n;
  for (size_t r0 = 0; r0 < rows; r0 += per) {
    const size_t r1 = std::min(rows, r0 + per);
    for (size_t r = r0; r < r1; ++r) std::copy(y + r * ld, y + r * ld + n, buf + (r - r0) * n);
    fn(buf, (r1 - r0) * n);
    for (size_t r = r0; r < r1; ++r) std::copy(buf + (r - r0) * n, buf + (r - r0 + 1) * n, y + r * ld);
  }
}

struct TableEntry {
  const char* name;
  std::unique_ptr<ConvAlgorithm> (*make)(const PackedConv2d&);
};

#define NNKERN_CONV_ENTRY_(name, family) {#name, &make_conv_##name},
const std::vector<TableEntry>& table() {
  static const std::vector<TableEntry> entries = {NNKERN_CONV_ALGORITHMS(NNKERN_CONV_ENTRY_)};
  return entries;
}
#undef NNKERN_CONV_ENTRY_

// The names for `_C.algorithms("conv2d")`, registered at static initialization.
[[maybe_unused]] const bool names_registered = [] {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const TableEntry& e : table()) n.emplace_back(e.name);
    return n;
  }();
  register_algorithm_names("conv2d", &names);
  return true;
}();

}  // namespace

std::vector<std::pair<std::string, std::string>> conv_algorithm_families() {
#define NNKERN_CONV_FAMILY_(name, family) {#name, #family},
  return {NNKERN_CONV_ALGORITHMS(NNKERN_CONV_FAMILY_)};
#undef NNKERN_CONV_FAMILY_
}

PackedConv2d::PackedConv2d(const ConvGeometry& geo, const float* w, const float* bias, ConvPostOp post,
                           ActMethod method, std::shared_ptr<const void> w_owner)
    : geo_(geo), post_(post), method_(method) {
  if (!geo.valid()) throw std::invalid_argument("conv2d: bad geometry");
  const size_t n = checked_mul(geo.OC, geo.kg());
  raw_ = shared_or_copy(w, n, std::move(w_owner));
  finite_ = std::all_of(w, w + n, [](float v) { return std::isfinite(v); });
  if (bias) {
    bias_.resize(geo.OC);
    std::copy(bias, bias + geo.OC, bias_.data());
  }
  for (const TableEntry& e : table()) algorithms_.push_back(e.make(*this));
}

PackedConv2d::~PackedConv2d() = default;

F32Epilogue PackedConv2d::epilogue(const ConvCall& c, bool kernels_add_residual) const {
  F32Epilogue ep;
  if (c.residual && kernels_add_residual) ep.ldr = geo_.OC;
  if ((!c.residual || kernels_add_residual) &&
      (post_.act == ConvActivation::relu || post_.act == ConvActivation::relu6)) {
    ep.clamp = true;
    ep.clamp_min = 0.0f;
    ep.clamp_max = post_.act == ConvActivation::relu6 ? 6.0f : std::numeric_limits<float>::infinity();
  }
  return ep;
}

const float* PackedConv2d::residual_at(const ConvCall& c, const float* y) const {
  if (!c.residual) return nullptr;
  const size_t at = size_t(y - c.y);  // its pixel and channel are the output's
  return c.residual + at / c.ldc * geo_.OC + at % c.ldc;
}

void PackedConv2d::post_ops(const ConvCall& c, float* y, size_t rows, size_t n, bool kernels_added_residual) const {
  const size_t ld = c.ldc;
  // Whole rows (all channels, output and residual alike contiguous) as one: a row of a few channels is too short
  // for the loops and kernel calls.
  if (ld == n && n == geo_.OC) n *= rows, rows = 1;
  const float* r = kernels_added_residual ? nullptr : residual_at(c, y);
  // Nothing left after the epilogue's bias and clamp: return before the kernel table's lookup (a thread-local
  // read), which callers that pass a tile's rows one at a time would otherwise pay per row.
  const bool clamp_only = post_.act == ConvActivation::none || post_.act == ConvActivation::relu ||
                          post_.act == ConvActivation::relu6;
  if (!r && clamp_only) return;
  const F32ActivationKernels& k = f32_activation_family().dispatched();
  // One pass of kernels/f32_post_ops.h: the residual, then the relu / relu6 clamp the epilogue left to it, or a
  // piecewise activation.
  F32PostOpArgs a{y, r, rows, n, ld, geo_.OC, F32PostAct::none, post_.alpha, post_.beta};
  switch (post_.act) {
    case ConvActivation::relu: a.act = a.r ? F32PostAct::relu : F32PostAct::none; break;
    case ConvActivation::relu6: a.act = a.r ? F32PostAct::relu6 : F32PostAct::none; break;
    case ConvActivation::hardswish: a.act = F32PostAct::hardswish; break;
    case ConvActivation::hardsigmoid: a.act = F32PostAct::hardsigmoid; break;
    case ConvActivation::leaky_relu: a.act = F32PostAct::leaky_relu; break;
    default: break;
  }
  if (a.r || a.act != F32PostAct::none) k.post_ops(a);
  const ConvActivation act = post_.act;
  if (act != ConvActivation::sigmoid && act != ConvActivation::silu && act != ConvActivation::tanh) return;
  // The separate ops' kernels, elementwise: the same bits wherever an element sits in a chunk.
  const F32UnaryUkernel f = act == ConvActivation::tanh ? k.tanh[int(method_)] : k.sigmoid[int(method_)];
  alignas(64) float s[kPostChunk];
  for_row_chunks(y, rows, n, ld, [&](float* p, size_t len) {
    if (act != ConvActivation::silu) return f(len, p, p);
    for (size_t j = 0; j < len; j += kPostChunk) {  // SiLU: x * sigmoid(x)
      const size_t l = std::min(kPostChunk, len - j);
      f(l, p + j, s);
      for (size_t i = 0; i < l; ++i) p[j + i] *= s[i];
    }
  });
}

std::unique_ptr<ConvTapWeights> conv_pack_taps(const PackedConv2d& L, size_t MR, bool depthwise) {
  const ConvGeometry& geo = L.geometry();
  auto p = std::make_unique<ConvTapWeights>();
  const size_t ocg = geo.ocg(), kg = geo.kg(), ks = geo.ks();
  p->mr = MR;
  p->depthwise = depthwise;
  // Element (block, row, i) is raw output channel o's weight r: (group-major blocks of MR channels, rows q of kg)
  // or (blocks of MR depthwise channels, rows of taps).
  const size_t blocks = depthwise ? ceil_div(geo.OC, MR) : ceil_div(ocg, MR), rows = depthwise ? ks : kg;
  p->panels = blocks;
  p->panel_floats = rows * MR;
  p->w.resize(checked_mul(depthwise ? 1 : geo.groups, blocks, p->panel_floats));
  float* dst = p->w.data();
  for (size_t g = 0; g < (depthwise ? 1 : geo.groups); ++g)
    for (size_t b = 0; b < blocks; ++b)
      for (size_t r = 0; r < rows; ++r)  // r = t * icg + c: the raw row's own order
        for (size_t i = 0; i < MR; ++i) {
          const size_t o = b * MR + i;
          *dst++ = o < (depthwise ? geo.OC : ocg) ? L.raw()[(g * ocg + o) * kg + r] : 0.0f;
        }
  return p;
}

std::shared_ptr<const ConvIndirection> PackedConv2d::indirection(const ConvInputShape& s, size_t NR) const {
  const auto same = [&](const ConvIndirection& e) {
    return e.shape.N == s.N && e.shape.H == s.H && e.shape.W == s.W && e.shape.up_h == s.up_h &&
           e.shape.up_w == s.up_w && e.NR == NR;
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

ConvCall PackedConv2d::call(size_t N, size_t H, size_t W, const float* x, float* y, size_t ldc,
                            const std::string& kernel, Float32Precision precision, size_t up_h, size_t up_w) const {
  const size_t OH = geo_.OH(H), OW = geo_.OW(W);
  if (!H || !W || !OH || !OW) throw std::invalid_argument("conv2d: the kernel does not fit the padded input");
  if (ldc && ldc < geo_.OC) throw std::invalid_argument("conv2d: ldc is smaller than the output channels");
  if (!up_h || !up_w || H % up_h || W % up_w)
    throw std::invalid_argument("conv2d: the upsampled input's size is not a multiple of the upsampling");
  geo_.checked_pixels(N, H, W);
  return ConvCall{*this, {N, H, W, up_h, up_w}, OH, OW, x, y, ldc ? ldc : geo_.OC, kernel, precision};
}

const ConvAlgorithm& PackedConv2d::select(const ConvCall& c, const std::string& algorithm) const {
  // An upsampled input exists only through the indirection buffer: the indirect algorithm's alone.
  const auto applies = [&](const std::unique_ptr<ConvAlgorithm>& a) {
    return (!c.s.upsampled() || std::string(a->name) == "indirect") && a->applicable(c);
  };
  return *select_algorithm(
      "conv2d", algorithms_, algorithm, applies,
      [&](const std::unique_ptr<ConvAlgorithm>& a) { return a->preferred(c); },
      [](const std::unique_ptr<ConvAlgorithm>& a) { return a->name; });
}

const char* PackedConv2d::run(size_t N, size_t H, size_t W, const float* x, float* y, const std::string& algorithm,
                              const std::string& kernel, size_t ldc, Float32Precision precision,
                              const float* residual, size_t up_h, size_t up_w) const {
  ConvCall c = call(N, H, W, x, y, ldc, kernel, precision, up_h, up_w);
  c.residual = residual;
  const ConvAlgorithm& a = select(c, algorithm);  // errors before any work
  if (N == 0) return a.name;
  Workspace ws(a.workspace_bytes(c));
  a.run(c, ws.data());
  return a.name;
}

const char* PackedConv2d::auto_algorithm(size_t N, size_t H, size_t W, Float32Precision precision, size_t up_h,
                                         size_t up_w) const {
  return select(call(N, H, W, nullptr, nullptr, 0, "", precision, up_h, up_w), "auto").name;
}

std::vector<std::string> PackedConv2d::applicable_algorithms(size_t N, size_t H, size_t W) const {
  const ConvCall c = call(N, H, W, nullptr, nullptr, 0, "");
  std::vector<std::string> names;
  for (const auto& a : algorithms_)
    if (a->applicable(c)) names.emplace_back(a->name);
  return names;
}

size_t PackedConv2d::workspace_bytes(size_t N, size_t H, size_t W, const std::string& algorithm,
                                     Float32Precision precision) const {
  const ConvCall c = call(N, H, W, nullptr, nullptr, 0, "", precision);
  return select(c, algorithm).workspace_bytes(c);
}

}  // namespace nnkern
