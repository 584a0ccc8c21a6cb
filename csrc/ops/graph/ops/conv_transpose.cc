// nnkern.ConvTranspose: a float32 transposed convolution on NHWC tensors, weights as ONNX gives them (C, OC / group,
// KH, KW) and constant. Per image and group, one GEMM of the input pixels by the weights packed once (its columns
// ordered tap by tap, output channels innermost: PackedF32Gemm) gives every pixel's contribution to each tap; each
// output row then gathers the contributions that land on it (race-free across threads, in a fixed order) onto
// the bias. Attributes as ONNX's (strides, dilations, pads top, left, bottom, right, output_padding, output_shape,
// auto_pad, group); the Python side lowers ONNX's ConvTranspose onto it.
#include <algorithm>
#include <cstring>

#include "core/checked.h"
#include "core/threadpool.h"
#include "core/workspace.h"
#include "ops/gemm/gemm.h"
#include "ops/graph/ops/common.h"

namespace nnkern::graph {

namespace {

struct Geometry {
  size_t N, H, W, C, OC, KH, KW, groups, sh, sw, dh, dw;
  long pt, pl, pb, pr;  // negative where output_shape asks for more than the full output (rows of bias alone)
  size_t OH, OW;
  size_t cg() const { return C / groups; }
  size_t ocg() const { return OC / groups; }
};

// One axis: the padding and output size ONNX's rules give (output_shape, auto_pad, pads, output_padding).
void axis(const NodeSpec& n, size_t in, size_t k, size_t s, size_t d, int64_t out_pad, int64_t out_shape,
          const std::string& auto_pad, long* p0, long* p1, size_t* out) {
  const int64_t full = int64_t(s) * (int64_t(in) - 1) + out_pad + (int64_t(k) - 1) * int64_t(d) + 1;
  if (out_shape >= 0 || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    const int64_t target = out_shape >= 0 ? out_shape : int64_t(in) * int64_t(s);
    const int64_t total = full - target;  // negative: output rows past the full output, bias alone
    const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);  // floor division, as ONNX's reference
    const bool upper = auto_pad == "SAME_UPPER";
    *p0 = long(upper ? half : total - half);
    *p1 = long(total) - *p0;
  } else if (auto_pad == "VALID") {
    *p0 = *p1 = 0;
  }
  const int64_t o = full - *p0 - *p1;
  if (o < 1) n.invalid("the output would be empty");
  *out = size_t(o);
}

Geometry geometry(const NodeSpec& n) {
  n.require_types({0, 1, 2}, {DType::f32});
  const TensorDesc& x = n.in(0);
  const TensorDesc& w = n.need_constant(1, "weight").desc;
  if (x.rank() != 4 || w.rank() != 4) n.invalid("expects an NHWC input and a weight of rank 4");
  const auto s = n.attr_ints("strides", {1, 1}), d = n.attr_ints("dilations", {1, 1}),
             p = n.attr_ints("pads", {0, 0, 0, 0}), op = n.attr_ints("output_padding", {0, 0}),
             os = n.attr_ints("output_shape");
  if (s.size() != 2 || d.size() != 2 || p.size() != 4 || op.size() != 2 || (!os.empty() && os.size() != 2))
    n.invalid("strides, dilations, output_padding of 2 and pads of 4 values expected");
  for (int64_t v : s) if (v < 1) n.invalid("strides must be >= 1");
  for (int64_t v : d) if (v < 1) n.invalid("dilations must be >= 1");
  for (int64_t v : p) if (v < 0) n.invalid("pads must be >= 0");
  for (size_t i = 0; i < 2; ++i)
    if (op[i] < 0 || op[i] >= std::max(s[i], d[i])) n.invalid("output_padding must be below the stride or dilation");
  const int64_t group = n.attr_int("group", 1);
  Geometry g{};
  g.N = size_t(x.shape[0]); g.H = size_t(x.shape[1]); g.W = size_t(x.shape[2]); g.C = size_t(x.shape[3]);
  g.groups = size_t(group);
  if (group < 1 || size_t(w.shape[0]) != g.C || g.C % g.groups)
    n.invalid("weight " + w.str() + " does not fit input " + x.str() + " with group " + std::to_string(group));
  g.OC = size_t(w.shape[1]) * g.groups;
  g.KH = size_t(w.shape[2]); g.KW = size_t(w.shape[3]);
  g.sh = size_t(s[0]); g.sw = size_t(s[1]); g.dh = size_t(d[0]); g.dw = size_t(d[1]);
  g.pt = long(p[0]); g.pl = long(p[1]); g.pb = long(p[2]); g.pr = long(p[3]);
  const std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER")
    n.invalid("auto_pad '" + auto_pad + "'");
  axis(n, g.H, g.KH, g.sh, g.dh, op[0], os.empty() ? -1 : os[0], auto_pad, &g.pt, &g.pb, &g.OH);
  axis(n, g.W, g.KW, g.sw, g.dw, op[1], os.empty() ? -1 : os[1], auto_pad, &g.pl, &g.pr, &g.OW);
  if (n.has_input(2) && n.need_constant(2, "bias").desc.elements() != g.OC)
    n.invalid("bias must have " + std::to_string(g.OC) + " elements");
  checked_mul(g.H, g.W, g.KH, g.KW, g.OC, 4);
  return g;
}

std::vector<TensorDesc> infer(const NodeSpec& n) {
  const Geometry g = geometry(n);
  return one(DType::f32, {int64_t(g.N), int64_t(g.OH), int64_t(g.OW), int64_t(g.OC)});
}

struct PackedGroups {
  std::vector<std::unique_ptr<PackedF32Gemm>> gemm;  // per group: columns (kh, kw, oc), rows the group's channels
};

std::unique_ptr<Step> make(const NodeSpec& n, const std::vector<TensorDesc>&, SharedLayers& layers) {
  const Geometry g = geometry(n);
  const float* w = n.need_constant(1, "weight").as<float>();
  auto packed = layers.get<PackedGroups>(n, [&] {
    auto p = std::make_shared<PackedGroups>();
    const size_t cols = g.KH * g.KW * g.ocg();
    std::vector<float> wt(cols * g.cg());
    for (size_t grp = 0; grp < g.groups; ++grp) {
      for (size_t ci = 0; ci < g.cg(); ++ci)
        for (size_t oc = 0; oc < g.ocg(); ++oc)
          for (size_t t = 0; t < g.KH * g.KW; ++t)
            wt[(t * g.ocg() + oc) * g.cg() + ci] = w[((grp * g.cg() + ci) * g.ocg() + oc) * g.KH * g.KW + t];
      p->gemm.push_back(std::make_unique<PackedF32Gemm>(wt.data(), cols, g.cg(), g.cg()));
    }
    return p;
  });
  std::vector<float> bias(g.OC, 0.0f);
  if (n.has_input(2)) std::copy(n.need_constant(2, "bias").as<float>(), n.need_constant(2, "bias").as<float>() + g.OC, bias.begin());
  return fn_step(
      [g, packed, bias](const StepData& d) {
        const size_t pixels = g.H * g.W, cols = g.KH * g.KW * g.ocg();
        Workspace ws(checked_mul(pixels, cols, sizeof(float)));
        float* contrib = ws.as<float>();
        for (size_t img = 0; img < g.N; ++img) {
          const float* x = d.in<float>(0) + img * pixels * g.C;
          float* y = d.out<float>(0) + img * g.OH * g.OW * g.OC;
          for (size_t grp = 0; grp < g.groups; ++grp) {
            if (pixels && g.cg()) packed->gemm[grp]->run(pixels, x + grp * g.cg(), g.C, contrib, cols, F32Epilogue{});
            else std::fill(contrib, contrib + pixels * cols, 0.0f);
            parallel_for(g.OH, [&](size_t oh) {
              for (size_t ow = 0; ow < g.OW; ++ow) {
                float* py = y + (oh * g.OW + ow) * g.OC + grp * g.ocg();
                std::copy(bias.begin() + long(grp * g.ocg()), bias.begin() + long((grp + 1) * g.ocg()), py);
                for (size_t kh = 0; kh < g.KH; ++kh) {
                  const long th = long(oh) + g.pt - long(kh * g.dh);
                  if (th < 0 || th % long(g.sh) || size_t(th) / g.sh >= g.H) continue;
                  const size_t ih = size_t(th) / g.sh;
                  for (size_t kw = 0; kw < g.KW; ++kw) {
                    const long tw = long(ow) + g.pl - long(kw * g.dw);
                    if (tw < 0 || tw % long(g.sw) || size_t(tw) / g.sw >= g.W) continue;
                    const float* src = contrib + (ih * g.W + size_t(tw) / g.sw) * cols + (kh * g.KW + kw) * g.ocg();
                    for (size_t oc = 0; oc < g.ocg(); ++oc) py[oc] += src[oc];
                  }
                }
              }
            });
          }
        }
      },
      std::string("gemm + gather ") + packed->gemm[0]->kernel_name());
}

}  // namespace

void register_graph_ops_conv_transpose() { register_op("nnkern.ConvTranspose", {infer, make}); }

}  // namespace nnkern::graph
