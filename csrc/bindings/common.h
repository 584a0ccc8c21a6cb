// Shared by the binding files: array access and argument conversion. No op logic here.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "core/isa.h"
#include "core/kernel_list.h"
#include "core/precision.h"
#include "kernels/f32_activation.h"
#include "kernels/f32_gemm.h"
#include "kernels/qgemm.h"

namespace nnkern {
struct QGemmKernel;
struct F32GemmKernel;
}

namespace nnkern::bindings {

namespace py = pybind11;

Isa isa_arg(const std::string& name);  // ValueError for an unknown name
// TypeError unless dtype_ok; ValueError unless a has dims (kAnyDim matches any), is C-contiguous, aligned
// to `align` bytes and (for outputs) writeable.
void check_layout(const py::array& a, const char* what, std::initializer_list<ssize_t> dims, bool dtype_ok,
                  size_t align, bool output);
// "minimax" | "scalef" | "accurate"; ValueError naming the argument (`what`) otherwise.
ActMethod act_method_arg(const std::string& name, const char* what);
// "highest" | "high" | "medium" (core/precision.h); ValueError otherwise.
inline Float32Precision precision_arg(const std::string& name) { return float32_precision_from_name(name); }

// The GEMM bindings' epilogue: alpha, beta, a bias (or null) and an optional ReLU clamp.
inline F32Epilogue relu_epilogue(float alpha, float beta, const float* bias, bool relu) {
  F32Epilogue ep;
  ep.alpha = alpha;
  ep.beta = beta;
  ep.bias = bias;
  if (relu) {
    ep.clamp = true;
    ep.clamp_min = 0.0f;
    ep.clamp_max = INFINITY;
  }
  return ep;
}

// Data pointers of arrays whose dtype the Python layer has checked (a TypeError here is a bug there).
// A misaligned pointer is refused too: the kernels (the scalar ones included) read whole elements, and
// the Python layer copies misaligned arrays first.
template <typename T>
const T* cdata(const py::array& a) {
  if (!py::isinstance<py::array_t<T>>(a)) throw py::type_error("internal: unexpected dtype");
  if (reinterpret_cast<uintptr_t>(a.data()) % alignof(T)) throw py::value_error("internal: misaligned array");
  return static_cast<const T*>(a.data());
}

// The same for an optional array argument: None -> nullptr.
template <typename T>
const T* cdata_or_null(const py::object& a) {
  return a.is_none() ? nullptr : cdata<T>(a.cast<py::array>());
}

template <typename T>
T* mdata(py::array& a) {
  if (!py::isinstance<py::array_t<T>>(a)) throw py::type_error("internal: unexpected dtype");
  if (reinterpret_cast<uintptr_t>(a.data()) % alignof(T)) throw py::value_error("internal: misaligned array");
  return static_cast<T*>(a.mutable_data());
}

// The arrays a layer's kernels read and write, checked against the sizes the C++ object holds (never
// against sizes a caller passes): dtype T, these dimensions, C-contiguous, aligned, and writeable for
// outputs. A mismatch raises TypeError (dtype) or ValueError naming `what`; the Python layer has already
// given its friendlier message, so these fire only if its checks are bypassed.
constexpr ssize_t kAnyDim = -1;
template <typename T>
const T* checked_in(const py::array& a, const char* what, std::initializer_list<ssize_t> dims) {
  check_layout(a, what, dims, py::isinstance<py::array_t<T>>(a), alignof(T), false);
  return static_cast<const T*>(a.data());
}
template <typename T>
T* checked_out(py::array& a, const char* what, std::initializer_list<ssize_t> dims) {
  check_layout(a, what, dims, py::isinstance<py::array_t<T>>(a), alignof(T), true);
  return static_cast<T*>(a.mutable_data());
}

// uint8 or int8 activations (the Python layer picks the dtype per call): the data, checked as checked_in.
inline const void* checked_a8_in(const py::array& a, const char* what, std::initializer_list<ssize_t> dims) {
  if (py::isinstance<py::array_t<uint8_t>>(a)) return checked_in<uint8_t>(a, what, dims);
  return checked_in<int8_t>(a, what, dims);
}

// The output of an integer layer, of the element type its QOut kind stores, checked as checked_out.
inline void* checked_q_out(py::array& a, QOut kind, const char* what, std::initializer_list<ssize_t> dims) {
  switch (kind) {
    case QOut::i32: return checked_out<int32_t>(a, what, dims);
    case QOut::f32: return checked_out<float>(a, what, dims);
    case QOut::u8: return checked_out<uint8_t>(a, what, dims);
    case QOut::s8: break;
  }
  return checked_out<int8_t>(a, what, dims);
}

// The fast paths: a common call (new output, the defaults) taken without the Python layer's checks, whose
// cost is several times a small product's. They accept exactly an ndarray (no subclass, no other array
// type) and return None for anything else, which the caller then hands to the checked path.
using NdProxy = py::detail::PyArray_Proxy;
inline const NdProxy* plain_ndarray(const py::handle& h) {
  return Py_TYPE(h.ptr()) == py::detail::npy_api::get().PyArray_Type_ ? py::detail::array_proxy(h.ptr()) : nullptr;
}
inline int type_num(const NdProxy* x) {
  return reinterpret_cast<const py::detail::PyArrayDescr_Proxy*>(x->descr)->type_num;
}
// Element type `num` (py::dtype::of<T>().num()) in native byte order: a byte-swapped array has the same
// type number.
inline bool has_type(const NdProxy* x, int num) {
  const auto* d = reinterpret_cast<const py::detail::PyArrayDescr_Proxy*>(x->descr);
  constexpr char swapped = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? '>' : '<';
  return d->type_num == num && d->byteorder != swapped;
}
// Native-order float32: its descriptor is a singleton (`x.dtype is numpy.float32` in Python).
inline bool is_native_float32(const NdProxy* x) {
  static PyObject* const float32 = py::dtype::of<float>().release().ptr();
  return x->descr == float32;
}
inline bool is_c_contiguous_aligned(const NdProxy* x) {
  constexpr int want = py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_ | py::detail::npy_api::NPY_ARRAY_ALIGNED_;
  return (x->flags & want) == want;
}
// A layer's input: C-contiguous, aligned, at least 1-D, with k elements per row (the last dimension).
inline bool is_layer_input(const NdProxy* x, size_t k) {
  return x && x->nd >= 1 && size_t(x->dimensions[x->nd - 1]) == k && is_c_contiguous_aligned(x);
}
// The rows of such an input (the product of its leading dimensions), and the shape of its output, with n
// elements per row.
inline size_t layer_rows(const NdProxy* x) {
  size_t rows = 1;
  for (int d = 0; d + 1 < x->nd; ++d) rows *= size_t(x->dimensions[d]);
  return rows;
}
inline std::vector<ssize_t> layer_output_shape(const NdProxy* x, size_t n) {
  std::vector<ssize_t> shape(x->dimensions, x->dimensions + x->nd);
  shape.back() = ssize_t(n);
  return shape;
}
// A new C-contiguous T array. From kAlignedOutputBytes up its data starts on a 64-byte line (numpy's own
// large arrays start 16 bytes into a page, and AMX stores each tile row of an int32 output whole: split across
// two lines they cost; docs/performance.md: "qgemm: realigning A"); smaller ones are numpy's, whose allocation
// costs less.
constexpr size_t kAlignedOutputBytes = size_t(64) << 10;
template <typename T>
py::array_t<T> new_output(const std::vector<ssize_t>& shape) {
  size_t bytes = sizeof(T);
  bool overflow = false;
  for (ssize_t d : shape) overflow |= __builtin_mul_overflow(bytes, size_t(d), &bytes);
  // Small ones, and sizes no memory holds (numpy raises its own error for those), as numpy makes them.
  if (overflow || bytes >= (size_t(1) << 62) || bytes < kAlignedOutputBytes) return py::array_t<T>(shape);
  void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (!p) throw std::bad_alloc();
  py::capsule owner(p, [](void* q) { std::free(q); });
  return py::array_t<T>(shape, static_cast<T*>(p), owner);
}
// Whether the byte ranges of two arrays intersect (numpy.may_share_memory, without its overhead).
bool may_overlap(const py::array& x, const py::array& y);
// The array a fast path writes: a new T array of this shape when out_in is None, else out_in itself if it
// is an ndarray of T (native byte order) and this shape, C-contiguous, aligned, writeable and sharing no
// byte with the inputs; nothing (the caller returns None) otherwise.
template <typename T>
std::optional<py::array> fast_output(const py::handle& out_in, const std::vector<ssize_t>& shape,
                                     std::initializer_list<py::handle> inputs) {
  if (out_in.is_none()) return new_output<T>(shape);
  constexpr int writeable = py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  const NdProxy* c = plain_ndarray(out_in);
  if (!c || !has_type(c, py::dtype::of<T>().num()) || size_t(c->nd) != shape.size() ||
      !std::equal(shape.begin(), shape.end(), c->dimensions) || !is_c_contiguous_aligned(c) ||
      (c->flags & writeable) != writeable)
    return std::nullopt;
  const auto out = py::reinterpret_borrow<py::array>(out_in);
  for (const py::handle& in : inputs)
    if (may_overlap(out, py::reinterpret_borrow<py::array>(in))) return std::nullopt;
  return out;
}
// Releasing the GIL costs about as much as a 32 x 32 x 32 int8 product: smaller ones keep it.
inline bool worth_releasing_gil(size_t m, size_t n, size_t k) { return m * n * k >= (size_t(1) << 15); }
// f() with the GIL released where worth_releasing_gil says so, else holding it.
template <typename F>
void without_gil_if_worth(size_t m, size_t n, size_t k, F&& f) {
  if (worth_releasing_gil(m, n, k)) {
    py::gil_scoped_release release;
    f();
  } else {
    f();
  }
}
// The float32 layers' fast path (Linear, at either precision): x a native float32 ndarray (..., K), into out as
// fast_output says, through run(M, x, out) with out's rows N floats apart; None for anything else.
template <typename Run>
py::object float_layer_fast(const py::handle& x_in, const py::handle& out_in, size_t K, size_t N, Run&& run) {
  const NdProxy* x = plain_ndarray(x_in);
  if (!is_layer_input(x, K) || !is_native_float32(x)) return py::none();
  const size_t M = layer_rows(x);
  const std::optional<py::array> given = fast_output<float>(out_in, layer_output_shape(x, N), {x_in});
  if (!given) return py::none();
  py::array out = *given;
  if (M == 0 || N == 0) return std::move(out);
  const float* xp = reinterpret_cast<const float*>(x->data);
  float* op = static_cast<float*>(out.mutable_data());
  without_gil_if_worth(M, N, K, [&] { run(M, xp, op); });
  return std::move(out);
}

// A 2-D float32 array as the kernels read it: row-major (ld = row stride) or column-major (the
// transpose of a row-major array). Other layouts (negative or non-unit strides, misaligned data)
// become a C-contiguous copy, kept alive in `keep`.
struct MatrixView {
  const float* data;
  size_t ld;
  bool transposed;
  py::object keep;  // null unless the view is a copy
};
MatrixView matrix_view(const py::array& a);

// A kernel of the "qgemm" list by name that this CPU can run (test hooks), else ValueError.
const QGemmKernel& runnable_qgemm_kernel(const std::string& name);
// The kernel of that name in list l, or null if `name` is none of its kernels; ValueError if this CPU cannot run it.
template <typename Kernel>
const Kernel* runnable_in(const KernelList<Kernel>& l, const std::string& name) {
  for (size_t i = 0; i < l.kernels.size(); ++i) {
    if (name != l.info[i].name) continue;
    if (!isa_supported(l.info[i].level))
      throw py::value_error(std::string("this CPU cannot run ") + name + " (no " + isa_name(l.info[i].level) + ")");
    return l.kernels[i];
  }
  return nullptr;
}

// ValueError unless `name` is a kernel of some registered family that this CPU can run (the tests' kernel hooks,
// which the op resolves in the family of the algorithm that runs).
void check_runnable_kernel(const std::string& name);

// A kernel of the "f32_gemm" list by name, or an ISA level's kernel, that this CPU can run, else ValueError.
const F32GemmKernel& runnable_f32_gemm_kernel(const std::string& which);

// One function per binding file, called from module.cc.
void bind_core(py::module_& m);
void bind_f32_gemm(py::module_& m);
void bind_f32_gemv(py::module_& m);
void bind_f32_activation(py::module_& m);
void bind_f32_topk(py::module_& m);
void bind_f32_lstm(py::module_& m);
void bind_qgemm(py::module_& m);
void bind_qconv2d(py::module_& m);
void bind_conv2d(py::module_& m);
void bind_quantize(py::module_& m);
void bind_pixel_shuffle(py::module_& m);
void bind_pool2d(py::module_& m);
void bind_graph(py::module_& m);
void bind_bf16(py::module_& m);

}  // namespace nnkern::bindings
