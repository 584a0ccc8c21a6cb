// Single-layer LSTM with torch.nn.LSTM's semantics (gate order i, f, g, o), weights packed once
// (issue 5 part 2; seeds I17 embedding fusion, I18/I19 activations, I20 dynamic batch).
//
//   gates = x W_ih^T + h W_hh^T + b_ih + b_hh,  i, f, o = sigmoid,  g = tanh,
//   c' = f c + i g,  h' = o tanh(c').
//
// Per call: the input projection of every (step, sequence) row that is computed is ONE panel GEMM
// (ops/gemm/panel_gemm.h; at precision "medium" the bf16 GEMM) into a gate buffer, bias included. Then each step is one panel GEMM of the
// active h rows against W_hh, accumulating onto that step's gate rows (beta = 1), whose post-op (the
// cell) runs per block of MR hidden units right after the block's four gate tiles are stored:
// activations on the tiles (in L1), the c update, h written into the output. W_hh is packed so that
// a block's four panels (i, f, g, o of the same MR units) are adjacent, so a block needs no other.
// Sequences are sorted by length, longest first, and step t computes only the sequences still
// running (I20); nothing of a finished sequence is computed.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "core/buffer.h"
#include "kernels/f32_gemm.h"
#include "kernels/f32_activation.h"
#include "ops/bf16/bf16.h"
#include "ops/gemm/panel_gemm.h"

namespace nnkern {

struct F32LstmCall {
  size_t seq = 0, batch = 0;
  // Input row (t, b): x + t * x_ts + b * x_bs (input_size floats); or, when `table` is set, the
  // projected row table + ids[t * id_ts + b * id_bs] * 4H (F32Lstm::project of an embedding table).
  const float* x = nullptr;
  size_t x_ts = 0, x_bs = 0;
  const float* table = nullptr;
  const int64_t* ids = nullptr;  // each in [0, table rows): checked by the caller
  size_t id_ts = 0, id_bs = 0;
  const float* h0 = nullptr;  // (batch, H) rows, or null for zeros
  const float* c0 = nullptr;
  const int64_t* lengths = nullptr;  // per batch entry, each in [0, seq]; null: all seq
  float* out = nullptr;              // output row (t, b) at out + t * out_ts + b * out_bs; zero for t >= length
  size_t out_ts = 0, out_bs = 0;
  float* h_n = nullptr;  // (batch, H): each sequence's state after its own last step (h0 / c0 for length 0)
  float* c_n = nullptr;
  ActMethod method = ActMethod::accurate;
  // Float32 precision "medium": the input projection's products in bf16 (ops/bf16/bf16.h), summed in float32. The
  // recurrent product stays float32: a GEMM of a few rows per step, and its rounding would compound over the steps.
  bool bf16_input = false;
};

class F32Lstm {
 public:
  // w_ih[4H, I], w_hh[4H, H] row-major (torch's weight_ih_l0, weight_hh_l0); bias[4H] = b_ih + b_hh, or null.
  F32Lstm(const float* w_ih, const float* w_hh, const float* bias, size_t input_size, size_t hidden_size);
  ~F32Lstm();

  size_t input_size() const { return I_; }
  size_t hidden_size() const { return H_; }
  const char* kernel_name() const;

  // out[r] = x[r] W_ih^T + bias (4H floats, gate order i, f, g, o) for r < rows, x rows ldx apart: the
  // input projection, row for row bit-identical to the one run() computes (seed I17's table).
  void project(size_t rows, const float* x, size_t ldx, float* out) const;

  // Returns the cell updates computed (sequence-steps): the sum of the lengths. Safe to call from
  // several threads at once (no shared scratch).
  size_t run(const F32LstmCall& call) const;

 private:
  struct Packed;
  static std::unique_ptr<const Packed> pack(const F32GemmKernel& k, const float* w_ih, const float* w_hh, size_t I,
                                            size_t H);
  std::unique_ptr<const Packed> packed_;  // for the kernel dispatched at construction
  // Another cap than at construction: a copy packed for the kernel dispatched now, built per call.
  const Packed& packed_for_now(std::unique_ptr<const Packed>& tmp) const;
  // W_ih rounded to bf16 and packed for the bf16 GEMM, on the first call with bf16_input.
  const PackedBf16Gemm& bf16_ih() const;
  mutable std::mutex bf16_mu_;
  mutable std::unique_ptr<const PackedBf16Gemm> bf16_ih_;
  AlignedBuffer<float> bias_;
  bool has_bias_;
  size_t I_, H_;
};

}  // namespace nnkern
