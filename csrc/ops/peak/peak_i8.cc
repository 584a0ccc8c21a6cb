// Measured 8-bit multiply-add peak of one core per ISA level (see kernels/peak_i8.h), for the benchmarks.
#include "core/isa.h"
#include "ops/peak/peak.h"
#include "kernels/peak_i8.h"

namespace nnkern {

// Int8 ops/s (2 per multiply-add) of the level's loop over about `seconds`; 0 if none or unsupported.
double i8_peak_ops(Isa isa, double seconds) {
  I8PeakLoop loop = nullptr;
#ifdef NNKERN_HAVE_AVX2
  if (isa == Isa::avx2) loop = i8_peak__avx2;
#endif
#ifdef NNKERN_HAVE_AVXVNNI
  if (isa == Isa::avxvnni) loop = i8_peak__avxvnni;
#endif
#ifdef NNKERN_HAVE_AVX512
  if (isa == Isa::avx512) loop = i8_peak__avx512;
#endif
#ifdef NNKERN_HAVE_AVX512VNNI
  if (isa == Isa::avx512vnni) loop = i8_peak__avx512vnni;
#endif
#ifdef NNKERN_HAVE_AMX
  if (isa == Isa::amx) loop = i8_peak__amx;
#endif
  if (!loop || !isa_supported(isa)) return 0.0;
  return best_loop_rate(loop, 1 << 14, seconds);
}

}  // namespace nnkern
