// The graph ops by name (each op file registers itself at static initialization).
#include <cstring>
#include <map>

#include <mutex>

#include "ops/graph/ops/files.h"
#include "ops/graph/step.h"

namespace nnkern::graph {

namespace {
std::map<std::string, OpDef>& ops() {
  static std::map<std::string, OpDef> table;
  return table;
}
const std::map<std::string, OpDef>& registry() {
  static std::once_flag once;
  std::call_once(once, [] {
#define NNKERN_GRAPH_REGISTER_(file) register_graph_ops_##file();
    NNKERN_GRAPH_OP_FILES(NNKERN_GRAPH_REGISTER_)
#undef NNKERN_GRAPH_REGISTER_
  });
  return ops();
}
}  // namespace

void register_op(const char* name, OpDef def) {
  if (!ops().emplace(name, def).second) throw std::logic_error(std::string("graph op registered twice: ") + name);
}

const OpDef& find_op(const NodeSpec& n) {
  auto it = registry().find(n.op);
  if (it == registry().end()) throw Unsupported(n.where() + ": the operator " + n.op + " is not supported");
  return it->second;
}

bool has_op(const std::string& name) { return registry().count(name) != 0; }

std::vector<std::string> op_names() {
  std::vector<std::string> names;
  for (const auto& kv : registry()) names.push_back(kv.first);
  return names;
}

std::vector<TensorDesc> infer_outputs(const NodeSpec& n) {
  std::vector<TensorDesc> out = find_op(n).infer(n);
  if (out.size() < n.num_outputs)
    n.invalid("has " + std::to_string(n.num_outputs) + " outputs, the operator gives " + std::to_string(out.size()));
  out.resize(n.num_outputs);
  for (const TensorDesc& d : out) d.bytes();  // sizes that overflow are refused here, before any allocation
  return out;
}

void views_copy(const StepData& d, size_t bytes) {
  if (d.out(0) != d.in(0) && bytes) std::memcpy(d.out(0), d.in(0), bytes);
}

}  // namespace nnkern::graph
