#include "core/dispatch.h"

#include <mutex>

namespace nnkern {
namespace {

struct Registry {
  std::mutex mutex;
  std::vector<std::pair<const char*, std::string (*)()>> ops;
};

Registry& registry() {
  static Registry* r = new Registry();  // outlives static destructors
  return *r;
}

}  // namespace

void register_dispatched_op(const char* op, std::string (*chosen_kernel_name)()) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.ops.emplace_back(op, chosen_kernel_name);
}

std::vector<std::pair<std::string, std::string>> chosen_kernels() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [op, name] : r.ops) out.emplace_back(op, name());
  return out;
}

}  // namespace nnkern
