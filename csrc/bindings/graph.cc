// Graph plans (ops/graph): constants, shape inference, constant evaluation and plans for nnkern.onnx, which
// compiles the model and checks its inputs; this file converts arrays and attributes and releases the GIL.
#include "bindings/common.h"
#include "ops/graph/ops/elementwise.h"
#include "ops/graph/plan.h"

namespace nnkern::bindings {

namespace {

using graph::Attribute;
using graph::Constant;
using graph::DType;
using graph::TensorDesc;

// The NumPy dtype of a graph dtype and back, by type and by kind and size: never through str(dtype), which NumPy
// builds in Python (microseconds on every run of a small plan).
py::dtype numpy_dtype(DType t) {
  switch (t) {
    case DType::f32: return py::dtype::of<float>();
    case DType::f64: return py::dtype::of<double>();
    case DType::u8: return py::dtype::of<uint8_t>();
    case DType::i8: return py::dtype::of<int8_t>();
    case DType::u16: return py::dtype::of<uint16_t>();
    case DType::i16: return py::dtype::of<int16_t>();
    case DType::u32: return py::dtype::of<uint32_t>();
    case DType::i32: return py::dtype::of<int32_t>();
    case DType::u64: return py::dtype::of<uint64_t>();
    case DType::i64: return py::dtype::of<int64_t>();
    case DType::boolean: return py::dtype::of<bool>();
    default: return py::dtype(graph::dtype_name(t));  // float16: no C++ type
  }
}

DType dtype_of(const py::array& a) {
  const py::dtype dt = a.dtype();
  const ssize_t size = dt.itemsize();
  // NumPy's own types only (numbers below NPY_USERDEF): a registered type such as ml_dtypes' float8 may share a
  // kind and size with an IEEE one. '=' / '<': native little-endian, '|': single bytes.
  constexpr int kNpyUserDef = 256;
  if (dt.num() < kNpyUserDef && dt.byteorder() != '>') {
    switch (dt.kind()) {
      case 'f':
        if (size == 2 || size == 4 || size == 8) return size == 2 ? DType::f16 : size == 4 ? DType::f32 : DType::f64;
        break;
      case 'u':
        if (size == 1 || size == 2 || size == 4 || size == 8)
          return size == 1 ? DType::u8 : size == 2 ? DType::u16 : size == 4 ? DType::u32 : DType::u64;
        break;
      case 'i':
        if (size == 1 || size == 2 || size == 4 || size == 8)
          return size == 1 ? DType::i8 : size == 2 ? DType::i16 : size == 4 ? DType::i32 : DType::i64;
        break;
      case 'b':
        if (size == 1) return DType::boolean;
        break;
    }
  }
  throw py::type_error("arrays of dtype " + std::string(py::str(py::handle(dt))) + " cannot be graph tensors");
}

std::vector<int64_t> shape_of(const py::array& a) { return std::vector<int64_t>(a.shape(), a.shape() + a.ndim()); }

struct ConstantHandle {
  std::shared_ptr<const Constant> c;
};

ConstantHandle constant_from(const py::array& a) {
  const py::array contiguous = py::array::ensure(a, py::array::c_style);
  const TensorDesc d{dtype_of(contiguous), shape_of(contiguous)};
  return {graph::make_constant(d, contiguous.data())};
}

py::array numpy_of(const ConstantHandle& h) {
  // A read-only view of the constant's bytes, which the capsule keeps alive.
  auto* keep = new std::shared_ptr<const Constant>(h.c);
  py::capsule owner(keep, [](void* p) { delete static_cast<std::shared_ptr<const Constant>*>(p); });
  std::vector<ssize_t> shape(h.c->desc.shape.begin(), h.c->desc.shape.end());
  py::array a(numpy_dtype(h.c->desc.dtype), shape, h.c->data.get(), owner);
  py::detail::array_proxy(a.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return a;
}

py::tuple desc_tuple(const TensorDesc& d) { return py::make_tuple(int(d.dtype), d.shape); }

// Attributes as (kind, value) pairs: ("i", 3), ("f", 0.5), ("s", "NOTSET"), ("ints", [..]), ("floats", [..]),
// ("strings", [..]), ("tensor", GraphConstant).
std::map<std::string, Attribute> attrs_from(const py::dict& d) {
  std::map<std::string, Attribute> out;
  for (auto kv : d) {
    const std::string name = py::str(kv.first);
    const auto pair = kv.second.cast<py::tuple>();
    if (pair.size() != 2) throw py::value_error("attribute " + name + ": expected (kind, value)");
    const std::string kind = pair[0].cast<std::string>();
    Attribute a;
    if (kind == "i") { a.kind = Attribute::Kind::i; a.i = pair[1].cast<int64_t>(); }
    else if (kind == "f") { a.kind = Attribute::Kind::f; a.f = pair[1].cast<float>(); }
    else if (kind == "s") { a.kind = Attribute::Kind::s; a.s = pair[1].cast<std::string>(); }
    else if (kind == "ints") { a.kind = Attribute::Kind::ints; a.ints = pair[1].cast<std::vector<int64_t>>(); }
    else if (kind == "floats") { a.kind = Attribute::Kind::floats; a.floats = pair[1].cast<std::vector<float>>(); }
    else if (kind == "strings") { a.kind = Attribute::Kind::strings; a.strings = pair[1].cast<std::vector<std::string>>(); }
    else if (kind == "tensor") { a.kind = Attribute::Kind::tensor; a.tensor = pair[1].cast<const ConstantHandle&>().c; }
    else throw py::value_error("attribute " + name + ": unknown kind " + kind);
    out.emplace(name, std::move(a));
  }
  return out;
}

// Inputs of graph_infer: None (left out), a GraphConstant, or (dtype code, shape).
void inputs_from(const py::list& inputs, graph::NodeSpec& spec) {
  for (auto x : inputs) {
    if (x.is_none()) {
      spec.inputs.emplace_back();
      spec.constants.emplace_back();
    } else if (py::isinstance<ConstantHandle>(x)) {
      const auto& h = x.cast<const ConstantHandle&>();
      spec.inputs.push_back(h.c->desc);
      spec.constants.push_back(h.c);
    } else {
      const auto t = x.cast<py::tuple>();
      spec.inputs.push_back(TensorDesc{graph::dtype_from_code(t[0].cast<int>()), t[1].cast<std::vector<int64_t>>()});
      spec.constants.emplace_back();
    }
  }
}

void check_run_array(const py::array& a, const TensorDesc& d, const char* what, size_t i) {
  const bool ok = dtype_of(a) == d.dtype && shape_of(a) == d.shape &&
                  (a.flags() & py::array::c_style) && reinterpret_cast<uintptr_t>(a.data()) % graph::dtype_size(d.dtype) == 0;
  if (!ok)
    throw py::value_error(std::string("internal: plan ") + what + " " + std::to_string(i) + " must be a C-contiguous " +
                          d.str());
}

}  // namespace

void bind_graph(py::module_& m) {
  // GraphNeedsConstant(message, node, input index): a NotImplementedError the session resolves by planning for the
  // values of the graph inputs behind that input (python/nnkern/onnx/_session.py).
  static PyObject* needs_constant =  // never released: the translator may run until the interpreter's end
      PyErr_NewException("nnkern._C.GraphNeedsConstant", PyExc_NotImplementedError, nullptr);
  m.attr("GraphNeedsConstant") = py::handle(needs_constant);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const graph::NeedsConstant& e) {
      PyErr_SetObject(needs_constant, py::make_tuple(e.what(), e.node, e.input).ptr());
    } catch (const graph::Unsupported& e) {
      PyErr_SetString(PyExc_NotImplementedError, e.what());
    }
  });

  py::class_<ConstantHandle>(m, "GraphConstant", "A constant tensor of a graph plan (a copy of an array)")
      .def(py::init(&constant_from), py::arg("array"))
      .def("numpy", &numpy_of, "A read-only view of the constant's data")
      .def_property_readonly("dtype", [](const ConstantHandle& h) { return int(h.c->desc.dtype); })
      .def_property_readonly("shape", [](const ConstantHandle& h) { return h.c->desc.shape; })
      .def_property_readonly("nbytes", [](const ConstantHandle& h) { return h.c->desc.bytes(); });

  m.def("graph_ops", &graph::op_names, "The ops a graph plan can run");
  m.def("set_elementwise_parallel_min", &graph::set_elementwise_parallel_min, py::arg("elements"),
        "Measurements: the elements from which the graph ops' loops split across the pool (0: the default)");
  m.def("elementwise_parallel_min", &graph::elementwise_parallel_min);
  m.def(
      "graph_infer",
      [](const std::string& op, const std::string& name, const py::dict& attrs, const py::list& inputs,
         size_t num_outputs) {
        graph::NodeSpec spec{op, name, attrs_from(attrs)};
        inputs_from(inputs, spec);
        spec.num_outputs = num_outputs;
        py::list out;
        for (const TensorDesc& d : graph::infer_outputs(spec)) out.append(desc_tuple(d));
        return out;
      },
      py::arg("op"), py::arg("name"), py::arg("attrs"), py::arg("inputs"), py::arg("num_outputs"),
      "The (dtype code, shape) of a node's outputs; inputs: None, a GraphConstant or (dtype code, shape)");
  m.def(
      "graph_evaluate",
      [](const std::string& op, const std::string& name, const py::dict& attrs, const py::list& inputs,
         size_t num_outputs) {
        std::vector<std::shared_ptr<const Constant>> in;
        for (auto x : inputs) in.push_back(x.is_none() ? nullptr : x.cast<const ConstantHandle&>().c);
        const auto a = attrs_from(attrs);
        std::vector<std::shared_ptr<const Constant>> out;
        {
          py::gil_scoped_release release;
          out = graph::evaluate(op, name, a, in, num_outputs);
        }
        py::list result;
        for (auto& c : out) result.append(ConstantHandle{c});
        return result;
      },
      py::arg("op"), py::arg("name"), py::arg("attrs"), py::arg("inputs"), py::arg("num_outputs"),
      "A node run on constant inputs (constant folding): its outputs as GraphConstants");

  py::class_<graph::SharedLayers, std::shared_ptr<graph::SharedLayers>>(m, "GraphLayers",
                                                                        "Layers packed once and shared by the plans of a session")
      .def(py::init<>())
      .def_property_readonly("count", &graph::SharedLayers::size);

  py::class_<graph::Plan>(m, "GraphPlan", "A compiled graph for one set of input shapes (ops/graph/plan.h)")
      .def(py::init([](std::shared_ptr<graph::SharedLayers> layers, int num_threads, const std::string& max_isa) {
             return std::make_unique<graph::Plan>(std::move(layers), num_threads,
                                                  max_isa.empty() ? -1 : int(isa_arg(max_isa)));
           }),
           py::arg("layers"), py::arg("num_threads") = 0, py::arg("max_isa") = "",
           "num_threads: at most this many threads for its runs (0: the pool's); max_isa: a cap of its own")
      .def(
          "add_input",
          [](graph::Plan& p, int code, const std::vector<int64_t>& shape, size_t index, const std::string& name) {
            return p.add_input(TensorDesc{graph::dtype_from_code(code), shape}, index, name);
          },
          py::arg("dtype"), py::arg("shape"), py::arg("index"), py::arg("name"))
      .def(
          "add_constant", [](graph::Plan& p, const ConstantHandle& c, const std::string& name) { return p.add_constant(c.c, name); },
          py::arg("constant"), py::arg("name"))
      .def(
          "add_step",
          [](graph::Plan& p, const std::string& op, const std::string& name, const py::dict& attrs,
             const std::vector<int>& in, size_t num_outputs, const std::string& nodes,
             const std::vector<std::string>& out_names) {
            return p.add_step(op, name, attrs_from(attrs), in, num_outputs, nodes, out_names);
          },
          py::arg("op"), py::arg("name"), py::arg("attrs"), py::arg("inputs"), py::arg("num_outputs"), py::arg("nodes"),
          py::arg("output_names"))
      .def("mark_output", &graph::Plan::mark_output, py::arg("tensor"), py::arg("index"))
      .def("finalize", &graph::Plan::finalize, py::arg("join_in_place") = true,
           "join_in_place: Concat inputs written in place by their producers where they can")
      .def("desc", [](const graph::Plan& p, int t) { return desc_tuple(p.desc(t)); }, py::arg("tensor"))
      .def("shares_memory", &graph::Plan::shares_memory, py::arg("a"), py::arg("b"))
      .def_property_readonly("arena_bytes", &graph::Plan::arena_bytes)
      .def_property_readonly("unplanned_bytes", &graph::Plan::unplanned_bytes)
      .def(
          "steps",
          [](const graph::Plan& p) {
            py::list out;
            for (const auto& s : p.steps()) {
              py::dict d;
              d["op"] = s.op;
              d["name"] = s.name;
              d["nodes"] = s.nodes;
              d["detail"] = s.detail;
              d["inputs"] = s.in;
              d["outputs"] = s.out;
              out.append(d);
            }
            return out;
          },
          "Each step: op, name, the source nodes, the algorithm / kernel chosen, input and output tensor ids")
      .def(
          "run",
          [](const graph::Plan& p, const py::list& inputs, bool verbose, bool profile) {
            if (inputs.size() != p.num_inputs())
              throw py::value_error("the plan takes " + std::to_string(p.num_inputs()) + " inputs, got " +
                                    std::to_string(inputs.size()));
            std::vector<const void*> in;
            for (size_t i = 0; i < inputs.size(); ++i) {
              const auto a = inputs[i].cast<py::array>();
              check_run_array(a, p.desc(p.input_tensor(i)), "input", i);
              in.push_back(a.data());
            }
            py::list outputs;
            std::vector<void*> out;
            for (size_t j = 0; j < p.num_outputs(); ++j) {
              const TensorDesc& d = p.desc(p.output_tensor(j));
              py::array a(numpy_dtype(d.dtype), std::vector<ssize_t>(d.shape.begin(), d.shape.end()));
              out.push_back(a.mutable_data());
              outputs.append(a);
            }
            std::vector<graph::StepTime> times;
            {
              py::gil_scoped_release release;
              p.run(in, out, verbose, profile ? &times : nullptr);
            }
            if (!profile) return py::object(outputs);
            py::list t;
            for (const auto& st : times) t.append(py::make_tuple(st.step, st.seconds));
            return py::object(py::make_tuple(outputs, t));
          },
          py::arg("inputs"), py::arg("verbose") = false, py::arg("profile") = false,
          "Runs the plan on the graph's inputs (arrays of the planned dtypes and shapes, C-contiguous); returns the "
          "outputs, with per-step (step, seconds) if profile")
      .def_property_readonly("num_inputs", &graph::Plan::num_inputs)
      .def_property_readonly("num_outputs", &graph::Plan::num_outputs)
      .def("input_tensor", &graph::Plan::input_tensor, py::arg("index"))
      .def("output_tensor", &graph::Plan::output_tensor, py::arg("index"));
}

}  // namespace nnkern::bindings
