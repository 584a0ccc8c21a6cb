// The AVX2 Winograd transform kernel (kernels/f32_winograd.h): the template on 8-float vectors.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/f32_winograd_list.h"

#define NNK_INLINE inline __attribute__((always_inline))

namespace nnkern {
namespace {

#include "kernels/inc/f32_ymm.inc"
#include "kernels/inc/f32_winograd.inc"

}  // namespace

const F32WinogradKernel f32_winograd_8__avx2 = winograd_kernel<Avx2F32>("f32_winograd_8__avx2");

}  // namespace nnkern
