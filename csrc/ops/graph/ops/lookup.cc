// nnkern.Lookup: y[i] = table[x[i]] for an 8-bit x (uint8 indexes the table directly, int8 by x + 128) and a
// constant table of 256 8-bit entries, y of the table's type. The ONNX plan turns DequantizeLinear -> an
// elementwise float op -> QuantizeLinear into it, the table holding what the three ops give for each of the 256
// inputs (computed by the same ops at load): the INT8 graph stays quantized, with the same bits.
#include <array>

#include "ops/graph/ops/common.h"
#include "ops/graph/ops/elementwise.h"

namespace nnkern::graph {

namespace {

using ByteTypes = TypeList<uint8_t, int8_t>;

std::vector<TensorDesc> infer_lookup(const NodeSpec& n) {
  require_types(n, {0, 1}, ByteTypes{});
  const TensorDesc& table = n.need_constant(1, "table").desc;
  if (table.elements() != 256) n.invalid("the table must have 256 entries, got " + table.str());
  return one(table.dtype, n.in(0).shape);
}

std::unique_ptr<Step> make_lookup(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers&) {
  const Constant& table = n.need_constant(1, "table");
  std::array<uint8_t, 256> t;  // by the input's bits as uint8 (int8's -128 .. 127 are 128 .. 255)
  const uint8_t* entries = table.as<uint8_t>();
  const bool signed_in = n.in(0).dtype == DType::i8;
  for (size_t b = 0; b < 256; ++b) t[b] = entries[signed_in ? (b + 128) & 255 : b];
  return map_step<uint8_t, uint8_t>(n.in(0).elements(), [t](uint8_t x) { return t[x]; });
}

}  // namespace

void register_graph_ops_lookup() { register_op("nnkern.Lookup", {infer_lookup, make_lookup}); }

}  // namespace nnkern::graph
