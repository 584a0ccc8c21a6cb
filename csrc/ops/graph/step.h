// A step of a graph plan: one op over tensors the plan owns, built once per input shape. A graph op is registered
// by name with two functions: infer (the outputs' descriptions from the node: no data needed except the constant
// inputs) and make (the step). The ops live in the files of ops/graph/ops, each registering its ops in
// `register_graph_ops_<file>()`; adding a file is one line in NNKERN_GRAPH_OP_FILES (ops/graph/ops/files.h).
// Baseline header.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <typeinfo>
#include <vector>

#include "ops/graph/node.h"

namespace nnkern::graph {

// The data of one step's tensors during a run (an optional input left out is null, as is one past the node's last:
// a QuantizeLinear written without its zero point has two inputs).
struct StepData {
  void* const* ptr;  // every tensor of the plan, by id
  const int* in_ids;
  const int* out_ids;
  size_t n_in;  // the node's inputs
  const void* in(size_t i) const { return i >= n_in || in_ids[i] < 0 ? nullptr : ptr[in_ids[i]]; }
  template <typename T>
  const T* in(size_t i) const { return static_cast<const T*>(in(i)); }
  void* out(size_t i) const { return ptr[out_ids[i]]; }
  template <typename T>
  T* out(size_t i) const { return static_cast<T*>(out(i)); }
};

// How a step's output 0 holds its inputs side by side (Concat): `rows` rows of `pitch` bytes, input i the
// `bytes[i]` bytes at `at[i]` of each row.
struct RowsJoin {
  size_t rows = 0, pitch = 0;
  std::vector<size_t> at, bytes;
};

class Step {
 public:
  virtual ~Step() = default;
  virtual void run(const StepData& d) const = 0;
  // What describe() adds after the op: the algorithm and kernel chosen, where there is a choice.
  virtual std::string detail() const { return ""; }
  // The input whose memory output `out` may take over (the step reads every element before it writes it: an
  // elementwise op), or -1. The plan uses it only where nothing reads that input later.
  virtual int in_place_input(size_t out) const { return -1; }
  // Output 0 is input 0's bytes unchanged (Reshape, Flatten, Squeeze, ...): the plan lets it share the input's
  // memory where it can, and run() copies only where the plan could not (views_copy).
  virtual bool is_view() const { return false; }
  // Output 0 is the inputs joined in rows (Concat): the plan may have an input's producer write straight into its
  // place in the output, and run() then leaves the inputs it finds there alone. Null for other steps.
  virtual const RowsJoin* joins_rows() const { return nullptr; }
  // From now on, write output `out` as rows of `row_bytes` bytes (its innermost dimensions), `pitch` bytes apart:
  // a slice of a wider tensor. Returns false (the default) where the step cannot, changing nothing.
  virtual bool write_rows(size_t out, size_t row_bytes, size_t pitch) { return false; }
};

// A view step's run: a copy only where the plan gave the output its own memory.
void views_copy(const StepData& d, size_t bytes);

// Layers packed once per session and shared by the plans of every input shape (packed weights do not depend on the
// input's size): keyed by the node's op and name, the object's type and the constants it is built from (a plan for
// other values of a weight fed as an input packs its own). An entry keeps those constants alive, so their addresses
// stay unique.
class SharedLayers {
 public:
  template <typename T, typename Make>
  std::shared_ptr<const T> get(const NodeSpec& n, Make make) {
    std::string key = n.op + "|" + n.name + "|" + typeid(T).name();
    for (const auto& c : n.constants) key += "|" + std::to_string(reinterpret_cast<uintptr_t>(c ? c->data.get() : nullptr));
    std::lock_guard<std::mutex> lock(m_);
    auto it = layers_.find(key);
    if (it != layers_.end()) return std::static_pointer_cast<const T>(it->second.layer);
    std::shared_ptr<const T> made = make();
    layers_[key] = Entry{made, n.constants};
    return made;
  }
  size_t size() const {
    std::lock_guard<std::mutex> lock(m_);
    return layers_.size();
  }

 private:
  struct Entry {
    std::shared_ptr<const void> layer;
    std::vector<std::shared_ptr<const Constant>> sources;
  };
  mutable std::mutex m_;
  std::map<std::string, Entry> layers_;
};

using InferFn = std::vector<TensorDesc> (*)(const NodeSpec&);
using MakeFn = std::unique_ptr<Step> (*)(const NodeSpec&, const std::vector<TensorDesc>& outputs, SharedLayers&);

struct OpDef {
  InferFn infer;
  MakeFn make;
};

void register_op(const char* name, OpDef def);
// The op of this node; Unsupported naming the node and listing nothing else if no op has that name.
const OpDef& find_op(const NodeSpec& n);
bool has_op(const std::string& name);
std::vector<std::string> op_names();

// The outputs of a node: its op's infer, with the count checked against the node's.
std::vector<TensorDesc> infer_outputs(const NodeSpec& n);

}  // namespace nnkern::graph
