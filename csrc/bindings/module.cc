// The one pybind11 module. It converts arrays, releases the GIL and calls an op: no logic here.
// The Python layer (python/nnkern) has already checked dtypes, shapes, layouts and aliasing.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "core/dispatch.h"
#include "core/isa.h"
#include "core/threadpool.h"
#include "ops/f32_gemm.h"
#include "ops/peak.h"
#include "testing/guard.h"

namespace py = pybind11;
using namespace nnkern;

namespace {

Isa isa_arg(const std::string& name) {
  Isa isa;
  if (!isa_from_name(name, &isa)) throw py::value_error("unknown ISA level '" + name + "'");
  return isa;
}

template <typename T>
const T* cdata(const py::array& a) {
  if (!py::isinstance<py::array_t<T>>(a)) throw py::type_error("internal: unexpected dtype");
  return static_cast<const T*>(a.data());
}

template <typename T>
T* mdata(py::array& a) {
  if (!py::isinstance<py::array_t<T>>(a)) throw py::type_error("internal: unexpected dtype");
  return static_cast<T*>(a.mutable_data());
}

F32Epilogue epilogue(float alpha, float beta, const py::object& bias, bool relu) {
  F32Epilogue ep;
  ep.alpha = alpha;
  ep.beta = beta;
  if (!bias.is_none()) ep.bias = cdata<float>(bias.cast<py::array>());
  if (relu) {
    ep.clamp = true;
    ep.clamp_min = 0.0f;
    ep.clamp_max = INFINITY;
  }
  return ep;
}

py::dict cpu_info() {
  const CpuFeatures& f = cpu_features();
  py::dict d, feats, caches, kernels;
  d["arch"] = f.arch;
  d["vendor"] = f.vendor;
  d["model"] = f.model;
  for (auto [k, v] : std::initializer_list<std::pair<const char*, bool>>{
           {"sse4_2", f.sse42}, {"avx", f.avx}, {"avx2", f.avx2}, {"fma", f.fma}, {"f16c", f.f16c},
           {"avx512f", f.avx512f}, {"avx512bw", f.avx512bw}, {"avx512dq", f.avx512dq}, {"avx512vl", f.avx512vl},
           {"avx512_vnni", f.avx512vnni}, {"avx_vnni", f.avxvnni}, {"os_ymm", f.os_ymm}, {"os_zmm", f.os_zmm},
           {"asimd", f.asimd}, {"asimddp", f.asimddp}, {"i8mm", f.i8mm}})
    feats[k] = v;
  d["features"] = feats;
  caches["l1d"] = f.l1d;
  caches["l2"] = f.l2;
  caches["l3"] = f.l3;
  d["caches"] = caches;
  py::list levels, supported;
  for (Isa i : isa_levels()) {
    levels.append(isa_name(i));
    if (isa_supported(i)) supported.append(isa_name(i));
  }
  d["isa_levels"] = levels;
  d["supported_isas"] = supported;
  d["max_isa"] = isa_name(max_isa());
  py::list active;
  for (Isa i : active_isas()) active.append(isa_name(i));
  d["active_isas"] = active;
  for (const auto& [op, name] : chosen_kernels()) kernels[op.c_str()] = name;
  d["kernels"] = kernels;
  d["num_threads"] = get_num_threads();
  return d;
}

// A 2-D float32 array as the kernels read it: row-major (ld = row stride) or column-major (the
// transpose of a row-major array). Other layouts (negative or non-unit strides, misaligned data)
// become a C-contiguous copy, kept alive in `keep`.
struct MatrixView {
  const float* data;
  size_t ld;
  bool transposed;
  py::object keep;  // null unless the view is a copy
};

MatrixView matrix_view(const py::array& a) {
  const ssize_t rows = a.shape(0), cols = a.shape(1), s0 = a.strides(0), s1 = a.strides(1);
  constexpr ssize_t f = sizeof(float);
  const bool aligned = reinterpret_cast<uintptr_t>(a.data()) % f == 0;
  if (aligned && (cols <= 1 || s1 == f) && s0 >= 0 && s0 % f == 0) {
    const ssize_t ld = rows > 1 ? s0 / f : cols;
    if (ld >= cols) return {cdata<float>(a), size_t(std::max<ssize_t>(ld, 1)), false, py::object()};
  }
  if (aligned && (rows <= 1 || s0 == f) && s1 >= 0 && s1 % f == 0) {
    const ssize_t ld = cols > 1 ? s1 / f : rows;
    if (ld >= rows) return {cdata<float>(a), size_t(std::max<ssize_t>(ld, 1)), true, py::object()};
  }
  // numpy.array(copy=True) always allocates fresh, aligned, C-contiguous memory.
  py::array copy = py::module_::import("numpy").attr("array")(a, py::arg("order") = "C", py::arg("copy") = true);
  return {cdata<float>(copy), size_t(std::max<ssize_t>(cols, 1)), false, copy};
}

// c (M x N) = epilogue(op(a) op(b)); shapes, dtypes and aliasing were checked by the Python layer.
void sgemm_binding(const py::array& a, bool trans_a, const py::array& b, bool trans_b, py::array& c, float alpha,
                   float beta, const py::object& bias, bool relu) {
  MatrixView va = matrix_view(a), vb = matrix_view(b);
  SgemmArgs g;
  g.M = size_t(c.shape(0));
  g.N = size_t(c.shape(1));
  g.K = size_t(trans_a ? a.shape(0) : a.shape(1));
  g.a = va.data; g.lda = va.ld; g.trans_a = trans_a != va.transposed;
  g.b = vb.data; g.ldb = vb.ld; g.trans_b = trans_b != vb.transposed;
  g.ep = epilogue(alpha, beta, bias, relu);
  MatrixView vc = matrix_view(c);
  const bool in_place = !vc.keep && !vc.transposed;
  py::array tmp;
  if (in_place) {
    g.c = mdata<float>(c);
    g.ldc = vc.ld;
  } else {  // compute into a row-major temporary (holding C's values when beta reads them), copy back
    tmp = beta != 0.0f ? py::array(py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(c).attr("copy")())
                       : py::array(py::array_t<float>({c.shape(0), c.shape(1)}));
    g.c = mdata<float>(tmp);
    g.ldc = size_t(std::max<ssize_t>(c.shape(1), 1));
  }
  {
    py::gil_scoped_release release;
    nnkern::sgemm(g);
  }
  if (!in_place) c.attr("__setitem__")(py::ellipsis(), tmp);
}

// Runs one ISA's micro-kernel on one tile, for the tests (a/b/c may live in guarded buffers).
void f32_gemm_ukernel(const std::string& isa_name_, size_t m, size_t n, size_t k, const py::array& a, size_t a_offset,
                      size_t a_stride, py::object a_copy, const py::array& b, std::vector<size_t> b_offsets,
                      size_t b_stride, py::array& c, size_t c_offset, size_t ldc, float alpha, float beta,
                      const py::object& bias, bool relu) {
  Isa isa = isa_arg(isa_name_);
  if (!isa_supported(isa)) throw py::value_error("this CPU cannot run " + isa_name_);
  const F32GemmKernel* kernel = f32_gemm_kernel_for(isa);
  if (!kernel) throw py::value_error("no f32_gemm kernel for " + isa_name_);
  if (m > size_t(kernel->mr) || n > size_t(kernel->nr) || b_offsets.size() != n)
    throw py::value_error("tile larger than the kernel");
  std::vector<const float*> bptr;
  for (size_t off : b_offsets) bptr.push_back(cdata<float>(b) + off);
  py::array copy_arr = a_copy.is_none() ? py::array() : a_copy.cast<py::array>();
  float* copy = a_copy.is_none() ? nullptr : mdata<float>(copy_arr);
  F32Epilogue ep = epilogue(alpha, beta, bias, relu);
  kernel->run(m, n, k, cdata<float>(a) + a_offset, a_stride, copy, bptr.data(), b_stride, mdata<float>(c) + c_offset,
              ldc, &ep);
}

class Linear {
 public:
  Linear(const py::array& w, size_t N, size_t K) : packed_(cdata<float>(w), N, K, K) {}
  void run(const py::array& x, size_t M, py::array& out, const py::object& bias, bool relu) const {
    F32Epilogue ep = epilogue(1.0f, 0.0f, bias, relu);
    const float* xp = cdata<float>(x);
    float* op = mdata<float>(out);
    py::gil_scoped_release release;
    packed_.run(M, xp, packed_.K(), op, packed_.N(), ep);
  }
  std::string kernel_name() const { return packed_.kernel_name(); }

 private:
  PackedF32Gemm packed_;
};

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "nnkern native core (internal: use the nnkern package)";
  m.def("cpu_info", &cpu_info);
  m.def("isa_levels", [] {
    std::vector<std::string> v;
    for (Isa i : isa_levels()) v.push_back(isa_name(i));
    return v;
  });
  m.def("isa_supported", [](const std::string& n) { return isa_supported(isa_arg(n)); });
  m.def("set_max_isa", [](const std::string& n) { set_max_isa(isa_arg(n)); });
  m.def("get_max_isa", [] { return std::string(isa_name(max_isa())); });
  m.def("set_num_threads", [](int n) {
    if (n < 1) throw py::value_error("num_threads must be >= 1");
    py::gil_scoped_release release;
    set_num_threads(n);
  });
  m.def("get_num_threads", &get_num_threads);
  m.def("set_blocking_mode", [](const std::string& mode) {
    if (mode == "cache") set_blocking_mode(BlockingMode::cache);
    else if (mode == "fixed") set_blocking_mode(BlockingMode::fixed);
    else throw py::value_error("blocking mode must be 'cache' or 'fixed'");
  });
  m.def("get_blocking_mode", [] { return std::string(blocking_mode() == BlockingMode::cache ? "cache" : "fixed"); });
  m.def("gemm_blocking", [](size_t K) {
    GemmBlocking b = gemm_blocking(*dispatch().f32_gemm, K);
    return py::make_tuple(b.kc, b.mc, b.nc);
  });
  m.def("f32_peak_flops", [](const std::string& n, double seconds) {
    Isa isa = isa_arg(n);
    py::gil_scoped_release release;
    return f32_peak_flops(isa, seconds);
  });
  m.def("sgemm", &sgemm_binding);
  m.def("f32_gemm_ukernel", &f32_gemm_ukernel);
  m.def("f32_gemm_tile", [](const std::string& n) {
    const F32GemmKernel* k = f32_gemm_kernel_for(isa_arg(n));
    if (!k) throw py::value_error("no f32_gemm kernel for " + n);
    return py::make_tuple(std::string(k->name), k->mr, k->nr);
  });

  py::class_<Linear>(m, "PackedLinear")
      .def(py::init<const py::array&, size_t, size_t>())
      .def("run", &Linear::run)
      .def_property_readonly("kernel_name", &Linear::kernel_name);

  py::class_<GuardedBuffer>(m, "GuardedBuffer", py::buffer_protocol())
      .def(py::init<size_t>())
      .def_buffer([](GuardedBuffer& g) {
        return py::buffer_info(g.data(), 1, py::format_descriptor<uint8_t>::format(), 1, {g.size()}, {1});
      });
}
