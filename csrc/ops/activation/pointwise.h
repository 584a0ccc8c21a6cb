// The piecewise-linear activations as one formula each, shared by the ONNX plan's elementwise ops
// (ops/graph/ops/unary.cc) and the convolutions' fused post-ops (ops/conv/layer.cc): a fused activation gives the
// same bits as the separate op it replaces. NaN in gives NaN out.
#pragma once

namespace nnkern {

// min(max(v, lo), hi) where NaN in v stays NaN (and a NaN bound is ignored).
template <typename T>
inline T clamp_keep_nan(T v, T lo, T hi) {
  v = v < lo ? lo : v;
  return v > hi ? hi : v;
}

template <typename T>
inline T leaky_relu(T x, T alpha) {
  return x < T(0) ? x * alpha : x;
}

template <typename T>
inline T hard_sigmoid(T x, T alpha, T beta) {
  return clamp_keep_nan(alpha * x + beta, T(0), T(1));
}

template <typename T>
inline T hard_swish(T x) {  // x * HardSigmoid(x) with alpha 1/6, beta 0.5
  return x * clamp_keep_nan(T(1) / T(6) * x + T(0.5), T(0), T(1));
}

}  // namespace nnkern
