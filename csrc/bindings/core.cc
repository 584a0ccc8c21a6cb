// Bindings of the core: CPU information, the ISA cap, threads, the peak loops, test buffers.
#include "bindings/common.h"
#include "core/dispatch.h"
#include "core/algorithm.h"
#include "core/kernel_list.h"
#include "core/workspace.h"
#include "core/threadpool.h"
#include "ops/peak/peak.h"
#include "testing/guard.h"

#include <algorithm>
#include <cstdint>

namespace nnkern::bindings {

void check_runnable_kernel(const std::string& name) {
  for (const std::string& family : kernel_families())
    for (const KernelInfo& k : *kernel_family(family)) {
      if (name != k.name) continue;
      if (!isa_supported(k.level))
        throw py::value_error("this CPU cannot run " + name + " (no " + isa_name(k.level) + ")");
      return;
    }
  throw py::value_error("no kernel named '" + name + "' in this build");
}

Isa isa_arg(const std::string& name) {
  Isa isa;
  if (!isa_from_name(name, &isa)) throw py::value_error("unknown ISA level '" + name + "'");
  return isa;
}

void check_layout(const py::array& a, const char* what, std::initializer_list<ssize_t> dims, bool dtype_ok,
                  size_t align, bool output) {
  if (!dtype_ok) throw py::type_error(std::string(what) + ": unexpected dtype " + py::str(a.dtype()).cast<std::string>());
  bool shape_ok = a.ndim() == ssize_t(dims.size());
  for (size_t d = 0; shape_ok && d < dims.size(); ++d) shape_ok = dims.begin()[d] == kAnyDim || a.shape(d) == dims.begin()[d];
  if (!shape_ok) {
    std::string want = "(";
    for (ssize_t d : dims) want += (d == kAnyDim ? std::string("*") : std::to_string(d)) + ", ";
    throw py::value_error(std::string(what) + " must have shape " + want.substr(0, want.size() - 2) + "), got " +
                          py::str(a.attr("shape")).cast<std::string>());
  }
  constexpr int kContiguous = py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_;
  if (!(a.flags() & kContiguous)) throw py::value_error(std::string(what) + " must be C-contiguous");
  if (reinterpret_cast<uintptr_t>(a.data()) % align) throw py::value_error(std::string(what) + " must be aligned");
  if (output && !a.writeable()) throw py::value_error(std::string(what) + " is read-only");
}

MatrixView matrix_view(const py::array& a) {
  const ssize_t rows = a.shape(0), cols = a.shape(1), s0 = a.strides(0), s1 = a.strides(1);
  constexpr ssize_t f = sizeof(float);
  const bool aligned = reinterpret_cast<uintptr_t>(a.data()) % f == 0;
  if (aligned && (cols <= 1 || s1 == f) && s0 >= 0 && s0 % f == 0) {
    const ssize_t ld = rows > 1 ? s0 / f : cols;
    if (ld >= cols) return {cdata<float>(a), size_t(std::max<ssize_t>(ld, 1)), false, py::object()};
  }
  if (aligned && (rows <= 1 || s0 == f) && s1 >= 0 && s1 % f == 0) {
    const ssize_t ld = cols > 1 ? s1 / f : rows;
    if (ld >= rows) return {cdata<float>(a), size_t(std::max<ssize_t>(ld, 1)), true, py::object()};
  }
  // numpy.array(copy=True) always allocates fresh, aligned, C-contiguous memory.
  py::array copy = py::module_::import("numpy").attr("array")(a, py::arg("order") = "C", py::arg("copy") = true);
  return {cdata<float>(copy), size_t(std::max<ssize_t>(cols, 1)), false, copy};
}


namespace {
std::pair<uintptr_t, uintptr_t> byte_extent(const py::array& a);
}  // namespace

bool may_overlap(const py::array& x, const py::array& y) {
  auto [xl, xh] = byte_extent(x);
  auto [yl, yh] = byte_extent(y);
  return xl < xh && yl < yh && xl < yh && yl < xh;
}

namespace {

// Byte range [lo, hi) an array can touch; empty for a zero-size array.
std::pair<uintptr_t, uintptr_t> byte_extent(const py::array& a) {
  uintptr_t lo = reinterpret_cast<uintptr_t>(a.data()), hi = lo;
  for (ssize_t d = 0; d < a.ndim(); ++d) {
    if (a.shape(d) == 0) return {0, 0};
    const ssize_t span = (a.shape(d) - 1) * a.strides(d);
    (span < 0 ? lo : hi) += span;  // unsigned wrap-around adds a negative span
  }
  return {lo, hi + uintptr_t(a.itemsize())};
}

py::dict cpu_info() {
  const CpuFeatures& f = cpu_features();
  py::dict d, feats, caches, kernels;
  d["arch"] = f.arch;
  d["vendor"] = f.vendor;
  d["model"] = f.model;
  for (auto [k, v] : std::initializer_list<std::pair<const char*, bool>>{
           {"sse4_2", f.sse42}, {"avx", f.avx}, {"avx2", f.avx2}, {"fma", f.fma}, {"f16c", f.f16c},
           {"avx512f", f.avx512f}, {"avx512bw", f.avx512bw}, {"avx512dq", f.avx512dq}, {"avx512vl", f.avx512vl},
           {"avx512_vnni", f.avx512vnni}, {"avx_vnni", f.avxvnni}, {"avx512_bf16", f.avx512bf16}, {"amx_tile", f.amx_tile}, {"amx_int8", f.amx_int8},
           {"amx_bf16", f.amx_bf16}, {"os_ymm", f.os_ymm}, {"os_zmm", f.os_zmm}, {"os_amx", f.os_amx},
           {"amx_permitted", amx_permitted()},
           {"asimd", f.asimd}, {"asimddp", f.asimddp}, {"i8mm", f.i8mm}, {"bf16", f.bf16}})
    feats[k] = v;
  d["features"] = feats;
  caches["l1d"] = f.l1d;
  caches["l2"] = f.l2;
  caches["l3"] = f.l3;
  d["caches"] = caches;
  py::list levels, supported;
  for (Isa i : isa_levels()) {
    levels.append(isa_name(i));
    if (isa_supported(i)) supported.append(isa_name(i));
  }
  d["isa_levels"] = levels;
  d["supported_isas"] = supported;
  d["max_isa"] = isa_name(max_isa());
  py::list active;
  for (Isa i : active_isas()) active.append(isa_name(i));
  d["active_isas"] = active;
  for (const auto& [op, name] : chosen_kernels()) kernels[op.c_str()] = name;
  d["kernels"] = kernels;
  d["num_threads"] = get_num_threads();
  return d;
}

}  // namespace

void bind_core(py::module_& m) {
  m.def("cpu_info", &cpu_info);
  m.def("may_overlap", &may_overlap);
  m.def("isa_levels", [] {
    std::vector<std::string> v;
    for (Isa i : isa_levels()) v.push_back(isa_name(i));
    return v;
  });
  m.def("isa_supported", [](const std::string& n) { return isa_supported(isa_arg(n)); });
  m.def("kernel_families", &kernel_families);
  m.def("algorithm_ops", &algorithm_ops);
  m.def(
      "algorithms",
      [](const std::string& op) {
        const std::vector<std::string>* names = algorithm_names(op);
        if (!names) throw py::value_error("no algorithm table for '" + op + "'");
        return *names;
      },
      "The entries of an op's algorithm table, in the order algorithm='auto' tries them.");
  m.def("last_algorithm", &take_last_selection, py::arg("op"),
        "The entry of op's algorithm table that this thread's last call selected, then forgotten: '' if no "
        "call since the last read (NNKERN_VERBOSE reports it).");
  m.def("workspace_last_bytes", &workspace_last_bytes,
        "Scratch bytes of the last op call that ended on this thread (its workspace).");
  m.def("workspace_retained_bytes", &workspace_retained_bytes,
        "Scratch bytes this thread keeps allocated between calls.");
  m.def("set_workspace_guards", &set_workspace_guards, py::arg("on"),
        "Test hook: a guard pattern after every workspace and thread scratch slice, checked when it ends.");
  m.def("workspace_guard_violations", &workspace_guard_violations, py::arg("reset") = false,
        "How many guards were found overwritten (all threads) since the last reset.");
  m.def(
      "workspace_overrun_probe",
      [](bool scratch, size_t bytes, size_t overrun, size_t tasks) {
        py::gil_scoped_release release;
        workspace_overrun_probe(scratch, bytes, overrun, tasks);
      },
      py::arg("scratch"), py::arg("bytes"), py::arg("overrun"), py::arg("tasks") = 8,
      "Test hook: writes `overrun` bytes past a workspace (or each thread's scratch slice) of `bytes`.");
  m.def(
      "kernel_list",
      [](const std::string& family) {
        const std::vector<KernelInfo>* info = kernel_family(family);
        if (!info) throw py::value_error("unknown kernel family '" + family + "'");
        py::list out;
        for (const KernelInfo& k : *info) {
          py::dict d;
          d["name"] = k.name;
          d["level"] = isa_name(k.level);
          d["mr"] = k.mr;
          d["nr"] = k.nr;
          d["kgroup"] = k.kgroup;
          d["weight_bits"] = k.weight_bits;
          d["supported"] = isa_supported(k.level);
          out.append(d);
        }
        return out;
      },
      "Every kernel of a family in this build (its list, csrc/kernels/<family>_list.h): name, ISA level, "
      "tile, K-group, the weight bits it is exact for (8, or 7 for the integer kernels exact only on [-64, 64]) "
      "and whether this CPU can run it.");
  m.def("set_max_isa", [](const std::string& n) { set_max_isa(isa_arg(n)); });
  m.def("get_max_isa", [] { return std::string(isa_name(max_isa())); });
  m.def("set_num_threads", [](int n) {
    py::gil_scoped_release release;
    set_num_threads(n);  // std::invalid_argument -> ValueError, std::runtime_error -> RuntimeError
  });
  m.def("get_num_threads", &get_num_threads);
  m.attr("MAX_NUM_THREADS") = kMaxThreads;
  m.def("default_num_threads", &default_num_threads);  // reads the environment now (tests)
  m.def("f32_peak_flops", [](const std::string& n, double seconds) {
    Isa isa = isa_arg(n);
    py::gil_scoped_release release;
    return f32_peak_flops(isa, seconds);
  });
  py::class_<GuardedBuffer>(m, "GuardedBuffer", py::buffer_protocol())
      .def(py::init<size_t>())
      .def_buffer([](GuardedBuffer& g) {
        return py::buffer_info(g.data(), 1, py::format_descriptor<uint8_t>::format(), 1, {g.size()}, {1});
      });
}

}  // namespace nnkern::bindings

// A C ABI for threadpoolctl's nnkern controller (python/nnkern/_threads.py): threadpoolctl finds the
// loaded library by file name, then tells it from other packages' _C modules by these symbols.
extern "C" {
__attribute__((visibility("default"))) int nnkern_threadpool_get_num_threads() { return nnkern::get_num_threads(); }

// 0 on success; -1 (nothing changed) for a bad count or if the threads could not be started.
__attribute__((visibility("default"))) int nnkern_threadpool_set_num_threads(int n) {
  try {
    nnkern::set_num_threads(n);
    return 0;
  } catch (...) {
    return -1;
  }
}
}
