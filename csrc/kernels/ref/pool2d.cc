// pool2d in baseline code: the loops of kernels/inc/pool2d_loop.inc with the architecture's baseline vectors
// (SSE2 on x86-64, NEON on aarch64: 16 bytes).
#define NNKERN_POOL_VEC_BYTES 16
#include "kernels/inc/pool2d_loop.inc"

namespace nnkern {
const Pool2dKernel pool2d__scalar = {"pool2d__scalar", pool2d_rows};
}  // namespace nnkern
