// Bindings of the integer GEMM ops: qgemm / qgemm16, the packed QLinear, and test hooks for the
// micro-kernels. The Python layer (nnkern/qgemm.py) has checked dtypes, shapes, ranges and the K bound.
#include <algorithm>
#include <optional>
#include <vector>

#include "bindings/common.h"
#include "kernels/qgemm_list.h"
#include "ops/peak/peak.h"
#include "ops/qgemm/pack.h"
#include "ops/qgemm/qgemm.h"
#include "core/kernel_family.h"

namespace nnkern::bindings {
namespace {

// c (M x N int32) = sum_k (a - a_zero)(b - b_zero); a, b and c are C-contiguous.
void qgemm_binding(const py::array& a, int a_type, int a_zero, const py::array& b, int b_type, const py::object& b_zero,
                   int b_zero_scalar, py::array& c, const std::string& algorithm) {
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
  qgemm(g, algorithm);
}

// The largest K whose products sum_k (a - a_zero)(b - b_zero) all fit int32, for a in [alo, ahi] and int8 b
// (nnkern.qgemm_max_k).
int64_t max_exact_k(int alo, int ahi, int a_zero, int b_zero) {
  const int64_t da = std::max(a_zero - alo, ahi - a_zero), db = std::max(b_zero + 128, 127 - b_zero);
  return INT32_MAX / (da * db);
}

// The fast path (bindings/common.h) of qgemm: a uint8/int8 and b int8 C-contiguous 2-D ndarrays, scalar
// zero points in their dtypes' ranges, K within qgemm_max_k; into out (as fast_output says).
py::object qgemm_fast(const py::handle& a_in, const py::handle& b_in, int a_zero, int b_zero,
                      const py::handle& out_in) {
  constexpr int kU8 = py::detail::npy_api::NPY_UBYTE_, kS8 = py::detail::npy_api::NPY_BYTE_;
  const NdProxy *a = plain_ndarray(a_in), *b = plain_ndarray(b_in);
  if (!a || !b || a->nd != 2 || b->nd != 2 || !is_c_contiguous_aligned(a) || !is_c_contiguous_aligned(b) ||
      type_num(b) != kS8 || (type_num(a) != kU8 && type_num(a) != kS8))
    return py::none();
  const bool u8 = type_num(a) == kU8;
  const int alo = u8 ? 0 : -128, ahi = u8 ? 255 : 127;
  if (a_zero < alo || a_zero > ahi || b_zero < -128 || b_zero > 127) return py::none();
  QgemmArgs g;
  g.M = size_t(a->dimensions[0]);
  g.K = size_t(a->dimensions[1]);
  g.N = size_t(b->dimensions[1]);
  if (size_t(b->dimensions[0]) != g.K || int64_t(g.K) > max_exact_k(alo, ahi, a_zero, b_zero)) return py::none();
  const std::optional<py::array> out = fast_output<int32_t>(out_in, {ssize_t(g.M), ssize_t(g.N)}, {a_in, b_in});
  if (!out) return py::none();
  py::array c = *out;
  if (g.M == 0 || g.N == 0) return std::move(c);
  g.a_type = u8 ? QType::u8 : QType::s8;
  g.a = a->data;
  g.lda = g.K;
  g.a_zero = a_zero;
  g.b_type = QType::s8;
  g.b = b->data;
  g.ldb = g.N;
  g.b_zero_scalar = b_zero;
  g.c = static_cast<int32_t*>(c.mutable_data());
  g.ldc = g.N;
  without_gil_if_worth(g.M, g.N, g.K, [&] { qgemm(g); });
  return std::move(c);
}

const char* kind_name(QKind kind) {
  switch (kind) {
    case QKind::u8s8: return "u8s8";
    case QKind::s8s8: return "s8s8";
    case QKind::s16w8: return "s16w8";
    default: return "s16";
  }
}

// A kernel of the "qgemm" list (kernels/qgemm_list.h) by name, or ValueError.
const QGemmKernel& kernel_named(const std::string& name) {
  const KernelList<QGemmKernel>& l = qgemm_family().list();
  for (size_t i = 0; i < l.kernels.size(); ++i)
    if (name == l.info[i].name) return *l.kernels[i];
  throw py::value_error("no integer GEMM kernel named '" + name + "' in this build");
}

}  // namespace

const QGemmKernel& runnable_qgemm_kernel(const std::string& name) {
  const KernelList<QGemmKernel>& l = qgemm_family().list();
  const QGemmKernel& k = kernel_named(name);
  for (size_t i = 0; i < l.kernels.size(); ++i)
    if (l.kernels[i] == &k && !isa_supported(l.info[i].level))
      throw py::value_error(std::string("this CPU cannot run ") + name + " (no " + isa_name(l.info[i].level) + ")");
  return k;
}

namespace {

// What the tile hook saw, for the tests: each call's arguments and the values it found where the tile says.
struct HookLog {
  py::list calls;
};

template <typename T>
py::list tile_values(const QTile& t) {
  py::list cols;
  for (size_t j = 0; j < t.n; ++j) {
    const T* col = t.c_rows ? static_cast<const T*>(t.c_rows[j]) : static_cast<const T*>(t.c) + j * t.ldc;
    py::list v;
    for (size_t i = 0; i < t.m; ++i) v.append(col[i]);
    cols.append(v);
  }
  return cols;
}

void record_tile(void* ctx, const QTile& t) {
  py::dict d;
  d["i0"] = t.i0, d["j0"] = t.j0, d["m"] = t.m, d["n"] = t.n, d["out"] = int(t.out), d["ldc"] = t.ldc;
  d["c"] = reinterpret_cast<uintptr_t>(t.c);
  d["c_rows"] = t.c_rows != nullptr;
  switch (t.out) {
    case QOut::i32: d["values"] = tile_values<int32_t>(t); break;
    case QOut::f32: d["values"] = tile_values<float>(t); break;
    case QOut::u8: d["values"] = tile_values<uint8_t>(t); break;
    case QOut::s8: d["values"] = tile_values<int8_t>(t); break;
  }
  static_cast<HookLog*>(ctx)->calls.append(d);
}

// Runs one micro-kernel on one tile, for the tests (arrays may live in guarded buffers). Direct form: b_offsets
// (n byte offsets into b, one per column). Indirect form (ks > 1, or any None entry): b_offsets holds ks * n
// entries, tap-major, each a byte offset into b or None for the zero row (the array `zero`); the kernel gets
// ks x NR pointers made so that adding b_offset lands on them (entries j >= n poisoned: never read). c_rows:
// n byte offsets into c, one per output column. hook: record every call of the tile hook (returned).
py::list qgemm_ukernel(const std::string& name, size_t m, size_t n, size_t k, const py::array& a, size_t a_offset_bytes,
                       const py::array& b, const std::vector<std::optional<ptrdiff_t>>& b_offsets_bytes, py::array& c,
                       size_t c_offset_bytes, size_t ldc, int out, const py::object& col_comp, const py::object& b_zero,
                       const py::object& row_sum, const py::object& scale, const py::object& bias, bool relu, float lo,
                       float hi, const py::object& c_in, int x_zero, const py::object& w_zero, size_t ks,
                       const py::object& zero, size_t zero_offset_bytes, size_t b_offset,
                       const std::optional<std::vector<ptrdiff_t>>& c_rows_offsets, bool hook, size_t tile_i,
                       size_t tile_j, size_t panels, size_t a_panel_bytes) {
  const QGemmKernel* kern = &runnable_qgemm_kernel(name);
  const size_t NR = size_t(kern->nr), MR = size_t(kern->mr);
  if (panels > 0 && (!kern->run_panels || hook || panels > m || m != panels * MR))
    throw py::value_error("the whole-panel form: a kernel that has one, m = panels * MR, no hook");
  if ((panels == 0 && m > MR) || n > NR || ks == 0 || b_offsets_bytes.size() != ks * n)
    throw py::value_error("tile larger than the kernel, or not ks * n column offsets");
  // The packed panels the kernel reads: one, or `panels` of them a_panel_bytes apart.
  const size_t panel = qgemm_panel_bytes(*kern, k, ks), a_bytes = size_t(a.nbytes());
  const size_t avail = a_offset_bytes <= a_bytes ? a_bytes - a_offset_bytes : 0;
  if (panels > 0 && a_panel_bytes < panel) throw py::value_error("a_panel_bytes is less than one packed panel");
  if (avail < panel || (panels > 1 && (avail - panel) / a_panel_bytes < panels - 1))
    throw py::value_error("a holds fewer bytes than the packed panels the kernel reads");
  const uint8_t* zp = zero.is_none() ? nullptr : static_cast<const uint8_t*>(zero.cast<py::array>().data()) + zero_offset_bytes;
  const uintptr_t base = reinterpret_cast<uintptr_t>(b.data());
  std::vector<const void*> bptr(ks * NR, reinterpret_cast<const void*>(uintptr_t(8)));  // poison: j >= n
  for (size_t t = 0; t < ks; ++t)
    for (size_t j = 0; j < n; ++j) {
      const auto& off = b_offsets_bytes[t * n + j];
      if (!off && !zp) throw py::value_error("a zero-row entry needs the zero array");
      bptr[t * NR + j] = off ? reinterpret_cast<const void*>(base + uintptr_t(*off) - b_offset) : zp;
    }
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
  uint8_t* cp = static_cast<uint8_t*>(c.mutable_data());
  std::vector<void*> rows;
  if (c_rows_offsets) {
    if (c_rows_offsets->size() != n) throw py::value_error("c_rows needs n offsets");
    for (ptrdiff_t off : *c_rows_offsets) rows.push_back(reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(cp) + uintptr_t(off)));
    ep.c_rows = rows.data();
  }
  HookLog log;
  if (hook) ep.hook = record_tile, ep.hook_ctx = &log;
  ep.tile_i = tile_i;
  ep.tile_j = tile_j;
  const uint8_t* ap = static_cast<const uint8_t*>(a.data()) + a_offset_bytes;
  if (panels > 0)
    kern->run_panels(panels, n, k, ks, ap, a_panel_bytes, bptr.data(), zp, b_offset, cp + c_offset_bytes, ldc, &ep);
  else
    kern->run(m, n, k, ks, ap, bptr.data(), zp, b_offset, cp + c_offset_bytes, ldc, &ep);
  if (kern->finish) kern->finish();
  return log.calls;
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
  // The fast path (bindings/common.h) of a static layer: x a uint8/int8 ndarray (..., K) whose zero point
  // and K the layer takes exactly, into out (as fast_output says); None for anything else.
  py::object run_fast(const py::handle& x_in, const py::handle& out_in) const {
    const NdProxy* x = plain_ndarray(x_in);
    if (!is_layer_input(x, packed_.K())) return py::none();
    const int t = type_num(x);
    const bool u8 = t == py::detail::npy_api::NPY_UBYTE_;
    if (!u8 && t != py::detail::npy_api::NPY_BYTE_) return py::none();
    const int alo = u8 ? 0 : -128, ahi = u8 ? 255 : 127;
    if (x_zero_ < alo || x_zero_ > ahi || int64_t(packed_.K()) > max_exact_k(alo, ahi, x_zero_, 0)) return py::none();
    switch (out_) {
      case QOut::i32: return run_into<int32_t>(x_in, x, u8, out_in);
      case QOut::f32: return run_into<float>(x_in, x, u8, out_in);
      case QOut::u8: return run_into<uint8_t>(x_in, x, u8, out_in);
      case QOut::s8: break;
    }
    return run_into<int8_t>(x_in, x, u8, out_in);
  }
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
  template <typename T>
  py::object run_into(const py::handle& x_in, const NdProxy* x, bool u8, const py::handle& out_in) const {
    const size_t M = layer_rows(x), N = packed_.N(), K = packed_.K();
    const std::optional<py::array> given = fast_output<T>(out_in, layer_output_shape(x, N), {x_in});
    if (!given) return py::none();
    py::array out = *given;
    if (M == 0 || N == 0) return std::move(out);
    const QOutput o = output(out.mutable_data(), nullptr);
    without_gil_if_worth(M, N, K, [&] { packed_.run(M, u8 ? QType::u8 : QType::s8, x->data, K, x_zero_, o); });
    return std::move(out);
  }
  // The output stage into c (M x N, row-major), with these per-column factors or the layer's own.
  QOutput output(void* c, const float* factor) const {
    QOutput o;
    o.out = out_;
    o.c = c;
    o.ldc = packed_.N();
    o.scale = factor ? factor : factor_.size() ? factor_.data() : nullptr;
    o.bias = offset_.size() ? offset_.data() : nullptr;
    o.relu = relu_;
    o.lo = lo_;
    o.hi = hi_;
    return o;
  }
  void run_with(const py::array& x, py::array& out, int x_zero, const float* factor) const {
    const bool u8 = py::isinstance<py::array_t<uint8_t>>(x);
    const void* xp = checked_a8_in(x, "x", {kAnyDim, ssize_t(packed_.K())});
    const QOutput o = output(checked_q_out(out, out_, "out", {x.shape(0), ssize_t(packed_.N())}), factor);
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
  m.def("qgemm", &qgemm_binding, py::arg("a"), py::arg("a_type"), py::arg("a_zero"), py::arg("b"), py::arg("b_type"),
        py::arg("b_zero"), py::arg("b_zero_scalar"), py::arg("c"), py::arg("algorithm") = "auto");
  m.def("qgemm_fast", &qgemm_fast, py::arg("a"), py::arg("b"), py::arg("a_zero") = 0, py::arg("b_zero") = 0,
        py::arg("out") = py::none());
  m.def("qgemm_ukernel", &qgemm_ukernel, py::arg("name"), py::arg("m"), py::arg("n"), py::arg("k"), py::arg("a"),
        py::arg("a_offset_bytes"), py::arg("b"), py::arg("b_offsets_bytes"), py::arg("c"), py::arg("c_offset_bytes"),
        py::arg("ldc"), py::arg("out"), py::arg("col_comp"), py::arg("b_zero"), py::arg("row_sum"), py::arg("scale"),
        py::arg("bias"), py::arg("relu"), py::arg("lo"), py::arg("hi"), py::arg("c_in") = py::none(),
        py::arg("x_zero") = 0, py::arg("w_zero") = py::none(), py::arg("ks") = 1, py::arg("zero") = py::none(),
        py::arg("zero_offset_bytes") = 0, py::arg("b_offset") = 0, py::arg("c_rows") = py::none(),
        py::arg("hook") = false, py::arg("tile_i") = 0, py::arg("tile_j") = 0, py::arg("panels") = 0,
        py::arg("a_panel_bytes") = 0,
        "One micro-kernel tile, direct or indirect (kernels/qgemm.h), for the tests; returns the tile hook's calls. "
        "panels > 0: that many whole panels (m = panels * MR, each a_panel_bytes of a) in one run_panels call.");
  m.def("qgemm_kernel_traits", [](const std::string& name) {
    const QGemmKernel& k = kernel_named(name);
    return py::make_tuple(kind_name(k.kind), std::max(k.kstep, k.kgroup), k.zero_points_in_kernel,
                          k.run_panels != nullptr);
  }, "(kind, k step of the inner loop, zero points subtracted in the kernel, has the whole-panel form) of a qgemm "
     "kernel.");
  m.def("qgemm_kernel_for", [](size_t k, size_t ks) { return std::string(qgemm_kernel(8, k, ks).name); },
        py::arg("k"), py::arg("ks") = 1,
        "The 8-bit kernel the dispatch runs now for a reduction of ks taps of k (below the level kernel's "
        "min_depth / min_k: the best one of the levels below).");
  m.def("i8_peak_ops", [](const std::string& n, double seconds) { return i8_peak_ops(isa_arg(n), seconds); });
  m.def("set_qgemm_kc", [](size_t kc) { set_qgemm_kc(kc); });
  m.def("set_qgemm_rows_outer", [](int v, size_t block) { set_qgemm_rows_outer(v, block); }, py::arg("v"),
        py::arg("block") = 0);
  m.def("qgemm_padded_n", [](size_t n) { return qgemm_padded_n(n); });
  py::class_<QLinearPacked>(m, "PackedQLinear")
      .def(py::init<const py::array&, int, const py::object&, const py::object&, bool, float, float, int>())
      .def("run", &QLinearPacked::run)
      .def("run_fast", &QLinearPacked::run_fast, py::arg("x"), py::arg("out") = py::none())
      .def("run_dynamic", &QLinearPacked::run_dynamic)
      .def_property_readonly("kernel_name", &QLinearPacked::kernel_name)
      .def_property_readonly("in_features", &QLinearPacked::in_features)
      .def_property_readonly("out_features", &QLinearPacked::out_features);
}

}  // namespace nnkern::bindings
