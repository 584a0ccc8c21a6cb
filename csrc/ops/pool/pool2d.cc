#include "ops/pool/pool2d.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "core/checked.h"
#include "core/kernel_family.h"
#include "core/threadpool.h"
#include "kernels/pool2d_list.h"

namespace nnkern {

const KernelFamily<Pool2dKernel>& pool2d_family() {
  static const KernelFamily<Pool2dKernel> family("pool2d", "pool2d", {NNKERN_POOL2D_LIST(NNKERN_KERNEL_ENTRY)},
                                                 [](const Pool2dKernel&) { return KernelInfo{}; });
  return family;
}
NNKERN_REGISTER_FAMILY(pool2d_family)

namespace {

// Below this many tap-bytes per task, claiming a task costs more than the work.
constexpr size_t kTaskWork = 64 << 10;
}  // namespace

size_t pool2d_output_size(size_t in, size_t k, size_t stride, size_t pad0, size_t pad1, bool ceil_mode) {
  if (k < 1 || stride < 1) throw std::invalid_argument("pool2d: kernel and stride must be >= 1");
  if (in < 1) throw std::invalid_argument("pool2d: the input height and width must be >= 1");
  if (pad0 > k / 2 || pad1 > k / 2) throw std::invalid_argument("pool2d: padding must be at most half the kernel");
  // torch: (in + pad0 + pad1 - k [+ stride - 1 with ceil_mode]) / stride rounded toward -inf, + 1, at least 1.
  const size_t padded = checked_add(in, pad0, pad1), reach = ceil_mode ? checked_add(padded, stride - 1) : padded;
  if (reach < k) throw std::invalid_argument("pool2d: the padded input is smaller than the kernel");
  size_t out = (reach - k) / stride + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad0) --out;  // never 0: in >= 1
  return out;
}

void pool2d(const Pool2dParams& p, const void* x, void* y) {
  const size_t rows = p.n * p.oh;
  if (rows == 0 || p.ow == 0 || p.c == 0) return;
  const Pool2dKernel& kern = pool2d_family().dispatched();
  const size_t elem = p.dtype == PoolDtype::f32 ? 4 : 1;
  const size_t row_work = std::max<size_t>(1, p.ow * p.c * elem * p.kh * p.kw);
  const size_t per_task = std::max<size_t>(1, kTaskWork / row_work);
  const size_t tasks = (rows + per_task - 1) / per_task;
  if (tasks <= 1 || get_num_threads() <= 1) return kern.rows(p, x, y, 0, rows);
  parallel_for(tasks, [&](size_t t) { kern.rows(p, x, y, t * per_task, std::min(rows, (t + 1) * per_task)); });
}

}  // namespace nnkern
