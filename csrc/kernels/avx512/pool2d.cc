// pool2d with AVX-512 (F, BW): the loops of kernels/inc/pool2d_loop.inc compiled for 64-byte vectors.
#define NNKERN_POOL_VEC_BYTES 64
#include "kernels/inc/pool2d_loop.inc"

namespace nnkern {
const Pool2dKernel pool2d__avx512 = {"pool2d__avx512", pool2d_rows};
}  // namespace nnkern
