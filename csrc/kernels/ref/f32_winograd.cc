// The scalar Winograd transform kernel (kernels/f32_winograd.h): the template on one channel at a time, the
// reference the SIMD kernels' channel tails also run. Baseline code.
#include <cstddef>

#include "kernels/f32_winograd_list.h"

#define NNK_INLINE inline __attribute__((always_inline))

namespace nnkern {
namespace {

#include "kernels/inc/f32_winograd.inc"

}  // namespace

const F32WinogradKernel f32_winograd_1__scalar = winograd_kernel<ScalarF32>("f32_winograd_1__scalar");

}  // namespace nnkern
