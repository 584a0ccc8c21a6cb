// Row-wise top-k over a float32 matrix (seed I21); order and ties as in kernels/f32_topk.h.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/isa.h"
#include "kernels/f32_topk.h"

namespace nnkern {

// For each row r < rows: values[r * k ..], indices[r * k ..] = top-k of x[r * ldx .. r * ldx + n).
// k <= n < 2^32. Rows are spread over the thread pool.
void f32_topk(size_t rows, size_t n, const float* x, size_t ldx, size_t k, float* values, int64_t* indices);

}  // namespace nnkern
