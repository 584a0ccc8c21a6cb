// Bindings of quantize / dequantize. The Python layer (nnkern/quantize.py) checked dtypes, shapes and
// parameters; arrays are C-contiguous; scale (float32) and zp (int32) have C entries.
#include "bindings/common.h"
#include "ops/quant/quantize.h"

namespace nnkern::bindings {

void bind_quantize(py::module_& m) {
  m.def("quantize", [](const py::array& x, py::array& q, size_t outer, size_t C, size_t inner, const py::array& scale,
                       const py::array& zp, bool is_signed) {
    const float* xp = cdata<float>(x);
    uint8_t* qp = static_cast<uint8_t*>(q.mutable_data());
    const float* sp = cdata<float>(scale);
    const int32_t* zpp = cdata<int32_t>(zp);
    py::gil_scoped_release release;
    quantize(xp, qp, outer, C, inner, sp, zpp, is_signed);
  });
  m.def("dequantize", [](const py::array& q, py::array& x, size_t outer, size_t C, size_t inner,
                         const py::array& scale, const py::array& zp, bool is_signed) {
    const uint8_t* qp = static_cast<const uint8_t*>(q.data());
    float* xp = mdata<float>(x);
    const float* sp = cdata<float>(scale);
    const int32_t* zpp = cdata<int32_t>(zp);
    py::gil_scoped_release release;
    dequantize(qp, xp, outer, C, inner, sp, zpp, is_signed);
  });
  // Test hook: x float32 (N, K, H, W) -> q uint8 (N, H, W, K) (int8 results as their bytes), C-contiguous: the
  // graph's nnkern.QuantizeToNhwc.
  m.def("quantize_to_nhwc", [](const py::array& x, py::array& q, float scale, int32_t zp, bool is_signed) {
    const float* xp = checked_in<float>(x, "x", {kAnyDim, kAnyDim, kAnyDim, kAnyDim});
    const size_t N = size_t(x.shape(0)), K = size_t(x.shape(1)), H = size_t(x.shape(2)), W = size_t(x.shape(3));
    uint8_t* qp = checked_out<uint8_t>(q, "q", {x.shape(0), x.shape(2), x.shape(3), x.shape(1)});
    py::gil_scoped_release release;
    quantize_to_nhwc(xp, qp, N, K, H * W, scale, zp, is_signed);
  });
  // (min, max) of the non-NaN elements of a 1-D C-contiguous float32 array; (inf, -inf) if there are none.
  m.def("minmax", [](const py::array& x) {
    const float* xp = checked_in<float>(x, "x", {kAnyDim});
    const size_t n = size_t(x.size());
    float lo = 0, hi = 0;
    {
      py::gil_scoped_release release;
      minmax(xp, n, &lo, &hi);
    }
    return py::make_tuple(lo, hi);
  });
}

}  // namespace nnkern::bindings
