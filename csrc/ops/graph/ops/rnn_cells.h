// The gates of one step of the recurrent graph ops (rnn_run.h), for a range of rows (the running sequences):
// pre-activations = input projection (biases included) + recurrent GEMM, clipped when the node asks, then the
// activations and the state update, as plain loops over the hidden units. ONNX's gate orders: LSTM i, o, f, c
// (peepholes i, o, f), GRU z, r, h. Sigmoid and Tanh run nnkern's activation kernels ("accurate"), the others
// a loop. Baseline header.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

#include "kernels/f32_activation.h"
#include "ops/graph/ops/rnn_run.h"

namespace nnkern::graph {

struct ActKernels {
  F32UnaryUkernel sigmoid, tanh;
};

// x = act(x) over n elements.
inline void activate(const GateAct& a, const ActKernels& k, float* x, size_t n) {
  const float alpha = a.alpha, beta = a.beta;
  switch (a.fn) {
    case GateFn::sigmoid: k.sigmoid(n, x, x); return;
    case GateFn::tanh: k.tanh(n, x, x); return;
    case GateFn::relu:
      for (size_t i = 0; i < n; ++i) x[i] = x[i] < 0.0f ? 0.0f : x[i];
      return;
    case GateFn::affine:
      for (size_t i = 0; i < n; ++i) x[i] = alpha * x[i] + beta;
      return;
    case GateFn::leaky_relu:
      for (size_t i = 0; i < n; ++i) x[i] = x[i] < 0.0f ? alpha * x[i] : x[i];
      return;
    case GateFn::thresholded_relu:
      for (size_t i = 0; i < n; ++i) x[i] = x[i] > alpha ? x[i] : (x[i] != x[i] ? x[i] : 0.0f);
      return;
    case GateFn::scaled_tanh:
      for (size_t i = 0; i < n; ++i) x[i] *= beta;
      k.tanh(n, x, x);
      for (size_t i = 0; i < n; ++i) x[i] *= alpha;
      return;
    case GateFn::hard_sigmoid:
      for (size_t i = 0; i < n; ++i) {
        const float v = alpha * x[i] + beta;
        x[i] = v != v ? v : std::min(1.0f, std::max(0.0f, v));
      }
      return;
    case GateFn::elu:
      for (size_t i = 0; i < n; ++i) x[i] = x[i] < 0.0f ? alpha * std::expm1(x[i]) : x[i];
      return;
    case GateFn::softsign:
      for (size_t i = 0; i < n; ++i) x[i] = x[i] / (1.0f + std::fabs(x[i]));
      return;
    case GateFn::softplus:  // log(1 + e^x) without overflow
      for (size_t i = 0; i < n; ++i)
        x[i] = x[i] > 0.0f ? x[i] + std::log1p(std::exp(-x[i])) : std::log1p(std::exp(x[i]));
      return;
  }
}

// z += p, then z clamped to [-c, c] when clip (NaN stays NaN).
inline void add_clip(float* z, const float* p, size_t n, bool clip, float c) {
  for (size_t i = 0; i < n; ++i) z[i] += p[i];
  if (clip)
    for (size_t i = 0; i < n; ++i) z[i] = z[i] > c ? c : (z[i] < -c ? -c : z[i]);
}

// What the gates of one step read and write. Row j is the j-th running sequence (sorted longest first):
// batch entry order[j], at time index time(j).
struct StepRows {
  const RnnSpec* s;
  const float* proj;     // input projections, row (t, b) at proj + x_row(t, b) * proj_ld + proj_off
  size_t proj_ld, proj_off;
  const size_t* order;   // row -> batch entry
  const size_t* length;  // batch entry -> its length
  size_t step;           // steps done so far
  bool reversed;
  float* rec;            // the recurrent GEMM's rows, rec_ld apart (updated in place)
  size_t rec_ld;
  float* rec_h;          // GRU with linear_before_reset = 0: the h rows of the second GEMM (H apart)
  float* reset_h;        // GRU with linear_before_reset = 0: r (.) H_{t-1}, the second GEMM's input
  float* h;              // hidden states, row j at h + j * H (updated)
  float* c;              // LSTM cell states, likewise
  const float* peep;     // LSTM peepholes of this direction (i, o, f), or null
  float* y;              // Y, or null
  size_t direction;
  GateAct f, g, hact;
  ActKernels k;

  size_t time(size_t j) const { return reversed ? length[order[j]] - 1 - step : step; }
  const float* proj_row(size_t j) const { return proj + s->x_row(time(j), order[j]) * proj_ld + proj_off; }
  // One gate: z += the input projection p (clipped where the node says), then its activation, in place.
  void gate(float* z, const float* p, const GateAct& act) const {
    add_clip(z, p, s->hidden, s->clip, s->clip_value);
    activate(act, k, z, s->hidden);
  }
  void store(size_t j) const {
    if (y) std::memcpy(y + s->y_offset(time(j), direction, order[j]), h + j * s->hidden, s->hidden * sizeof(float));
  }
};

inline void lstm_rows(const StepRows& r, size_t j0, size_t j1) {
  const RnnSpec& s = *r.s;
  const size_t H = s.hidden;
  for (size_t j = j0; j < j1; ++j) {
    const float* p = r.proj_row(j);
    float* zi = r.rec + j * r.rec_ld;
    float *zo = zi + H, *zf = zi + 2 * H, *zc = zi + 3 * H;
    float* c = r.c + j * H;
    float* h = r.h + j * H;
    if (r.peep)
      for (size_t u = 0; u < H; ++u) zi[u] += r.peep[u] * c[u];
    r.gate(zi, p, r.f);
    if (s.input_forget) {
      for (size_t u = 0; u < H; ++u) zf[u] = 1.0f - zi[u];
    } else {
      if (r.peep)
        for (size_t u = 0; u < H; ++u) zf[u] += r.peep[2 * H + u] * c[u];
      r.gate(zf, p + 2 * H, r.f);
    }
    r.gate(zc, p + 3 * H, r.g);
    for (size_t u = 0; u < H; ++u) c[u] = zf[u] * c[u] + zi[u] * zc[u];
    if (r.peep)
      for (size_t u = 0; u < H; ++u) zo[u] += r.peep[H + u] * c[u];
    r.gate(zo, p + H, r.f);
    std::memcpy(zc, c, H * sizeof(float));  // zc is consumed: it takes h(c)
    activate(r.hact, r.k, zc, H);
    for (size_t u = 0; u < H; ++u) h[u] = zo[u] * zc[u];
    r.store(j);
  }
}

// GRU, linear_before_reset = 1: rec holds H_{t-1} R^T + (0, 0, Rb_h).
inline void gru_rows_linear(const StepRows& r, size_t j0, size_t j1) {
  const RnnSpec& s = *r.s;
  const size_t H = s.hidden;
  for (size_t j = j0; j < j1; ++j) {
    const float* p = r.proj_row(j);
    float* z = r.rec + j * r.rec_ld;
    float *rg = z + H, *n = z + 2 * H;
    float* h = r.h + j * H;
    r.gate(z, p, r.f);
    r.gate(rg, p + H, r.f);
    for (size_t u = 0; u < H; ++u) n[u] *= rg[u];
    r.gate(n, p + 2 * H, r.g);
    for (size_t u = 0; u < H; ++u) h[u] = (1.0f - z[u]) * n[u] + z[u] * h[u];
    r.store(j);
  }
}

// GRU, linear_before_reset = 0, before the second GEMM: z and r from rec (H_{t-1} R_zr^T), reset_h = r (.) H_{t-1}.
inline void gru_rows_reset(const StepRows& r, size_t j0, size_t j1) {
  const RnnSpec& s = *r.s;
  const size_t H = s.hidden;
  for (size_t j = j0; j < j1; ++j) {
    const float* p = r.proj_row(j);
    float* z = r.rec + j * r.rec_ld;
    float* rg = z + H;
    const float* h = r.h + j * H;
    float* rh = r.reset_h + j * H;
    r.gate(z, p, r.f);
    r.gate(rg, p + H, r.f);
    for (size_t u = 0; u < H; ++u) rh[u] = rg[u] * h[u];
  }
}

// GRU, linear_before_reset = 0, after the second GEMM: rec_h holds (r (.) H_{t-1}) R_h^T.
inline void gru_rows_update(const StepRows& r, size_t j0, size_t j1) {
  const RnnSpec& s = *r.s;
  const size_t H = s.hidden;
  for (size_t j = j0; j < j1; ++j) {
    const float* p = r.proj_row(j);
    const float* z = r.rec + j * r.rec_ld;
    float* n = r.rec_h + j * H;
    float* h = r.h + j * H;
    r.gate(n, p + 2 * H, r.g);
    for (size_t u = 0; u < H; ++u) h[u] = (1.0f - z[u]) * n[u] + z[u] * h[u];
    r.store(j);
  }
}

inline void rnn_rows(const StepRows& r, size_t j0, size_t j1) {
  const RnnSpec& s = *r.s;
  const size_t H = s.hidden;
  for (size_t j = j0; j < j1; ++j) {
    float* z = r.rec + j * r.rec_ld;
    r.gate(z, r.proj_row(j), r.f);
    std::memcpy(r.h + j * H, z, H * sizeof(float));
    r.store(j);
  }
}

}  // namespace nnkern::graph
