// The small-M path of qgemm (M <= kQGemvMaxM, uint8 activations on a u8s8 G = 4 level with a GEMV kernel):
// B read once straight from memory, since packing it would cost as much as the product.
#pragma once
#include "kernels/qgemm.h"
#include "ops/qgemm.h"
#include "ops/qgemm_driver.h"

namespace nnkern {

// c = sum_k (a - za)(b - zb) for g's shapes, with P's prepared activations (a, a_row_bytes, row_sum), its
// effective zero point za and padded b_zero.
void qgemm_gemv(const QGemvKernel& gemv, const QgemmArgs& g, const QPlan& P);

}  // namespace nnkern
