// The files of graph ops: each defines `void register_graph_ops_<file>()`, which registers its ops by name
// (register_op in ops/graph/step.h). The registry calls them all once, on first use.
#pragma once

#define NNKERN_GRAPH_OP_FILES(X) \
  X(views)                       \
  X(unary)                       \
  X(binary)                      \
  X(conv)                        \
  X(transpose)

namespace nnkern::graph {
#define NNKERN_GRAPH_DECLARE_(file) void register_graph_ops_##file();
NNKERN_GRAPH_OP_FILES(NNKERN_GRAPH_DECLARE_)
#undef NNKERN_GRAPH_DECLARE_
}  // namespace nnkern::graph
