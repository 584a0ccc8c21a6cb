#include "ops/graph/tensor.h"

#include <algorithm>
#include <stdexcept>

#include "core/checked.h"

namespace nnkern::graph {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: case DType::i32: case DType::u32: return 4;
    case DType::u8: case DType::i8: case DType::boolean: return 1;
    case DType::u16: case DType::i16: case DType::f16: return 2;
    case DType::i64: case DType::f64: case DType::u64: return 8;
    case DType::undefined: return 0;
  }
  throw std::invalid_argument("unknown tensor element type " + std::to_string(int(t)));
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "float32";
    case DType::u8: return "uint8";
    case DType::i8: return "int8";
    case DType::u16: return "uint16";
    case DType::i16: return "int16";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
    case DType::boolean: return "bool";
    case DType::f16: return "float16";
    case DType::f64: return "float64";
    case DType::u32: return "uint32";
    case DType::u64: return "uint64";
    case DType::undefined: return "undefined";
  }
  return "unknown";
}

DType dtype_from_code(int code) {
  switch (code) {
    case 0: case 1: case 2: case 3: case 4: case 5: case 6: case 7: case 9: case 10: case 11: case 12: case 13:
      return DType(code);
    default:
      throw std::invalid_argument("tensor element type " + std::to_string(code) +
                                  " (ONNX TensorProto code) is not one a plan holds");
  }
}

size_t TensorDesc::elements() const {
  size_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw std::invalid_argument("negative dimension in " + str());
    n = checked_mul(n, size_t(d));
  }
  return n;
}

size_t TensorDesc::bytes() const { return checked_mul(elements(), dtype_size(dtype)); }

int64_t TensorDesc::dim(int64_t axis) const { return shape[normalize_axis(axis, shape.size(), "axis")]; }

std::string TensorDesc::str() const {
  std::string s = std::string(dtype_name(dtype)) + "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "x" : "") + std::to_string(shape[i]);
  return s + "]";
}

size_t normalize_axis(int64_t axis, size_t rank, const char* what) {
  const int64_t r = int64_t(rank);
  if (axis < -r || axis >= r)
    throw std::invalid_argument(std::string(what) + " " + std::to_string(axis) + " is out of range for rank " +
                                std::to_string(rank));
  return size_t(axis < 0 ? axis + r : axis);
}

std::vector<size_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<size_t> s(shape.size());
  size_t n = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = n;
    n = checked_mul(n, size_t(shape[i]));
  }
  return s;
}

std::vector<int64_t> broadcast_shapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  const size_t r = std::max(a.size(), b.size());
  std::vector<int64_t> out(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1)
      throw std::invalid_argument("shapes do not broadcast: dimension " + std::to_string(da) + " against " +
                                  std::to_string(db));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace nnkern::graph
