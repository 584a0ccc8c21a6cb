// Cast and CastLike between every element type a plan holds: the numeric types, bool and float16 (convert.h:
// floats to integers truncate toward zero, NaN and out-of-range values as onnxruntime's x86 builds give them;
// integers to narrower integers keep the low bits; anything to bool is "not zero"; float16 rounds to nearest
// even). A cast to the input's own type is a view. `saturate` and `round_mode` concern float8 types only, which
// plans do not hold.
#include <string>

#include "ops/graph/ops/common.h"
#include "ops/graph/ops/elementwise.h"

namespace nnkern::graph {

namespace {

using CastTypes = TypeList<float, double, int8_t, uint8_t, int16_t, uint16_t, int32_t, uint32_t, int64_t, uint64_t,
                           bool, Half>;

// The ONNX name of an element type code (TensorProto.DataType), for the types plans do not hold too.
std::string onnx_type_name(int64_t code) {
  static const char* names[] = {"UNDEFINED", "FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32", "INT64",
                                "STRING", "BOOL", "FLOAT16", "DOUBLE", "UINT32", "UINT64", "COMPLEX64",
                                "COMPLEX128", "BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2",
                                "FLOAT8E5M2FNUZ", "UINT4", "INT4", "FLOAT4E2M1", "FLOAT8E8M0", "UINT2", "INT2"};
  if (code >= 0 && code < int64_t(sizeof(names) / sizeof(names[0]))) return names[code];
  return "type " + std::to_string(code);
}

bool plan_holds(int64_t code) {
  try {
    return code != 0 && (dtype_from_code(int(code)), true);
  } catch (const std::invalid_argument&) {
    return false;
  }
}

// The target of Cast: `to`, an element type code (opsets 1-5 give its name as a string).
DType cast_target(const NodeSpec& n) {
  if (!n.has("to")) n.invalid("needs the attribute 'to'");
  int64_t code = -1;
  if (n.attrs.at("to").kind == Attribute::Kind::s) {
    const std::string s = n.attr_string("to", "");
    for (int64_t c = 0; c < 27; ++c)
      if (onnx_type_name(c) == s) code = c;
    if (code < 0) n.invalid("'to' names no element type: \"" + s + "\"");
  } else {
    code = n.attr_int("to", 0);
  }
  if (!plan_holds(code)) n.unsupported("casting to " + onnx_type_name(code) + " is not supported");
  return DType(code);
}

std::vector<TensorDesc> check_cast(const NodeSpec& n, DType to) {
  require_types(n, {0}, CastTypes{});
  return one(to, n.in(0).shape);
}

std::vector<TensorDesc> infer_cast(const NodeSpec& n) { return check_cast(n, cast_target(n)); }

std::vector<TensorDesc> infer_cast_like(const NodeSpec& n) {
  require_types(n, {1}, CastTypes{});
  return check_cast(n, n.in(1).dtype);
}

std::unique_ptr<Step> make_cast(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers&) {
  const size_t count = n.in(0).elements();
  if (out[0].dtype == n.in(0).dtype) return view_step(n.in(0).bytes());
  return visit_dtype(n.in(0).dtype, CastTypes{}, [&](auto tf) {
    using From = typename decltype(tf)::type;
    return visit_dtype(out[0].dtype, CastTypes{}, [&](auto tt) {
      using To = typename decltype(tt)::type;
      return map_step<From, To>(count, [](From x) { return convert<To>(x); });
    });
  });
}

}  // namespace

void register_graph_ops_cast() {
  register_op("Cast", {infer_cast, make_cast});
  register_op("CastLike", {infer_cast_like, make_cast});
}

}  // namespace nnkern::graph
