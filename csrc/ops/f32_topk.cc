#include "ops/f32_topk.h"

#include <algorithm>
#include <string>

#include "core/dispatch.h"
#include "core/threadpool.h"

namespace nnkern {

const F32TopkKernel* f32_topk_kernel_for(Isa isa) {
  switch (isa) {
    case Isa::scalar: return &f32_topk_ref;
#ifdef NNKERN_HAVE_AVX512
    case Isa::avx512: return &f32_topk_16__avx512;
#endif
    default: return nullptr;  // AVX2 / NEON: the general path
  }
}

const F32TopkKernel& f32_topk_kernel() {
  static const KernelTable<F32TopkKernel> table(f32_topk_kernel_for);
  return table.get();
}

namespace {
[[maybe_unused]] const bool registered =
    (register_dispatched_op("f32_topk", [] { return std::string(f32_topk_kernel().name); }), true);
}  // namespace

void f32_topk(size_t rows, size_t n, const float* x, size_t ldx, size_t k, float* values, int64_t* indices) {
  const F32TopkKernel& reg = f32_topk_kernel();
  const F32TopkKernel& kern = (k <= reg.max_k && n < (size_t(1) << 31)) ? reg : f32_topk_ref;
  // Tasks of >= 32K elements so small calls do not pay for waking the pool.
  const size_t rows_per_task = std::max<size_t>(1, 32768 / std::max<size_t>(n, 1));
  const size_t tasks = (rows + rows_per_task - 1) / rows_per_task;
  auto body = [&](size_t t) {
    for (size_t r = t * rows_per_task; r < std::min(rows, (t + 1) * rows_per_task); ++r)
      kern.run(n, x + r * ldx, k, values + r * k, indices + r * k);
  };
  if (tasks <= 1 || get_num_threads() <= 1) {
    for (size_t t = 0; t < tasks; ++t) body(t);
  } else {
    parallel_for(tasks, body);
  }
}

}  // namespace nnkern
