// The small-M path of qgemm (M <= the GEMV kernel's max_m, 8-bit activations prepared as uint8):
// B read once straight from memory, since packing it would cost as much as the product.
#pragma once
#include "kernels/qgemm.h"
#include "ops/qgemm/qgemm.h"
#include "ops/qgemm/driver.h"

namespace nnkern {

// c = sum_k (a - za)(b - zb) for g's shapes, with P's prepared activations (a, a_row_bytes, row_sum), its
// effective zero point za and padded b_zero.
void qgemm_gemv(const QGemvKernel& gemv, const QgemmArgs& g, const QPlan& P);

}  // namespace nnkern
