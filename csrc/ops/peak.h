// Measured peak FMA rate of one core for an ISA level, for "% of peak" in the benchmarks.
#pragma once
#include "core/isa.h"

namespace nnkern {

// Flop/s of the ISA's FMA loop over about `seconds` (best of a few runs); 0 if the level has no loop
// or the CPU lacks it.
double f32_peak_flops(Isa isa, double seconds);

}  // namespace nnkern
