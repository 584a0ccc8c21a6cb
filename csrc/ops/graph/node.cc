#include "ops/graph/node.h"

#include <cstring>

namespace nnkern::graph {

namespace {

template <typename T, typename Out>
void convert(const void* p, size_t n, std::vector<Out>& out) {
  const T* v = static_cast<const T*>(p);
  for (size_t i = 0; i < n; ++i) out.push_back(Out(v[i]));
}

template <typename Out>
std::vector<Out> values_of(const Constant& c, bool reals) {
  std::vector<Out> out;
  const size_t n = c.desc.elements();
  out.reserve(n);
  const void* p = c.data.get();
  switch (c.desc.dtype) {
    case DType::i64: convert<int64_t>(p, n, out); break;
    case DType::i32: convert<int32_t>(p, n, out); break;
    case DType::i16: convert<int16_t>(p, n, out); break;
    case DType::i8: convert<int8_t>(p, n, out); break;
    case DType::u8: convert<uint8_t>(p, n, out); break;
    case DType::u16: convert<uint16_t>(p, n, out); break;
    case DType::u32: convert<uint32_t>(p, n, out); break;
    case DType::u64: convert<uint64_t>(p, n, out); break;
    case DType::boolean: convert<uint8_t>(p, n, out); break;
    case DType::f32:
      if (!reals) throw std::invalid_argument("expected integer values, got a float32 tensor");
      convert<float>(p, n, out);
      break;
    case DType::f64:
      if (!reals) throw std::invalid_argument("expected integer values, got a float64 tensor");
      convert<double>(p, n, out);
      break;
    default:
      throw std::invalid_argument(std::string("cannot read the values of a ") + dtype_name(c.desc.dtype) + " tensor");
  }
  return out;
}

}  // namespace

std::vector<int64_t> Constant::ints() const { return values_of<int64_t>(*this, false); }
std::vector<double> Constant::reals() const { return values_of<double>(*this, true); }

const TensorDesc& NodeSpec::in(size_t i) const {
  if (i >= inputs.size()) invalid("needs input " + std::to_string(i) + ", has " + std::to_string(inputs.size()));
  return inputs[i];
}

const Constant& NodeSpec::need_constant(size_t i, const char* what) const {
  if (!has_input(i)) invalid(std::string("needs its ") + what + " input");
  const Constant* c = constant(i);
  if (!c)
    throw NeedsConstant(where() + ": its " + what +
                            " input must be computable when the plan is built (from constants, the input shapes and "
                            "the values of small integer inputs): a value known only while running is not supported",
                        name, i);
  return *c;
}

namespace {
const Attribute* find(const NodeSpec& n, const std::string& a, Attribute::Kind kind, const char* kind_name) {
  auto it = n.attrs.find(a);
  if (it == n.attrs.end()) return nullptr;
  if (it->second.kind != kind) n.invalid("attribute '" + a + "' must be " + kind_name);
  return &it->second;
}
}  // namespace

int64_t NodeSpec::attr_int(const std::string& a, int64_t dflt) const {
  const Attribute* p = find(*this, a, Attribute::Kind::i, "an integer");
  return p ? p->i : dflt;
}
float NodeSpec::attr_float(const std::string& a, float dflt) const {
  auto it = attrs.find(a);
  if (it != attrs.end() && it->second.kind == Attribute::Kind::i) return float(it->second.i);  // a float given as 1
  const Attribute* p = find(*this, a, Attribute::Kind::f, "a float");
  return p ? p->f : dflt;
}
std::string NodeSpec::attr_string(const std::string& a, const std::string& dflt) const {
  const Attribute* p = find(*this, a, Attribute::Kind::s, "a string");
  return p ? p->s : dflt;
}
std::vector<int64_t> NodeSpec::attr_ints(const std::string& a, const std::vector<int64_t>& dflt) const {
  const Attribute* p = find(*this, a, Attribute::Kind::ints, "a list of integers");
  return p ? p->ints : dflt;
}
std::vector<float> NodeSpec::attr_floats(const std::string& a, const std::vector<float>& dflt) const {
  const Attribute* p = find(*this, a, Attribute::Kind::floats, "a list of floats");
  return p ? p->floats : dflt;
}

std::string NodeSpec::where() const { return op + " node '" + name + "'"; }
void NodeSpec::unsupported(const std::string& what) const { throw Unsupported(where() + ": " + what); }
void NodeSpec::invalid(const std::string& what) const { throw std::invalid_argument(where() + ": " + what); }

void NodeSpec::require_types(std::initializer_list<size_t> idx, std::initializer_list<DType> types) const {
  for (size_t i : idx) {
    if (!has_input(i)) continue;
    bool ok = false;
    for (DType t : types) ok = ok || inputs[i].dtype == t;
    if (ok) continue;
    std::string names;
    for (DType t : types) names += (names.empty() ? "" : ", ") + std::string(dtype_name(t));
    unsupported("input " + std::to_string(i) + " is " + dtype_name(inputs[i].dtype) + "; supported: " + names);
  }
}

}  // namespace nnkern::graph
