// Bindings of max / average pooling (NHWC; uint8, int8, float32). The geometry is checked again here and
// the output shape derived from it, since the kernels trust every size.
#include <array>
#include <stdexcept>

#include "bindings/common.h"
#include "ops/pool/pool2d.h"

namespace nnkern::bindings {

namespace {

// Sizes beyond this are refused (the Python layer says so first): no real image comes near it.
constexpr ssize_t kGeometryMax = (ssize_t(1) << 31) - 1;

size_t geometry(ssize_t v, const char* what) {
  if (v < 0 || v > kGeometryMax) throw py::value_error(std::string("pool2d: ") + what + " out of range");
  return size_t(v);
}

// x (N, H, W, C) -> out (N, OH, OW, C), the same dtype. average = false: max pooling (the quantization
// arguments are ignored). divisor: 0 or the divisor_override; scale_ratio, zi, zo: integer average only.
void pool(const py::array& x, py::array& out, bool average, std::array<ssize_t, 2> kernel,
          std::array<ssize_t, 2> stride, std::array<ssize_t, 4> padding, bool ceil_mode, bool count_include_pad,
          int64_t divisor, float scale_ratio, int32_t zi, int32_t zo) {
  if (x.ndim() != 4) throw py::value_error("pool2d: x must be 4-D (N, H, W, C)");
  PoolDtype dt;
  if (py::isinstance<py::array_t<uint8_t>>(x)) dt = PoolDtype::u8;
  else if (py::isinstance<py::array_t<int8_t>>(x)) dt = PoolDtype::s8;
  else if (py::isinstance<py::array_t<float>>(x)) dt = PoolDtype::f32;
  else throw py::type_error("pool2d: x must be uint8, int8 or float32");
  const size_t es = dt == PoolDtype::f32 ? 4 : 1;
  const size_t kh = geometry(kernel[0], "kernel"), kw = geometry(kernel[1], "kernel");
  const size_t sh = geometry(stride[0], "stride"), sw = geometry(stride[1], "stride");
  const size_t pt = geometry(padding[0], "padding"), pb = geometry(padding[1], "padding");
  const size_t pl = geometry(padding[2], "padding"), pr = geometry(padding[3], "padding");
  if (kh * kw >= (size_t(1) << 23)) throw py::value_error("pool2d: the kernel has 2^23 or more taps");
  if (average && (divisor < INT32_MIN || divisor > INT32_MAX)) throw py::value_error("pool2d: divisor out of range");
  if (average && dt != PoolDtype::f32) {
    if (!(scale_ratio > 0.0f) || scale_ratio > 3.4e38f) throw py::value_error("pool2d: scale_ratio must be finite and > 0");
    const int32_t lo = dt == PoolDtype::u8 ? 0 : -128, hi = dt == PoolDtype::u8 ? 255 : 127;
    if (zi < lo || zi > hi || zo < lo || zo > hi) throw py::value_error("pool2d: zero point out of the dtype's range");
  }
  const ssize_t N = x.shape(0), H = x.shape(1), W = x.shape(2), C = x.shape(3);
  size_t oh, ow;
  try {
    oh = pool2d_output_size(size_t(H), kh, sh, pt, pb, ceil_mode);
    ow = pool2d_output_size(size_t(W), kw, sw, pl, pr, ceil_mode);
  } catch (const std::invalid_argument& e) {
    throw py::value_error(e.what());
  }
  check_layout(x, "x", {N, H, W, C}, true, es, false);
  check_layout(out, "out", {N, ssize_t(oh), ssize_t(ow), C}, out.dtype().equal(x.dtype()), es, true);
  if (x.size() && may_overlap(x, out)) throw py::value_error("pool2d: out overlaps x");
  Pool2dParams p{};
  p.average = average;
  p.dtype = dt;
  p.n = size_t(N), p.h = size_t(H), p.w = size_t(W), p.c = size_t(C), p.oh = oh, p.ow = ow;
  p.kh = kh, p.kw = kw, p.sh = sh, p.sw = sw, p.pt = pt, p.pb = pb, p.pl = pl, p.pr = pr;
  p.count_include_pad = count_include_pad;
  p.divisor = int32_t(divisor);
  p.scale_ratio = scale_ratio;
  p.zi = zi, p.zo = zo;
  const void* xp = x.data();
  void* yp = out.mutable_data();
  py::gil_scoped_release release;
  pool2d(p, xp, yp);
}

}  // namespace

void bind_pool2d(py::module_& m) {
  m.def("pool2d", &pool, py::arg("x"), py::arg("out"), py::arg("average"), py::arg("kernel"), py::arg("stride"),
        py::arg("padding"), py::arg("ceil_mode"), py::arg("count_include_pad"), py::arg("divisor"),
        py::arg("scale_ratio"), py::arg("input_zero_point"), py::arg("output_zero_point"),
        "x (N, H, W, C) uint8/int8/float32 -> out (N, OH, OW, C): max or average pooling; padding (top, bottom, "
        "left, right). Internal: use nnkern.max_pool2d / nnkern.avg_pool2d.");
  m.def("pool2d_output_size", [](ssize_t in, ssize_t k, ssize_t stride, ssize_t pad0, ssize_t pad1, bool ceil_mode) {
          try {
            return pool2d_output_size(geometry(in, "size"), geometry(k, "kernel"), geometry(stride, "stride"),
                                      geometry(pad0, "padding"), geometry(pad1, "padding"), ceil_mode);
          } catch (const std::invalid_argument& e) {
            throw py::value_error(e.what());
          }
        },
        py::arg("size"), py::arg("kernel"), py::arg("stride"), py::arg("pad0"), py::arg("pad1"), py::arg("ceil_mode"),
        "One dimension's output length (torch's pooling_output_shape with padding pad0 before, pad1 after).");
}

}  // namespace nnkern::bindings
