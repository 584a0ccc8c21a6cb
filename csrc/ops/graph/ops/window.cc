#include "ops/graph/ops/window.h"

#include <string>

#include "core/checked.h"

namespace nnkern::graph {

namespace {

void same_padding(bool upper, size_t in, size_t k, size_t s, size_t d, size_t* p0, size_t* p1) {
  const size_t out = ceil_div(in, s), need = checked_add(checked_mul(out - 1, s), checked_mul(d, k - 1), 1);
  const size_t total = need > in ? need - in : 0;
  *p0 = upper ? total / 2 : total - total / 2;
  *p1 = total - *p0;
}

}  // namespace

Window2d window_attrs(const NodeSpec& n, size_t H, size_t W, size_t KH, size_t KW) {
  const auto s = n.attr_ints("strides", {1, 1}), d = n.attr_ints("dilations", {1, 1});
  const auto p = n.attr_ints("pads", {0, 0, 0, 0});
  if (s.size() != 2 || d.size() != 2 || p.size() != 4) n.invalid("strides / dilations / pads of a 2-D window");
  for (int64_t v : s) if (v < 1) n.invalid("strides must be >= 1");
  for (int64_t v : d) if (v < 1) n.invalid("dilations must be >= 1");
  for (int64_t v : p) if (v < 0) n.invalid("pads must be >= 0");
  if (KH == 0 || KW == 0) n.invalid("the kernel is empty");
  Window2d w{size_t(s[0]), size_t(s[1]), size_t(d[0]), size_t(d[1]),
             size_t(p[0]), size_t(p[1]), size_t(p[2]), size_t(p[3])};
  const std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    same_padding(auto_pad == "SAME_UPPER", H, KH, w.sh, w.dh, &w.pt, &w.pb);
    same_padding(auto_pad == "SAME_UPPER", W, KW, w.sw, w.dw, &w.pl, &w.pr);
  } else if (auto_pad == "VALID") {
    w.pt = w.pb = w.pl = w.pr = 0;
  } else if (auto_pad != "NOTSET") {
    n.invalid("auto_pad '" + auto_pad + "'");
  }
  return w;
}

}  // namespace nnkern::graph
