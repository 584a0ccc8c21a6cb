// Operators with several algorithms (convolution first, the GEMM's own paths too) keep a table of them,
// as oneDNN's implementation lists do. Entries are in the order "auto" tries them: auto takes the first
// entry that applies to the call and that auto prefers for it, so the table's order plus the `preferred`
// predicates are the documented rule. algorithm="name" selects one entry (std::invalid_argument, a
// ValueError in Python, if the name is unknown or the entry does not apply); tests enumerate the table
// (`nnkern._C.algorithms(op)`) and benchmarks report every entry. Scratch memory comes from one
// Workspace per call, sized by the entry. Baseline header.
#pragma once
#include <cstddef>
#include <stdexcept>
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

template <typename Problem>
class AlgorithmTable {
 public:
  AlgorithmTable(const char* op, std::vector<Algorithm<Problem>> entries) : op_(op), entries_(std::move(entries)) {
    for (const auto& e : entries_) names_.push_back(e.name);
    register_algorithm_names(op_, &names_);
  }
  AlgorithmTable(const AlgorithmTable&) = delete;

  const Algorithm<Problem>& select(const Problem& p, const std::string& name = "auto") const {
    if (name == "auto") {
      const Algorithm<Problem>* fallback = nullptr;
      for (const auto& e : entries_) {
        if (!e.applicable(p)) continue;
        if (!e.preferred || e.preferred(p)) return chosen(e);
        if (!fallback) fallback = &e;
      }
      if (fallback) return chosen(*fallback);
      throw std::invalid_argument(std::string(op_) + ": no algorithm applies to this call");
    }
    for (const auto& e : entries_) {
      if (name != e.name) continue;
      if (!e.applicable(p))
        throw std::invalid_argument(std::string(op_) + ": algorithm '" + name + "' does not apply to this call");
      return chosen(e);
    }
    throw std::invalid_argument(std::string(op_) + ": unknown algorithm '" + name + "' (" + choices() + ")");
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
  const Algorithm<Problem>& chosen(const Algorithm<Problem>& e) const {
    record_selection(op_, e.name);
    return e;
  }
  std::string choices() const {
    std::string s = "auto";
    for (const auto& n : names_) s += ", " + n;
    return s;
  }
  const char* op_;
  std::vector<Algorithm<Problem>> entries_;
  std::vector<std::string> names_;
};

}  // namespace nnkern
