#include "ops/topk/topk.h"

#include <algorithm>
#include <string>

#include "core/kernel_family.h"
#include "core/threadpool.h"
#include "kernels/f32_topk_list.h"

namespace nnkern {

const KernelFamily<F32TopkKernel>& f32_topk_family() {
  static const KernelFamily<F32TopkKernel> family("f32_topk", "f32_topk", {NNKERN_F32_TOPK_LIST(NNKERN_KERNEL_ENTRY)},
                                                  [](const F32TopkKernel&) { return KernelInfo{}; });
  return family;
}
NNKERN_REGISTER_FAMILY(f32_topk_family)

void f32_topk(size_t rows, size_t n, const float* x, size_t ldx, size_t k, float* values, int64_t* indices) {
  const F32TopkKernel& reg = f32_topk_family().dispatched();
  const F32TopkKernel& kern = (k <= reg.max_k && n < (size_t(1) << 31)) ? reg : f32_topk__scalar;
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
