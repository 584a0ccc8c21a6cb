// Bindings of the elementwise activations (sigmoid, tanh) and their test hooks.
#include <algorithm>
#include <string>

#include "bindings/common.h"
#include "ops/activation/activation.h"
#include "core/kernel_family.h"
#include "kernels/f32_activation_list.h"

namespace nnkern::bindings {

ActMethod act_method_arg(const std::string& m, const char* what) {
  if (m == "minimax") return ActMethod::minimax;
  if (m == "scalef") return ActMethod::scalef;
  if (m == "accurate") return ActMethod::accurate;
  throw py::value_error(std::string(what) + " must be 'minimax', 'scalef' or 'accurate', got '" + m + "'");
}

namespace {

ActMethod method_arg(const std::string& m) { return act_method_arg(m, "method"); }

bool tanh_arg(const std::string& fn) {
  if (fn == "sigmoid") return false;
  if (fn == "tanh") return true;
  throw py::value_error("function must be 'sigmoid' or 'tanh'");
}

const F32ActivationKernels& kernels_of(const std::string& isa_name) {
  const Isa isa = isa_arg(isa_name);
  if (!isa_supported(isa)) throw py::value_error("this CPU cannot run " + isa_name);
  const F32ActivationKernels* k = f32_activation_family().at(isa);
  if (!k) throw py::value_error("no activation kernels for " + isa_name);
  return *k;
}

// Computes function(x) into out and returns true when both are float32 arrays of the same shape, both
// C-contiguous and aligned, out is writeable and out is x or shares no byte with it; otherwise returns false without
// touching anything, and the Python layer takes its general path (argument errors, copies). These checks
// cost nanoseconds here, several times less than their Python and numpy equivalents.
bool apply(const std::string& fn, const std::string& method, const py::array& x, py::array& out) {
  const bool tanh = tanh_arg(fn);
  const ActMethod m = method_arg(method);
  if (!py::isinstance<py::array_t<float>>(x) || !py::isinstance<py::array_t<float>>(out)) return false;
  if (x.ndim() != out.ndim() || !std::equal(x.shape(), x.shape() + x.ndim(), out.shape())) return false;
  constexpr int kContiguous = py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_;
  if (!(x.flags() & kContiguous) || !(out.flags() & kContiguous) || !out.writeable()) return false;
  // Misaligned data (numpy allows any byte offset) takes the general path, which copies it.
  if (reinterpret_cast<uintptr_t>(x.data()) % sizeof(float) || reinterpret_cast<uintptr_t>(out.data()) % sizeof(float))
    return false;
  const size_t n = size_t(x.size());
  const float* xp = cdata<float>(x);
  float* yp = mdata<float>(out);
  if (xp != yp && n && yp < xp + n && xp < yp + n) return false;  // partial overlap
  py::gil_scoped_release release;
  if (tanh) f32_tanh(m, n, xp, yp);
  else f32_sigmoid(m, n, xp, yp);
  return true;
}

}  // namespace

void bind_f32_activation(py::module_& m) {
  m.def("activation", &apply, py::arg("function"), py::arg("method"), py::arg("x"), py::arg("out"),
        "Computes function(x) into out if both are float32 of one shape, C-contiguous, out writeable and out "
        "is x or disjoint from it; returns whether it did.");
  m.def(
      "activation_kernel_name",
      [](const std::string& isa, const std::string& fn, const std::string& method) {
        const F32ActivationKernels& k = kernels_of(isa);
        return std::string(tanh_arg(fn) ? k.tanh_names[int(method_arg(method))] : k.sigmoid_names[int(method_arg(method))]);
      },
      "Test hook: the name of isa's kernel (ValueError if the CPU or the build lacks it).");
  m.def(
      "activation_ukernel",
      [](const std::string& isa, const std::string& fn, const std::string& method, const py::array& x, size_t x_offset,
         py::array& y, size_t y_offset, size_t n, bool stream, size_t y_shift_bytes) {
        const F32ActivationKernels& k = kernels_of(isa);
        const int mi = int(method_arg(method));
        const F32UnaryUkernel f = tanh_arg(fn) ? (stream ? k.tanh_stream[mi] : k.tanh[mi])
                                               : (stream ? k.sigmoid_stream[mi] : k.sigmoid[mi]);
        if (!f) throw py::value_error(isa + " has no streaming-store activation kernels");
        if (y_shift_bytes && size_t(y.nbytes()) < (y_offset + n + 1) * sizeof(float))
          throw py::value_error("y too small for the shifted output");
        // y_shift_bytes (0..3) moves y off float alignment: the kernels must accept any address.
        float* yp = reinterpret_cast<float*>(reinterpret_cast<char*>(mdata<float>(y) + y_offset) + y_shift_bytes);
        f(n, cdata<float>(x) + x_offset, yp);
      },
      py::arg("isa"), py::arg("function"), py::arg("method"), py::arg("x"), py::arg("x_offset"), py::arg("y"),
      py::arg("y_offset"), py::arg("n"), py::arg("stream") = false, py::arg("y_shift_bytes") = 0,
      "Test hook: run one ISA's kernel (stream: its streaming-store variant, y disjoint from x) on n elements "
      "at the given offsets (buffers may be guarded); y_shift_bytes shifts y by that many bytes.");
  m.def(
      "exp_nonpos_ukernel",
      [](const std::string& isa, const py::array_t<float, py::array::c_style | py::array::forcecast>& x) {
        py::array_t<float> y(x.size());
        kernels_of(isa).exp_nonpos(size_t(x.size()), x.data(), y.mutable_data());
        return y;
      },
      py::arg("isa"), py::arg("x"),
      "Test hook: isa's exp_nonpos kernel (Softmax's exps, kernels/f32_exp.h) on x's elements, flattened.");
  m.def(
      "activation_sweep",
      [](const std::string& isa, const std::string& fn, const std::string& method, float hi, size_t stride) {
        const F32ActivationKernels& k = kernels_of(isa);
        const bool tanh = tanh_arg(fn);
        const ActMethod me = method_arg(method);
        ActivationSweep s;
        {
          py::gil_scoped_release release;
          s = sweep_activation(k, tanh, me, hi, stride);
        }
        py::dict d;
        d["max_abs_err"] = s.max_abs_err;
        d["worst_x"] = s.worst_x;
        d["worst_y"] = s.worst_y;
        d["count"] = s.count;
        d["out_of_range"] = s.out_of_range;
        return d;
      },
      py::arg("isa"), py::arg("function"), py::arg("method"), py::arg("hi") = 20.0f, py::arg("stride") = 1,
      "Test hook: max abs error of isa's kernel over every stride-th float32 bit pattern in [-hi, hi].");
}

}  // namespace nnkern::bindings
