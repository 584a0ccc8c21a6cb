// The fused inverted-residual block (ops/conv/block.h).
#include "ops/conv/block.h"

#include <algorithm>
#include <stdexcept>

#include "core/checked.h"
#include "core/threadpool.h"
#include "core/workspace.h"

namespace nnkern {
namespace {

// The slices of one band (expanded input rows, depthwise output rows) should fit in about this much of L2.
constexpr size_t kBandBytes = size_t(1) << 20;

bool is_pointwise(const PackedConv2d* L) { return L && L->geometry().pointwise() && L->geometry().groups == 1; }

}  // namespace

FusedInvertedResidual::FusedInvertedResidual(std::shared_ptr<const PackedConv2d> expand,
                                             std::shared_ptr<const PackedConv2d> dw,
                                             std::shared_ptr<const PackedConv2d> project, bool residual,
                                             std::array<std::string, 3> algorithms)
    : expand_(std::move(expand)), dw_(std::move(dw)), project_(std::move(project)), residual_(residual),
      algorithms_(std::move(algorithms)) {
  if (!dw_ || !project_) throw std::invalid_argument("inverted residual: the depthwise and projection layers are required");
  const ConvGeometry& d = dw_->geometry();
  if (expand_ && !is_pointwise(expand_.get()))
    throw std::invalid_argument("inverted residual: the expansion must be 1x1, stride 1, unpadded, groups 1");
  if (!is_pointwise(project_.get()))
    throw std::invalid_argument("inverted residual: the projection must be 1x1, stride 1, unpadded, groups 1");
  if (d.groups != d.IC || d.groups != d.OC)
    throw std::invalid_argument("inverted residual: the middle layer must be depthwise (groups = in = out channels)");
  hidden_ = d.IC;
  IC_ = expand_ ? expand_->geometry().IC : hidden_;
  OC_ = project_->geometry().OC;
  if ((expand_ && expand_->geometry().OC != hidden_) || project_->geometry().IC != hidden_)
    throw std::invalid_argument("inverted residual: the layers' channel counts do not chain");
  if (residual_ && (IC_ != OC_ || d.sh != 1 || d.sw != 1 || d.pt + d.pb != (d.KH - 1) * d.dh ||
                    d.pl + d.pr != (d.KW - 1) * d.dw))
    throw std::invalid_argument("inverted residual: a residual needs in == out channels and a size-keeping depthwise");
}

const PackedConv2d& FusedInvertedResidual::dw_variant(size_t top, size_t bottom) const {
  const ConvGeometry& d = dw_->geometry();
  if (top == d.pt && bottom == d.pb) return *dw_;
  std::lock_guard<std::mutex> lock(mu_);
  auto& v = variants_[{top, bottom}];
  if (!v) {
    ConvGeometry g = d;
    g.pt = top;
    g.pb = bottom;
    v = std::make_unique<PackedConv2d>(g, dw_->raw(), dw_->bias(), dw_->post_op(), dw_->method());
  }
  return *v;
}

size_t FusedInvertedResidual::rows_per_band(size_t H, size_t W) const {
  const ConvGeometry& d = dw_->geometry();
  const size_t OH = out_h(H), OW = out_w(W);
  // One pixel wide: a band of one row would make a 1x1 layer a GEMV (another summation order than the whole
  // image's GEMM), so such an image is one band.
  if (W == 1 || OW == 1) return std::max<size_t>(OH, 1);
  // An output row needs sh expanded rows (plus the window's halo once per band) and one depthwise row.
  const size_t per_row = (d.sh * W + OW) * hidden_ * sizeof(float);
  const size_t rows = std::min(std::max<size_t>(OH, 1), std::max<size_t>(1, kBandBytes / std::max<size_t>(per_row, 1)));
  // Bands in parallel when there are at least two per thread: then a whole number of bands per thread.
  const size_t threads = size_t(get_num_threads()), bands = (OH + rows - 1) / rows;
  if (threads < 2) return rows;
  if (bands < 2 * threads) {
    // A small image: one band per thread when each gets two rows or more. Each thread then runs the three layers
    // on its rows without waiting for the others (the halo rows of the expansion computed twice), where three
    // pooled layer calls on a few rows each would spend the time in their synchronizations (ShuffleNet's and
    // MobileNet's 28 x 28 to 7 x 7 blocks at batch 1).
    return OH >= 2 * threads ? (OH + threads - 1) / threads : rows;
  }
  const size_t even = (bands + threads - 1) / threads * threads;
  return (OH + even - 1) / even;
}

void FusedInvertedResidual::run(size_t N, size_t H, size_t W, const float* x, float* y) const {
  const ConvGeometry& d = dw_->geometry();
  const size_t OH = out_h(H), OW = out_w(W);
  if (!H || !W || !OH || !OW) throw std::invalid_argument("inverted residual: the kernel does not fit the padded input");
  dw_->geometry().checked_pixels(N, H, W);
  checked_mul(N, H, W, std::max(IC_, hidden_), sizeof(float));
  checked_mul(N, OH, OW, std::max(OC_, hidden_), sizeof(float));
  if (!N) return;
  const size_t rows = rows_per_band(H, W), bands = (OH + rows - 1) / rows;
  const size_t span = (d.KH - 1) * d.dh;
  const size_t max_in_rows = std::min(H, (rows - 1) * d.sh + span + 1);
  // Slices: the expanded input rows, the depthwise output rows, and one zero row that stands in for the input of a
  // band whose windows lie wholly in the bottom padding (a layer needs at least one input row).
  WorkspaceLayout lay;
  const size_t e_off = lay.add(expand_ ? checked_mul(max_in_rows, W, hidden_, sizeof(float)) : 0);
  const size_t dw_off = lay.add(checked_mul(rows, OW, hidden_, sizeof(float)));
  const size_t zero_off = lay.add(checked_mul(W, hidden_, sizeof(float)));
  const auto band = [&](size_t task, void* buf) {
    const size_t n = task / bands, o0 = task % bands * rows, o1 = std::min(OH, o0 + rows);
    // The band's windows read padded rows [first, last]; the real ones among them are [r0, r1) (padded coordinates).
    // What lies outside the image becomes the variant's padding.
    const size_t first = o0 * d.sh, last = (o1 - 1) * d.sh + span;
    const size_t r0 = std::max(first, d.pt), r1 = std::min(last + 1, d.pt + H);
    char* ws = static_cast<char*>(buf);
    float* dwo = reinterpret_cast<float*>(ws + dw_off);
    size_t in_rows = 1, top = 0, bottom = last - first;  // no real row: one zero row, the rest padding
    const float* mid = reinterpret_cast<const float*>(ws + zero_off);
    if (r0 < r1) {
      in_rows = r1 - r0, top = r0 - first, bottom = last + 1 - r1;
      const float* xin = x + (n * H + r0 - d.pt) * W * IC_;
      mid = xin;
      if (expand_) {
        float* e = reinterpret_cast<float*>(ws + e_off);
        expand_->run(1, in_rows, W, xin, e, algorithms_[0]);
        mid = e;
      }
    } else {
      std::fill(reinterpret_cast<float*>(ws + zero_off), reinterpret_cast<float*>(ws + zero_off) + W * hidden_, 0.0f);
    }
    const PackedConv2d& dwv = dw_variant(top, bottom);
    if (dwv.geometry().OH(in_rows) != o1 - o0) throw std::logic_error("inverted residual: band rows do not match");
    dwv.run(1, in_rows, W, mid, dwo, algorithms_[1]);
    float* out = y + (n * OH + o0) * OW * OC_;
    project_->run(1, o1 - o0, OW, dwo, out, algorithms_[2]);
    if (residual_) {  // stride 1, same size: the band's own input rows
      const float* r = x + (n * H + o0) * W * IC_;
      const size_t count = (o1 - o0) * OW * OC_;
      for (size_t i = 0; i < count; ++i) out[i] += r[i];
    }
  };
  // A band per thread or more: in parallel, each layer call inside a band on its thread. Fewer (images of a few
  // rows): one after the other, each layer call using the whole pool.
  const size_t threads = size_t(get_num_threads());
  if (threads > 1 && N * bands >= threads) {
    parallel_for_scratch(N * bands, lay.bytes, band);
  } else {
    Workspace ws(lay.bytes);
    for (size_t task = 0; task < N * bands; ++task) band(task, ws.data());
  }
}

}  // namespace nnkern
