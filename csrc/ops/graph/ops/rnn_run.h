// The recurrent graph ops (LSTM, GRU, RNN; registered in ops/graph/ops/rnn.cc): what a node asks for, its
// weights packed once per session, and one run. float32 only. Baseline header.
//
// Two implementations:
//   * LSTM with the default activations (Sigmoid, Tanh, Tanh), no clip, no peepholes, no input_forget: nnkern's
//     F32Lstm (ops/rnn/lstm.h), its weights reordered from ONNX's gate order (i, o, f, c) to its own (i, f, g, o)
//     once, when they are packed; a reverse direction runs it on the sequences reversed within their lengths.
//   * everything else: the input projection of every step of every direction as one GEMM (W packed once, the
//     biases that do not need the reset gate folded into its epilogue), then per step one GEMM of the running
//     sequences' hidden states against R (two for GRU with linear_before_reset = 0) and the gates as plain loops
//     over rows (rnn_cells.h).
// Sequence lengths are data (read at each run): a sequence of length L computes steps 0 .. L-1 (a reverse
// direction L-1 .. 0), Y is zero past L, Y_h / Y_c hold the state after its last step, and zero for L = 0 (as
// onnxruntime gives).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ops/gemm/gemm.h"
#include "ops/graph/node.h"
#include "ops/rnn/lstm.h"

namespace nnkern::graph {

enum class RnnKind { rnn, gru, lstm };

// The activation functions the ops' `activations` attribute names (case-insensitive), with their alpha / beta.
enum class GateFn { sigmoid, tanh, relu, affine, leaky_relu, thresholded_relu, scaled_tanh, hard_sigmoid, elu,
                    softsign, softplus };
struct GateAct {
  GateFn fn = GateFn::sigmoid;
  float alpha = 0.0f, beta = 0.0f;
};

struct RnnSpec {
  RnnKind kind = RnnKind::lstm;
  size_t gates = 4;  // blocks of H rows in W and R: LSTM i, o, f, c; GRU z, r, h; RNN one
  size_t directions = 1;
  bool reverse = false;      // direction "reverse"
  // layout 1: X (batch, seq, input), Y (batch, seq, directions, hidden), states (batch, directions, hidden)
  bool batch_first = false;
  size_t seq = 0, batch = 0, input = 0, hidden = 0;
  size_t acts_per_direction = 1;  // LSTM f, g, h; GRU f, g; RNN f
  std::vector<GateAct> acts;      // directions * acts_per_direction
  bool clip = false;              // pre-activations clamped to [-clip_value, clip_value]
  float clip_value = 0.0f;
  bool input_forget = false;         // LSTM: f = 1 - i
  bool linear_before_reset = false;  // GRU
  bool has_bias = false, has_lengths = false, has_h0 = false, has_c0 = false, has_peepholes = false;
  bool bf16_input = false;  // the session's precision "medium": F32Lstm's input projection in bf16
  // nnkern.EmbeddingLSTM: X's rows are rows of a constant table (vocab x input) picked by int64 token ids, (seq,
  // batch) or, with ids_batch_first, (batch, seq); the table is projected once (seed I17), in float32 also at
  // precision "medium" (as LSTM.precompute_embeddings' table). vocab 0: X is given.
  size_t vocab = 0;
  bool ids_batch_first = false;

  bool reversed(size_t d) const { return reverse || d == 1; }
  const GateAct& act(size_t d, size_t k) const { return acts[d * acts_per_direction + k]; }
  size_t gate_width() const { return gates * hidden; }
  // Element offsets of row (t, b) of X (times input), of Y's row (t, d, b), and of a state row (d, b) in
  // initial_h, initial_c, Y_h, Y_c; the index of (t, b)'s token id.
  size_t x_row(size_t t, size_t b) const { return batch_first ? b * seq + t : t * batch + b; }
  size_t id_index(size_t t, size_t b) const { return ids_batch_first ? b * seq + t : t * batch + b; }
  size_t y_offset(size_t t, size_t d, size_t b) const {
    return (batch_first ? (b * seq + t) * directions + d : (t * directions + d) * batch + b) * hidden;
  }
  size_t state_offset(size_t d, size_t b) const {
    return (batch_first ? b * directions + d : d * batch + b) * hidden;
  }
};

// Whether the node runs on F32Lstm (the default LSTM cell; see above).
bool rnn_uses_f32_lstm(const RnnSpec& s);

// W, R and B of one node, packed. Shared by the plans of a session while their W / R / B are the same.
class RnnWeights {
 public:
  RnnWeights(const NodeSpec& n, const RnnSpec& s);
  // Whether this node's W / R / B are the ones packed here (the same constants, or equal bytes).
  bool packed_from(const NodeSpec& n) const;
  std::string detail() const;

  struct Direction {
    std::unique_ptr<F32Lstm> lstm;       // the F32Lstm path
    std::unique_ptr<PackedF32Gemm> r;    // R's rows (GRU with linear_before_reset = 0: z and r only)
    std::unique_ptr<PackedF32Gemm> r_h;  // GRU with linear_before_reset = 0: R's h rows
    std::vector<float> r_bias;           // GRU with linear_before_reset = 1 and B: (0, 0, Rb_h), else empty
    std::vector<float> table;            // nnkern.EmbeddingLSTM: the table's rows projected (F32Lstm::project)
  };
  std::unique_ptr<PackedF32Gemm> w;  // every direction's W as one (directions * gates * H, input) matrix
  std::vector<float> w_bias;         // the biases folded into the input projection (empty without B)
  std::vector<Direction> dir;

 private:
  std::vector<std::shared_ptr<const Constant>> sources_;  // W, R, B (null where left out)
};

// The tensors of one run. lengths, h0, c0, peepholes are null when left out; y_h, y_c when the node has no such
// output.
struct RnnIo {
  const float* x = nullptr;
  const int64_t* ids = nullptr;  // nnkern.EmbeddingLSTM: the token ids in place of x
  const int32_t* lengths = nullptr;
  const float* h0 = nullptr;
  const float* c0 = nullptr;
  const float* peepholes = nullptr;
  float* y = nullptr;
  float* y_h = nullptr;
  float* y_c = nullptr;
};

// std::invalid_argument naming `where` if a sequence length is outside [0, seq]; nothing is written then.
// Also when a token id is outside [-vocab, vocab) (negative ids count from the end, as Gather's).
void run_rnn(const RnnSpec& s, const RnnWeights& w, const RnnIo& io, const std::string& where);

}  // namespace nnkern::graph
