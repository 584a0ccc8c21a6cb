// The AVX-512 Winograd transform kernel (kernels/f32_winograd.h): the template on 16-float vectors.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/f32_winograd_list.h"

#define NNK_INLINE inline __attribute__((always_inline))

namespace nnkern {
namespace {

#include "kernels/inc/f32_zmm.inc"
#include "kernels/inc/f32_winograd.inc"

}  // namespace

const F32WinogradKernel f32_winograd_16__avx512 = winograd_kernel<Avx512F32>("f32_winograd_16__avx512");

}  // namespace nnkern
