// Bindings of the FP32 GEMM ops: sgemm, the packed Linear, and test hooks for the micro-kernels.
#include <cmath>
#include <vector>

#include "bindings/common.h"
#include "ops/f32_gemm.h"

namespace nnkern::bindings {
namespace {

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

// The packed weight, bias and activation of nnkern.Linear. Every size a call uses comes from here, and
// each call checks its arrays against it (the Python attributes are views of these, read-only).
class Linear {
 public:
  // weight (N, K) float32, bias (N,) float32 or None; both copied.
  Linear(const py::array& w, const py::object& bias, bool relu)
      : packed_(checked_in<float>(w, "weight", {kAnyDim, kAnyDim}), size_t(w.shape(0)), size_t(w.shape(1)),
                size_t(w.shape(1))),
        relu_(relu) {
    if (!bias.is_none()) {
      const float* b = checked_in<float>(bias.cast<py::array>(), "bias", {ssize_t(packed_.N())});
      bias_.assign(b, b + packed_.N());
      has_bias_ = true;
    }
  }
  // out (M, N) = x (M, K) W^T + bias, relu.
  void run(const py::array& x, py::array& out) const {
    const float* xp = checked_in<float>(x, "x", {kAnyDim, ssize_t(packed_.K())});
    float* op = checked_out<float>(out, "out", {x.shape(0), ssize_t(packed_.N())});
    F32Epilogue ep = epilogue(1.0f, 0.0f, py::none(), relu_);
    ep.bias = has_bias_ ? bias_.data() : nullptr;
    const size_t M = size_t(x.shape(0));
    py::gil_scoped_release release;
    packed_.run(M, xp, packed_.K(), op, packed_.N(), ep);
  }
  std::string kernel_name() const { return packed_.kernel_name(); }
  size_t in_features() const { return packed_.K(); }
  size_t out_features() const { return packed_.N(); }
  bool relu() const { return relu_; }
  py::object bias() const {  // a copy: writing to it cannot change the layer
    if (!has_bias_) return py::none();
    return py::array_t<float>(ssize_t(bias_.size()), bias_.data());
  }

 private:
  PackedF32Gemm packed_;
  std::vector<float> bias_;
  bool has_bias_ = false;
  bool relu_;
};

}  // namespace

void bind_f32_gemm(py::module_& m) {
  m.def("set_blocking_mode", [](const std::string& mode) {
    if (mode == "cache") set_blocking_mode(BlockingMode::cache);
    else if (mode == "fixed") set_blocking_mode(BlockingMode::fixed);
    else throw py::value_error("blocking mode must be 'cache' or 'fixed'");
  });
  m.def("get_blocking_mode", [] { return std::string(blocking_mode() == BlockingMode::cache ? "cache" : "fixed"); });
  m.def("gemm_blocking", [](size_t K) {
    GemmBlocking b = gemm_blocking(f32_gemm_kernel(), K);
    return py::make_tuple(b.kc, b.mc, b.nc);
  });
  m.def("sgemm", &sgemm_binding);
  m.def("f32_gemm_ukernel", &f32_gemm_ukernel);
  m.def("f32_gemm_tile", [](const std::string& n) {
    const F32GemmKernel* k = f32_gemm_kernel_for(isa_arg(n));
    if (!k) throw py::value_error("no f32_gemm kernel for " + n);
    return py::make_tuple(std::string(k->name), k->mr, k->nr);
  });

  py::class_<Linear>(m, "PackedLinear")
      .def(py::init<const py::array&, const py::object&, bool>())
      .def("run", &Linear::run)
      .def_property_readonly("kernel_name", &Linear::kernel_name)
      .def_property_readonly("in_features", &Linear::in_features)
      .def_property_readonly("out_features", &Linear::out_features)
      .def_property_readonly("relu", &Linear::relu)
      .def_property_readonly("bias", &Linear::bias);

}

}  // namespace nnkern::bindings
