// A one-instruction dot-product kernel (SDOT), compiled with -march=armv8.2-a+dotprod like the
// csrc/kernels/neondot files. test_dispatch uses it as the neondot entry of a test dispatch table, and
// calls it in a forked child to prove that it really traps (SIGILL) on a CPU without the feature.
#include <arm_neon.h>

#include <cstdint>

int32_t probe_neondot(const int8_t* a, const int8_t* b) {
  const int32x4_t acc = vdotq_s32(vdupq_n_s32(0), vld1q_s8(a), vld1q_s8(b));
  return vaddvq_s32(acc);
}
