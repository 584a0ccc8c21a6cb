// A QLinearAdd / QLinearMul's parameters as the graph steps read them at run time: the QLinearAdd / QLinearMul step
// (quant.cc) and the one fused into a convolution's output (qconv.cc). Baseline header.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>

#include "kernels/qbinary.h"
#include "ops/graph/ops/common.h"

namespace nnkern {
namespace graph {

// Input indices of A_scale, A_zero_point, B_scale, B_zero_point, C_scale, C_zero_point (an absent zero point is 0);
// the result clamped to the 8-bit type's range, from C's zero point up with relu.
struct QBinaryInputs {
  size_t sa, za, sb, zb, sc, zc;
};

inline QBinaryParams qbinary_params(const StepData& d, const QBinaryInputs& in, bool is_signed, bool mul, bool relu) {
  const auto zero = [&](size_t i) { return float(zero_point8(d, i, is_signed)); };
  const float zc = zero(in.zc);
  return QBinaryParams{*d.in<float>(in.sa), zero(in.za), *d.in<float>(in.sb), zero(in.zb), *d.in<float>(in.sc), zc,
                       std::max(relu ? zc : -INFINITY, is_signed ? -128.0f : 0.0f), is_signed ? 127.0f : 255.0f, mul,
                       is_signed};
}

}  // namespace graph
}  // namespace nnkern
