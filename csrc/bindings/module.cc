// The one pybind11 module. Binding files convert arrays, release the GIL and call an op: no logic.
// The Python layer (python/nnkern) has already checked dtypes, shapes, layouts and aliasing.
#include "bindings/common.h"

PYBIND11_MODULE(_C, m) {
  m.doc() = "nnkern native core (internal: use the nnkern package)";
  nnkern::bindings::bind_core(m);
  nnkern::bindings::bind_f32_gemm(m);
  nnkern::bindings::bind_f32_gemv(m);
  nnkern::bindings::bind_f32_activation(m);
  nnkern::bindings::bind_f32_topk(m);
  nnkern::bindings::bind_f32_lstm(m);
  nnkern::bindings::bind_qgemm(m);
  nnkern::bindings::bind_qconv2d(m);
  nnkern::bindings::bind_conv2d(m);
  nnkern::bindings::bind_quantize(m);
  nnkern::bindings::bind_pixel_shuffle(m);
  nnkern::bindings::bind_pool2d(m);
  nnkern::bindings::bind_graph(m);
  nnkern::bindings::bind_bf16(m);
}
