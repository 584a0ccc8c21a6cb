// Single-layer LSTM (see ops/rnn/lstm.h).
#include "ops/rnn/lstm.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "core/workspace.h"
#include "ops/activation/activation.h"
#include "ops/gemm/gemm.h"
#include "core/kernel_family.h"
#include "kernels/f32_activation_list.h"
#include "kernels/f32_gemm_list.h"

namespace nnkern {

struct F32Lstm::Packed {
  F32FullKPanels ih;  // W_ih's 4H rows in order, no post-op (group 1)
  F32FullKPanels hh;  // per block of MR hidden units: the panels of gates i, f, g, o (group 4)
};

namespace {

constexpr size_t kGates = 4;
constexpr size_t kMaxUnitBlock = 768;  // the cell's scratch per gate and run of rows (on the stack)

// Block u of MR hidden units -> its four panels, rows q * H + u * MR + (0 .. MR-1) for gate q.
std::vector<PanelRows> gate_block_panels(size_t H, size_t mr) {
  std::vector<PanelRows> spans;
  for (size_t u0 = 0; u0 < H; u0 += mr)
    for (size_t q = 0; q < kGates; ++q) spans.push_back({q * H + u0, std::min(mr, H - u0)});
  return spans;
}

// What the cell post-op of one step reads and writes. Row j is the j-th running sequence.
struct CellStep {
  float* gates;  // gate pre-activations of the step, row j at gates + j * 4H: [i | f | g | o], H each
  float* c;      // cell state, row j at c + j * H (updated in place)
  float* const* h_out;  // h' row j
  size_t H, unit_block;
  F32UnaryUkernel sigmoid, tanh;
};

// The post-op: the four gate tiles of units [u0, u0 + u) for rows r0 .. r0 + nr - 1 were just stored
// (L1). They are gathered into one sigmoid run (i, f, o of every row) and one tanh run (g), so a tile
// costs three activation calls instead of five per row. The kernels compute each element the same way
// wherever it sits in a run (tails included), so a row's result does not depend on its neighbours.
void lstm_cell(void* ctx, size_t block, size_t r0, size_t nr) {
  const CellStep& s = *static_cast<const CellStep*>(ctx);
  const size_t H = s.H, u0 = block * s.unit_block;
  const size_t u = std::min(s.unit_block, H - u0);
  float sig[3 * kMaxUnitBlock], th[kMaxUnitBlock];  // 12 KiB
  const size_t rows_per_run = std::max<size_t>(1, kMaxUnitBlock / u);
  for (size_t j0 = r0; j0 < r0 + nr; j0 += rows_per_run) {
    const size_t n = std::min(rows_per_run, r0 + nr - j0);
    for (size_t jj = 0; jj < n; ++jj) {
      const float* z = s.gates + (j0 + jj) * kGates * H + u0;
      std::memcpy(sig + jj * 3 * u, z, u * sizeof(float));                  // i
      std::memcpy(sig + jj * 3 * u + u, z + H, u * sizeof(float));          // f
      std::memcpy(sig + jj * 3 * u + 2 * u, z + 3 * H, u * sizeof(float));  // o
      std::memcpy(th + jj * u, z + 2 * H, u * sizeof(float));               // g
    }
    s.sigmoid(3 * u * n, sig, sig);
    s.tanh(u * n, th, th);
    for (size_t jj = 0; jj < n; ++jj) {
      const float* i = sig + jj * 3 * u;
      const float* f = i + u;
      float* g = th + jj * u;
      float* c = s.c + (j0 + jj) * H + u0;
      for (size_t r = 0; r < u; ++r) g[r] = c[r] = f[r] * c[r] + i[r] * g[r];  // g is consumed: it takes c'
    }
    s.tanh(u * n, th, th);
    for (size_t jj = 0; jj < n; ++jj) {
      const float* o = sig + jj * 3 * u + 2 * u;
      const float* tc = th + jj * u;
      float* h = s.h_out[j0 + jj] + u0;
      for (size_t r = 0; r < u; ++r) h[r] = o[r] * tc[r];
    }
  }
}

}  // namespace

std::unique_ptr<const F32Lstm::Packed> F32Lstm::pack(const F32GemmKernel& k, const float* w_ih, const float* w_hh,
                                                     size_t I, size_t H) {
  const size_t mr = size_t(k.mr);
  if (mr > kMaxUnitBlock) throw std::logic_error("F32Lstm: the kernel's MR exceeds the cell's unit block scratch");
  return std::unique_ptr<const Packed>(
      new Packed{F32FullKPanels(k, w_ih, I, kGates * H, I, contiguous_panels(kGates * H, mr), 1),
                 F32FullKPanels(k, w_hh, H, kGates * H, H, gate_block_panels(H, mr), kGates)});
}

F32Lstm::F32Lstm(const float* w_ih, const float* w_hh, const float* bias, size_t input_size, size_t hidden_size)
    : has_bias_(bias != nullptr), I_(input_size), H_(hidden_size) {
  packed_ = pack(f32_gemm_family().dispatched(), w_ih, w_hh, I_, H_);
  bias_.resize(std::max<size_t>(kGates * H_, 1));
  for (size_t n = 0; n < kGates * H_; ++n) bias_.data()[n] = bias ? bias[n] : 0.0f;
}

F32Lstm::~F32Lstm() = default;

const char* F32Lstm::kernel_name() const { return packed_->hh.kernel().name; }

const F32Lstm::Packed& F32Lstm::packed_for_now(std::unique_ptr<const Packed>& tmp) const {
  const F32GemmKernel& k = f32_gemm_family().dispatched();
  if (&k == &packed_->hh.kernel()) return *packed_;
  std::vector<float> w_ih(std::max<size_t>(kGates * H_ * I_, 1)), w_hh(std::max<size_t>(kGates * H_ * H_, 1));
  packed_->ih.unpack(w_ih.data(), I_);
  packed_->hh.unpack(w_hh.data(), H_);
  tmp = pack(k, w_ih.data(), w_hh.data(), I_, H_);
  return *tmp;
}

const PackedBf16Gemm& F32Lstm::bf16_ih() const {
  std::lock_guard<std::mutex> lock(bf16_mu_);
  if (!bf16_ih_) {
    std::vector<float> w_ih(std::max<size_t>(kGates * H_ * I_, 1));
    packed_->ih.unpack(w_ih.data(), I_);
    bf16_ih_ = std::make_unique<const PackedBf16Gemm>(Bf16Operand::matrix(w_ih.data(), I_), kGates * H_, I_);
  }
  return *bf16_ih_;
}

void F32Lstm::project(size_t rows, const float* x, size_t ldx, float* out) const {
  std::unique_ptr<const Packed> tmp;
  const Packed& P = packed_for_now(tmp);
  std::vector<const float*> xr(rows);
  for (size_t r = 0; r < rows; ++r) xr[r] = x + r * ldx;
  PanelGemmArgs a;
  a.M = rows;
  a.x = xr.data();
  a.c = out;
  a.ldc = kGates * H_;
  a.ep.bias = has_bias_ ? bias_.data() : nullptr;
  panel_gemm(P.ih, a);
}

size_t F32Lstm::run(const F32LstmCall& call) const {
  std::unique_ptr<const Packed> tmp;
  const Packed& P = packed_for_now(tmp);
  const size_t H = H_, G = kGates * H_, B = call.batch, S = call.seq;
  auto length = [&](size_t b) { return call.lengths ? size_t(call.lengths[b]) : S; };

  // Sequences by length, longest first (stable: ties keep batch order). Sorted position s runs at
  // step t while s < active[t]; its rows of step t sit at gates + (offset[t] + s) * 4H (the packed
  // layout of torch's PackedSequence: only rows that are computed exist).
  std::vector<size_t> order(B);
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return length(a) > length(b); });
  const size_t T = B ? length(order[0]) : 0;
  std::vector<size_t> active(T), offset(T + 1, 0);
  for (size_t t = 0, n = B; t < T; ++t) {
    while (n > 0 && length(order[n - 1]) <= t) --n;
    active[t] = n;
    offset[t + 1] = offset[t] + n;
  }
  const size_t rows = offset[T];

  // The gate rows of every computed step: the call's workspace (core/workspace.h).
  Workspace gate_buf(rows * G * sizeof(float));
  float* const gates = gate_buf.as<float>();

  if (call.table) {  // seed I17: the projected embedding rows are copied, not computed
    for (size_t t = 0; t < T; ++t)
      for (size_t s = 0; s < active[t]; ++s) {
        const int64_t id = call.ids[t * call.id_ts + order[s] * call.id_bs];
        std::memcpy(gates + (offset[t] + s) * G, call.table + size_t(id) * G, G * sizeof(float));
      }
  } else if (rows > 0) {  // the input projection of every computed row: one GEMM
    std::vector<const float*> xr(rows);
    for (size_t t = 0; t < T; ++t)
      for (size_t s = 0; s < active[t]; ++s) xr[offset[t] + s] = call.x + t * call.x_ts + order[s] * call.x_bs;
    if (call.bf16_input) {
      Bf16Operand x;
      x.row_ptrs = reinterpret_cast<const void* const*>(xr.data());
      x.cs = 1;
      F32Epilogue ep;
      ep.bias = has_bias_ ? bias_.data() : nullptr;
      bf16_ih().run(rows, x, gates, G, ep);
    } else {
      PanelGemmArgs a;
      a.M = rows;
      a.x = xr.data();
      a.c = gates;
      a.ldc = G;
      a.ep.bias = has_bias_ ? bias_.data() : nullptr;
      panel_gemm(P.ih, a);
    }
  }

  std::vector<float> zeros(std::max<size_t>(H, 1), 0.0f), c(std::max<size_t>(B * H, 1));
  std::vector<const float*> h_prev(B);
  std::vector<float*> h_out(B);
  for (size_t s = 0; s < B; ++s) {
    h_prev[s] = call.h0 ? call.h0 + order[s] * H : zeros.data();
    if (H) std::memcpy(c.data() + s * H, call.c0 ? call.c0 + order[s] * H : zeros.data(), H * sizeof(float));
  }

  const F32ActivationKernels& act = f32_activation_family().dispatched();
  CellStep step{nullptr, c.data(), h_out.data(), H, size_t(P.hh.kernel().mr), act.sigmoid[int(call.method)],
                act.tanh[int(call.method)]};
  for (size_t t = 0; t < T; ++t) {
    const size_t n = active[t];
    for (size_t s = 0; s < n; ++s) h_out[s] = call.out + t * call.out_ts + order[s] * call.out_bs;
    step.gates = gates + offset[t] * G;
    PanelGemmArgs a;
    a.M = n;
    a.x = h_prev.data();
    a.c = step.gates;
    a.ldc = G;
    a.ep.beta = 1.0f;  // accumulate onto the projected input (bias included)
    a.post = lstm_cell;
    a.post_ctx = &step;
    a.reverse = (t & 1) != 0;  // consecutive steps meet at the panels still in L2
    panel_gemm(P.hh, a);
    for (size_t s = 0; s < n; ++s) h_prev[s] = h_out[s];
  }

  for (size_t s = 0; s < B; ++s) {
    const size_t b = order[s];
    if (H) {
      std::memcpy(call.h_n + b * H, h_prev[s], H * sizeof(float));
      std::memcpy(call.c_n + b * H, c.data() + s * H, H * sizeof(float));
    }
    for (size_t t = length(b); t < S; ++t) std::memset(call.out + t * call.out_ts + b * call.out_bs, 0, H * sizeof(float));
  }
  return rows;
}

}  // namespace nnkern
