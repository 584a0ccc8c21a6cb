// 2-D max / average pooling of NHWC tensors (nnkern.max_pool2d / avg_pool2d): geometry and threading over
// the pool2d kernels (kernels/pool2d.h states the arithmetic).
#pragma once
#include <cstddef>

#include "core/kernel_list.h"
#include "kernels/pool2d.h"

namespace nnkern {

// The output length of one dimension, as torch's pooling_output_shape with padding pad0 before and pad1
// after: floor or ceil of (in + pad0 + pad1 - k) / stride, plus one; with ceil_mode a last window that
// would start at or beyond in + pad0 (entirely in the trailing padding) is dropped. Throws
// std::invalid_argument unless k, stride >= 1, in >= 1, pad0, pad1 <= k / 2 and the length is at least 1
// (in + pad0 + pad1 >= k; with ceil_mode in + pad0 + pad1 + stride - 1 >= k: a window may then reach past the
// padded input, as in torch, and counts only the positions within it).
size_t pool2d_output_size(size_t in, size_t k, size_t stride, size_t pad0, size_t pad1, bool ceil_mode);

// y = pool(x) for the geometry of p (p.oh, p.ow from pool2d_output_size); x and y C-contiguous, aligned
// for the dtype, not overlapping. Output rows (image, oh) are spread over the thread pool.
void pool2d(const Pool2dParams& p, const void* x, void* y);

}  // namespace nnkern
