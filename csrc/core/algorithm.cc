#include "core/algorithm.h"

#include <mutex>

namespace nnkern {
namespace {

struct Registry {
  std::mutex mutex;
  std::vector<std::pair<std::string, const std::vector<std::string>*>> ops;
};

Registry& registry() {
  static Registry* r = new Registry();  // outlives static destructors
  return *r;
}

// (op, entry name) pairs; both are string literals of the static tables, so no copies.
thread_local std::vector<std::pair<const char*, const char*>> t_selected;

}  // namespace

void record_selection(const char* op, const char* name) {
  for (auto& [o, n] : t_selected)
    if (o == op) {
      n = name;
      return;
    }
  t_selected.emplace_back(op, name);
}

std::string take_last_selection(const std::string& op) {
  for (auto& [o, n] : t_selected)
    if (o && op == o && n) {
      std::string name = n;
      n = nullptr;
      return name;
    }
  return "";
}

void register_algorithm_names(const char* op, const std::vector<std::string>* names) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.ops.emplace_back(op, names);
}

const std::vector<std::string>* algorithm_names(const std::string& op) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (const auto& [name, names] : r.ops)
    if (name == op) return names;
  return nullptr;
}

std::vector<std::string> algorithm_ops() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::string> out;
  for (const auto& entry : r.ops) out.push_back(entry.first);
  return out;
}

}  // namespace nnkern
