// nnkern.Lookup: y[i] = table[x[i]] for an 8-bit x (uint8 indexes the table directly, int8 by x + 128) and a
// constant table of 256 8-bit entries, y of the table's type. The ONNX plan turns the elementwise work between a
// DequantizeLinear and a QuantizeLinear into it (python/nnkern/onnx/_tables.py), the table holding what those ops
// give for each of the 256 inputs (computed by the same ops at load): the INT8 graph stays quantized, same bits.
#include <cstdint>

#include "core/kernel_family.h"
#include "kernels/quantize_list.h"
#include "ops/graph/ops/byte_table.h"
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

// Elementwise, so its output may take over its input's memory, or be rows of a wider tensor (a Concat's slice).
class LookupStep final : public Step {
 public:
  LookupStep(const ByteTable& t, size_t count) : t_(t), count_(count), row_(count), pitch_(count) {}
  void run(const StepData& d) const override {
    const uint8_t* x = d.in<uint8_t>(0);
    uint8_t* y = d.out<uint8_t>(0);
    const LookupFn lookup = quantize_family().dispatched().lookup;  // the ISA's (kernels/lookup.h)
    const uint8_t* t = t_.data();
    if (pitch_ == row_) {
      for_ranges(count_, [&](size_t b, size_t e) { lookup(t, x + b, y + b, e - b); });
      return;
    }
    const auto rows = [&](size_t b, size_t e) {
      for (size_t r = b; r < e; ++r) lookup(t, x + r * row_, y + r * pitch_, row_);
    };
    if (count_ < elementwise_parallel_min()) rows(0, count_ / row_);
    else parallel_for_ranges(count_ / row_, rows);
  }
  int in_place_input(size_t out) const override { return out == 0 ? 0 : -1; }
  bool write_rows(size_t out, size_t row_bytes, size_t pitch) override {
    if (out != 0 || row_bytes == 0 || count_ % row_bytes || pitch < row_bytes) return false;
    row_ = row_bytes;
    pitch_ = pitch;
    return true;
  }

 private:
  ByteTable t_;
  size_t count_, row_;  // elements, and per row
  size_t pitch_;        // bytes from one output row to the next
};

std::unique_ptr<Step> make_lookup(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers&) {
  const ByteTable t = byte_table(n.need_constant(1, "table"), n.in(0).dtype == DType::i8);
  return std::make_unique<LookupStep>(t, n.in(0).elements());
}

}  // namespace

void register_graph_ops_lookup() { register_op("nnkern.Lookup", {infer_lookup, make_lookup}); }

}  // namespace nnkern::graph
