// nnkern.Conv: a float32 convolution on NHWC tensors through PackedConv2d (ops/conv/layer.h), the weights packed
// once per session. The Python side rewrites ONNX's Conv (NCHW, OIHW weights) into it: X (N, H, W, C), W
// constant (OC, KH, KW, C / group), B constant (OC) or left out, R (a residual of the output's shape, added before
// the activation: the plan's fusion of a following Add) or left out; attributes strides, dilations, pads (top, left,
// bottom, right as ONNX orders them), group, activation ("none", "relu", "relu6", "sigmoid", "silu", "hardswish",
// "hardsigmoid", "leaky_relu", "tanh") and its activation_alpha / activation_beta; upsample (two integer factors,
// default 1, 1: X is read as its nearest upsampling by them, through the indirect algorithm's indirection buffer,
// never written out: the plan's fusion of a Resize before the Conv); precision ("highest" by default, "high",
// "medium": what the layer's "auto" may pick, core/precision.h).
// nnkern.InvertedResidual: MobileNet-v2's expansion -> depthwise -> projection (-> + input) as one step in bands of
// rows that stay in cache (ops/conv/block.h), the plan's fusion of three nnkern.Conv nodes: inputs X, then weight
// and bias of the expansion (both left out: none), of the depthwise layer and of the projection; each layer's
// nnkern.Conv attributes prefixed "expand.", "dw.", "project."; residual (0 / 1): X added to the output.
#include "core/checked.h"
#include "ops/conv/block.h"
#include "ops/conv/layer.h"
#include "ops/graph/ops/common.h"
#include "ops/graph/ops/window.h"

namespace nnkern::graph {

namespace {

struct ConvParams {
  ConvGeometry geo;
  ConvPostOp post;
  size_t up_h = 1, up_w = 1;  // X is read as its nearest upsampling by these factors
  size_t H = 0, W = 0;        // the convolution's input size (X's, upsampled)
};

// The fused activation and its parameters (activation_alpha, activation_beta: the ONNX op's alpha and beta).
ConvPostOp activation_of(const NodeSpec& n) {
  static const std::pair<const char*, ConvActivation> kNames[] = {
      {"none", ConvActivation::none},           {"relu", ConvActivation::relu},
      {"relu6", ConvActivation::relu6},         {"sigmoid", ConvActivation::sigmoid},
      {"silu", ConvActivation::silu},           {"hardswish", ConvActivation::hardswish},
      {"hardsigmoid", ConvActivation::hardsigmoid}, {"leaky_relu", ConvActivation::leaky_relu},
      {"tanh", ConvActivation::tanh}};
  const std::string a = n.attr_string("activation", "none");
  for (const auto& [name, act] : kNames)
    if (a == name) return {act, n.attr_float("activation_alpha", 0.0f), n.attr_float("activation_beta", 0.0f)};
  n.unsupported("activation '" + a + "'");
}

ConvParams conv_params(const NodeSpec& n) {
  n.require_types({0, 1, 2, 3}, {DType::f32});
  const TensorDesc& x = n.in(0);
  const TensorDesc& w = n.need_constant(1, "weight").desc;
  if (x.rank() != 4 || w.rank() != 4) n.invalid("expects NHWC input and OHWI weights of rank 4");
  ConvParams p;
  ConvGeometry& g = p.geo;
  const int64_t group = n.attr_int("group", 1);
  if (group < 1) n.invalid("group must be >= 1");
  g.OC = size_t(w.shape[0]);
  g.KH = size_t(w.shape[1]);
  g.KW = size_t(w.shape[2]);
  g.IC = size_t(x.shape[3]);
  g.groups = size_t(group);
  const std::vector<int64_t> up = n.attr_ints("upsample", {1, 1});
  if (up.size() != 2 || up[0] < 1 || up[1] < 1) n.invalid("upsample must be two factors >= 1");
  p.up_h = size_t(up[0]);
  p.up_w = size_t(up[1]);
  p.H = checked_mul(size_t(x.shape[1]), p.up_h);
  p.W = checked_mul(size_t(x.shape[2]), p.up_w);
  const Window2d win = window_attrs(n, p.H, p.W, g.KH, g.KW);
  g.sh = win.sh; g.sw = win.sw; g.dh = win.dh; g.dw = win.dw;
  g.pt = win.pt; g.pl = win.pl; g.pb = win.pb; g.pr = win.pr;
  if (!g.valid() || size_t(w.shape[3]) * g.groups != g.IC)
    n.invalid("weight " + w.str() + " does not fit input " + x.str() + " with group " + std::to_string(group));
  if (n.has_input(2) && (n.need_constant(2, "bias").desc.elements() != g.OC))
    n.invalid("bias must have " + std::to_string(g.OC) + " elements");
  p.post = activation_of(n);
  return p;
}

std::vector<TensorDesc> infer_conv(const NodeSpec& n) {
  const ConvParams p = conv_params(n);
  const TensorDesc& x = n.in(0);
  const size_t OH = p.geo.OH(p.H), OW = p.geo.OW(p.W);
  if (OH == 0 || OW == 0) n.invalid("the kernel does not fit the padded input " + x.str());
  std::vector<TensorDesc> out = one(DType::f32, {x.shape[0], int64_t(OH), int64_t(OW), int64_t(p.geo.OC)});
  if (n.has_input(3) && n.in(3).shape != out[0].shape)
    n.invalid("the residual " + n.in(3).str() + " must have the output's shape " + out[0].str());
  return out;
}

// The packed layer of an nnkern.Conv node (its weight, bias and activation).
std::shared_ptr<const PackedConv2d> packed_layer(const NodeSpec& n) {
  const ConvParams p = conv_params(n);
  const Constant& w = n.need_constant(1, "weight");
  const float* b = n.has_input(2) ? n.need_constant(2, "bias").as<float>() : nullptr;
  // The constant's bytes serve as the layer's weights as given: no copy beside the packed one.
  return std::make_shared<PackedConv2d>(p.geo, w.as<float>(), b, p.post, ActMethod::accurate, w.data);
}

// A convolution step; its output may be a channel slice of a wider tensor (a Concat's: Step::write_rows).
class ConvStep final : public Step {
 public:
  ConvStep(std::shared_ptr<const PackedConv2d> layer, size_t N, const ConvParams& p, std::string algorithm,
           bool residual)
      : layer_(std::move(layer)), N_(N), H_(p.H), W_(p.W), up_h_(p.up_h), up_w_(p.up_w),
        algorithm_(std::move(algorithm)), residual_(residual) {}
  void run(const StepData& d) const override {
    layer_->run(N_, H_, W_, d.in<float>(0), d.out<float>(0), algorithm_, "", ldc_, Float32Precision::highest,
                residual_ ? d.in<float>(3) : nullptr, up_h_, up_w_);
  }
  std::string detail() const override {
    std::string s = algorithm_;
    if (up_h_ != 1 || up_w_ != 1) s += ", input upsampled x" + std::to_string(up_h_) + "," + std::to_string(up_w_);
    return residual_ ? s + " + residual" : s;
  }
  bool write_rows(size_t out, size_t row_bytes, size_t pitch) override {
    if (out != 0 || row_bytes != layer_->geometry().OC * sizeof(float) || pitch % sizeof(float)) return false;
    ldc_ = pitch / sizeof(float);
    return true;
  }

 private:
  std::shared_ptr<const PackedConv2d> layer_;
  size_t N_, H_, W_, up_h_, up_w_;  // H_, W_: the upsampled input's
  std::string algorithm_;
  bool residual_;
  size_t ldc_ = 0;  // floats from one output pixel to the next (0: OC)
};

std::unique_ptr<Step> make_conv(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers& layers) {
  auto layer = layers.get<PackedConv2d>(n, [&] { return packed_layer(n); });
  const ConvParams p = conv_params(n);
  const size_t N = size_t(n.in(0).shape[0]);
  Float32Precision precision;
  try {
    precision = float32_precision_from_name(n.attr_string("precision", "highest"));
  } catch (const std::invalid_argument& e) {
    n.invalid(e.what());
  }
  const std::string algorithm = layer->auto_algorithm(N, p.H, p.W, precision, p.up_h, p.up_w);
  return std::make_unique<ConvStep>(layer, N, p, algorithm, n.has_input(3));
}

// One layer of an nnkern.InvertedResidual as the nnkern.Conv node it stands for: input x, weight and bias at
// inputs w and w + 1, the attributes under `prefix`.
NodeSpec block_layer(const NodeSpec& n, const std::string& prefix, const TensorDesc& x, size_t w) {
  NodeSpec p;
  p.op = "nnkern.Conv";
  p.name = n.name + "/" + prefix;
  for (const auto& [key, value] : n.attrs)
    if (key.size() > prefix.size() && key.compare(0, prefix.size() + 1, prefix + ".") == 0)
      p.attrs[key.substr(prefix.size() + 1)] = value;
  p.inputs = {x, n.has_input(w) ? n.in(w) : TensorDesc{}, n.has_input(w + 1) ? n.in(w + 1) : TensorDesc{}};
  p.constants = {nullptr, n.has_input(w) ? n.constants[w] : nullptr, n.has_input(w + 1) ? n.constants[w + 1] : nullptr};
  return p;
}

struct BlockLayers {
  std::vector<NodeSpec> layers;  // [expansion,] depthwise, projection
  bool expand = false, residual = false;
};

BlockLayers block_layers(const NodeSpec& n) {
  if (n.inputs.size() != 7) n.invalid("expects 7 inputs (X and a weight and bias per layer)");
  BlockLayers b;
  b.expand = n.has_input(1);
  b.residual = n.attr_int("residual", 0) != 0;
  TensorDesc x = n.in(0);
  const auto add = [&](const char* prefix, size_t w) {
    b.layers.push_back(block_layer(n, prefix, x, w));
    const ConvParams p = conv_params(b.layers.back());
    if (p.up_h != 1 || p.up_w != 1) n.invalid("the block's layers read their inputs as they are (no upsample)");
    x = infer_conv(b.layers.back())[0];
  };
  if (b.expand) add("expand", 1);
  add("dw", 3);
  add("project", 5);
  const auto pointwise = [](const NodeSpec& p) {
    const ConvGeometry g = conv_params(p).geo;
    return g.pointwise() && g.groups == 1;
  };
  const ConvGeometry dw = conv_params(b.layers[b.expand]).geo;
  if ((b.expand && !pointwise(b.layers[0])) || !pointwise(b.layers.back()))
    n.invalid("the expansion and projection must be 1x1, stride 1, unpadded convolutions of one group");
  if (dw.groups != dw.IC || dw.groups != dw.OC) n.invalid("the middle layer must be depthwise");
  if (b.residual && x.shape != n.in(0).shape) n.invalid("a residual needs the output's shape to be the input's");
  return b;
}

std::vector<TensorDesc> infer_block(const NodeSpec& n) {
  const BlockLayers b = block_layers(n);
  return infer_conv(b.layers.back());
}

std::unique_ptr<Step> make_block(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers& layers) {
  const BlockLayers b = block_layers(n);
  auto block = layers.get<FusedInvertedResidual>(n, [&] {
    std::vector<std::shared_ptr<const PackedConv2d>> packed;
    for (const NodeSpec& p : b.layers) packed.push_back(packed_layer(p));
    return std::make_shared<FusedInvertedResidual>(b.expand ? packed[0] : nullptr, packed[b.expand], packed.back(),
                                                   b.residual);
  });
  const TensorDesc& x = n.in(0);
  const size_t N = size_t(x.shape[0]), H = size_t(x.shape[1]), W = size_t(x.shape[2]);
  const ConvGeometry& dw = conv_params(b.layers[b.expand]).geo;
  const std::string detail = std::string(b.expand ? "expand, " : "") + "depthwise " + std::to_string(dw.KH) + "x" +
                             std::to_string(dw.KW) + "/" + std::to_string(dw.sh) + ", project" +
                             (b.residual ? ", + input" : "") + " in bands of rows";
  return fn_step([block, N, H, W](const StepData& d) { block->run(N, H, W, d.in<float>(0), d.out<float>(0)); },
                 detail);
}

}  // namespace

void register_graph_ops_conv() {
  register_op("nnkern.Conv", {infer_conv, make_conv});
  register_op("nnkern.InvertedResidual", {infer_block, make_block});
}

}  // namespace nnkern::graph
