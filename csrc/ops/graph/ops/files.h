// The files of graph ops: each defines `void register_graph_ops_<file>()`, which registers its ops by name
// (register_op in ops/graph/step.h). The registry calls them all once, on first use. Grouped as the docs list
// the operators.
#pragma once

#define NNKERN_GRAPH_OP_FILES(X) \
  /* shapes and views */         \
  X(views)                       \
  X(transpose)                   \
  /* elementwise */              \
  X(unary)                       \
  X(binary)                      \
  X(math)                        \
  X(logic)                       \
  X(variadic)                    \
  X(cast)                        \
  /* data movement */            \
  X(movement)                    \
  X(slice)                       \
  X(gather)                      \
  X(rearrange)                   \
  X(pad)                         \
  X(shape)                       \
  X(resize)                      \
  /* reductions, normalization */ \
  X(reduce)                      \
  X(softmax)                     \
  X(layer_norm)                  \
  X(norm)                        \
  X(topk)                        \
  X(cumsum)                      \
  /* recurrent */                \
  X(rnn)                         \
  /* convolution, products */    \
  X(conv)                        \
  X(conv_transpose)              \
  X(matmul)                      \
  X(pool)                        \
  /* quantization */             \
  X(quant)                       \
  X(lookup)                      \
  X(qconv)                       \
  X(qmatmul)

namespace nnkern::graph {
#define NNKERN_GRAPH_DECLARE_(file) void register_graph_ops_##file();
NNKERN_GRAPH_OP_FILES(NNKERN_GRAPH_DECLARE_)
#undef NNKERN_GRAPH_DECLARE_
}  // namespace nnkern::graph
