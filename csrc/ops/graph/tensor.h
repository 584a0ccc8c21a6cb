// The tensors of a graph plan: an element type (ONNX's TensorProto codes, so the Python side passes them as they
// are) and a shape. Sizes derived from shapes are checked (core/checked.h). Baseline header.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace nnkern::graph {

enum class DType : int {
  undefined = 0,
  f32 = 1,
  u8 = 2,
  i8 = 3,
  u16 = 4,
  i16 = 5,
  i32 = 6,
  i64 = 7,
  boolean = 9,
  f16 = 10,
  f64 = 11,
  u32 = 12,
  u64 = 13,
};

size_t dtype_size(DType t);        // bytes per element; std::invalid_argument for an unknown code
const char* dtype_name(DType t);   // "float32", "uint8", ... ("undefined")
DType dtype_from_code(int code);   // std::invalid_argument naming the code if the plan cannot hold it

struct TensorDesc {
  DType dtype = DType::undefined;  // undefined: an optional input left out
  std::vector<int64_t> shape;

  bool present() const { return dtype != DType::undefined; }
  size_t rank() const { return shape.size(); }
  size_t elements() const;  // checked product of the dimensions (1 for a scalar)
  size_t bytes() const;     // checked elements() * dtype_size
  int64_t dim(int64_t axis) const;  // axis may be negative (from the end)
  std::string str() const;          // "float32[1x3x224x224]"
};

// An axis attribute normalized into [0, rank) (negative counts from the end); std::invalid_argument naming
// `what` if it is out of range.
size_t normalize_axis(int64_t axis, size_t rank, const char* what);

// Strides in elements of a C-contiguous tensor of this shape.
std::vector<size_t> contiguous_strides(const std::vector<int64_t>& shape);

// The shape numpy broadcasting gives two shapes; std::invalid_argument if they do not broadcast.
std::vector<int64_t> broadcast_shapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

}  // namespace nnkern::graph
