// The fixed order in which nnkern sums a run of floats, whatever the thread count and ISA: the graph's reductions
// (ops/graph/ops/reduction.h) and the kernels that sum as they do (kernels/f32_softmax.h) share these sizes, so
// the two orders cannot drift apart. A run is cut into pieces of kSumPiece elements; a piece is summed in
// kSumLanes interleaved partials (lane j takes elements j, j + kSumLanes, ...) combined pairwise at its end; the
// pieces' sums are folded kSumGroup at a time into a group, and the groups in order into the result.
// Constants only (no functions): safe to include from baseline and ISA-flagged files alike.
#pragma once
#include <cstddef>

namespace nnkern {

constexpr size_t kSumLanes = 16;
constexpr size_t kSumPiece = 4096;
constexpr size_t kSumGroup = 64;

}  // namespace nnkern
