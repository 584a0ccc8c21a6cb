// Binding of the LSTM op (ops/rnn/lstm.h). Every size, stride and index a call uses is derived here from
// the arrays themselves and checked against the sizes the op was built with: python/nnkern/lstm.py gives
// the friendly messages, these checks keep memory safe even if its attributes are changed.
#include <cstdint>
#include <memory>
#include <string>

#include "bindings/common.h"
#include "ops/rnn/lstm.h"

namespace nnkern::bindings {
namespace {

// A 3-D float32 (A, B, F) array read or written row by row: rows of F contiguous floats, the two outer
// strides whole floats >= 0 (a stride of 0 only where that dimension is 1).
struct Rows3 {
  size_t a_stride, b_stride;  // in floats
};

Rows3 rows3(const py::array& a, const char* what, ssize_t A, ssize_t B, ssize_t F, bool output) {
  if (!py::isinstance<py::array_t<float>>(a)) throw py::type_error(std::string(what) + " must be float32");
  if (a.ndim() != 3 || a.shape(0) != A || a.shape(1) != B || a.shape(2) != F)
    throw py::value_error(std::string(what) + " must have shape (" + std::to_string(A) + ", " + std::to_string(B) +
                          ", " + std::to_string(F) + ")");
  if (output && !a.writeable()) throw py::value_error(std::string(what) + " is read-only");
  if (F == 0) return {0, 0};  // rows of no floats: nothing is read or written (numpy's strides may be 0)
  constexpr ssize_t f = sizeof(float);
  bool ok = reinterpret_cast<uintptr_t>(a.data()) % f == 0 && (F <= 1 || a.strides(2) == f);
  for (int d = 0; d < 2; ++d)
    ok = ok && a.strides(d) >= 0 && a.strides(d) % f == 0 && (a.strides(d) > 0 || a.shape(d) <= 1);
  if (!ok) throw py::value_error(std::string(what) + ": rows must be contiguous and aligned, strides >= 0");
  return {size_t(a.strides(0) / f), size_t(a.strides(1) / f)};
}

ssize_t hidden_size_of(const py::array& w_hh) {
  if (w_hh.ndim() != 2) throw py::value_error("w_hh must be 2-D (4H, H)");
  return w_hh.shape(1);
}

class Lstm {
 public:
  // w_ih (4H, I), w_hh (4H, H), bias (4H,) or None (b_ih + b_hh): float32, copied and packed.
  Lstm(const py::array& w_ih, const py::array& w_hh, const py::object& bias)
      : hidden_(hidden_size_of(w_hh)),
        op_(checked_in<float>(w_ih, "w_ih", {4 * hidden_, kAnyDim}), checked_in<float>(w_hh, "w_hh", {4 * hidden_, hidden_}),
            bias.is_none() ? nullptr : checked_in<float>(bias.cast<py::array>(), "bias", {4 * hidden_}),
            size_t(w_ih.shape(1)), size_t(hidden_)) {}

  size_t I() const { return op_.input_size(); }
  size_t H() const { return op_.hidden_size(); }

  // Stores table (vocab, I) @ W_ih^T + bias as the (vocab, 4H) projected table; returns it (read-only).
  py::array set_table(const py::array& table) {
    const float* tp = checked_in<float>(table, "table", {kAnyDim, ssize_t(I())});
    const size_t rows = size_t(table.shape(0));
    py::array_t<float> proj({ssize_t(rows), ssize_t(4 * H())});
    float* pp = proj.mutable_data();
    if (rows) {
      py::gil_scoped_release release;
      op_.project(rows, tp, I(), pp);
    }
    proj.attr("flags").attr("writeable") = false;
    table_ = proj;  // one reference swap under the GIL: running calls keep the table they took
    return proj;
  }
  py::object table() const { return table_; }

  // x3: float32 (A, B, I), or with tokens int64 ids (A, B); (A, B) = (seq, batch), or (batch, seq) when
  // batch_first. out3 (A, B, H); h0, c0: None or (batch, H); lengths: None or int64 (batch,), each in
  // [0, seq]; h_n, c_n (1, batch, H). Returns the cell updates computed.
  size_t run(const py::array& x3, bool tokens, bool batch_first, const py::object& h0, const py::object& c0,
             const py::object& lengths, py::array& out3, py::array& h_n, py::array& c_n,
             const std::string& method, bool bf16_input) const {
    if (x3.ndim() < 2) throw py::value_error("x must have a sequence and a batch axis");
    const ssize_t A = x3.shape(0), B = x3.shape(1), Hs = ssize_t(H());
    const size_t seq = size_t(batch_first ? B : A), batch = size_t(batch_first ? A : B);
    const int t_ax = batch_first ? 1 : 0, b_ax = 1 - t_ax;
    F32LstmCall call;
    call.seq = seq;
    call.batch = batch;
    py::object table = table_;  // this call's table, kept alive while it runs
    if (!tokens) {
      const Rows3 xs = rows3(x3, "x", A, B, ssize_t(I()), false);
      call.x = static_cast<const float*>(x3.data());
      call.x_ts = t_ax == 0 ? xs.a_stride : xs.b_stride;
      call.x_bs = t_ax == 0 ? xs.b_stride : xs.a_stride;
    } else {
      if (table.is_none()) throw py::value_error("forward_tokens needs precompute_embeddings(table) first");
      const py::array tab = table.cast<py::array>();
      const int64_t* ids = checked_in<int64_t>(x3, "ids", {A, B});
      const int64_t vocab = int64_t(tab.shape(0));
      for (ssize_t i = 0; i < A * B; ++i)
        if (ids[i] < 0 || ids[i] >= vocab)
          throw py::value_error("ids must be in [0, " + std::to_string(vocab) + ") (the table's rows), got " +
                                std::to_string(ids[i]));
      call.table = static_cast<const float*>(tab.data());
      call.ids = ids;
      call.id_ts = t_ax == 0 ? size_t(B) : 1;
      call.id_bs = t_ax == 0 ? 1 : size_t(B);
    }
    const ssize_t bs = ssize_t(batch);
    call.h0 = h0.is_none() ? nullptr : checked_in<float>(h0.cast<py::array>(), "h0", {bs, Hs});
    call.c0 = c0.is_none() ? nullptr : checked_in<float>(c0.cast<py::array>(), "c0", {bs, Hs});
    if (!lengths.is_none()) {
      const int64_t* len = checked_in<int64_t>(lengths.cast<py::array>(), "lengths", {bs});
      for (size_t b = 0; b < batch; ++b)
        if (len[b] < 0 || uint64_t(len[b]) > seq)
          throw py::value_error("lengths must be in [0, " + std::to_string(seq) + "], got " + std::to_string(len[b]));
      call.lengths = len;
    }
    const Rows3 os = rows3(out3, "out", A, B, Hs, true);
    call.out = static_cast<float*>(out3.mutable_data());
    call.out_ts = t_ax == 0 ? os.a_stride : os.b_stride;
    call.out_bs = t_ax == 0 ? os.b_stride : os.a_stride;
    call.h_n = checked_out<float>(h_n, "h_n", {1, bs, Hs});
    call.c_n = checked_out<float>(c_n, "c_n", {1, bs, Hs});
    call.method = act_method_arg(method, "activation");
    call.bf16_input = bf16_input;
    if (!seq || !batch || !Hs) throw py::value_error("internal: empty LSTM call");
    py::gil_scoped_release release;
    return op_.run(call);
  }

  std::string kernel_name() const { return op_.kernel_name(); }

 private:
  ssize_t hidden_;  // before op_: its initializer checks the weights' shapes with it
  F32Lstm op_;
  py::object table_ = py::none();
};

}  // namespace

void bind_f32_lstm(py::module_& m) {
  py::class_<Lstm>(m, "Lstm")
      .def(py::init<const py::array&, const py::array&, const py::object&>())
      .def("set_table", &Lstm::set_table)
      .def_property_readonly("table", &Lstm::table)
      .def("run", &Lstm::run, py::arg("x"), py::arg("tokens"), py::arg("batch_first"), py::arg("h0"), py::arg("c0"),
           py::arg("lengths"), py::arg("out"), py::arg("h_n"), py::arg("c_n"), py::arg("method"),
           py::arg("bf16_input") = false)
      .def_property_readonly("input_size", &Lstm::I)
      .def_property_readonly("hidden_size", &Lstm::H)
      .def_property_readonly("kernel_name", &Lstm::kernel_name);
}

}  // namespace nnkern::bindings
