#include "ops/activation/activation.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/dispatch.h"
#include "core/threadpool.h"
#include "kernels/f32_activation_list.h"
#include "core/kernel_family.h"

namespace nnkern {
namespace {

// Calls below kMinParallel elements run inline: waking the pool's other thread costs more than the work below
// it. Tasks are about 1/8 of a thread's share: contiguous runs for the prefetchers, and still a dynamic balance
// when the other core is busy (docs/performance.md: "Activations: threads and task size").
constexpr size_t kChunk = 16384;
constexpr size_t kMinParallel = size_t(1) << 20;
// Outputs from 32 MiB on (not in place) are written with streaming stores where the ISA has them: they
// skip the read-for-ownership of y and leave the caches to other data; below, y would have stayed in L3
// (docs/performance.md: "Activations: streaming stores").
constexpr size_t kStreamMinBytes = size_t(32) << 20;

F32UnaryUkernel pick(F32UnaryUkernel regular, F32UnaryUkernel stream, size_t n, const float* x, const float* y) {
  const bool y_aligned = reinterpret_cast<uintptr_t>(y) % sizeof(float) == 0;  // else no vector-aligned body
  return (stream && x != y && y_aligned && n * sizeof(float) >= kStreamMinBytes) ? stream : regular;
}

void run_split(F32UnaryUkernel fn, size_t n, const float* x, float* y) {
  if (n < kMinParallel || get_num_threads() <= 1) {
    fn(n, x, y);
    return;
  }
  // About 8 tasks per thread (dynamic balance), each at least kChunk and a multiple of 16 floats.
  const size_t per_task = std::max(kChunk, (n / (8 * size_t(get_num_threads())) + 15) / 16 * 16);
  const size_t tasks = (n + per_task - 1) / per_task;
  parallel_for(tasks, [&](size_t t) {
    const size_t i0 = t * per_task, len = std::min(per_task, n - i0);
    fn(len, x + i0, y + i0);
  });
}

}  // namespace

// Reported as two lines of cpu_info() (sigmoid, tanh), each naming its three methods' kernels.
const KernelFamily<F32ActivationKernels>& f32_activation_family() {
  static const KernelFamily<F32ActivationKernels> family("f32_activation", nullptr,
                                                         {NNKERN_F32_ACTIVATION_LIST(NNKERN_KERNEL_ENTRY)},
                                                         [](const F32ActivationKernels&) { return KernelInfo{}; });
  return family;
}
NNKERN_REGISTER_FAMILY(f32_activation_family)

namespace {
[[maybe_unused]] const bool reported = (register_dispatched_op("f32_sigmoid", [] {
  return std::string(f32_activation_family().dispatched().sigmoid_names[int(ActMethod::minimax)]).append("|scalef|accurate");
}), register_dispatched_op("f32_tanh", [] {
  return std::string(f32_activation_family().dispatched().tanh_names[int(ActMethod::minimax)]).append("|scalef|accurate");
}), register_dispatched_op("f32_erf", [] { return std::string(f32_activation_family().dispatched().erf_name); }),
    register_dispatched_op("f32_exp_nonpos",
                           [] { return std::string(f32_activation_family().dispatched().exp_nonpos_name); }),
    register_dispatched_op("f32_gelu", [] { return std::string(f32_activation_family().dispatched().gelu_name); }),
    register_dispatched_op("f32_softmax",
                           [] { return std::string(f32_activation_family().dispatched().softmax_name); }),
    true);
}  // namespace

void f32_sigmoid(ActMethod method, size_t n, const float* x, float* y) {
  const F32ActivationKernels& k = f32_activation_family().dispatched();
  run_split(pick(k.sigmoid[int(method)], k.sigmoid_stream[int(method)], n, x, y), n, x, y);
}

void f32_erf(size_t n, const float* x, float* y) { run_split(f32_activation_family().dispatched().erf, n, x, y); }

void f32_tanh(ActMethod method, size_t n, const float* x, float* y) {
  const F32ActivationKernels& k = f32_activation_family().dispatched();
  run_split(pick(k.tanh[int(method)], k.tanh_stream[int(method)], n, x, y), n, x, y);
}

ActivationSweep sweep_activation(const F32ActivationKernels& kernels, bool tanh, ActMethod method, float hi,
                                 size_t stride) {
  const F32UnaryUkernel fn = tanh ? kernels.tanh[int(method)] : kernels.sigmoid[int(method)];
  uint32_t hi_bits;
  std::memcpy(&hi_bits, &hi, 4);
  if (stride == 0) stride = 1;
  // Bit patterns 0..hi_bits step stride, each with both signs.
  const size_t per_sign = size_t(hi_bits) / stride + 1;
  constexpr size_t kBlock = 4096, kTaskBlocks = 64;
  const size_t blocks = (per_sign + kBlock - 1) / kBlock;
  const size_t tasks = (blocks + kTaskBlocks - 1) / kTaskBlocks;
  std::vector<ActivationSweep> part(tasks);
  parallel_for(tasks, [&](size_t t) {
    ActivationSweep r;
    float xs[2 * kBlock], ys[2 * kBlock];
    for (size_t b = t * kTaskBlocks; b < std::min(blocks, (t + 1) * kTaskBlocks); ++b) {
      const size_t i0 = b * kBlock, len = std::min(kBlock, per_sign - i0);
      for (size_t i = 0; i < len; ++i) {
        const uint32_t bits = uint32_t((i0 + i) * stride), nbits = bits | 0x80000000u;
        std::memcpy(&xs[2 * i], &bits, 4);
        std::memcpy(&xs[2 * i + 1], &nbits, 4);
      }
      fn(2 * len, xs, ys);
      for (size_t i = 0; i < 2 * len; ++i) {
        const double xd = xs[i];
        double ref;
        if (tanh) {
          ref = std::tanh(xd);
        } else {
          const double e = std::exp(-std::fabs(xd));
          ref = xd >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
        }
        const float y = ys[i];
        const double lo = tanh ? -1.0 : 0.0;
        if (!(y >= lo && y <= 1.0f)) ++r.out_of_range;
        const double err = std::fabs(double(y) - ref);
        if (!(err <= r.max_abs_err)) {  // NaN output counts as infinite error
          r.max_abs_err = std::isnan(err) ? INFINITY : err;
          r.worst_x = xs[i];
          r.worst_y = y;
        }
      }
      r.count += 2 * len;
    }
    part[t] = r;
  });
  ActivationSweep total;
  for (const ActivationSweep& r : part) {  // in task order: deterministic worst_x
    if (r.max_abs_err > total.max_abs_err) {
      total.max_abs_err = r.max_abs_err;
      total.worst_x = r.worst_x;
      total.worst_y = r.worst_y;
    }
    total.count += r.count;
    total.out_of_range += r.out_of_range;
  }
  return total;
}

}  // namespace nnkern
