// Peak-rate loops of the 8-bit multiply-add instructions, for "% of peak" in the INT8 GEMM benchmarks:
// each runs `iters` iterations of 12 independent accumulator chains and reports the int8 ops (2 per
// multiply-add) per iteration through *ops_per_iter.
//   amx: tdpbusd into four accumulator tiles (the AMX-INT8 peak)
//   avx512vnni / avxvnni: vpdpbusd zmm / ymm (the VNNI peak)
//   avx512 / avx2: the saturating 3-instruction sequence vpmaddubsw + vpmaddwd + vpaddd (zmm / ymm), the
//   reference for the exact non-VNNI kernels.
#pragma once
#include <cstddef>

namespace nnkern {

using I8PeakLoop = int (*)(size_t iters, double* ops_per_iter);

extern const I8PeakLoop i8_peak__avx2;
extern const I8PeakLoop i8_peak__avxvnni;
extern const I8PeakLoop i8_peak__avx512;
extern const I8PeakLoop i8_peak__avx512vnni;
extern const I8PeakLoop i8_peak__amx;

}  // namespace nnkern
