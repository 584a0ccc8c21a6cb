// float32 <-> bf16 arrays on the dispatched bf16_convert kernel (kernels/bf16_convert.h): at memory speed, threaded
// in contiguous ranges when the array is large.
#include "core/kernel_family.h"
#include "core/threadpool.h"
#include "kernels/bf16_convert_list.h"
#include "ops/bf16/bf16.h"

namespace nnkern {

const KernelFamily<Bf16ConvertKernel>& bf16_convert_family() {
  static const KernelFamily<Bf16ConvertKernel> family(
      "bf16_convert", "bf16_convert", {NNKERN_BF16_CONVERT_LIST(NNKERN_KERNEL_ENTRY)},
      [](const Bf16ConvertKernel&) { return KernelInfo{}; });
  return family;
}
NNKERN_REGISTER_FAMILY(bf16_convert_family)

namespace {

// Below this many elements one thread converts faster than the pool wakes up.
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
  const Bf16ConvertKernel& k = bf16_convert_family().dispatched();
  ranges(n, [&](size_t begin, size_t end) { k.to_bits(x + begin, y + begin, end - begin); });
}

void bf16_to_f32_array(const uint16_t* x, float* y, size_t n) {
  const Bf16ConvertKernel& k = bf16_convert_family().dispatched();
  ranges(n, [&](size_t begin, size_t end) { k.widen(x + begin, y + begin, end - begin); });
}

}  // namespace nnkern
