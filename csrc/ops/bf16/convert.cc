// float32 <-> bf16 arrays. Plain loops over kernels/bf16.h's conversions: the compiler vectorizes them for the
// baseline (SSE2 / NEON), and they run at memory speed; threaded in contiguous ranges when the array is large.
#include "core/threadpool.h"
#include "kernels/bf16.h"
#include "ops/bf16/bf16.h"

namespace nnkern {
namespace {

// Below this many elements one thread copies faster than the pool wakes up.
constexpr size_t kThreadedElements = size_t(1) << 16;

template <typename F>
void ranges(size_t n, F&& f) {
  if (n < kThreadedElements)
    f(size_t(0), n);
  else
    parallel_for_ranges(n, f);
}

}  // namespace

void f32_to_bf16_array(const float* x, uint16_t* y, size_t n) {
  ranges(n, [=](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) y[i] = f32_to_bf16(x[i]);
  });
}

void bf16_to_f32_array(const uint16_t* x, float* y, size_t n) {
  ranges(n, [=](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) y[i] = bf16_to_f32(x[i]);
  });
}

}  // namespace nnkern
