// Pixel shuffle / unshuffle (torch.nn.functional.pixel_shuffle) on raw bytes: a pure permutation, so the
// element type only matters through its size (1, 2, 4 or 8 bytes).
#pragma once
#include <cstddef>

namespace nnkern {

// The geometry of one call, named by the shuffled side's small shape: the shuffle maps C*r*r channels of
// H x W pixels to C channels of (H*r) x (W*r) pixels; the unshuffle is its exact inverse.
//   NCHW: shuffled[n, c, h*r + i, w*r + j] = unshuffled[n, c*r*r + i*r + j, h, w]
//   NHWC: shuffled[n, h*r + i, w*r + j, c] = unshuffled[n, h, w, c*r*r + i*r + j]
struct PixelShuffleShape {
  size_t n, c, h, w, r;
  size_t elem_size;  // 1, 2, 4 or 8
  bool nhwc;
};

// inverse = false: x is the unshuffled array, y the shuffled one; inverse = true: the other way round.
// Both C-contiguous, aligned to elem_size, not overlapping; their element count n*c*r*r*h*w must not
// overflow (the caller checks). Work is spread over the thread pool by (n, output rows).
void pixel_shuffle(const PixelShuffleShape& s, bool inverse, const void* x, void* y);

}  // namespace nnkern
