// Operators with several algorithms (convolution first, the GEMM's own paths too) keep a table of them,
// as oneDNN's implementation lists do. Entries are in the order "auto" tries them: auto takes the first
// entry that applies to the call and that auto prefers for it, so the table's order plus the `preferred`
// predicates are the documented rule. algorithm="name" selects one entry (std::invalid_argument, a
// ValueError in Python, if the name is unknown or the entry does not apply); tests enumerate the table
// (`nnkern._C.algorithms(op)`) and benchmarks report every entry. Scratch memory comes from one
// Workspace per call, sized by the entry. Baseline header.
#pragma once
#include <cstddef>
#include <iterator>
#include <stdexcept>
#include <type_traits>
#include <string>
#include <utility>
#include <vector>

#include "core/workspace.h"

namespace nnkern {

template <typename Problem>
struct Algorithm {
  const char* name;
  bool (*applicable)(const Problem&);           // can run this call (shape, parameters, CPU)
  bool (*preferred)(const Problem&);            // auto picks it when applicable; nullptr: always
  size_t (*workspace_bytes)(const Problem&);    // nullptr: none
  void (*run)(const Problem&, const Workspace&);
};

// The names of every registered table's entries, for the binding (the tables register themselves).
void register_algorithm_names(const char* op, const std::vector<std::string>* names);
const std::vector<std::string>* algorithm_names(const std::string& op);  // nullptr if no such op
std::vector<std::string> algorithm_ops();

// The entry that the calling thread's last select() of `op` returned, so that NNKERN_VERBOSE reports the
// path that ran instead of re-deriving the rule; take_last_selection also forgets it ("" if none since).
void record_selection(const char* op, const char* name);
std::string take_last_selection(const std::string& op);

// auto's rule and the choice by name over any sequence of entries e (a table's Algorithm structs, or a layer's
// algorithm objects): applies(e) and prefers(e) answer for the call, name_of(e) names the entry. Returns the
// entry chosen; std::invalid_argument for an unknown name, a named entry that does not apply, or no entry at all.
template <typename Entries, typename Applies, typename Prefers, typename NameOf>
const auto& select_algorithm(const char* op, const Entries& entries, const std::string& name, Applies applies,
                             Prefers prefers, NameOf name_of) {
  using Entry = std::remove_reference_t<decltype(*std::begin(entries))>;
  const Entry* chosen = nullptr;
  if (name == "auto") {
    for (const auto& e : entries) {
      if (!applies(e)) continue;
      if (prefers(e)) {
        chosen = &e;
        break;
      }
      if (!chosen) chosen = &e;  // the fallback: the first that applies
    }
    if (!chosen) throw std::invalid_argument(std::string(op) + ": no algorithm applies to this call");
  } else {
    for (const auto& e : entries) {
      if (name != name_of(e)) continue;
      if (!applies(e))
        throw std::invalid_argument(std::string(op) + ": algorithm '" + name + "' does not apply to this call");
      chosen = &e;
      break;
    }
    if (!chosen) {
      std::string choices = "auto";
      for (const auto& e : entries) choices += std::string(", ") + name_of(e);
      throw std::invalid_argument(std::string(op) + ": unknown algorithm '" + name + "' (" + choices + ")");
    }
  }
  record_selection(op, name_of(*chosen));
  return *chosen;
}

template <typename Problem>
class AlgorithmTable {
 public:
  AlgorithmTable(const char* op, std::vector<Algorithm<Problem>> entries) : op_(op), entries_(std::move(entries)) {
    for (const auto& e : entries_) names_.push_back(e.name);
    register_algorithm_names(op_, &names_);
  }
  AlgorithmTable(const AlgorithmTable&) = delete;

  const Algorithm<Problem>& select(const Problem& p, const std::string& name = "auto") const {
    return select_algorithm(
        op_, entries_, name, [&](const Algorithm<Problem>& e) { return e.applicable(p); },
        [&](const Algorithm<Problem>& e) { return !e.preferred || e.preferred(p); },
        [](const Algorithm<Problem>& e) { return e.name; });
  }

  // The names of the entries that apply to p, in table order (what tests and benchmarks enumerate).
  std::vector<std::string> applicable(const Problem& p) const {
    std::vector<std::string> names;
    for (const auto& e : entries_)
      if (e.applicable(p)) names.push_back(e.name);
    return names;
  }

  size_t workspace_bytes(const Algorithm<Problem>& e, const Problem& p) const {
    return e.workspace_bytes ? e.workspace_bytes(p) : 0;
  }

  // Runs the selected entry with one Workspace of its size; returns it.
  const Algorithm<Problem>& run(const Problem& p, const std::string& name = "auto") const {
    const Algorithm<Problem>& e = select(p, name);
    Workspace ws(workspace_bytes(e, p));
    e.run(p, ws);
    return e;
  }

  const std::vector<Algorithm<Problem>>& entries() const { return entries_; }
  const char* op() const { return op_; }

 private:
  const char* op_;
  std::vector<Algorithm<Problem>> entries_;
  std::vector<std::string> names_;
};

}  // namespace nnkern
