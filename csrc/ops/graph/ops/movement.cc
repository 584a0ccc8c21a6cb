// Graph ops: (to be filled).
#include "ops/graph/ops/common.h"

namespace nnkern::graph {

void register_graph_ops_movement() {}

}  // namespace nnkern::graph
