// Test hooks of the skinny-GEMM kernels (kernels/f32_gemv.h): one ISA's kernel called directly, so the
// tests can place its operands at guard pages. The public entry points stay nnkern.sgemm / Linear.
#include <cmath>
#include <utility>

#include "bindings/common.h"
#include "ops/gemm/gemv.h"
#include "core/kernel_family.h"
#include "kernels/f32_gemv_list.h"

namespace nnkern::bindings {
namespace {

const F32GemvKernel& gemv_kernel(const std::string& name) {
  Isa isa = isa_arg(name);
  if (!isa_supported(isa)) throw py::value_error("this CPU cannot run " + name);
  const F32GemvKernel* k = f32_gemv_family().at(isa);
  if (!k) throw py::value_error("no f32_gemv kernel for " + name);
  return *k;
}

}  // namespace

void bind_f32_gemv(py::module_& m) {
  m.def("f32_gemv_info", [](const std::string& n) {
    const F32GemvKernel* k = f32_gemv_family().at(isa_arg(n));
    if (!k) throw py::value_error("no f32_gemv kernel for " + n);
    return py::make_tuple(std::string(k->name), k->dot_mr, k->dot_nr);
  });
  m.def("f32_gemv_dot_auto_n", [](const std::string& n) {
    const F32GemvKernel* k = f32_gemv_family().at(isa_arg(n));
    if (!k) throw py::value_error("no f32_gemv kernel for " + n);
    return dot_threshold(*k);
  }, py::arg("isa"), "Up to how many outputs sgemm's auto takes the dot path on that level's kernel.");
  // acc[acc_off + j] += sum_p x[x_off + p * incx] * b[b_off + p * ldb + j]
  m.def("f32_gemv_rows", [](const std::string& isa, size_t n, size_t k, const py::array& x, size_t x_off, size_t incx,
                            const py::array& b, size_t b_off, size_t ldb, py::array& acc, size_t acc_off) {
    gemv_kernel(isa).rows(n, k, cdata<float>(x) + x_off, incx, cdata<float>(b) + b_off, ldb, mdata<float>(acc) + acc_off);
  });
  // acc[acc_off + i * ldacc + j] += sum_p x[x_off + i * x_row + p * incx] * b[b_off + p * ldb + j], i < mm
  m.def("f32_gemv_rows_m", [](const std::string& isa, size_t mm, size_t n, size_t k, const py::array& x, size_t x_off,
                              size_t x_row, size_t incx, const py::array& b, size_t b_off, size_t ldb, py::array& acc,
                              size_t acc_off, size_t ldacc) {
    const F32GemvKernel& g = gemv_kernel(isa);
    if (!g.rows_m) throw py::value_error(std::string(g.name) + " has no rows_m kernel");
    if (mm > size_t(g.rows_mr)) throw py::value_error("more rows than the kernel takes");
    g.rows_m(mm, n, k, cdata<float>(x) + x_off, x_row, incx, cdata<float>(b) + b_off, ldb, mdata<float>(acc) + acc_off,
             ldacc);
  });
  // acc[acc_off + q * pw + j] += sum_p x[x_off + p] * b[b_off + q * panel_stride + p * pw + j], q < np: the
  // kernel's rows_panels, or the driver's rows per panel where it has none (the bool says which ran)
  m.def("f32_gemv_rows_panels", [](const std::string& isa, size_t np, size_t pw, size_t k, const py::array& x,
                                   size_t x_off, const py::array& b, size_t b_off, size_t panel_stride, py::array& acc,
                                   size_t acc_off) {
    const F32GemvKernel& g = gemv_kernel(isa);
    rows_panels(g, np, pw, k, cdata<float>(x) + x_off, cdata<float>(b) + b_off, panel_stride,
                mdata<float>(acc) + acc_off);
    return g.rows_panels != nullptr;
  });
  // (the most rows rows_m takes at once, the rows up to which auto runs it whatever B's size); (0, 0) without one.
  m.def("f32_gemv_rows_m_info", [](const std::string& isa) {
    const F32GemvKernel& g = gemv_kernel(isa);
    return g.rows_m ? std::make_pair(g.rows_mr, g.rows_m_auto) : std::make_pair(0, 0);
  });
  // c[c_off + j] = epilogue(acc[acc_off + j])
  m.def("f32_gemv_store", [](const std::string& isa, size_t n, const py::array& acc, size_t acc_off, py::array& c,
                             size_t c_off, float alpha, float beta, const py::object& bias, bool relu) {
    F32Epilogue ep;
    ep.alpha = alpha;
    ep.beta = beta;
    py::array bias_arr = bias.is_none() ? py::array() : bias.cast<py::array>();
    if (!bias.is_none()) ep.bias = cdata<float>(bias_arr);
    if (relu) { ep.clamp = true; ep.clamp_min = 0.0f; ep.clamp_max = INFINITY; }
    gemv_kernel(isa).store(n, cdata<float>(acc) + acc_off, mdata<float>(c) + c_off, &ep);
  });
  // c[c_off + i * ldc + j] = epilogue(sum_p a[a_off + i * lda + p] * bt[bt_off + j * ldbt + p])
  m.def("f32_gemv_dot", [](const std::string& isa, size_t mm, size_t n, size_t k, const py::array& a, size_t a_off,
                           size_t lda, const py::array& bt, size_t bt_off, size_t ldbt, py::array& c, size_t c_off,
                           size_t ldc, float alpha, float beta, const py::object& bias, bool relu) {
    const F32GemvKernel& g = gemv_kernel(isa);
    if (mm > size_t(g.dot_mr) || n > size_t(g.dot_nr)) throw py::value_error("tile larger than the kernel");
    F32Epilogue ep;
    ep.alpha = alpha;
    ep.beta = beta;
    py::array bias_arr = bias.is_none() ? py::array() : bias.cast<py::array>();
    if (!bias.is_none()) ep.bias = cdata<float>(bias_arr);
    if (relu) { ep.clamp = true; ep.clamp_min = 0.0f; ep.clamp_max = INFINITY; }
    g.dot(mm, n, k, cdata<float>(a) + a_off, lda, cdata<float>(bt) + bt_off, ldbt, mdata<float>(c) + c_off, ldc, &ep);
  });
}

}  // namespace nnkern::bindings
