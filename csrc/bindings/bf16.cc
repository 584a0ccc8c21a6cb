// Bindings of the bf16 ops: array conversions, the bf16 GEMM (one-shot and packed Linear) and the micro-kernel hook.
#include <cmath>
#include <vector>

#include "bindings/common.h"
#include "core/kernel_family.h"
#include "kernels/bf16.h"
#include "ops/bf16/bf16.h"

namespace nnkern::bindings {
namespace {

// A 2-D float32 or uint16 (bf16 bits) array as a strided operand, transposed if asked. The Python layer passes
// arrays with non-negative strides that are whole elements; anything else is refused here.
Bf16Operand operand(const py::array& a, bool trans, const char* what) {
  if (a.ndim() != 2) throw py::value_error(std::string(what) + ": internal: not 2-D");
  Bf16Operand op;
  op.is_bf16 = py::isinstance<py::array_t<uint16_t>>(a);
  if (!op.is_bf16 && !py::isinstance<py::array_t<float>>(a)) throw py::type_error("internal: unexpected dtype");
  const ssize_t item = a.itemsize();
  for (int d = 0; d < 2; ++d)
    if (a.strides(d) < 0 || a.strides(d) % item)
      throw py::value_error(std::string(what) + ": internal: negative or partial-element stride");
  if (reinterpret_cast<uintptr_t>(a.data()) % size_t(item)) throw py::value_error("internal: misaligned array");
  op.data = a.data();
  op.rs = size_t(a.strides(0) / item);
  op.cs = size_t(a.strides(1) / item);
  if (trans) std::swap(op.rs, op.cs);
  return op;
}

// c (M x N, C-contiguous float32) = epilogue(op(a) op(b)) with bf16 products; shapes checked by the Python layer.
void bf16_gemm_binding(const py::array& a, bool trans_a, const py::array& b, bool trans_b, py::array& c, float alpha,
                       float beta, const py::object& bias, bool relu) {
  const Bf16Operand va = operand(a, trans_a, "a"), vb = operand(b, trans_b, "b");
  const size_t K = size_t(trans_a ? a.shape(0) : a.shape(1));
  if (size_t(trans_b ? b.shape(1) : b.shape(0)) != K) throw py::value_error("internal: inner dimensions differ");
  float* cp = checked_out<float>(c, "c", {trans_a ? a.shape(1) : a.shape(0), trans_b ? b.shape(0) : b.shape(1)});
  const F32Epilogue ep = relu_epilogue(alpha, beta, cdata_or_null<float>(bias), relu);
  const size_t M = size_t(c.shape(0)), N = size_t(c.shape(1));
  py::gil_scoped_release release;
  bf16_gemm(M, N, K, va, vb, cp, N, ep);
}

// nnkern.Linear's bf16 packing: the weight (N, K) float32 (rounded) or bf16 bits, its own copy of the bias.
class Bf16Linear {
 public:
  Bf16Linear(const py::array& w, const py::object& bias, bool relu)
      : packed_(operand(w, false, "weight"), size_t(w.shape(0)), size_t(w.shape(1))), relu_(relu) {
    if (!bias.is_none()) {
      const float* bp = checked_in<float>(bias.cast<py::array>(), "bias", {ssize_t(packed_.N())});
      bias_.assign(bp, bp + packed_.N());
    }
  }
  // out (M, N) float32 C-contiguous = x (M, K) W^T + bias, relu; x float32 or bf16 bits, any 2-D strides.
  void run(const py::array& x, py::array& out) const {
    const Bf16Operand vx = operand(x, false, "x");
    if (size_t(x.shape(1)) != packed_.K()) throw py::value_error("x: internal: wrong width");
    float* op = checked_out<float>(out, "out", {x.shape(0), ssize_t(packed_.N())});
    const F32Epilogue ep = relu_epilogue(1.0f, 0.0f, bias_.empty() ? nullptr : bias_.data(), relu_);
    const size_t M = size_t(x.shape(0));
    py::gil_scoped_release release;
    packed_.run(M, vx, op, packed_.N(), ep);
  }
  // The fast path (bindings/common.h), as PackedLinear's: x a native float32 ndarray (..., K), into out (as
  // fast_output says); None for anything else (bf16 arrays included: the Python layer takes those).
  py::object run_fast(const py::handle& x_in, const py::handle& out_in) const {
    const F32Epilogue ep = relu_epilogue(1.0f, 0.0f, bias_.empty() ? nullptr : bias_.data(), relu_);
    return float_layer_fast(x_in, out_in, packed_.K(), packed_.N(), [&](size_t M, const float* x, float* out) {
      packed_.run(M, Bf16Operand::matrix(x, packed_.K()), out, packed_.N(), ep);
    });
  }
  std::string kernel_name() const { return packed_.kernel_name(); }

 private:
  PackedBf16Gemm packed_;
  std::vector<float> bias_;
  bool relu_;
};

// The fast path of matmul at "medium" (bindings/common.h): a (M, K) @ b (K, N), both native float32 2-D ndarrays
// with non-negative, whole-element strides, into out (as fast_output says); None for anything else.
py::object bf16_matmul_fast(const py::handle& a_in, const py::handle& b_in, const py::handle& c_in) {
  const NdProxy *pa = plain_ndarray(a_in), *pb = plain_ndarray(b_in);
  if (!pa || !pb || pa->nd != 2 || pb->nd != 2 || !is_native_float32(pa) || !is_native_float32(pb)) return py::none();
  const size_t M = size_t(pa->dimensions[0]), K = size_t(pa->dimensions[1]), N = size_t(pb->dimensions[1]);
  if (size_t(pb->dimensions[0]) != K) return py::none();
  Bf16Operand op[2];
  const NdProxy* xs[2] = {pa, pb};
  for (int i = 0; i < 2; ++i) {
    for (int d = 0; d < 2; ++d)
      if (xs[i]->strides[d] < 0 || xs[i]->strides[d] % 4) return py::none();
    if (reinterpret_cast<uintptr_t>(xs[i]->data) % 4) return py::none();
    op[i].data = xs[i]->data;
    op[i].rs = size_t(xs[i]->strides[0] / 4);
    op[i].cs = size_t(xs[i]->strides[1] / 4);
  }
  const std::optional<py::array> out = fast_output<float>(c_in, {ssize_t(M), ssize_t(N)}, {a_in, b_in});
  if (!out) return py::none();
  py::array c = *out;
  if (M == 0 || N == 0) return std::move(c);
  float* cp = static_cast<float*>(c.mutable_data());
  without_gil_if_worth(M, N, K, [&] { bf16_gemm(M, N, K, op[0], op[1], cp, N, F32Epilogue()); });
  return std::move(c);
}

const Bf16GemmKernel& runnable_kernel(const std::string& which) {
  const KernelList<Bf16GemmKernel>& list = bf16_gemm_family().list();
  for (size_t i = 0; i < list.kernels.size(); ++i) {
    if (which != list.info[i].name) continue;
    if (!isa_supported(list.info[i].level)) throw py::value_error("this CPU cannot run " + which);
    return *list.kernels[i];
  }
  throw py::value_error("no bf16_gemm kernel named " + which);
}

// One micro-kernel call on one tile, for the tests: a is a packed panel (uint16), b holds n rows of 2 * kq bf16
// values (uint16, row j at b_offsets[j]), c the float32 output at c_offset with leading dimension ldc.
void bf16_gemm_ukernel(const std::string& which, size_t m, size_t n, size_t kq, const py::array& a, const py::array& b,
                       const std::vector<size_t>& b_offsets, py::array& c, size_t c_offset, size_t ldc, float alpha,
                       float beta, const py::object& bias, bool relu) {
  const Bf16GemmKernel& k = runnable_kernel(which);
  if (m > size_t(k.mr) || n > size_t(k.nr) || b_offsets.size() != n) throw py::value_error("tile larger than the kernel");
  const size_t g = size_t(k.kgroup);
  if (size_t(a.size()) < (2 * kq + g - 1) / g * g * size_t(k.mr)) throw py::value_error("a smaller than a packed panel");
  std::vector<const void*> bp;
  std::vector<std::vector<float>> widened;  // a b_f32 kernel's rows: the bits' float32 values
  widened.reserve(b_offsets.size());
  for (size_t off : b_offsets) {
    if (off + 2 * kq > size_t(b.size())) throw py::value_error("b row out of range");
    const uint16_t* row = cdata<uint16_t>(b) + off;
    if (k.b_f32) {
      widened.emplace_back(2 * kq);
      for (size_t i = 0; i < 2 * kq; ++i) widened.back()[i] = bf16_to_f32(row[i]);
      bp.push_back(widened.back().data());
    } else {
      bp.push_back(row);
    }
  }
  if (n && c_offset + (n - 1) * ldc + m > size_t(c.size())) throw py::value_error("c out of range");
  const F32Epilogue ep = relu_epilogue(alpha, beta, cdata_or_null<float>(bias), relu);
  k.run(m, n, kq, cdata<uint16_t>(a), bp.data(), mdata<float>(c) + c_offset, ldc, &ep);
  if (k.finish) k.finish();
}

}  // namespace

void bind_bf16(py::module_& m) {
  m.def("to_bf16", [](const py::array& x, py::array& out) {
    const float* xp = cdata<float>(x);
    uint16_t* op = mdata<uint16_t>(out);
    if (x.size() != out.size()) throw py::value_error("internal: sizes differ");
    py::gil_scoped_release release;
    f32_to_bf16_array(xp, op, size_t(out.size()));
  }, py::arg("x"), py::arg("out"), "float32 -> bf16 bits (C-contiguous arrays of one size), round to nearest even");
  m.def("from_bf16", [](const py::array& x, py::array& out) {
    const uint16_t* xp = cdata<uint16_t>(x);
    float* op = mdata<float>(out);
    if (x.size() != out.size()) throw py::value_error("internal: sizes differ");
    py::gil_scoped_release release;
    bf16_to_f32_array(xp, op, size_t(out.size()));
  }, py::arg("x"), py::arg("out"), "bf16 bits -> float32 (C-contiguous arrays of one size), exact");
  m.def("bf16_gemm", &bf16_gemm_binding, py::arg("a"), py::arg("trans_a"), py::arg("b"), py::arg("trans_b"),
        py::arg("c"), py::arg("alpha") = 1.0f, py::arg("beta") = 0.0f, py::arg("bias") = py::none(),
        py::arg("relu") = false);
  m.def("bf16_matmul_fast", &bf16_matmul_fast, py::arg("a"), py::arg("b"), py::arg("c") = py::none());
  m.def("bf16_gemm_ukernel", &bf16_gemm_ukernel, py::arg("kernel"), py::arg("m"), py::arg("n"), py::arg("kq"),
        py::arg("a"), py::arg("b"), py::arg("b_offsets"), py::arg("c"), py::arg("c_offset"), py::arg("ldc"),
        py::arg("alpha") = 1.0f, py::arg("beta") = 0.0f, py::arg("bias") = py::none(), py::arg("relu") = false);
  py::class_<Bf16Linear>(m, "PackedLinearBf16")
      .def(py::init<const py::array&, const py::object&, bool>())
      .def("run", &Bf16Linear::run)
      .def("run_fast", &Bf16Linear::run_fast, py::arg("x"), py::arg("out") = py::none())
      .def_property_readonly("kernel_name", &Bf16Linear::kernel_name);
}

}  // namespace nnkern::bindings
