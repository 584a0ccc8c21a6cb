// Bindings of the row-wise top-k.
#include <string>

#include "bindings/common.h"
#include "ops/topk/topk.h"
#include "core/kernel_family.h"
#include "kernels/f32_topk_list.h"

namespace nnkern::bindings {

void bind_f32_topk(py::module_& m) {
  // x: C-contiguous float32 (rows, n); values (rows, k) float32, indices (rows, k) int64, checked by Python.
  m.def("topk", [](const py::array& x, size_t k, py::array& values, py::array& indices) {
    const size_t rows = size_t(x.shape(0)), n = size_t(x.shape(1));
    const float* xp = cdata<float>(x);
    float* vp = mdata<float>(values);
    int64_t* ip = mdata<int64_t>(indices);
    py::gil_scoped_release release;
    f32_topk(rows, n, xp, n, k, vp, ip);
  });
  m.def(
      "topk_kernel_name",
      [](const std::string& isa_name) {
        const Isa isa = isa_arg(isa_name);
        if (!isa_supported(isa)) throw py::value_error("this CPU cannot run " + isa_name);
        const F32TopkKernel* k = f32_topk_family().at(isa);
        if (!k) throw py::value_error("no top-k kernel of its own for " + isa_name);
        return std::string(k->name);
      },
      "Test hook: the name of isa's top-k register kernel (ValueError if the CPU or the build lacks it).");
}

}  // namespace nnkern::bindings
