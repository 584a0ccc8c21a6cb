// nnkern.Conv: a float32 convolution on NHWC tensors through PackedConv2d (ops/conv/layer.h), the weights packed
// once per session. The Python side rewrites ONNX's Conv (NCHW, OIHW weights) into it: X (N, H, W, C), W
// constant (OC, KH, KW, C / group), B constant (OC) or left out; attributes strides, dilations, pads (top, left,
// bottom, right as ONNX orders them), group and activation ("none", "relu", "relu6", "sigmoid", "silu").
#include "ops/conv/layer.h"
#include "ops/graph/ops/common.h"

namespace nnkern::graph {

namespace {

struct ConvParams {
  ConvGeometry geo;
  ConvActivation act = ConvActivation::none;
};

ConvActivation activation_of(const NodeSpec& n) {
  const std::string a = n.attr_string("activation", "none");
  if (a == "none") return ConvActivation::none;
  if (a == "relu") return ConvActivation::relu;
  if (a == "relu6") return ConvActivation::relu6;
  if (a == "sigmoid") return ConvActivation::sigmoid;
  if (a == "silu") return ConvActivation::silu;
  n.unsupported("activation '" + a + "'");
}

ConvParams conv_params(const NodeSpec& n) {
  n.require_types({0, 1, 2}, {DType::f32});
  const TensorDesc& x = n.in(0);
  const TensorDesc& w = n.need_constant(1, "weight").desc;
  if (x.rank() != 4 || w.rank() != 4) n.invalid("expects NHWC input and OHWI weights of rank 4");
  ConvParams p;
  ConvGeometry& g = p.geo;
  const auto s = n.attr_ints("strides", {1, 1}), d = n.attr_ints("dilations", {1, 1}), pads = n.attr_ints("pads", {0, 0, 0, 0});
  if (s.size() != 2 || d.size() != 2 || pads.size() != 4) n.invalid("strides / dilations / pads of a 2-D convolution");
  for (int64_t v : s) if (v < 1) n.invalid("strides must be >= 1");
  for (int64_t v : d) if (v < 1) n.invalid("dilations must be >= 1");
  for (int64_t v : pads) if (v < 0) n.invalid("pads must be >= 0");
  const int64_t group = n.attr_int("group", 1);
  if (group < 1) n.invalid("group must be >= 1");
  g.OC = size_t(w.shape[0]);
  g.KH = size_t(w.shape[1]);
  g.KW = size_t(w.shape[2]);
  g.IC = size_t(x.shape[3]);
  g.groups = size_t(group);
  g.sh = size_t(s[0]); g.sw = size_t(s[1]);
  g.dh = size_t(d[0]); g.dw = size_t(d[1]);
  g.pt = size_t(pads[0]); g.pl = size_t(pads[1]); g.pb = size_t(pads[2]); g.pr = size_t(pads[3]);
  const std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {  // ceil(in / stride) outputs, the odd pad at the end / start
    auto same = [&](size_t in, size_t k, size_t st, size_t dil, size_t* p0, size_t* p1) {
      const size_t out = ceil_div(in, st), need = (out - 1) * st + dil * (k - 1) + 1, total = need > in ? need - in : 0;
      *p0 = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      *p1 = total - *p0;
    };
    same(size_t(x.shape[1]), g.KH, g.sh, g.dh, &g.pt, &g.pb);
    same(size_t(x.shape[2]), g.KW, g.sw, g.dw, &g.pl, &g.pr);
  } else if (auto_pad == "VALID") {
    g.pt = g.pb = g.pl = g.pr = 0;
  } else if (auto_pad != "NOTSET") {
    n.invalid("auto_pad '" + auto_pad + "'");
  }
  if (!g.valid() || size_t(w.shape[3]) * g.groups != g.IC)
    n.invalid("weight " + w.str() + " does not fit input " + x.str() + " with group " + std::to_string(group));
  if (n.has_input(2) && (n.need_constant(2, "bias").desc.elements() != g.OC))
    n.invalid("bias must have " + std::to_string(g.OC) + " elements");
  p.act = activation_of(n);
  return p;
}

std::vector<TensorDesc> infer_conv(const NodeSpec& n) {
  const ConvParams p = conv_params(n);
  const TensorDesc& x = n.in(0);
  const size_t OH = p.geo.OH(size_t(x.shape[1])), OW = p.geo.OW(size_t(x.shape[2]));
  if (OH == 0 || OW == 0) n.invalid("the kernel does not fit the padded input " + x.str());
  return one(DType::f32, {x.shape[0], int64_t(OH), int64_t(OW), int64_t(p.geo.OC)});
}

std::unique_ptr<Step> make_conv(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers& layers) {
  const ConvParams p = conv_params(n);
  const float* w = n.need_constant(1, "weight").as<float>();
  const float* b = n.has_input(2) ? n.need_constant(2, "bias").as<float>() : nullptr;
  auto layer = layers.get<PackedConv2d>(n, [&] {
    return std::make_shared<PackedConv2d>(p.geo, w, b, p.act, ActMethod::accurate);
  });
  const TensorDesc& x = n.in(0);
  const size_t N = size_t(x.shape[0]), H = size_t(x.shape[1]), W = size_t(x.shape[2]);
  const std::string algorithm = layer->auto_algorithm(N, H, W);
  return fn_step(
      [layer, N, H, W, algorithm](const StepData& d) {
        layer->run(N, H, W, d.in<float>(0), d.out<float>(0), algorithm);
      },
      algorithm);
}

}  // namespace

void register_graph_ops_conv() { register_op("nnkern.Conv", {infer_conv, make_conv}); }

}  // namespace nnkern::graph
