// The attributes of a 2-D sliding window that the convolutions and pools share: strides, dilations, pads (top,
// left, bottom, right as ONNX orders them) and auto_pad, checked and resolved against the input's size.
// Baseline header.
#pragma once
#include <cstddef>

#include "ops/graph/node.h"

namespace nnkern::graph {

struct Window2d {
  size_t sh = 1, sw = 1, dh = 1, dw = 1;
  size_t pt = 0, pl = 0, pb = 0, pr = 0;
};

// The window over an H x W input with a KH x KW kernel; NodeSpec::invalid for strides or dilations < 1, negative
// pads, lists of the wrong length or an unknown auto_pad. SAME_UPPER / SAME_LOWER give ceil(in / stride) outputs
// (the odd padding at the end / start), VALID none.
Window2d window_attrs(const NodeSpec& n, size_t H, size_t W, size_t KH, size_t KW);

}  // namespace nnkern::graph
