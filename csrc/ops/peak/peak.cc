#include "ops/peak/peak.h"

#include "kernels/peak.h"

namespace nnkern {

double f32_peak_flops(Isa isa, double seconds) {
  PeakLoop loop = nullptr;
#ifdef NNKERN_HAVE_AVX2
  if (isa == Isa::avx2) loop = f32_fma_peak__avx2;
#endif
#ifdef NNKERN_HAVE_AVX512
  if (isa == Isa::avx512) loop = f32_fma_peak__avx512;
#endif
  if (!loop || !isa_supported(isa)) return 0.0;
  return best_loop_rate(loop, 1 << 16, seconds);
}

}  // namespace nnkern
