// Bindings of the FP32 GEMM ops: sgemm, the packed Linear, and test hooks for the micro-kernels.
#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "bindings/common.h"
#include "core/checked.h"
#include "ops/gemm/gemm.h"
#include "core/kernel_family.h"
#include "kernels/f32_gemm_list.h"

namespace nnkern::bindings {
namespace {

F32Epilogue epilogue(float alpha, float beta, const py::object& bias, bool relu) {
  return relu_epilogue(alpha, beta, cdata_or_null<float>(bias), relu);
}

// c (M x N) = epilogue(op(a) op(b)); shapes, dtypes and aliasing were checked by the Python layer.
void sgemm_binding(const py::array& a, bool trans_a, const py::array& b, bool trans_b, py::array& c, float alpha,
                   float beta, const py::object& bias, bool relu, const std::string& algorithm) {
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
    nnkern::sgemm(g, algorithm);
  }
  if (!in_place) c.attr("__setitem__")(py::ellipsis(), tmp);
}

// The fast path (bindings/common.h) of sgemm and matmul: op(a) @ op(b) into c, or into a new array if c is
// None; a and b native float32 2-D ndarrays with matching inner dimensions (any strides: matrix_view
// copies what it cannot view), c as fast_output says.
py::object sgemm_fast(const py::handle& a_in, const py::handle& b_in, bool trans_a, bool trans_b,
                      const py::handle& c_in) {
  const NdProxy *pa = plain_ndarray(a_in), *pb = plain_ndarray(b_in);
  if (!pa || !pb || pa->nd != 2 || pb->nd != 2 || !is_native_float32(pa) || !is_native_float32(pb)) return py::none();
  SgemmArgs g;
  g.M = size_t(pa->dimensions[trans_a ? 1 : 0]);
  g.K = size_t(pa->dimensions[trans_a ? 0 : 1]);
  g.N = size_t(pb->dimensions[trans_b ? 0 : 1]);
  if (size_t(pb->dimensions[trans_b ? 1 : 0]) != g.K) return py::none();
  const std::optional<py::array> out = fast_output<float>(c_in, {ssize_t(g.M), ssize_t(g.N)}, {a_in, b_in});
  if (!out) return py::none();
  py::array c = *out;
  if (g.M == 0 || g.N == 0) return std::move(c);
  const MatrixView va = matrix_view(py::reinterpret_borrow<py::array>(a_in));
  const MatrixView vb = matrix_view(py::reinterpret_borrow<py::array>(b_in));
  g.a = va.data; g.lda = va.ld; g.trans_a = trans_a != va.transposed;
  g.b = vb.data; g.ldb = vb.ld; g.trans_b = trans_b != vb.transposed;
  g.c = static_cast<float*>(c.mutable_data());
  g.ldc = g.N;
  without_gil_if_worth(g.M, g.N, g.K, [&] { nnkern::sgemm(g); });
  return std::move(c);
}


// The test hooks' epilogue extensions: c_rows (element offsets into c, one per column j < n, or None)
// and the tile hook, which records each tile it is called with.
struct TileRecorder {
  std::vector<std::tuple<size_t, size_t, size_t, size_t, std::vector<float>>> tiles;
  static void hook(void* ctx, const F32Tile& t) {
    std::vector<float> v(t.m * t.n);
    for (size_t j = 0; j < t.n; ++j)
      for (size_t i = 0; i < t.m; ++i) v[j * t.m + i] = t.values[j * t.ld + i];
    static_cast<TileRecorder*>(ctx)->tiles.emplace_back(t.tile_i, t.tile_j, t.m, t.n, std::move(v));
  }
  py::object result(bool wanted) const {
    if (!wanted) return py::none();
    py::list out;
    for (const auto& [ti, tj, m, n, v] : tiles) {
      py::array_t<float> values({ssize_t(n), ssize_t(m)});  // values[j, i] = C(i, j)
      std::copy(v.begin(), v.end(), values.mutable_data());
      out.append(py::make_tuple(ti, tj, values));
    }
    return out;
  }
};

void extend_epilogue(F32Epilogue& ep, float* c, const py::object& c_rows, std::vector<float*>& rows, size_t n,
                     bool hook, TileRecorder& rec, size_t tile_i, size_t tile_j, const py::object& residual,
                     size_t r_offset, size_t ldr) {
  if (!residual.is_none()) {  // R(i, j) = residual[r_offset + j * ldr + i]
    ep.residual = cdata<float>(residual.cast<py::array>()) + r_offset;
    ep.ldr = ldr;
  }
  if (!c_rows.is_none()) {
    for (size_t off : c_rows.cast<std::vector<size_t>>()) rows.push_back(c + off);
    if (rows.size() != n) throw py::value_error("c_rows needs one offset per column");
    ep.c_rows = rows.data();
  }
  if (hook) {
    ep.tile_hook = &TileRecorder::hook;
    ep.tile_ctx = &rec;
  }
  ep.tile_i = tile_i;
  ep.tile_j = tile_j;
}

// Runs one micro-kernel on one tile, for the tests (a/b/c may live in guarded buffers). Returns the
// tiles the hook saw ([(tile_i, tile_j, values[n, m])]) if hook, else None.
py::object f32_gemm_ukernel(const std::string& which, size_t m, size_t n, size_t k, const py::array& a, size_t a_offset,
                            size_t a_stride, py::object a_copy, const py::array& b, std::vector<size_t> b_offsets,
                            size_t b_stride, py::array& c, size_t c_offset, size_t ldc, float alpha, float beta,
                            const py::object& bias, bool relu, const py::object& c_rows, bool hook, size_t tile_i,
                            size_t tile_j, const py::object& residual, size_t r_offset, size_t ldr, size_t panels,
                            size_t a_panel_stride) {
  const F32GemmKernel* kernel = &runnable_f32_gemm_kernel(which);
  const size_t mr = size_t(kernel->mr);
  if (panels > 0) {
    if (!kernel->run_panels || hook || !a_copy.is_none() || m != panels * mr || a_stride != mr)
      throw py::value_error("the whole-panel form: a kernel that has one, m = panels * MR, packed panels "
                            "(a_stride = MR), no a_copy, no hook");
    // The packed panels the kernel reads: panel q at a_offset + q * a_panel_stride, MR * k floats each.
    const size_t panel = checked_mul(mr, k), size = size_t(a.size());
    const size_t avail = a_offset <= size ? size - a_offset : 0;
    if (a_panel_stride < panel) throw py::value_error("a_panel_stride is less than one packed panel");
    if (avail < panel || (panels > 1 && (avail - panel) / std::max<size_t>(a_panel_stride, 1) < panels - 1))
      throw py::value_error("a holds fewer floats than the packed panels the kernel reads");
  } else if (m > mr) {
    throw py::value_error("tile larger than the kernel");
  }
  if (n > size_t(kernel->nr) || b_offsets.size() != n) throw py::value_error("tile larger than the kernel");
  std::vector<const float*> bptr;
  for (size_t off : b_offsets) bptr.push_back(cdata<float>(b) + off);
  py::array copy_arr = a_copy.is_none() ? py::array() : a_copy.cast<py::array>();
  float* copy = a_copy.is_none() ? nullptr : mdata<float>(copy_arr);
  F32Epilogue ep = epilogue(alpha, beta, bias, relu);
  std::vector<float*> rows;
  TileRecorder rec;
  extend_epilogue(ep, mdata<float>(c), c_rows, rows, n, hook, rec, tile_i, tile_j, residual, r_offset, ldr);
  if (panels > 0)
    kernel->run_panels(panels, n, k, cdata<float>(a) + a_offset, a_panel_stride, bptr.data(), b_stride,
                       mdata<float>(c) + c_offset, ldc, &ep);
  else
    kernel->run(m, n, k, cdata<float>(a) + a_offset, a_stride, copy, bptr.data(), b_stride, mdata<float>(c) + c_offset,
                ldc, &ep);
  return rec.result(hook);
}

// The indirect form on one tile: b_offsets holds ks * NR element offsets into x, tap-major (entry
// t * NR + j; entries j >= n are not read, pass anything), -1 for the zero row (zero + zero_offset).
// b_offset_bytes is the kernel's offset, added to every pointer but the zero row's.
py::object f32_igemm_ukernel(const std::string& which, size_t m, size_t n, size_t k, size_t ks, const py::array& a,
                             size_t a_offset, const py::array& x, std::vector<long long> b_offsets, const py::array& zero,
                             size_t zero_offset, size_t b_offset_bytes, py::array& c, size_t c_offset, size_t ldc,
                             float alpha, float beta, const py::object& bias, bool relu, const py::object& c_rows,
                             bool hook, size_t tile_i, size_t tile_j, const py::object& residual, size_t r_offset,
                             size_t ldr) {
  const F32GemmKernel* kernel = &runnable_f32_gemm_kernel(which);
  const size_t nr = size_t(kernel->nr);
  if (m > size_t(kernel->mr) || n > nr || b_offsets.size() != ks * nr)
    throw py::value_error("tile larger than the kernel, or not ks * NR pointers");
  const float* zp = cdata<float>(zero) + zero_offset;
  std::vector<const float*> bptr;
  for (long long off : b_offsets) bptr.push_back(off < 0 ? zp : cdata<float>(x) + off);
  F32Epilogue ep = epilogue(alpha, beta, bias, relu);
  std::vector<float*> rows;
  TileRecorder rec;
  extend_epilogue(ep, mdata<float>(c), c_rows, rows, n, hook, rec, tile_i, tile_j, residual, r_offset, ldr);
  kernel->igemm(m, n, k, ks, cdata<float>(a) + a_offset, bptr.data(), zp, b_offset_bytes, mdata<float>(c) + c_offset,
                ldc, &ep);
  return rec.result(hook);
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
  // The fast path (bindings/common.h): x a native float32 ndarray (..., K), into out (as fast_output says);
  // None for anything else.
  py::object run_fast(const py::handle& x_in, const py::handle& out_in) const {
    F32Epilogue ep = epilogue(1.0f, 0.0f, py::none(), relu_);
    ep.bias = has_bias_ ? bias_.data() : nullptr;
    return float_layer_fast(x_in, out_in, packed_.K(), packed_.N(), [&](size_t M, const float* x, float* out) {
      packed_.run(M, x, packed_.K(), out, packed_.N(), ep);
    });
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

// The kernel named `which` (a kernel name of the f32_gemm list, or an ISA level: that level's kernel),
// refusing one this CPU cannot run.
const F32GemmKernel& runnable_f32_gemm_kernel(const std::string& which) {
  const KernelList<F32GemmKernel>& list = f32_gemm_family().list();
  for (size_t i = 0; i < list.kernels.size(); ++i) {
    if (which != list.info[i].name) continue;
    if (!isa_supported(list.info[i].level)) throw py::value_error("this CPU cannot run " + which);
    return *list.kernels[i];
  }
  Isa isa = isa_arg(which);
  if (!isa_supported(isa)) throw py::value_error("this CPU cannot run " + which);
  const F32GemmKernel* kernel = f32_gemm_family().at(isa);
  if (!kernel) throw py::value_error("no f32_gemm kernel for " + which);
  return *kernel;
}

void bind_f32_gemm(py::module_& m) {
  m.def("set_blocking_mode", [](const std::string& mode) {
    if (mode == "cache") set_blocking_mode(BlockingMode::cache);
    else if (mode == "fixed") set_blocking_mode(BlockingMode::fixed);
    else throw py::value_error("blocking mode must be 'cache' or 'fixed'");
  });
  m.def("get_blocking_mode", [] { return std::string(blocking_mode() == BlockingMode::cache ? "cache" : "fixed"); });
  // The loop order a row-major M x N output runs in, and the blocks of an order at depth K.
  m.def("gemm_order", [](size_t M, size_t N) {
    return std::string(gemm_order(f32_gemm_family().dispatched(), M, N) == GemmOrder::block ? "block" : "panel");
  }, py::arg("M"), py::arg("N"));
  m.def("gemm_blocking", [](size_t K, const std::string& order) {
    if (order != "block" && order != "panel") throw py::value_error("order must be 'block' or 'panel'");
    GemmBlocking b = gemm_blocking(f32_gemm_family().dispatched(), K, order == "block" ? GemmOrder::block : GemmOrder::panel);
    return py::make_tuple(b.kc, b.mc, b.nc);
  }, py::arg("K"), py::arg("order") = "block");
  m.def("sgemm", &sgemm_binding, py::arg("a"), py::arg("trans_a"), py::arg("b"), py::arg("trans_b"), py::arg("c"),
        py::arg("alpha"), py::arg("beta"), py::arg("bias"), py::arg("relu"), py::arg("algorithm") = "auto");
  m.def("sgemm_fast", &sgemm_fast, py::arg("a"), py::arg("b"), py::arg("trans_a") = false,
        py::arg("trans_b") = false, py::arg("c") = py::none());
  m.def("f32_gemm_ukernel", &f32_gemm_ukernel, py::arg("kernel"), py::arg("m"), py::arg("n"), py::arg("k"), py::arg("a"),
        py::arg("a_offset"), py::arg("a_stride"), py::arg("a_copy"), py::arg("b"), py::arg("b_offsets"),
        py::arg("b_stride"), py::arg("c"), py::arg("c_offset"), py::arg("ldc"), py::arg("alpha"), py::arg("beta"),
        py::arg("bias"), py::arg("relu"), py::arg("c_rows") = py::none(), py::arg("hook") = false,
        py::arg("tile_i") = 0, py::arg("tile_j") = 0, py::arg("residual") = py::none(), py::arg("r_offset") = 0,
        py::arg("ldr") = 0, py::arg("panels") = 0, py::arg("a_panel_stride") = 0,
        "panels > 0: that many whole panels (m = panels * MR, packed, each a_panel_stride floats of a) in one "
        "run_panels call.");
  m.def("f32_gemm_has_panels", [](const std::string& n) { return runnable_f32_gemm_kernel(n).run_panels != nullptr; },
        py::arg("kernel"), "Whether a kernel (a name or an ISA level) has the whole-panel form.");
  m.def("f32_igemm_ukernel", &f32_igemm_ukernel, py::arg("kernel"), py::arg("m"), py::arg("n"), py::arg("k"),
        py::arg("ks"), py::arg("a"), py::arg("a_offset"), py::arg("x"), py::arg("b_offsets"), py::arg("zero"),
        py::arg("zero_offset"), py::arg("b_offset_bytes"), py::arg("c"), py::arg("c_offset"), py::arg("ldc"),
        py::arg("alpha") = 1.0f, py::arg("beta") = 0.0f, py::arg("bias") = py::none(), py::arg("relu") = false,
        py::arg("c_rows") = py::none(), py::arg("hook") = false, py::arg("tile_i") = 0, py::arg("tile_j") = 0,
        py::arg("residual") = py::none(), py::arg("r_offset") = 0, py::arg("ldr") = 0);
  m.def("f32_gemm_tile", [](const std::string& n) {  // a kernel name or an ISA level
    const F32GemmKernel& k = runnable_f32_gemm_kernel(n);
    return py::make_tuple(std::string(k.name), k.mr, k.nr);
  });

  py::class_<Linear>(m, "PackedLinear")
      .def(py::init<const py::array&, const py::object&, bool>())
      .def("run", &Linear::run)
      .def("run_fast", &Linear::run_fast, py::arg("x"), py::arg("out") = py::none())
      .def_property_readonly("kernel_name", &Linear::kernel_name)
      .def_property_readonly("in_features", &Linear::in_features)
      .def_property_readonly("out_features", &Linear::out_features)
      .def_property_readonly("relu", &Linear::relu)
      .def_property_readonly("bias", &Linear::bias);

}

}  // namespace nnkern::bindings
