// The packed INT8 convolution layer (ops/qconv/layer.h): its algorithms, the choice among them, the checks of a
// call, and what the GEMM-based algorithms share.
#include "ops/qconv/layer.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "core/algorithm.h"
#include "core/checked.h"
#include "core/kernel_family.h"
#include "core/workspace.h"
#include "kernels/qgemm_list.h"
#include "ops/qgemm/driver.h"
#include "ops/qgemm/pack.h"

namespace nnkern {
namespace {

struct TableEntry {
  const char* name;
  std::unique_ptr<QConvAlgorithm> (*make)(const PackedQConv2d&);
};

#define NNKERN_QCONV_ENTRY_(name) {#name, &make_qconv_##name},
const std::vector<TableEntry>& table() {
  static const std::vector<TableEntry> entries = {NNKERN_QCONV_ALGORITHMS(NNKERN_QCONV_ENTRY_)};
  return entries;
}
#undef NNKERN_QCONV_ENTRY_

// The names for `_C.algorithms("qconv2d")`, registered at static initialization.
[[maybe_unused]] const bool names_registered = [] {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const TableEntry& e : table()) n.emplace_back(e.name);
    return n;
  }();
  register_algorithm_names("qconv2d", &names);
  return true;
}();

const QConvGeometry& valid_geometry(const QConvGeometry& geo) {
  if (!geo.valid()) throw std::invalid_argument("qconv2d: bad geometry");
  return geo;
}

}  // namespace

PackedQConv2d::PackedQConv2d(const QConvGeometry& geo, const int8_t* w, const float* factor, const float* offset,
                             int32_t x_zero, const QConvRequant& requant, std::shared_ptr<const void> w_owner)
    : geo_(valid_geometry(geo)), requant_(requant), x_zero_(x_zero), pad_(qgemm_padded_n(geo.ocg())) {
  if ((factor == nullptr) != (requant.out == QOut::i32))
    throw std::invalid_argument("qconv2d: factor and offset go with (only) the requantized and float32 outputs");
  const size_t n = checked_mul(geo.groups, geo.kg(), geo.ocg());
  raw_ = shared_or_copy(w, n, std::move(w_owner));
  narrow_ = qgemm_narrow_weights(w, n);
  kernel_ = &qgemm_kernel(8, geo.icg(), geo.ks(), narrow_);
  if (factor) {
    factor_.resize(checked_mul(geo.groups, pad_));
    offset_.resize(checked_mul(geo.groups, pad_));
    for (size_t g = 0; g < geo.groups; ++g)
      for (size_t o = 0; o < pad_; ++o) {
        const bool in = o < geo.ocg();
        factor_.data()[g * pad_ + o] = in ? factor[g * geo.ocg() + o] : 0.0f;
        offset_.data()[g * pad_ + o] = in ? offset[g * geo.ocg() + o] : 0.0f;
      }
  }
  for (const TableEntry& e : table()) algorithms_.push_back(e.make(*this));
}

PackedQConv2d::~PackedQConv2d() = default;

QConvCall PackedQConv2d::call(size_t N, size_t H, size_t W, QType x_type, const void* x,
                              const std::string& kernel) const {
  const size_t OH = geo_.OH(H), OW = geo_.OW(W);
  if (!H || !W || !OH || !OW) throw std::invalid_argument("qconv2d: the kernel does not fit the padded input");
  geo_.checked_pixels(N, H, W);
  return QConvCall{*this, N, H, W, OH, OW, x_type, x, kernel};
}

const QConvAlgorithm& PackedQConv2d::select(const QConvCall& c, const std::string& algorithm) const {
  return *select_algorithm(
      "qconv2d", algorithms_, algorithm, [&](const std::unique_ptr<QConvAlgorithm>& a) { return a->applicable(c); },
      [&](const std::unique_ptr<QConvAlgorithm>& a) { return a->preferred(c); },
      [](const std::unique_ptr<QConvAlgorithm>& a) { return a->name; });
}

const char* PackedQConv2d::run(size_t N, size_t H, size_t W, QType x_type, const void* x, QConvStage& out,
                               const std::string& algorithm, const std::string& kernel) const {
  const QConvCall c = call(N, H, W, x_type, x, kernel);
  qgemm_check_exact("qconv2d", x_type, x_zero_, geo_.kg());
  const QConvAlgorithm& a = select(c, algorithm);  // errors before any work
  if (N == 0) return a.name;
  if (!out.per_image()) {
    Workspace ws(a.workspace_bytes(c));
    a.run(c, out, ws.data());
    return a.name;
  }
  // Pooling: one image at a time, so that no tile spans two images.
  const size_t image_bytes = H * W * geo_.IC;  // 8-bit input
  for (size_t n = 0; n < N; ++n) {
    const QConvCall img{*this, 1, H, W, c.OH, c.OW, x_type, static_cast<const uint8_t*>(x) + n * image_bytes, kernel};
    Workspace ws(a.workspace_bytes(img));
    a.run(img, out, ws.data());
    out.finish_image(n);
  }
  return a.name;
}

const char* PackedQConv2d::auto_algorithm(size_t N, size_t H, size_t W) const {
  return select(call(N, H, W, QType::u8, nullptr, ""), "auto").name;
}

std::vector<std::string> PackedQConv2d::applicable_algorithms(size_t N, size_t H, size_t W) const {
  const QConvCall c = call(N, H, W, QType::u8, nullptr, "");
  std::vector<std::string> names;
  for (const auto& a : algorithms_)
    if (a->applicable(c)) names.emplace_back(a->name);
  return names;
}

std::shared_ptr<const QConvIndirection> PackedQConv2d::indirection(size_t N, size_t H, size_t W, const QGemmKernel* k,
                                                                   QType x_type, int32_t za_eff) const {
  const auto same = [&](const QConvIndirection& e) {
    return e.N == N && e.H == H && e.W == W && e.kern == k && e.x_type == x_type;
  };
  return indirect_.get(same, [&] { return qconv_build_indirection(geo_, N, H, W, k, x_type, za_eff); });
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

void qconv_contiguous_factors(const PackedQConv2d& L, size_t cpad, AlignedBuffer<float>* dst_factor,
                              AlignedBuffer<float>* dst_offset) {
  const QConvGeometry& geo = L.geometry();
  if (!L.factor(0)) return;
  std::vector<float> f(geo.OC), o(geo.OC);  // the per-group padded copies, gathered
  for (size_t oc = 0; oc < geo.OC; ++oc) {
    f[oc] = L.factor(oc / geo.ocg())[oc % geo.ocg()];
    o[oc] = L.offset(oc / geo.ocg())[oc % geo.ocg()];
  }
  qconv_padded_factors(f.data(), o.data(), geo.OC, cpad, dst_factor, dst_offset);
}

size_t qconv_input_bytes(const QConvCall& c, const QGemmKernel& k) {
  return qgemm_prepare_a_bytes(k, c.x_type, c.N * c.H * c.W, c.L.geometry().IC, false).buf;
}

QConvInput qconv_prepare_input(const QConvCall& c, const QGemmKernel& k, uint8_t* buf) {
  QPlan P{};
  const size_t IC = c.L.geometry().IC;
  const int32_t za = qgemm_prepare_a(k, c.x_type, c.x, IC, c.N * c.H * c.W, IC, c.L.x_zero(), false, buf, nullptr, &P);
  return {P.a, P.a_row_bytes, za};
}

void qconv_fill_zero_row(const QGemmKernel& k, int32_t za_eff, size_t n, uint8_t* dst) {
  if (qgemm_widens_x(k)) {
    int16_t* d = reinterpret_cast<int16_t*>(dst);
    std::fill(d, d + n, int16_t(za_eff));
  } else {
    std::fill(dst, dst + n, uint8_t(za_eff));  // uint8 za, or int8 za - 128 as its byte
  }
}

const QGemmKernel& qconv_gemm_kernel(const QConvCall& c, size_t k, size_t ks) {
  if (!c.kernel.empty())
    if (const QGemmKernel* named = qgemm_family().named(c.kernel)) {
      qgemm_check_weights_fit(*named, c.L.narrow_weights());
      return *named;
    }
  return qgemm_kernel(8, k, ks, c.L.narrow_weights());
}

QEpilogue qconv_epilogue(const QConvStage& out) {
  QEpilogue ep;
  const QConvRequant& t = out.tile_epilogue();
  ep.out = t.out;
  ep.relu = t.relu;
  ep.lo = t.lo;
  ep.hi = t.hi;
  return ep;
}

}  // namespace nnkern
