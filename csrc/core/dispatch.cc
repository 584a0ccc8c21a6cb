#include "core/dispatch.h"

#include <mutex>

namespace nnkern {
namespace {

struct Registry {
  std::mutex mutex;
  std::vector<std::pair<const char*, std::function<std::string()>>> ops;
};

Registry& registry() {
  static Registry* r = new Registry();  // outlives static destructors
  return *r;
}

}  // namespace

void register_dispatched_op(const char* op, std::function<std::string()> chosen_kernel_name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.ops.emplace_back(op, std::move(chosen_kernel_name));
}

std::vector<std::pair<std::string, std::string>> chosen_kernels() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [op, name] : r.ops) out.emplace_back(op, name());
  return out;
}

}  // namespace nnkern

// --- kernel lists (core/kernel_list.h) -------------------------------------------------------------
#include "core/kernel_list.h"

namespace nnkern {
namespace {

struct FamilyRegistry {
  std::mutex mutex;
  std::vector<std::pair<std::string, const std::vector<KernelInfo>*>> families;
};

FamilyRegistry& families() {
  static FamilyRegistry* r = new FamilyRegistry();  // outlives static destructors
  return *r;
}

}  // namespace

void register_kernel_family(const char* family, const std::vector<KernelInfo>* info) {
  FamilyRegistry& r = families();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.families.emplace_back(family, info);
}

const std::vector<KernelInfo>* kernel_family(const std::string& family) {
  FamilyRegistry& r = families();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (const auto& [name, info] : r.families)
    if (name == family) return info;
  return nullptr;
}

std::vector<std::string> kernel_families() {
  FamilyRegistry& r = families();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::string> out;
  for (const auto& entry : r.families) out.push_back(entry.first);
  return out;
}

}  // namespace nnkern
