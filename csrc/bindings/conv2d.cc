// Binding of the packed FP32 convolution (nnkern.Conv2d). The Python layer (nnkern/conv.py) has checked
// dtypes, shapes and parameters; the object re-checks every array against its own sizes.
#include "bindings/common.h"
#include "kernels/f32_conv_list.h"
#include "ops/conv/layer.h"
#include "ops/conv/block.h"
#include "core/kernel_family.h"

namespace nnkern::bindings {
namespace {

bool isa_named(const std::string& name) {
  for (Isa level : isa_levels())
    if (name == isa_name(level)) return true;
  return false;
}

class Conv2dBinding {
 public:
  // w: OC x KH x KW x icg float32; geo: (OC, IC, KH, KW, groups, sh, sw, dh, dw, pt, pb, pl, pr); bias: float32
  // (OC,) or None; activation: ConvActivation's number, alpha / beta its parameters; method: the sigmoid kernels'
  // method name.
  Conv2dBinding(const py::array& w, const std::vector<size_t>& g, const py::object& bias, int activation,
                const std::string& method, float alpha, float beta) {
    if (g.size() != 13) throw py::value_error("internal: geometry needs 13 values");
    if (activation < 0 || activation > int(kLastConvActivation)) throw py::value_error("internal: bad activation");
    ConvGeometry geo;
    geo.OC = g[0], geo.IC = g[1], geo.KH = g[2], geo.KW = g[3], geo.groups = g[4];
    geo.sh = g[5], geo.sw = g[6], geo.dh = g[7], geo.dw = g[8];
    geo.pt = g[9], geo.pb = g[10], geo.pl = g[11], geo.pr = g[12];
    if (!geo.valid()) throw py::value_error("internal: bad geometry");
    const float* wp =
        checked_in<float>(w, "weight", {ssize_t(geo.OC), ssize_t(geo.KH), ssize_t(geo.KW), ssize_t(geo.icg())});
    const float* b = bias.is_none() ? nullptr : checked_in<float>(bias.cast<py::array>(), "bias", {ssize_t(geo.OC)});
    packed_ = std::make_shared<PackedConv2d>(geo, wp, b, ConvPostOp{ConvActivation(activation), alpha, beta},
                                             act_method_arg(method, "method"));
  }

  // y (N, OH, OW, OC) = conv(x (N, H, W, IC)). kernel: "" (the dispatched ones), a kernel's name (tests: the
  // algorithm that runs uses it if it is of its family), or for the GEMM-based ones an ISA level's name. Returns the
  // algorithm that ran. precision: "highest", "high" or "medium", what "auto" may pick (core/precision.h).
  // residual: None or (N, OH, OW, OC) float32, C-contiguous, added before the activation (not overlapping y).
  std::string run(const py::array& x, py::array& y, const std::string& algorithm, const std::string& kernel,
                  const std::string& precision, const py::object& residual) const {
    const Float32Precision level = precision_arg(precision);
    const ConvGeometry& geo = packed_->geometry();
    const float* xp = checked_in<float>(x, "x", {kAnyDim, kAnyDim, kAnyDim, ssize_t(geo.IC)});
    const size_t N = size_t(x.shape(0)), H = size_t(x.shape(1)), W = size_t(x.shape(2));
    if (!H || !W || !geo.OH(H) || !geo.OW(W)) throw py::value_error("x: the kernel does not fit the padded input");
    float* yp = checked_out<float>(y, "out", {ssize_t(N), ssize_t(geo.OH(H)), ssize_t(geo.OW(W)), ssize_t(geo.OC)});
    const float* rp = nullptr;
    if (!residual.is_none()) {
      const py::array r = residual.cast<py::array>();
      rp = checked_in<float>(r, "residual", {ssize_t(N), ssize_t(geo.OH(H)), ssize_t(geo.OW(W)), ssize_t(geo.OC)});
      // The kernels store y before the post-ops read the residual.
      if (r.size() && may_overlap(r, y)) throw py::value_error("residual must not overlap out");
    }
    if (!kernel.empty() && !isa_named(kernel)) check_runnable_kernel(kernel);
    if (!kernel.empty() && isa_named(kernel) && !isa_supported(isa_arg(kernel)))
      throw py::value_error("this CPU cannot run " + kernel);
    py::gil_scoped_release release;
    return packed_->run(N, H, W, xp, yp, algorithm, kernel, 0, level, rp);
  }

  std::string auto_algorithm(size_t N, size_t H, size_t W, const std::string& precision) const {
    return packed_->auto_algorithm(N, H, W, precision_arg(precision));
  }
  std::vector<std::string> applicable_algorithms(size_t N, size_t H, size_t W) const {
    return packed_->applicable_algorithms(N, H, W);
  }
  size_t workspace_bytes(size_t N, size_t H, size_t W, const std::string& algorithm,
                         const std::string& precision) const {
    return packed_->workspace_bytes(N, H, W, algorithm, precision_arg(precision));
  }
  size_t indirection_builds() const { return packed_->indirection_builds(); }
  size_t indirection_bytes() const { return packed_->indirection_bytes(); }
  const std::shared_ptr<PackedConv2d>& packed() const { return packed_; }

 private:
  std::shared_ptr<PackedConv2d> packed_;
};

class InvertedResidualBinding {
 public:
  InvertedResidualBinding(const Conv2dBinding* expand, const Conv2dBinding& dw, const Conv2dBinding& project,
                          bool residual, const std::array<std::string, 3>& algorithms)
      : block_(expand ? expand->packed() : nullptr, dw.packed(), project.packed(), residual, algorithms),
        IC_(expand ? expand->packed()->geometry().IC : dw.packed()->geometry().IC),
        OC_(project.packed()->geometry().OC) {}

  void run(const py::array& x, py::array& y) const {
    const float* xp = checked_in<float>(x, "x", {kAnyDim, kAnyDim, kAnyDim, ssize_t(IC_)});
    const size_t N = size_t(x.shape(0)), H = size_t(x.shape(1)), W = size_t(x.shape(2));
    if (!H || !W || !block_.out_h(H) || !block_.out_w(W))
      throw py::value_error("x: the kernel does not fit the padded input");
    float* yp = checked_out<float>(y, "out", {ssize_t(N), ssize_t(block_.out_h(H)), ssize_t(block_.out_w(W)), ssize_t(OC_)});
    if (may_overlap(x, y)) throw py::value_error("out must not overlap x");
    py::gil_scoped_release release;
    block_.run(N, H, W, xp, yp);
  }
  size_t rows_per_band(size_t H, size_t W) const { return block_.rows_per_band(H, W); }

 private:
  FusedInvertedResidual block_;
  size_t IC_, OC_;
};

}  // namespace

void bind_conv2d(py::module_& m) {
  m.def("conv2d_algorithm_families", &conv_algorithm_families,
        "(algorithm, the kernel family it runs) for each entry of the conv2d table, in its order");
  py::class_<Conv2dBinding>(m, "PackedConv2d")
      .def(py::init<const py::array&, const std::vector<size_t>&, const py::object&, int, const std::string&, float,
                    float>(),
           py::arg("w"), py::arg("geometry"), py::arg("bias"), py::arg("activation"), py::arg("method"),
           py::arg("alpha") = 0.0f, py::arg("beta") = 0.0f)
      .def("run", &Conv2dBinding::run, py::arg("x"), py::arg("out"), py::arg("algorithm") = "auto",
           py::arg("kernel") = "", py::arg("precision") = "highest", py::arg("residual") = py::none())
      .def("auto_algorithm", &Conv2dBinding::auto_algorithm, py::arg("n"), py::arg("h"), py::arg("w"),
           py::arg("precision") = "highest")
      .def("applicable_algorithms", &Conv2dBinding::applicable_algorithms, py::arg("n"), py::arg("h"), py::arg("w"),
           "The algorithms of the table that apply to an input of this shape (the rule, from C++).")
      .def("workspace_bytes", &Conv2dBinding::workspace_bytes, py::arg("n"), py::arg("h"), py::arg("w"),
           py::arg("algorithm") = "auto", py::arg("precision") = "highest")
      .def_property_readonly("indirection_builds", &Conv2dBinding::indirection_builds)
      .def_property_readonly("indirection_bytes", &Conv2dBinding::indirection_bytes,
                             "Bytes of the indirection buffers the layer keeps (ops/conv/indirection_cache.h)");
  py::class_<InvertedResidualBinding>(m, "InvertedResidual")
      .def(py::init<const Conv2dBinding*, const Conv2dBinding&, const Conv2dBinding&, bool,
                    const std::array<std::string, 3>&>(),
           py::arg("expand"), py::arg("dw"), py::arg("project"), py::arg("residual"), py::arg("algorithms"),
           py::keep_alive<1, 2>(), py::keep_alive<1, 3>(),
           py::keep_alive<1, 4>())
      .def("run", &InvertedResidualBinding::run, py::arg("x"), py::arg("out"))
      .def("rows_per_band", &InvertedResidualBinding::rows_per_band, py::arg("h"), py::arg("w"));
}

}  // namespace nnkern::bindings
