#include "ops/gemm/tasks.h"

#include <algorithm>

#include "core/checked.h"
#include "core/threadpool.h"

namespace nnkern {
void split_gemm_tasks(size_t m, size_t n, size_t mr, size_t nr, size_t mc_max, size_t nc_max, double ops,
                      double min_ops_per_thread, size_t* mc, size_t* nc) {
  size_t bm = ceil_div(m, std::max(mc_max, mr)), bn = ceil_div(n, std::max(nc_max, nr));
  const size_t max_bm = ceil_div(m, mr), max_bn = ceil_div(n, nr);
  const size_t threads = std::min(size_t(get_num_threads()), size_t(1) + size_t(ops / min_ops_per_thread));
  // Tasks are claimed one at a time, so a count that is not a multiple of the threads leaves threads idle
  // in the last round: 5 blocks on 2 threads run as 3 rounds (2-thread 1024^3 at 1.6x one thread, not
  // 1.9x). Past a few rounds per thread the remainder costs little, and smaller blocks cost reuse.
  auto uneven = [&] { return bm * bn < threads || ((bm * bn) % threads != 0 && bm * bn < 4 * threads); };
  while (uneven() && (bm < max_bm || bn < max_bn)) {
    // Grow the block count of the dimension whose blocks are wider (in micro-tiles).
    bool grow_m = bn >= max_bn || (bm < max_bm && max_bm / bm >= max_bn / bn);
    (grow_m ? bm : bn) += 1;
  }
  *mc = ceil_div(ceil_div(m, bm), mr) * mr;  // balanced blocks
  *nc = ceil_div(ceil_div(n, bn), nr) * nr;
}

}  // namespace nnkern
