// What the graph op files share: a step from a lambda, and small shape helpers. Baseline header.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ops/graph/step.h"

namespace nnkern::graph {

// A step whose run is `fn(const StepData&)`.
template <typename Fn>
class FnStep final : public Step {
 public:
  FnStep(Fn fn, std::string detail, int in_place, bool view)
      : fn_(std::move(fn)), detail_(std::move(detail)), in_place_(in_place), view_(view) {}
  void run(const StepData& d) const override { fn_(d); }
  std::string detail() const override { return detail_; }
  int in_place_input(size_t out) const override { return out == 0 ? in_place_ : -1; }
  bool is_view() const override { return view_; }

 private:
  Fn fn_;
  std::string detail_;
  int in_place_;
  bool view_;
};

template <typename Fn>
std::unique_ptr<Step> fn_step(Fn fn, std::string detail = "") {
  return std::make_unique<FnStep<Fn>>(std::move(fn), std::move(detail), -1, false);
}
// An elementwise step: output 0 may take over input `in_place`'s memory.
template <typename Fn>
std::unique_ptr<Step> in_place_step(Fn fn, int in_place, std::string detail = "") {
  return std::make_unique<FnStep<Fn>>(std::move(fn), std::move(detail), in_place, false);
}
// A view: output 0 is input 0's bytes.
std::unique_ptr<Step> view_step(size_t bytes);

// A scalar 8-bit zero point (int8 where is_signed, else uint8) read at run time; 0 where the input is left out.
inline int32_t zero_point8(const StepData& d, size_t input, bool is_signed) {
  if (!d.in(input)) return 0;
  return is_signed ? int32_t(*d.in<int8_t>(input)) : int32_t(*d.in<uint8_t>(input));
}

inline std::vector<TensorDesc> one(DType t, std::vector<int64_t> shape) { return {TensorDesc{t, std::move(shape)}}; }

// The number of elements before / from an axis.
size_t elements_before(const std::vector<int64_t>& shape, size_t axis);
size_t elements_from(const std::vector<int64_t>& shape, size_t axis);

}  // namespace nnkern::graph
