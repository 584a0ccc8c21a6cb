// Graph ops LSTM, GRU and RNN (ONNX's newest forms, float32): inputs X, W, R, B, sequence_lens, initial_h
// (and initial_c, P for LSTM); attributes direction, hidden_size, activations, activation_alpha / _beta, clip,
// layout, input_forget (LSTM), linear_before_reset (GRU). W, R and B must be constants: they are packed once per
// session (rnn_run.h); sequence_lens, initial states and peepholes are read at each run.
// nnkern.EmbeddingLSTM: an LSTM (the default cell) whose X is the rows of a constant embedding table picked by
// token ids, the plan's fusion of Gather (-> Transpose) -> LSTM: input 0 the int64 ids ((seq, batch), or (batch,
// seq) with ids_batch_first = 1), input 8 the table (vocab, input_size); the LSTM's other inputs and attributes.
// The table's rows are projected once, as the weights are packed, and a step copies its rows (seed I17).
#include <cctype>

#include "core/precision.h"
#include "ops/graph/ops/common.h"
#include "ops/graph/ops/rnn_run.h"

namespace nnkern::graph {

namespace {

const char* const kInputNames[] = {"X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P", "table"};

struct GateFnInfo {
  const char* name;  // lower case
  GateFn fn;
  bool uses_alpha, uses_beta;
  float alpha, beta;  // defaults: those of the ONNX operator of that name
};

const GateFnInfo kGateFns[] = {
    {"sigmoid", GateFn::sigmoid, false, false, 0.0f, 0.0f},
    {"tanh", GateFn::tanh, false, false, 0.0f, 0.0f},
    {"relu", GateFn::relu, false, false, 0.0f, 0.0f},
    {"affine", GateFn::affine, true, true, 1.0f, 0.0f},
    {"leakyrelu", GateFn::leaky_relu, true, false, 0.01f, 0.0f},
    {"thresholdedrelu", GateFn::thresholded_relu, true, false, 1.0f, 0.0f},
    {"scaledtanh", GateFn::scaled_tanh, true, true, 1.0f, 1.0f},
    {"hardsigmoid", GateFn::hard_sigmoid, true, true, 0.2f, 0.5f},
    {"elu", GateFn::elu, true, false, 1.0f, 0.0f},
    {"softsign", GateFn::softsign, false, false, 0.0f, 0.0f},
    {"softplus", GateFn::softplus, false, false, 0.0f, 0.0f},
};

// The activations attribute: names (case-insensitive), alpha and beta taken in order by the functions that use
// them (onnxruntime's reading), a function's ONNX default where the lists run out.
std::vector<GateAct> gate_acts(const NodeSpec& n, const RnnSpec& s) {
  std::vector<std::string> names;
  auto it = n.attrs.find("activations");
  if (it != n.attrs.end()) {
    if (it->second.kind != Attribute::Kind::strings) n.invalid("attribute 'activations' must be a list of strings");
    names = it->second.strings;
  } else {
    const char* dflt[3] = {"sigmoid", "tanh", "tanh"};
    for (size_t d = 0; d < s.directions; ++d)
      for (size_t k = 0; k < s.acts_per_direction; ++k) names.push_back(s.kind == RnnKind::rnn ? "tanh" : dflt[k]);
  }
  const size_t want = s.directions * s.acts_per_direction;
  if (s.kind == RnnKind::rnn && s.directions == 1 && names.size() == 2) names.resize(1);  // ONNX's default list
  if (names.size() != want)
    n.invalid("attribute 'activations' needs " + std::to_string(want) + " functions (" +
              std::to_string(s.acts_per_direction) + " per direction), has " + std::to_string(names.size()));
  const std::vector<float> alphas = n.attr_floats("activation_alpha"), betas = n.attr_floats("activation_beta");
  size_t next_alpha = 0, next_beta = 0;
  std::vector<GateAct> acts;
  for (const std::string& name : names) {
    std::string lower;
    for (char ch : name) lower += char(std::tolower(static_cast<unsigned char>(ch)));
    const GateFnInfo* info = nullptr;
    for (const GateFnInfo& f : kGateFns)
      if (lower == f.name) info = &f;
    if (!info)
      n.unsupported("activation '" + name + "' (supported: Sigmoid, Tanh, Relu, Affine, LeakyRelu, ThresholdedRelu, "
                    "ScaledTanh, HardSigmoid, Elu, Softsign, Softplus)");
    GateAct a{info->fn, info->alpha, info->beta};
    if (info->uses_alpha && next_alpha < alphas.size()) a.alpha = alphas[next_alpha++];
    if (info->uses_beta && next_beta < betas.size()) a.beta = betas[next_beta++];
    acts.push_back(a);
  }
  return acts;
}

void check_shape(const NodeSpec& n, size_t i, const std::vector<int64_t>& want) {
  const TensorDesc& t = n.in(i);
  if (t.shape != want) {
    std::string w;
    for (int64_t v : want) w += (w.empty() ? "" : "x") + std::to_string(v);
    n.invalid(std::string("input ") + kInputNames[i] + " must have shape [" + w + "], has " + t.str());
  }
}

RnnSpec rnn_spec(const NodeSpec& n, RnnKind kind, bool embedding = false) {
  RnnSpec s;
  s.kind = kind;
  s.gates = kind == RnnKind::lstm ? 4 : kind == RnnKind::gru ? 3 : 1;
  s.acts_per_direction = kind == RnnKind::lstm ? 3 : kind == RnnKind::gru ? 2 : 1;
  const size_t max_inputs = embedding ? 9 : kind == RnnKind::lstm ? 8 : 6;
  if (n.inputs.size() > max_inputs) n.invalid("takes at most " + std::to_string(max_inputs) + " inputs");
  for (size_t i = 0; i < 3; ++i)
    if (!n.has_input(i)) n.invalid(std::string("needs input ") + kInputNames[i]);
  if (embedding && !n.has_input(8)) n.invalid("needs input table");
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    if (i == 4 || !n.has_input(i) || (embedding && i == 0)) continue;
    const DType t = n.in(i).dtype;
    if (t == DType::f64 || t == DType::f16)
      n.unsupported(std::string("input ") + kInputNames[i] + " is " + dtype_name(t) + ": only float32 is supported");
    if (t != DType::f32) n.invalid(std::string("input ") + kInputNames[i] + " must be float32, is " + dtype_name(t));
  }
  if (n.has_input(4) && n.in(4).dtype != DType::i32)
    n.invalid(std::string("input sequence_lens must be int32, is ") + dtype_name(n.in(4).dtype));

  s.bf16_input = float32_precision_from_name(n.attr_string("precision", "highest")) == Float32Precision::medium;
  const std::string direction = n.attr_string("direction", "forward");
  if (direction == "bidirectional") s.directions = 2;
  else if (direction == "reverse") s.reverse = true;
  else if (direction != "forward")
    n.invalid("direction must be forward, reverse or bidirectional, is '" + direction + "'");
  const int64_t layout = n.attr_int("layout", 0);
  if (layout != 0 && layout != 1) n.invalid("layout must be 0 or 1, is " + std::to_string(layout));
  s.batch_first = layout == 1;

  if (embedding) {
    const TensorDesc& ids = n.in(0);
    const TensorDesc& table = n.need_constant(8, "the embedding table").desc;
    if (ids.dtype != DType::i64 || ids.rank() != 2) n.invalid("the token ids must be 2-D int64, are " + ids.str());
    if (table.rank() != 2 || table.shape[0] < 1) n.invalid("the embedding table must be 2-D, is " + table.str());
    s.ids_batch_first = n.attr_int("ids_batch_first", 0) != 0;
    s.seq = size_t(ids.shape[s.ids_batch_first ? 1 : 0]);
    s.batch = size_t(ids.shape[s.ids_batch_first ? 0 : 1]);
    s.vocab = size_t(table.shape[0]);
    s.input = size_t(table.shape[1]);
  } else {
    const TensorDesc& x = n.in(0);
    if (x.rank() != 3) n.invalid("input X must have rank 3, has " + x.str());
    s.seq = size_t(x.shape[s.batch_first ? 1 : 0]);
    s.batch = size_t(x.shape[s.batch_first ? 0 : 1]);
    s.input = size_t(x.shape[2]);
  }
  const TensorDesc& r = n.need_constant(2, "R (recurrence weights)").desc;
  n.need_constant(1, "W (input weights)");
  if (r.rank() != 3) n.invalid("input R must have rank 3, has " + r.str());
  const int64_t hidden = n.has("hidden_size") ? n.attr_int("hidden_size", 0) : r.shape[2];
  if (hidden <= 0) n.invalid("hidden_size must be positive, is " + std::to_string(hidden));
  s.hidden = size_t(hidden);
  const int64_t D = int64_t(s.directions), GH = int64_t(s.gates) * hidden;
  check_shape(n, 1, {D, GH, int64_t(s.input)});
  check_shape(n, 2, {D, GH, hidden});
  if (n.has_input(3)) {
    n.need_constant(3, "B (biases)");
    check_shape(n, 3, {D, 2 * GH});
    s.has_bias = true;
  }
  if (n.has_input(4)) {
    check_shape(n, 4, {int64_t(s.batch)});
    s.has_lengths = true;
  }
  const std::vector<int64_t> state = s.batch_first ? std::vector<int64_t>{int64_t(s.batch), D, hidden}
                                                   : std::vector<int64_t>{D, int64_t(s.batch), hidden};
  if (n.has_input(5)) {
    check_shape(n, 5, state);
    s.has_h0 = true;
  }
  if (n.has_input(6)) {
    check_shape(n, 6, state);
    s.has_c0 = true;
  }
  if (n.has_input(7)) {
    check_shape(n, 7, {D, 3 * hidden});
    s.has_peepholes = true;
  }

  s.acts = gate_acts(n, s);
  if (n.has("clip")) {
    s.clip = true;
    s.clip_value = n.attr_float("clip", 0.0f);
    if (!(s.clip_value > 0.0f)) n.invalid("clip must be positive, is " + std::to_string(s.clip_value));
  }
  if (kind == RnnKind::lstm) s.input_forget = n.attr_int("input_forget", 0) != 0;
  if (kind == RnnKind::gru) s.linear_before_reset = n.attr_int("linear_before_reset", 0) != 0;
  if (embedding && !rnn_uses_f32_lstm(s)) n.invalid("the embedding form needs the default LSTM cell");
  return s;
}

template <RnnKind K, bool Embedding = false>
std::vector<TensorDesc> infer_rnn(const NodeSpec& n) {
  const RnnSpec s = rnn_spec(n, K, Embedding);
  const int64_t S = int64_t(s.seq), B = int64_t(s.batch), D = int64_t(s.directions), H = int64_t(s.hidden);
  const TensorDesc y{DType::f32, s.batch_first ? std::vector<int64_t>{B, S, D, H} : std::vector<int64_t>{S, D, B, H}};
  const TensorDesc state{DType::f32, s.batch_first ? std::vector<int64_t>{B, D, H} : std::vector<int64_t>{D, B, H}};
  if (K == RnnKind::lstm) return {y, state, state};
  return {y, state};
}

// The packed weights: the session's, unless this plan's W / R / B differ from those it was packed from (inputs
// whose values a plan is specialized for), then this plan's own.
std::shared_ptr<const RnnWeights> weights_of(const NodeSpec& n, const RnnSpec& s, SharedLayers& layers) {
  auto shared = layers.get<RnnWeights>(n, [&] { return std::make_shared<const RnnWeights>(n, s); });
  if (shared->packed_from(n)) return shared;
  return std::make_shared<const RnnWeights>(n, s);
}

template <RnnKind K, bool Embedding = false>
std::unique_ptr<Step> make_rnn(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers& layers) {
  const RnnSpec s = rnn_spec(n, K, Embedding);
  std::shared_ptr<const RnnWeights> w = weights_of(n, s, layers);
  const size_t outputs = out.size();
  std::string detail = w->detail(), where = n.where();
  return fn_step(
      [s, w, outputs, where](const StepData& d) {
        RnnIo io;
        io.x = Embedding ? nullptr : d.in<float>(0);
        io.ids = Embedding ? d.in<int64_t>(0) : nullptr;
        io.lengths = s.has_lengths ? d.in<int32_t>(4) : nullptr;
        io.h0 = s.has_h0 ? d.in<float>(5) : nullptr;
        io.c0 = s.has_c0 ? d.in<float>(6) : nullptr;
        io.peepholes = s.has_peepholes ? d.in<float>(7) : nullptr;
        io.y = outputs > 0 ? d.out<float>(0) : nullptr;
        io.y_h = outputs > 1 ? d.out<float>(1) : nullptr;
        io.y_c = outputs > 2 ? d.out<float>(2) : nullptr;
        run_rnn(s, *w, io, where);
      },
      detail);
}

}  // namespace

void register_graph_ops_rnn() {
  register_op("LSTM", {infer_rnn<RnnKind::lstm>, make_rnn<RnnKind::lstm>});
  register_op("nnkern.EmbeddingLSTM", {infer_rnn<RnnKind::lstm, true>, make_rnn<RnnKind::lstm, true>});
  register_op("GRU", {infer_rnn<RnnKind::gru>, make_rnn<RnnKind::gru>});
  register_op("RNN", {infer_rnn<RnnKind::rnn>, make_rnn<RnnKind::rnn>});
}

}  // namespace nnkern::graph
