// Bindings of the integer GEMM ops: qgemm / qgemm16, the packed QLinear, and test hooks for the
// micro-kernels. The Python layer (nnkern/qgemm.py) has checked dtypes, shapes, ranges and the K bound.
#include <algorithm>
#include <vector>

#include "bindings/common.h"
#include "ops/qgemm.h"

namespace nnkern {
double i8_peak_ops(Isa isa, double seconds);  // ops/peak_i8.cc
}

namespace nnkern::bindings {
namespace {

// c (M x N int32) = sum_k (a - a_zero)(b - b_zero); a, b and c are C-contiguous.
void qgemm_binding(const py::array& a, int a_type, int a_zero, const py::array& b, int b_type, const py::object& b_zero,
                   int b_zero_scalar, py::array& c) {
  QgemmArgs g;
  g.M = size_t(a.shape(0));
  g.K = size_t(a.shape(1));
  g.N = size_t(b.shape(1));
  g.a_type = QType(a_type);
  g.a = a.data();
  g.lda = g.K;
  g.a_zero = a_zero;
  g.b_type = QType(b_type);
  g.b = b.data();
  g.ldb = g.N;
  g.b_zero = cdata_or_null<int32_t>(b_zero);
  g.b_zero_scalar = b_zero_scalar;
  g.c = mdata<int32_t>(c);
  g.ldc = g.N;
  py::gil_scoped_release release;
  qgemm(g);
}

const char* kind_name(QKind kind) {
  switch (kind) {
    case QKind::u8s8: return "u8s8";
    case QKind::s8s8: return "s8s8";
    default: return "s16";
  }
}

// The kernel of `kind` ("u8s8", "s8s8" or "s16") at one level, or ValueError.
const QGemmKernel* tile_kernel(const std::string& isa_name_, const std::string& kind) {
  const QGemmKernels* ks = qgemm_kernels_for(isa_arg(isa_name_));
  const QGemmKernel* k = !ks ? nullptr : kind == "s16" ? ks->s16 : ks->i8;
  if (k && kind != kind_name(k->kind)) k = nullptr;
  if (!k) throw py::value_error("no " + kind + "_gemm kernel for " + isa_name_);
  return k;
}

// Runs one ISA's micro-kernel on one tile, for the tests (arrays may live in guarded buffers).
void qgemm_ukernel(const std::string& isa_name_, const std::string& kind, size_t m, size_t n, size_t k,
                   const py::array& a, size_t a_offset_bytes, const py::array& b, std::vector<size_t> b_offsets_bytes,
                   py::array& c, size_t c_offset_bytes, size_t ldc, int out, const py::object& col_comp,
                   const py::object& b_zero, const py::object& row_sum, const py::object& scale, const py::object& bias,
                   bool relu, float lo, float hi, const py::object& c_in, int x_zero, const py::object& w_zero) {
  Isa isa = isa_arg(isa_name_);
  if (!isa_supported(isa)) throw py::value_error("this CPU cannot run " + isa_name_);
  const QGemmKernel* kern = tile_kernel(isa_name_, kind);
  if (m > size_t(kern->mr) || n > size_t(kern->nr) || b_offsets_bytes.size() != n)
    throw py::value_error("tile larger than the kernel");
  std::vector<const void*> bptr;
  for (size_t off : b_offsets_bytes) bptr.push_back(static_cast<const uint8_t*>(b.data()) + off);
  QEpilogue ep;
  ep.out = QOut(out);
  ep.col_comp = cdata_or_null<int32_t>(col_comp);
  ep.b_zero = cdata_or_null<int32_t>(b_zero);
  ep.row_sum = cdata_or_null<int32_t>(row_sum);
  ep.scale = cdata_or_null<float>(scale);
  ep.bias = cdata_or_null<float>(bias);
  ep.relu = relu;
  ep.lo = lo;
  ep.hi = hi;
  ep.c_in = cdata_or_null<int32_t>(c_in);  // laid out like c: c_in[j * ldc + i]
  ep.ld_in = ldc;
  if (kern->zero_points_in_kernel) {
    ep.x_zero = x_zero;
    ep.w_zero = cdata_or_null<int32_t>(w_zero);
  } else if (x_zero != 0 || !w_zero.is_none()) {
    throw py::value_error(std::string(kern->name) + " does not subtract zero points itself");
  }
  kern->run(m, n, k, static_cast<const uint8_t*>(a.data()) + a_offset_bytes, bptr.data(),
            static_cast<uint8_t*>(c.mutable_data()) + c_offset_bytes, ldc, &ep);
}

// The packed weights and the requantization of nnkern.QLinear. Every size and per-column array a call
// uses is held (copied, padded) here, and each call checks its arrays against it.
class QLinearPacked {
 public:
  // w: K x N int8 (the transpose of torch's (out, in) weight); factor/offset: float32 (N,) or None (int32
  // output); out_kind: QOut; lo/hi: the clamp of uint8/int8 output (relu folded in by the caller).
  QLinearPacked(const py::array& w, int out_kind, const py::object& factor, const py::object& offset, bool relu,
                float lo, float hi, int x_zero)
      : packed_(checked_in<int8_t>(w, "weight", {kAnyDim, kAnyDim}), size_t(w.shape(0)), size_t(w.shape(1)),
                size_t(w.shape(1))),
        out_(QOut(out_kind)), relu_(relu), lo_(lo), hi_(hi), x_zero_(x_zero) {
    if (out_kind < 0 || out_kind > 3) throw py::value_error("internal: bad output kind");
    const size_t N = packed_.N(), padded = qgemm_padded_n(N);
    if (factor.is_none() != offset.is_none() || factor.is_none() != (out_ == QOut::i32))
      throw py::value_error("internal: factor and offset go with (only) the requantized and float32 outputs");
    if (!factor.is_none()) {
      const float* f = checked_in<float>(factor.cast<py::array>(), "factor", {ssize_t(N)});
      const float* o = checked_in<float>(offset.cast<py::array>(), "offset", {ssize_t(N)});
      factor_.resize(padded);
      offset_.resize(padded);
      std::fill(std::copy(f, f + N, factor_.data()), factor_.data() + padded, 0.0f);
      std::fill(std::copy(o, o + N, offset_.data()), offset_.data() + padded, 0.0f);
    }
  }
  // out (M, N) = output(x (M, K) uint8 or int8, minus the input zero point, times W).
  void run(const py::array& x, py::array& out) const { run_with(x, out, x_zero_, nullptr); }
  // Dynamic quantization (float32 output only): this call's input zero point, and factor[n] * input_scale
  // (one float32 product, as onnxruntime's Mul of the two scales) as the per-column factor.
  void run_dynamic(const py::array& x, py::array& out, int x_zero, float input_scale) const {
    if (out_ != QOut::f32 || !factor_.size()) throw py::value_error("internal: run_dynamic needs float32 output");
    if (x_zero < 0 || x_zero > 255) throw py::value_error("internal: dynamic zero point outside uint8");
    AlignedBuffer<float> factor(factor_.size());
    for (size_t n = 0; n < factor_.size(); ++n) factor.data()[n] = factor_.data()[n] * input_scale;
    run_with(x, out, x_zero, factor.data());
  }

 private:
  void run_with(const py::array& x, py::array& out, int x_zero, const float* factor) const {
    const bool u8 = py::isinstance<py::array_t<uint8_t>>(x);
    const void* xp = u8 ? static_cast<const void*>(checked_in<uint8_t>(x, "x", {kAnyDim, ssize_t(packed_.K())}))
                        : checked_in<int8_t>(x, "x", {kAnyDim, ssize_t(packed_.K())});
    const std::initializer_list<ssize_t> dims = {x.shape(0), ssize_t(packed_.N())};
    QOutput o;
    o.out = out_;
    switch (out_) {
      case QOut::i32: o.c = checked_out<int32_t>(out, "out", dims); break;
      case QOut::f32: o.c = checked_out<float>(out, "out", dims); break;
      case QOut::u8: o.c = checked_out<uint8_t>(out, "out", dims); break;
      case QOut::s8: o.c = checked_out<int8_t>(out, "out", dims); break;
    }
    o.ldc = packed_.N();
    o.scale = factor ? factor : factor_.size() ? factor_.data() : nullptr;
    o.bias = offset_.size() ? offset_.data() : nullptr;
    o.relu = relu_;
    o.lo = lo_;
    o.hi = hi_;
    const size_t M = size_t(x.shape(0));
    py::gil_scoped_release release;
    packed_.run(M, u8 ? QType::u8 : QType::s8, xp, packed_.K(), x_zero, o);
  }

 public:
  std::string kernel_name() const { return packed_.kernel_name(); }
  size_t in_features() const { return packed_.K(); }
  size_t out_features() const { return packed_.N(); }

 private:
  PackedQGemm packed_;
  QOut out_;
  bool relu_;
  float lo_, hi_;
  int x_zero_;
  AlignedBuffer<float> factor_, offset_;  // padded to qgemm_padded_n(N): the kernels read whole vectors
};

}  // namespace

void bind_qgemm(py::module_& m) {
  m.def("qgemm", &qgemm_binding);
  m.def("qgemm_ukernel", &qgemm_ukernel, py::arg("isa"), py::arg("kind"), py::arg("m"), py::arg("n"), py::arg("k"),
        py::arg("a"), py::arg("a_offset_bytes"), py::arg("b"), py::arg("b_offsets_bytes"), py::arg("c"),
        py::arg("c_offset_bytes"), py::arg("ldc"), py::arg("out"), py::arg("col_comp"), py::arg("b_zero"),
        py::arg("row_sum"), py::arg("scale"), py::arg("bias"), py::arg("relu"), py::arg("lo"), py::arg("hi"),
        py::arg("c_in") = py::none(), py::arg("x_zero") = 0, py::arg("w_zero") = py::none());
  m.def("qgemm_tile", [](const std::string& isa, const std::string& kind) {
    const QGemmKernel* k = tile_kernel(isa, kind);
    return py::make_tuple(std::string(k->name), k->mr, k->nr, k->kgroup);
  });
  m.def("qgemm_kernel_traits", [](const std::string& isa, const std::string& kind) {
    const QGemmKernel* k = tile_kernel(isa, kind);
    return py::make_tuple(std::max(k->kstep, k->kgroup), k->zero_points_in_kernel);
  });
  m.def("i8_peak_ops", [](const std::string& n, double seconds) { return i8_peak_ops(isa_arg(n), seconds); });
  m.def("set_qgemm_kc", [](size_t kc) { set_qgemm_kc(kc); });
  m.def("qgemm_padded_n", [](size_t n) { return qgemm_padded_n(n); });
  py::class_<QLinearPacked>(m, "PackedQLinear")
      .def(py::init<const py::array&, int, const py::object&, const py::object&, bool, float, float, int>())
      .def("run", &QLinearPacked::run)
      .def("run_dynamic", &QLinearPacked::run_dynamic)
      .def_property_readonly("kernel_name", &QLinearPacked::kernel_name)
      .def_property_readonly("in_features", &QLinearPacked::in_features)
      .def_property_readonly("out_features", &QLinearPacked::out_features);
}

}  // namespace nnkern::bindings
