// Peak-rate loops: each runs `iters` iterations of independent FMAs (12 accumulators, enough to cover
// the FMA latency on two ports) and returns a value so the work cannot be elided.
// Flops per iteration are returned through *flops_per_iter. Used by the bench for "% of peak".
#pragma once
#include <cstddef>

namespace nnkern {

using PeakLoop = float (*)(size_t iters, double* flops_per_iter);

extern const PeakLoop f32_fma_peak__avx2;
extern const PeakLoop f32_fma_peak__avx512;

}  // namespace nnkern
