// Binding of the LSTM op (ops/f32_lstm.h). Shapes, dtypes, strides, ids and lengths were checked by
// python/nnkern/lstm.py; strides arrive in elements.
#include <cstdint>
#include <memory>
#include <string>

#include "bindings/common.h"
#include "ops/f32_lstm.h"

namespace nnkern::bindings {
namespace {

class Lstm {
 public:
  Lstm(const py::array& w_ih, const py::array& w_hh, const py::object& bias, size_t input_size, size_t hidden_size)
      : op_(cdata<float>(w_ih), cdata<float>(w_hh), cdata_or_null<float>(bias), input_size, hidden_size) {}

  // out (rows, 4H) = x (rows, I) W_ih^T + bias; both C-contiguous.
  void project(const py::array& x, py::array& out) const {
    const size_t rows = size_t(x.shape(0));
    const float* xp = cdata<float>(x);
    float* op = mdata<float>(out);
    py::gil_scoped_release release;
    op_.project(rows, xp, op_.input_size(), op);
  }

  // x: float32 input rows (t, b) at t * x_ts + b * x_bs; or, with table set, int64 ids at t * x_ts + b * x_bs.
  size_t run(const py::object& x, const py::object& table, size_t x_ts, size_t x_bs, size_t seq, size_t batch,
           const py::object& h0, const py::object& c0, const py::object& lengths, py::array& out, size_t out_ts,
           size_t out_bs, py::array& h_n, py::array& c_n, const std::string& method) const {
    F32LstmCall call;
    call.seq = seq;
    call.batch = batch;
    if (table.is_none()) {
      call.x = cdata<float>(x.cast<py::array>());
      call.x_ts = x_ts;
      call.x_bs = x_bs;
    } else {
      call.table = cdata<float>(table.cast<py::array>());
      call.ids = cdata<int64_t>(x.cast<py::array>());
      call.id_ts = x_ts;
      call.id_bs = x_bs;
    }
    call.h0 = cdata_or_null<float>(h0);
    call.c0 = cdata_or_null<float>(c0);
    call.lengths = cdata_or_null<int64_t>(lengths);
    call.out = mdata<float>(out);
    call.out_ts = out_ts;
    call.out_bs = out_bs;
    call.h_n = mdata<float>(h_n);
    call.c_n = mdata<float>(c_n);
    call.method = act_method_arg(method, "activation");
    py::gil_scoped_release release;
    return op_.run(call);
  }

  std::string kernel_name() const { return op_.kernel_name(); }

 private:
  F32Lstm op_;
};

}  // namespace

void bind_f32_lstm(py::module_& m) {
  py::class_<Lstm>(m, "Lstm")
      .def(py::init<const py::array&, const py::array&, const py::object&, size_t, size_t>())
      .def("project", &Lstm::project)
      .def("run", &Lstm::run)
      .def_property_readonly("kernel_name", &Lstm::kernel_name);
}

}  // namespace nnkern::bindings
