// One node as a graph op sees it when it infers its outputs or builds its step: the op's name, its attributes,
// its inputs' descriptions, and the data of those inputs that are constants when the plan is built (weights,
// shapes, axes). Ops are written against the newest ONNX opset; the Python side rewrites older forms first.
// Baseline header.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/graph/tensor.h"

namespace nnkern::graph {

// What a plan cannot do (an op, an attribute value, an element type): NotImplementedError in Python, raised
// when the plan is built, never during a run.
struct Unsupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Unsupported because input `input` of the node is not a constant when the plan is built (a shape, axes, a
// size). The Python side then treats the graph inputs it comes from as part of the plan's key and retries.
struct NeedsConstant : Unsupported {
  NeedsConstant(const std::string& what, std::string node, size_t input)
      : Unsupported(what), node(std::move(node)), input(input) {}
  std::string node;
  size_t input;
};

// A constant tensor: its description and its bytes (C order), shared by every plan of a session.
struct Constant {
  TensorDesc desc;
  std::shared_ptr<const void> data;  // desc.bytes() bytes, 64-byte aligned
  template <typename T>
  const T* as() const { return static_cast<const T*>(data.get()); }
  // The values of an integer constant (any integer type) as int64: shapes, axes, pads, sizes.
  std::vector<int64_t> ints() const;
  std::vector<double> reals() const;  // any numeric type
  // Element i of an int8 or uint8 constant (weights, read in place: ints() would take eight times their bytes).
  int64_t int8_at(size_t i) const {
    return desc.dtype == DType::u8 ? int64_t(as<uint8_t>()[i]) : int64_t(as<int8_t>()[i]);
  }
};

struct Attribute {
  enum class Kind { i, f, s, ints, floats, strings, tensor } kind = Kind::i;
  int64_t i = 0;
  float f = 0.0f;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::vector<std::string> strings;
  std::shared_ptr<const Constant> tensor;
};

struct NodeSpec {
  std::string op;    // "Conv", or "nnkern.<Name>" for the plan's own fused ops
  std::string name;  // the node's name (errors, describe(), the key of the layers a session shares)
  std::map<std::string, Attribute> attrs;
  std::vector<TensorDesc> inputs;                         // !present(): an optional input left out
  std::vector<std::shared_ptr<const Constant>> constants;  // per input: its data if constant, else null
  size_t num_outputs = 1;

  const TensorDesc& in(size_t i) const;  // std::invalid_argument if the node has fewer inputs
  bool has_input(size_t i) const { return i < inputs.size() && inputs[i].present(); }
  const Constant* constant(size_t i) const { return i < constants.size() ? constants[i].get() : nullptr; }
  // Input i's values, which must be a constant (Unsupported naming `what` otherwise: data-dependent shapes are
  // not planned).
  const Constant& need_constant(size_t i, const char* what) const;

  bool has(const std::string& attr) const { return attrs.count(attr) != 0; }
  int64_t attr_int(const std::string& a, int64_t dflt) const;
  float attr_float(const std::string& a, float dflt) const;
  std::string attr_string(const std::string& a, const std::string& dflt) const;
  std::vector<int64_t> attr_ints(const std::string& a, const std::vector<int64_t>& dflt = {}) const;
  std::vector<float> attr_floats(const std::string& a, const std::vector<float>& dflt = {}) const;

  // "Conv node 'conv1'": how errors name the node.
  std::string where() const;
  [[noreturn]] void unsupported(const std::string& what) const;  // throws Unsupported naming the node
  [[noreturn]] void invalid(const std::string& what) const;      // throws std::invalid_argument naming it
  // Unsupported unless every listed input present has one of the element types.
  void require_types(std::initializer_list<size_t> inputs, std::initializer_list<DType> types) const;
};

}  // namespace nnkern::graph
