// A compiled graph: steps over tensors for one set of input shapes, run as one C++ loop. Tensors are the graph's
// inputs and outputs (the caller's memory), constants (shared, read-only) and intermediates, which live in one
// arena at offsets planned by their lifetimes: tensors whose lifetimes do not overlap share bytes, an elementwise
// step writes over an input nothing reads later, a view (Reshape, ...) is its input's bytes, and an input only a
// Concat reads is written by its producer straight into its place in the Concat's output (a slice). Runs are
// thread-safe: each takes an arena of its own from a pool. Baseline header.
#pragma once
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "ops/graph/step.h"

namespace nnkern::graph {

struct StepInfo {
  std::string op, name, nodes;  // the op, the node's name, the source nodes it covers (for describe())
  std::vector<int> in, out;
  std::string detail;
};

// One step's time in a profiled run.
struct StepTime {
  size_t step;
  double seconds;
};

class Plan {
 public:
  // num_threads > 0: at most that many threads for its runs; isa_cap >= 0: an ISA cap of its own (core/isa.h
  // ScopedIsaCap) for building its steps and for its runs.
  explicit Plan(std::shared_ptr<SharedLayers> layers, int num_threads = 0, int isa_cap = -1);

  int add_input(const TensorDesc& d, size_t index, const std::string& name);
  int add_constant(std::shared_ptr<const Constant> c, const std::string& name);
  // Builds the node's step over tensors `in` (-1: an optional input left out) and adds its outputs as new
  // intermediate tensors, whose ids it returns. `nodes`: the source nodes the step covers.
  std::vector<int> add_step(const std::string& op, const std::string& name,
                            const std::map<std::string, Attribute>& attrs, const std::vector<int>& in,
                            size_t num_outputs, const std::string& nodes, const std::vector<std::string>& out_names);
  void mark_output(int tensor, size_t index);  // a step's output becomes graph output `index` (caller's memory)
  // Plans the arena; no step may be added after. join_in_place: let producers write Concat inputs in place
  // (off: every Concat copies, for measuring and testing).
  void finalize(bool join_in_place = true);

  // inputs / outputs: the graph's, by index (outputs sized as output_desc says). times: per-step seconds if given.
  void run(const std::vector<const void*>& inputs, const std::vector<void*>& outputs, bool verbose,
           std::vector<StepTime>* times) const;

  const TensorDesc& desc(int tensor) const { return tensors_.at(size_t(tensor)).desc; }
  const std::string& tensor_name(int tensor) const { return tensors_.at(size_t(tensor)).name; }
  const std::shared_ptr<const Constant>& constant_of(int tensor) const { return tensors_.at(size_t(tensor)).constant; }
  size_t num_inputs() const { return inputs_.size(); }
  int input_tensor(size_t index) const { return inputs_.at(index); }
  size_t num_outputs() const { return outputs_.size(); }
  int output_tensor(size_t index) const { return outputs_.at(index); }
  const std::vector<StepInfo>& steps() const { return info_; }
  size_t arena_bytes() const { return arena_bytes_; }      // the intermediates' peak, as planned
  size_t unplanned_bytes() const { return unplanned_; }    // what they would take without sharing
  bool shares_memory(int a, int b) const;                   // the tests' probe of the plan

 private:
  enum class Kind { input, constant, intermediate };
  struct Tensor {
    TensorDesc desc;
    Kind kind;
    std::string name;
    size_t index = 0;  // input index
    int output = -1;   // graph output index, or -1
    std::shared_ptr<const Constant> constant;
    int root = -1;       // intermediates: the tensor whose memory this one uses (itself if its own)
    size_t offset = 0;   // roots: arena offset
    size_t slice = 0;    // a slice of a Concat's output (root): its first byte there
  };
  void resolve(void** ptr, uint8_t* arena, const std::vector<const void*>& inputs,
               const std::vector<void*>& outputs) const;
  // Which Concat inputs their producers write in place: {input tensor: byte offset in the Concat's output}, each
  // producer told its rows' pitch. An input qualifies when it is an intermediate only that Concat reads.
  std::map<int, std::pair<int, size_t>> plan_joins();
  std::unique_ptr<AlignedBuffer<uint8_t>> take_arena() const;
  void give_arena(std::unique_ptr<AlignedBuffer<uint8_t>> a) const;

  std::shared_ptr<SharedLayers> layers_;
  int num_threads_, isa_cap_;
  std::vector<Tensor> tensors_;
  std::vector<std::unique_ptr<Step>> steps_;
  std::vector<StepInfo> info_;
  std::vector<int> inputs_, outputs_;
  bool finalized_ = false;
  size_t arena_bytes_ = 0, unplanned_ = 0;
  mutable std::mutex arenas_m_;
  mutable std::vector<std::unique_ptr<AlignedBuffer<uint8_t>>> arenas_;
};

// Evaluates one node on constant inputs (the Python side's constant folding): the same step a plan would run.
std::vector<std::shared_ptr<const Constant>> evaluate(const std::string& op, const std::string& name,
                                                      const std::map<std::string, Attribute>& attrs,
                                                      const std::vector<std::shared_ptr<const Constant>>& inputs,
                                                      size_t num_outputs);

// A constant holding a copy of `bytes` for desc (64-byte aligned; uninitialized if bytes is null).
std::shared_ptr<const Constant> make_constant(const TensorDesc& desc, const void* bytes);

}  // namespace nnkern::graph
