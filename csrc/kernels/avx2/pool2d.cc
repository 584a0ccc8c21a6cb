// pool2d with AVX2: the loops of kernels/inc/pool2d_loop.inc compiled for 32-byte vectors (vpmaxub, vpaddw,
// vcvtdq2ps ... from the compiler; no intrinsics).
#define NNKERN_POOL_VEC_BYTES 32
#include "kernels/inc/pool2d_loop.inc"

namespace nnkern {
const Pool2dKernel pool2d__avx2 = {"pool2d__avx2", pool2d_rows};
}  // namespace nnkern
