// Binding of the packed INT8 convolution (nnkern.QConv2d). The Python layer (nnkern/qconv.py) has checked dtypes,
// shapes and parameters; the C++ object re-checks every array against its own sizes and the exactness bounds.
#include <array>

#include "bindings/common.h"
#include "core/kernel_list.h"
#include "ops/qconv/layer.h"
#include "ops/qconv/stage.h"
#include "ops/qgemm/qgemm.h"

namespace nnkern::bindings {
namespace {

class QConv2dBinding {
 public:
  // w: groups x kg x ocg int8; geo: (OC, IC, KH, KW, groups, sh, sw, dh, dw, pt, pb, pl, pr); factor / offset:
  // float32 (OC,) or None (int32 output); lo / hi: the uint8 / int8 clamp (relu folded in).
  QConv2dBinding(const py::array& w, const std::vector<size_t>& g, int out_kind, const py::object& factor,
                 const py::object& offset, bool relu, float lo, float hi, int x_zero) {
    if (g.size() != 13) throw py::value_error("internal: geometry needs 13 values");
    if (out_kind < 0 || out_kind > 3) throw py::value_error("internal: bad output kind");
    QConvGeometry geo;
    geo.OC = g[0], geo.IC = g[1], geo.KH = g[2], geo.KW = g[3], geo.groups = g[4];
    geo.sh = g[5], geo.sw = g[6], geo.dh = g[7], geo.dw = g[8];
    geo.pt = g[9], geo.pb = g[10], geo.pl = g[11], geo.pr = g[12];
    if (!geo.valid()) throw py::value_error("internal: bad geometry");
    const int8_t* wp = checked_in<int8_t>(w, "weight", {ssize_t(geo.groups), ssize_t(checked_mul(geo.ks(), geo.icg())),
                                                        ssize_t(geo.ocg())});
    const float* f = factor.is_none() ? nullptr : checked_in<float>(factor.cast<py::array>(), "factor", {ssize_t(geo.OC)});
    const float* o = offset.is_none() ? nullptr : checked_in<float>(offset.cast<py::array>(), "offset", {ssize_t(geo.OC)});
    if ((f == nullptr) != (o == nullptr)) throw py::value_error("internal: factor and offset go together");
    QConvRequant r;
    r.out = QOut(out_kind), r.relu = relu, r.lo = lo, r.hi = hi;
    packed_ = std::make_unique<PackedQConv2d>(geo, wp, f, o, x_zero, r);
  }

  // out (N, OH, OW, OC), or (N, OC, OH, OW) if planar, = conv(x (N, H, W, IC) uint8 or int8). kernel: "" (the
  // dispatched ones) or any kernel's name (tests: the algorithm that runs uses it if it is of its family).
  // residual: None or uint8 / int8 of out's shape, with its zero point and factor (ops/qconv/stage.h). Returns
  // the algorithm that ran.
  std::string run(const py::array& x, py::array& out, const std::string& algorithm, const std::string& kernel,
                  const py::object& residual, int residual_zero, float residual_factor, bool planar) const {
    const QConvGeometry& geo = packed_->geometry();
    const auto [N, H, W] = input_shape(x);
    const ssize_t OH = ssize_t(geo.OH(H)), OW = ssize_t(geo.OW(W)), OC = ssize_t(geo.OC);
    const std::initializer_list<ssize_t> od = {ssize_t(N), planar ? OC : OH, planar ? OH : OW, planar ? OW : OC};
    const QConvRequant& rq = packed_->requant();
    void* c = checked_q_out(out, rq.out, "out", od);
    if (!residual.is_none()) {
      const py::array r = residual.cast<py::array>();
      const void* rp = checked_a8_in(r, "residual", od);
      const QType rt = py::isinstance<py::array_t<uint8_t>>(r) ? QType::u8 : QType::s8;
      QConvResidualStage stage(rq, c, geo.OC, rp, rt, residual_zero, residual_factor, planar);
      return call(x, stage, algorithm, kernel);
    }
    if (planar) {
      QConvPlanarStage stage(rq, c, geo.OC, size_t(OH), size_t(OW));
      return call(x, stage, algorithm, kernel);
    }
    QConvNhwcStage stage(rq, c, geo.OC);
    return call(x, stage, algorithm, kernel);
  }

  // The layer with its output pixel-shuffled by r in the output stage: out (N, OH*r, OW*r, OC/(r*r)) of the
  // output dtype. runs: the weights' channels were given in the (i, j, c) order (ops/qconv/stage.h).
  std::string run_shuffled(const py::array& x, py::array& out, const std::string& algorithm, const std::string& kernel,
                           size_t r, bool runs) const {
    const QConvGeometry& geo = packed_->geometry();
    const auto [N, H, W] = input_shape(x);
    if (r == 0 || r > geo.OC || geo.OC % (r * r))
      throw py::value_error("pixel shuffle: out_channels must be divisible by r*r");
    const QConvRequant& rq = packed_->requant();
    void* dst = checked_q_out(out, rq.out, "out", {ssize_t(N), ssize_t(checked_mul(geo.OH(H), r)),
                                                   ssize_t(checked_mul(geo.OW(W), r)), ssize_t(geo.OC / (r * r))});
    QConvShuffleStage stage(rq, geo.OC, r, dst, runs);
    return call(x, stage, algorithm, kernel);
  }

  // Global average pooling fused into the output stage: out (N, OC) float32 / uint8 / int8 with the parameters of
  // ops/qconv/stage.h QConvPoolParams.
  std::string run_pooled(const py::array& x, py::array& out, const std::string& algorithm, const std::string& kernel,
                         double zero, double scale, double out_scale, double out_zero, double lo, double hi) const {
    const size_t N = input_shape(x)[0], OC = packed_->geometry().OC;
    QConvPoolParams p;
    p.zero = zero, p.scale = scale, p.out_scale = out_scale, p.out_zero = out_zero, p.lo = lo, p.hi = hi;
    p.out = py::isinstance<py::array_t<float>>(out) ? QOut::f32
            : py::isinstance<py::array_t<uint8_t>>(out) ? QOut::u8 : QOut::s8;
    p.dst = checked_q_out(out, p.out, "out", {ssize_t(N), ssize_t(OC)});
    QConvPoolStage stage(packed_->requant(), OC, p);
    return call(x, stage, algorithm, kernel);
  }

  std::string auto_algorithm(size_t N, size_t H, size_t W) const { return packed_->auto_algorithm(N, H, W); }
  std::vector<std::string> applicable_algorithms(size_t N, size_t H, size_t W) const {
    return packed_->applicable_algorithms(N, H, W);
  }
  std::string kernel_name() const { return packed_->kernel_name(); }
  size_t indirection_builds() const { return packed_->indirection_builds(); }
  size_t indirection_bytes() const { return packed_->indirection_bytes(); }

 private:
  // x checked (uint8 / int8, N x H x W x IC, the kernel fits): {N, H, W}.
  std::array<size_t, 3> input_shape(const py::array& x) const {
    const QConvGeometry& geo = packed_->geometry();
    checked_a8_in(x, "x", {kAnyDim, kAnyDim, kAnyDim, ssize_t(geo.IC)});
    const size_t N = size_t(x.shape(0)), H = size_t(x.shape(1)), W = size_t(x.shape(2));
    if (!H || !W || !geo.OH(H) || !geo.OW(W)) throw py::value_error("x: the kernel does not fit the padded input");
    return {N, H, W};
  }

  // Runs the layer on x (checked by the caller) into stage, with the kernel asked for (a name this CPU runs, or
  // ValueError). Releases the GIL.
  std::string call(const py::array& x, QConvStage& stage, const std::string& algorithm,
                   const std::string& kernel) const {
    if (!kernel.empty()) check_runnable_kernel(kernel);
    const bool u8 = py::isinstance<py::array_t<uint8_t>>(x);
    const size_t N = size_t(x.shape(0)), H = size_t(x.shape(1)), W = size_t(x.shape(2));
    py::gil_scoped_release release;
    return packed_->run(N, H, W, u8 ? QType::u8 : QType::s8, x.data(), stage, algorithm, kernel);
  }

  std::unique_ptr<PackedQConv2d> packed_;
};

}  // namespace

void bind_qconv2d(py::module_& m) {
  py::class_<QConv2dBinding>(m, "PackedQConv2d")
      .def(py::init<const py::array&, const std::vector<size_t>&, int, const py::object&, const py::object&, bool,
                    float, float, int>())
      .def("run", &QConv2dBinding::run, py::arg("x"), py::arg("out"), py::arg("algorithm") = "auto",
           py::arg("kernel") = "",
           py::arg("residual") = py::none(), py::arg("residual_zero") = 0, py::arg("residual_factor") = 0.0f,
           py::arg("planar") = false)
      .def("run_shuffled", &QConv2dBinding::run_shuffled, py::arg("x"), py::arg("out"), py::arg("algorithm"),
           py::arg("kernel"), py::arg("r"), py::arg("runs"))
      .def("run_pooled", &QConv2dBinding::run_pooled, py::arg("x"), py::arg("out"), py::arg("algorithm"),
           py::arg("kernel"), py::arg("zero"), py::arg("scale"), py::arg("out_scale"), py::arg("out_zero"),
           py::arg("lo"), py::arg("hi"))
      .def("auto_algorithm", &QConv2dBinding::auto_algorithm)
      .def("applicable_algorithms", &QConv2dBinding::applicable_algorithms, py::arg("n"), py::arg("h"), py::arg("w"),
           "The algorithms of the table that apply to an input of this shape (the rule, from C++).")
      .def_property_readonly("kernel_name", &QConv2dBinding::kernel_name)
      .def_property_readonly("indirection_builds", &QConv2dBinding::indirection_builds)
      .def_property_readonly("indirection_bytes", &QConv2dBinding::indirection_bytes,
                             "Bytes of the indirection buffers the layer keeps (ops/conv/indirection_cache.h)");
}

}  // namespace nnkern::bindings
