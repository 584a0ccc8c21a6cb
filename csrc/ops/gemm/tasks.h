// Task split shared by the GEMM drivers (FP32 and integer): how the m x n output (kernel terms) is cut
// into blocks for the thread pool. Baseline header.
#pragma once
#include <cstddef>

namespace nnkern {

// Splits m and n into balanced blocks no larger than mc_max / nc_max (rounded to mr / nr), with at least
// one block per thread that gets work: a thread must get about min_ops_per_thread of the call's `ops`
// to pay for waking it. The blocks never depend on more than the shape, the thread count and the
// caps, and a block computes the same thing on any thread, so results never depend on the thread count.
void split_gemm_tasks(size_t m, size_t n, size_t mr, size_t nr, size_t mc_max, size_t nc_max, double ops,
                      double min_ops_per_thread, size_t* mc, size_t* nc);

}  // namespace nnkern
