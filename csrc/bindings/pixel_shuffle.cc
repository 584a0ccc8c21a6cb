// Bindings of pixel shuffle / unshuffle: any dtype of 1, 2, 4 or 8 bytes, copied as raw bytes.
#include <array>

#include "bindings/common.h"
#include "ops/shuffle/pixel_shuffle.h"

namespace nnkern::bindings {

namespace {

// a * b, or ValueError when it overflows ssize_t (a shape no array could have).
ssize_t mul_dim(ssize_t a, ssize_t b) {
  ssize_t p;
  if (__builtin_mul_overflow(a, b, &p)) throw py::value_error("pixel_shuffle: the shape overflows");
  return p;
}

// x: the 4-D input; y: the output, of x's dtype and the shape the op gives (checked here, since the
// copy trusts every size). inverse = false: x (N, C*r*r, H, W) -> y (N, C, H*r, W*r) for NCHW,
// x (N, H, W, C*r*r) -> y (N, H*r, W*r, C) for NHWC; inverse = true: the other way round.
void shuffle(const py::array& x, py::array& y, ssize_t r, bool nhwc, bool inverse) {
  if (r < 1) throw py::value_error("pixel_shuffle: r must be positive");
  if (x.ndim() != 4) throw py::value_error("pixel_shuffle: x must be 4-D");
  const py::dtype dt = x.dtype();
  const size_t es = size_t(dt.itemsize());
  // Copying object pointers as bytes would skip their reference counts.
  const bool dtype_ok = (es == 1 || es == 2 || es == 4 || es == 8) && !dt.attr("hasobject").cast<bool>();
  const ssize_t rr = mul_dim(r, r);
  const int ch = nhwc ? 3 : 1, hd = nhwc ? 1 : 2, wd = nhwc ? 2 : 3;
  // The small (unshuffled-side) geometry, from whichever of x and y is shuffled.
  ssize_t C, H, W;
  if (!inverse) {
    if (x.shape(ch) % rr) throw py::value_error("pixel_shuffle: channels not divisible by r*r");
    C = x.shape(ch) / rr, H = x.shape(hd), W = x.shape(wd);
  } else {
    if (x.shape(hd) % r || x.shape(wd) % r) throw py::value_error("pixel_unshuffle: H or W not divisible by r");
    C = x.shape(ch), H = x.shape(hd) / r, W = x.shape(wd) / r;
  }
  const ssize_t N = x.shape(0), Cr = mul_dim(C, rr), Hr = mul_dim(H, r), Wr = mul_dim(W, r);
  // The expected shapes: unshuffled (N, C*r*r, H, W) and shuffled (N, C, H*r, W*r), or their NHWC forms.
  const auto check = [&](const py::array& a, const char* what, bool shuffled, bool ok, bool output) {
    std::array<ssize_t, 4> d = shuffled ? std::array<ssize_t, 4>{N, C, Hr, Wr} : std::array<ssize_t, 4>{N, Cr, H, W};
    if (nhwc) d = {d[0], d[2], d[3], d[1]};
    check_layout(a, what, {d[0], d[1], d[2], d[3]}, ok, es, output);
  };
  check(x, "x", inverse, dtype_ok, false);
  check(y, "out", !inverse, dtype_ok && y.dtype().equal(dt), true);
  if (x.size() && may_overlap(x, y)) throw py::value_error("pixel_shuffle: out overlaps x");
  const PixelShuffleShape s{size_t(N), size_t(C), size_t(H), size_t(W), size_t(r), es, nhwc};
  const void* xp = x.data();
  void* yp = y.mutable_data();
  py::gil_scoped_release release;
  pixel_shuffle(s, inverse, xp, yp);
}

}  // namespace

void bind_pixel_shuffle(py::module_& m) {
  m.def("pixel_shuffle", [](const py::array& x, py::array& out, ssize_t r, bool nhwc) { shuffle(x, out, r, nhwc, false); },
        py::arg("x"), py::arg("out"), py::arg("r"), py::arg("nhwc"),
        "x (N, C*r*r, H, W) -> out (N, C, H*r, W*r), or NHWC (N, H, W, C*r*r) -> (N, H*r, W*r, C). Internal: "
        "use nnkern.pixel_shuffle.");
  m.def("pixel_unshuffle", [](const py::array& x, py::array& out, ssize_t r, bool nhwc) { shuffle(x, out, r, nhwc, true); },
        py::arg("x"), py::arg("out"), py::arg("r"), py::arg("nhwc"),
        "The inverse of pixel_shuffle. Internal: use nnkern.pixel_unshuffle.");
}

}  // namespace nnkern::bindings
