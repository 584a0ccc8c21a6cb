// The recurrent graph ops' weights and runs (see rnn_run.h).
#include "ops/graph/ops/rnn_run.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <stdexcept>

#include "core/threadpool.h"
#include "core/workspace.h"
#include "ops/activation/activation.h"
#include "ops/graph/ops/rnn_cells.h"

namespace nnkern::graph {

namespace {

// Below this many gate values a step's gates run on the calling thread.
constexpr size_t kGatesParallel = size_t(1) << 15;

template <typename Fn>
void for_rows(size_t rows, size_t width, Fn fn) {
  if (rows < 2 || rows * width < kGatesParallel) {
    fn(size_t(0), rows);
    return;
  }
  parallel_for_ranges(rows, [&](size_t b, size_t e) { fn(b, e); });
}

bool same_constant(const Constant* a, const Constant* b) {
  if (!a || !b) return a == b;
  if (a == b || a->data == b->data) return true;
  return a->desc.dtype == b->desc.dtype && a->desc.shape == b->desc.shape &&
         std::memcmp(a->data.get(), b->data.get(), a->desc.bytes()) == 0;
}

// ONNX's LSTM gate blocks (i, o, f, c) in F32Lstm's order (i, f, g, o): block q of F32Lstm is ONNX's kOnnxGate[q].
constexpr size_t kOnnxGate[4] = {0, 2, 3, 1};

std::unique_ptr<F32Lstm> pack_f32_lstm(const RnnSpec& s, const float* w, const float* r, const float* b) {
  const size_t H = s.hidden, I = s.input;
  std::vector<float> w_ih(4 * H * I), w_hh(4 * H * H), bias(b ? 4 * H : 0);
  for (size_t q = 0; q < 4; ++q) {
    const size_t g = kOnnxGate[q];
    std::copy(w + g * H * I, w + (g + 1) * H * I, w_ih.data() + q * H * I);
    std::copy(r + g * H * H, r + (g + 1) * H * H, w_hh.data() + q * H * H);
    if (b)
      for (size_t u = 0; u < H; ++u) bias[q * H + u] = b[g * H + u] + b[4 * H + g * H + u];
  }
  return std::make_unique<F32Lstm>(w_ih.data(), w_hh.data(), b ? bias.data() : nullptr, I, H);
}

}  // namespace

bool rnn_uses_f32_lstm(const RnnSpec& s) {
  if (s.kind != RnnKind::lstm || s.clip || s.input_forget || s.has_peepholes || s.input == 0) return false;
  for (size_t d = 0; d < s.directions; ++d)
    if (s.act(d, 0).fn != GateFn::sigmoid || s.act(d, 1).fn != GateFn::tanh || s.act(d, 2).fn != GateFn::tanh)
      return false;
  return true;
}

RnnWeights::RnnWeights(const NodeSpec& n, const RnnSpec& s) {
  for (size_t i : {1, 2, 3, 8}) sources_.push_back(n.has_input(i) ? n.constants[i] : nullptr);
  const float* W = n.constant(1)->as<float>();
  const float* R = n.constant(2)->as<float>();
  const float* B = s.has_bias ? n.constant(3)->as<float>() : nullptr;
  const size_t H = s.hidden, I = s.input, GH = s.gate_width(), D = s.directions;
  dir.resize(D);
  if (rnn_uses_f32_lstm(s)) {
    for (size_t d = 0; d < D; ++d) {
      dir[d].lstm = pack_f32_lstm(s, W + d * GH * I, R + d * GH * H, B ? B + d * 2 * GH : nullptr);
      if (s.vocab) {  // every row of the embedding table through the input projection, once
        dir[d].table.resize(s.vocab * GH);
        dir[d].lstm->project(s.vocab, n.constant(8)->as<float>(), I, dir[d].table.data());
      }
    }
    return;
  }
  if (I > 0) w = std::make_unique<PackedF32Gemm>(W, D * GH, I, I);
  const bool gru = s.kind == RnnKind::gru;
  if (B) {
    // Wb + Rb per gate, except GRU's Rb_h under linear_before_reset (it goes inside r (.) (...)).
    w_bias.resize(D * GH);
    for (size_t d = 0; d < D; ++d)
      for (size_t i = 0; i < GH; ++i) {
        const bool rb_outside = gru && s.linear_before_reset && i >= 2 * H;
        w_bias[d * GH + i] = B[d * 2 * GH + i] + (rb_outside ? 0.0f : B[d * 2 * GH + GH + i]);
      }
  }
  for (size_t d = 0; d < D; ++d) {
    const float* Rd = R + d * GH * H;
    Direction& e = dir[d];
    if (gru && !s.linear_before_reset) {
      e.r = std::make_unique<PackedF32Gemm>(Rd, 2 * H, H, H);
      e.r_h = std::make_unique<PackedF32Gemm>(Rd + 2 * H * H, H, H, H);
    } else {
      e.r = std::make_unique<PackedF32Gemm>(Rd, GH, H, H);
    }
    if (gru && s.linear_before_reset && B) {
      e.r_bias.assign(GH, 0.0f);
      std::copy(B + d * 2 * GH + GH + 2 * H, B + d * 2 * GH + 2 * GH, e.r_bias.data() + 2 * H);
    }
  }
}

bool RnnWeights::packed_from(const NodeSpec& n) const {
  size_t k = 0;
  for (size_t i : {1, 2, 3, 8})
    if (!same_constant(sources_[k++].get(), n.has_input(i) ? n.constant(i) : nullptr)) return false;
  return true;
}

std::string RnnWeights::detail() const {
  if (!dir.empty() && dir[0].lstm) return std::string("f32_lstm ") + dir[0].lstm->kernel_name();
  return std::string("gemm ") + (!dir.empty() && dir[0].r ? dir[0].r->kernel_name() : "") + ", gate loops";
}

namespace {

// Sequences by length, longest first (stable), and how many still run at each step.
struct Schedule {
  std::vector<size_t> length, order, running;
  size_t longest = 0;
};

Schedule schedule(const RnnSpec& s, const int32_t* lengths) {
  Schedule q;
  q.length.assign(s.batch, s.seq);
  if (lengths)
    for (size_t b = 0; b < s.batch; ++b) q.length[b] = size_t(lengths[b]);
  q.order.resize(s.batch);
  std::iota(q.order.begin(), q.order.end(), size_t(0));
  std::stable_sort(q.order.begin(), q.order.end(), [&](size_t a, size_t b) { return q.length[a] > q.length[b]; });
  q.longest = s.batch ? q.length[q.order[0]] : 0;
  q.running.resize(q.longest);
  for (size_t t = 0, n = s.batch; t < q.longest; ++t) {
    while (n > 0 && q.length[q.order[n - 1]] <= t) --n;
    q.running[t] = n;
  }
  return q;
}

// Y rows past each sequence's length are zero.
void zero_padding(const RnnSpec& s, const Schedule& q, size_t d, float* y) {
  if (!y) return;
  for (size_t b = 0; b < s.batch; ++b)
    for (size_t t = q.length[b]; t < s.seq; ++t) std::memset(y + s.y_offset(t, d, b), 0, s.hidden * sizeof(float));
}

// A final state row: the state after the sequence's last step, zero for an empty sequence.
void store_state(const RnnSpec& s, const Schedule& q, size_t d, size_t b, const float* state, float* out) {
  if (!out) return;
  float* dst = out + s.state_offset(d, b);
  if (q.length[b] == 0) std::memset(dst, 0, s.hidden * sizeof(float));
  else std::memcpy(dst, state, s.hidden * sizeof(float));
}

void run_general(const RnnSpec& s, const RnnWeights& w, const RnnIo& io, const Schedule& q) {
  const size_t H = s.hidden, I = s.input, GH = s.gate_width(), D = s.directions, B = s.batch;
  const bool gru = s.kind == RnnKind::gru, lstm = s.kind == RnnKind::lstm;
  const bool split_h = gru && !s.linear_before_reset;
  const size_t rec_ld = split_h ? 2 * H : GH;
  // The projection's rows: X's, up to the longest sequence's last step when steps are X's outer dimension.
  const size_t rows = s.batch_first ? s.seq * B : q.longest * B;

  WorkspaceLayout l;
  const size_t o_proj = l.add(rows * D * GH * sizeof(float));
  const size_t o_h = l.add(B * H * sizeof(float));
  const size_t o_c = l.add(lstm ? B * H * sizeof(float) : 0);
  const size_t o_rec = l.add(B * rec_ld * sizeof(float));
  const size_t o_rech = l.add(split_h ? B * H * sizeof(float) : 0);
  const size_t o_rh = l.add(split_h ? B * H * sizeof(float) : 0);
  Workspace ws(l.bytes);
  float* const proj = ws.as<float>(o_proj);
  float* const h = ws.as<float>(o_h);
  float* const c = ws.as<float>(o_c);
  float* const rec = ws.as<float>(o_rec);

  if (rows > 0) {
    if (w.w) {
      F32Epilogue ep;
      ep.bias = w.w_bias.empty() ? nullptr : w.w_bias.data();
      w.w->run(rows, io.x, I, proj, D * GH, ep);
    } else {  // input_size 0: the projection is the bias
      for (size_t r = 0; r < rows; ++r)
        for (size_t i = 0; i < D * GH; ++i) proj[r * D * GH + i] = w.w_bias.empty() ? 0.0f : w.w_bias[i];
    }
  }

  const F32ActivationKernels& ak = f32_activation_family().dispatched();
  const ActKernels kernels{ak.sigmoid[int(ActMethod::accurate)], ak.tanh[int(ActMethod::accurate)]};
  for (size_t d = 0; d < D; ++d) {
    const RnnWeights::Direction& e = w.dir[d];
    for (size_t j = 0; j < B; ++j) {
      const size_t b = q.order[j];
      if (io.h0) std::memcpy(h + j * H, io.h0 + s.state_offset(d, b), H * sizeof(float));
      else std::memset(h + j * H, 0, H * sizeof(float));
      if (!lstm) continue;
      if (io.c0) std::memcpy(c + j * H, io.c0 + s.state_offset(d, b), H * sizeof(float));
      else std::memset(c + j * H, 0, H * sizeof(float));
    }
    StepRows r{};
    r.s = &s;
    r.proj = proj;
    r.proj_ld = D * GH;
    r.proj_off = d * GH;
    r.order = q.order.data();
    r.length = q.length.data();
    r.reversed = s.reversed(d);
    r.rec = rec;
    r.rec_ld = rec_ld;
    r.rec_h = ws.as<float>(o_rech);
    r.reset_h = ws.as<float>(o_rh);
    r.h = h;
    r.c = c;
    r.peep = io.peepholes ? io.peepholes + d * 3 * H : nullptr;
    r.y = io.y;
    r.direction = d;
    r.f = s.act(d, 0);
    r.g = s.acts_per_direction > 1 ? s.act(d, 1) : GateAct{};
    r.hact = s.acts_per_direction > 2 ? s.act(d, 2) : GateAct{};
    r.k = kernels;
    F32Epilogue rec_ep;
    rec_ep.bias = e.r_bias.empty() ? nullptr : e.r_bias.data();
    for (size_t t = 0; t < q.longest; ++t) {
      const size_t n = q.running[t];
      r.step = t;
      e.r->run(n, h, H, rec, rec_ld, rec_ep);
      if (lstm) {
        for_rows(n, GH, [&](size_t j0, size_t j1) { lstm_rows(r, j0, j1); });
      } else if (!gru) {
        for_rows(n, GH, [&](size_t j0, size_t j1) { rnn_rows(r, j0, j1); });
      } else if (s.linear_before_reset) {
        for_rows(n, GH, [&](size_t j0, size_t j1) { gru_rows_linear(r, j0, j1); });
      } else {
        for_rows(n, GH, [&](size_t j0, size_t j1) { gru_rows_reset(r, j0, j1); });
        e.r_h->run(n, r.reset_h, H, r.rec_h, H, F32Epilogue{});
        for_rows(n, GH, [&](size_t j0, size_t j1) { gru_rows_update(r, j0, j1); });
      }
    }
    for (size_t j = 0; j < B; ++j) {
      store_state(s, q, d, q.order[j], h + j * H, io.y_h);
      if (lstm) store_state(s, q, d, q.order[j], c + j * H, io.y_c);
    }
    zero_padding(s, q, d, io.y);
  }
}

// One direction on F32Lstm. A reverse direction runs on a copy of X with each sequence reversed within its
// length, into a scratch Y that is reversed back.
void run_f32_lstm(const RnnSpec& s, const F32Lstm& lstm, const float* table, const RnnIo& io, const Schedule& q,
                  size_t d) {
  const size_t H = s.hidden, I = s.input, B = s.batch, S = s.seq;
  const bool rev = s.reversed(d);
  const bool ids = s.vocab > 0;
  // State rows of this direction are H apart in initial_h / Y_h unless batch-first with two directions.
  const bool states_contiguous = !s.batch_first || s.directions == 1;
  const bool own_y = rev || !io.y;
  WorkspaceLayout l;
  const size_t o_x = l.add(rev && !ids ? S * B * I * sizeof(float) : 0);
  const size_t o_ids = l.add(ids ? S * B * sizeof(int64_t) : 0);
  const size_t o_y = l.add(own_y ? S * B * H * sizeof(float) : 0);
  const size_t o_h0 = l.add(io.h0 && !states_contiguous ? B * H * sizeof(float) : 0);
  const size_t o_c0 = l.add(io.c0 && !states_contiguous ? B * H * sizeof(float) : 0);
  const size_t o_hn = l.add(B * H * sizeof(float));
  const size_t o_cn = l.add(B * H * sizeof(float));
  Workspace ws(l.bytes);
  std::vector<int64_t> lengths(q.length.begin(), q.length.end());

  F32LstmCall call;
  call.seq = S;
  call.batch = B;
  call.lengths = lengths.data();
  if (ids) {  // (t, b) order, reversed within each length for a reverse direction, negative ids wrapped
    int64_t* idr = ws.as<int64_t>(o_ids);
    for (size_t b = 0; b < B; ++b)
      for (size_t t = 0; t < q.length[b]; ++t) {
        const size_t u = rev ? q.length[b] - 1 - t : t;
        const int64_t id = io.ids[s.id_index(u, b)];
        idr[t * B + b] = id < 0 ? id + int64_t(s.vocab) : id;
      }
    call.table = table;
    call.ids = idr;
    call.id_ts = B;
    call.id_bs = 1;
  } else if (rev) {
    float* xr = ws.as<float>(o_x);
    for (size_t b = 0; b < B; ++b)
      for (size_t t = 0; t < q.length[b]; ++t)
        std::memcpy(xr + (t * B + b) * I, io.x + s.x_row(q.length[b] - 1 - t, b) * I, I * sizeof(float));
    call.x = xr;
    call.x_ts = B * I;
    call.x_bs = I;
  } else {
    call.x = io.x;
    call.x_ts = s.x_row(1, 0) * I;
    call.x_bs = s.x_row(0, 1) * I;
  }
  if (own_y) {
    call.out = ws.as<float>(o_y);
    call.out_ts = B * H;
    call.out_bs = H;
  } else {
    call.out = io.y + s.y_offset(0, d, 0);
    call.out_ts = s.y_offset(1, 0, 0);
    call.out_bs = s.y_offset(0, 0, 1);
  }
  auto state_in = [&](const float* init, size_t offset, const float*& dst) {
    if (!init) return;
    if (states_contiguous) {
      dst = init + s.state_offset(d, 0);
      return;
    }
    float* rows = ws.as<float>(offset);
    for (size_t b = 0; b < B; ++b) std::memcpy(rows + b * H, init + s.state_offset(d, b), H * sizeof(float));
    dst = rows;
  };
  state_in(io.h0, o_h0, call.h0);
  state_in(io.c0, o_c0, call.c0);
  call.h_n = ws.as<float>(o_hn);
  call.c_n = ws.as<float>(o_cn);
  call.bf16_input = s.bf16_input;
  lstm.run(call);

  for (size_t b = 0; b < B; ++b) {
    store_state(s, q, d, b, call.h_n + b * H, io.y_h);
    store_state(s, q, d, b, call.c_n + b * H, io.y_c);
  }
  if (io.y && own_y) {
    for (size_t b = 0; b < B; ++b)
      for (size_t t = 0; t < q.length[b]; ++t)
        std::memcpy(io.y + s.y_offset(q.length[b] - 1 - t, d, b), call.out + (t * B + b) * H, H * sizeof(float));
  }
  zero_padding(s, q, d, io.y);
}

}  // namespace

void run_rnn(const RnnSpec& s, const RnnWeights& w, const RnnIo& io, const std::string& where) {
  if (io.lengths)
    for (size_t b = 0; b < s.batch; ++b)
      if (io.lengths[b] < 0 || size_t(io.lengths[b]) > s.seq)
        throw std::invalid_argument(where + ": sequence_lens[" + std::to_string(b) + "] = " +
                                    std::to_string(io.lengths[b]) + " is outside [0, " + std::to_string(s.seq) + "]");
  const Schedule q = schedule(s, io.lengths);
  if (s.vocab)  // every id a sequence reads, before anything is written
    for (size_t b = 0; b < s.batch; ++b)
      for (size_t t = 0; t < q.length[b]; ++t) {
        const int64_t id = io.ids[s.id_index(t, b)];
        if (id < -int64_t(s.vocab) || id >= int64_t(s.vocab))
          throw std::invalid_argument(where + ": token id " + std::to_string(id) + " is outside [-" +
                                      std::to_string(s.vocab) + ", " + std::to_string(s.vocab) + ")");
      }
  if (w.dir[0].lstm) {
    // Two directions on two threads: one direction per thread, each a whole sequence on its own core (its
    // weights in its own L2, no sync per step), where each would otherwise split every step across both.
    // With more threads each direction keeps the pool. The bits are the same either way.
    if (s.directions == 2 && get_num_threads() == 2) {
      parallel_for(2, [&](size_t d) { run_f32_lstm(s, *w.dir[d].lstm, w.dir[d].table.data(), io, q, d); });
      return;
    }
    for (size_t d = 0; d < s.directions; ++d) run_f32_lstm(s, *w.dir[d].lstm, w.dir[d].table.data(), io, q, d);
    return;
  }
  run_general(s, w, io, q);
}

}  // namespace nnkern::graph
