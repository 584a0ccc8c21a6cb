// Every f32_conv kernel of the four families this CPU can run (f32_conv_direct, f32_conv_mgemm, f32_dwconv,
// f32_conv_dot; kernels/f32_conv_list.h), run and run_any, against the oracles f32_conv_reference /
// f32_dwconv_reference / f32_dotconv_reference over every tail: m = 1..MR channels, n = 1..nr pixels (nr_for(m),
// nr_any_for(m)), with rectangles of 0..3 kernel rows, 0..7 kernel columns (mGEMM's chunks of wf columns and
// their remainders) and 1..11 input channels (4-channel steps and their 1-3 channel tails), with and without bias
// and clamp. The input, the output, the bias and the dot kernels' weights (the layer's own rows) each end right
// before an unmapped page (testing/guard.h), every input and weight float outside the formula's reads is NaN
// (channels past ic, past m for depthwise, the gaps between pixels and taps), and the output outside the m x n
// tile must keep its sentinel. run takes the next pixel one kernel column on (x_pix == x_kw) and, where wf = 1,
// also two (stride 2). Each pixel's bits must not depend on the tile: a pixel run alone, and run_any on run's
// arguments, give the same bits (ops/conv/block.cc relies on it).
// Built for the host and cross-built for aarch64 (ctest runs it under qemu-user per CPU model).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/isa.h"
#include "harness.h"
#include "kernels/f32_conv_list.h"
#include "testing/guard.h"
#include "core/kernel_family.h"

using namespace nnkern;
using nnkern_test::check;

namespace {

constexpr float kSentinel = -777.0f;


// n floats ending at a guard page.
struct Guarded {
  GuardedBuffer buf;
  explicit Guarded(size_t n) : buf(n * sizeof(float)) {}
  float* data() const { return static_cast<float*>(buf.data()); }
};

struct Shape {
  size_t kh_n, kw_n, ic;
};

// f over a.n pixels in pieces of at most nr (run_any may take fewer pixels than run).
void run_pieces(F32ConvUkernel f, F32ConvArgs a, size_t nr) {
  const size_t n = a.n;
  for (size_t j = 0; j < n; j += nr) {
    F32ConvArgs p = a;
    p.n = std::min(nr, n - j);
    p.x = a.x + j * a.x_pix;
    p.y = a.y + j * a.y_pix;
    f(p);
  }
}

// One call: kernel k (run, or run_any with pixels that are not adjacent) on m channels x n pixels.
void check_call(const F32ConvKernel& k, bool any, size_t stride, size_t m, size_t n, const Shape& sh, int variant,
                uint32_t seed) {
  const bool dw = k.depthwise, dot = k.dot;
  const size_t MR = size_t(k.mr), ic = dw ? 1 : sh.ic, kh_n = sh.kh_n, kw_n = sh.kw_n;
  // Input: pixels of C floats (channels past ic, or past m for depthwise, are NaN), a kernel column d pixels on;
  // run: the next output pixel d pixels on too (x_pix == x_kw, which mGEMM needs) or, for stride 2, 2 d pixels on
  // (x_pix == 2 x_kw: the depthwise tiles' shared columns); run_any: any x_pix.
  // Every fourth variant packs pixels densely (C == ic, d == 1: x_kw == ic, the direct kernels' merged (kw, c)
  // loop); the others leave 3 NaN channels after each pixel's used ones.
  const size_t used = dw ? m : ic, C = used + (variant % 4 == 2 ? 0 : 3), d = 1 + size_t(variant % 2);
  const size_t x_kw = d * C, row = ((n - 1) * d * stride + (kw_n ? kw_n - 1 : 0) * d + 1) * C + 5 * C;
  const size_t x_kh = row, x_pix = any ? 2 * row + 3 * C : stride * x_kw;
  const size_t last = (n - 1) * x_pix + (kh_n ? kh_n - 1 : 0) * x_kh + (kw_n ? kw_n - 1 : 0) * x_kw + used;
  Guarded xg(last + 7);
  float* xbuf = xg.data();
  for (size_t i = 0; i < last + 7; ++i) xbuf[i] = NAN;
  float* x = xbuf + 7;  // some NaN before the first pixel too
  uint32_t s = seed;
  for (size_t j = 0; j < n; ++j)
    for (size_t kh = 0; kh < kh_n; ++kh)
      for (size_t kw = 0; kw < kw_n; ++kw)
        for (size_t c = 0; c < used; ++c) x[j * x_pix + kh * x_kh + kw * x_kw + c] = nnkern_test::next_unit(s);
  // Weights, a kernel column and row more than the rectangle (NaN there). Packed blocks of MR channels: rows past m
  // are read by contract (values that only reach unstored lanes: NaN here). Dot: the layer's rows, w_oc apart,
  // nothing readable past row m - 1's last tap.
  const size_t KW = kw_n + 1, w_kh = dot ? KW * ic : (dw ? KW : KW * ic) * MR, w_oc = (kh_n + 1) * w_kh;
  const auto w_at = [&](size_t o, size_t kh, size_t kw, size_t c) {
    return dot ? o * w_oc + kh * w_kh + kw * ic + c : kh * w_kh + (kw * ic + c) * MR + o;
  };
  const size_t w_len = dot ? (kh_n && kw_n ? w_at(m - 1, kh_n - 1, kw_n - 1, ic - 1) + 1 : 1) : (kh_n + 1) * w_kh;
  Guarded wg(w_len);
  float* w = wg.data();
  for (size_t i = 0; i < w_len; ++i) w[i] = NAN;
  for (size_t kh = 0; kh < kh_n; ++kh)
    for (size_t kw = 0; kw < kw_n; ++kw)
      for (size_t c = 0; c < ic; ++c)
        for (size_t o = 0; o < m; ++o) w[w_at(o, kh, kw, c)] = nnkern_test::next_unit(s);
  // Bias (m floats before a guard page) and output (the last stored float before one).
  Guarded bg(m);
  for (size_t o = 0; o < m; ++o) bg.data()[o] = nnkern_test::next_unit(s);
  const size_t y_pix = MR + 3, y_len = (n - 1) * y_pix + m;
  Guarded yg(y_len);
  for (size_t i = 0; i < y_len; ++i) yg.data()[i] = kSentinel;
  std::vector<float> y_ref(y_len, kSentinel), y_alone(y_len, kSentinel), y_any(y_len, kSentinel);

  F32Epilogue ep;
  if (variant & 2) ep.bias = bg.data();
  if (variant & 4) {
    ep.clamp = true;
    ep.clamp_min = -0.5f;
    ep.clamp_max = 0.75f;
  }
  F32ConvArgs a{};
  a.m = m;
  a.n = n;
  a.kh_n = kh_n;
  a.kw_n = kw_n;
  a.ic = ic;
  a.x = x;
  a.x_pix = x_pix;
  a.x_kw = x_kw;
  a.x_kh = x_kh;
  a.w = w;
  a.w_kh = w_kh;
  a.w_oc = w_oc;
  a.y = y_ref.data();
  a.y_pix = y_pix;
  a.ep = &ep;
  if (dot)
    f32_dotconv_reference(a);
  else if (dw)
    f32_dwconv_reference(a, MR);
  else
    f32_conv_reference(a, MR);
  a.y = yg.data();
  (any ? k.run_any : k.run)(a);
  if (!any) {  // the same pixels one at a time, and through run_any
    a.y = y_alone.data();
    run_pieces(k.run, a, 1);
    a.y = y_any.data();
    run_pieces(k.run_any, a, size_t(k.nr_any_for(m)));
  }

  char what[200];
  std::snprintf(what, sizeof what, "%s %s m=%zu n=%zu kh=%zu kw=%zu ic=%zu d=%zu stride=%zu bias=%d clamp=%d", k.name,
                any ? "run_any" : "run", m, n, kh_n, kw_n, ic, d, stride, int(ep.bias != nullptr), int(ep.clamp));
  for (size_t i = 0; i < y_len; ++i) {
    const size_t j = i / y_pix, o = i % y_pix;
    const float got = yg.data()[i];
    if (o >= m) {
      check(std::memcmp(&got, &kSentinel, 4) == 0, "%s: wrote y(%zu, %zu) outside the tile", what, j, o);
      continue;
    }
    double mag = 0.0;
    for (size_t kh = 0; kh < kh_n; ++kh)
      for (size_t kw = 0; kw < kw_n; ++kw)
        for (size_t c = 0; c < ic; ++c)
          mag += std::fabs(double(x[j * x_pix + kh * x_kh + kw * x_kw + (dw ? o : c)]) * w[w_at(o, kh, kw, c)]);
    const double K = double(kh_n * kw_n * ic), bias = ep.bias ? std::fabs(ep.bias[o]) : 0.0;
    const double tol = 2.0 * (2.0 * K + 2.0) * std::ldexp(1.0, -24) * (mag + bias) + 1e-30;
    check(std::fabs(double(got) - y_ref[i]) <= tol, "%s: y(%zu, %zu) = %.9g, reference %.9g (tol %.3g)", what, j, o,
          got, double(y_ref[i]), tol);
    if (!any) {
      check(std::memcmp(&got, &y_alone[i], 4) == 0, "%s: y(%zu, %zu) = %.9g, %.9g run alone", what, j, o, got,
            double(y_alone[i]));
      check(std::memcmp(&got, &y_any[i], 4) == 0, "%s: y(%zu, %zu) = %.9g, %.9g from run_any", what, j, o, got,
            double(y_any[i]));
    }
  }
}

void check_kernel(const F32ConvKernel& k) {
  // Rectangles: empty ones (every tap clipped), single taps, mGEMM's chunks of 3 columns and their remainders,
  // input channels around the 4-channel steps.
  const Shape shapes[] = {{1, 1, 1}, {3, 3, 4}, {2, 3, 5}, {1, 4, 3}, {3, 5, 8}, {2, 7, 9}, {1, 2, 2},
                          {3, 6, 7}, {1, 3, 11}, {0, 3, 4}, {2, 0, 5}, {2, 3, 16}};
  uint32_t seed = 1;
  // run at stride 2 too where the kernel allows it (wf = 1; mGEMM's run needs x_pix == x_kw).
  const size_t strides = k.wf == 1 ? 2 : 1;
  for (int any = 0; any < 2; ++any)
    for (size_t stride = 1; stride <= (any ? 1 : strides); ++stride)
      for (size_t m = 1; m <= size_t(k.mr); ++m) {
        const size_t nr = size_t(any ? k.nr_any_for(m) : k.nr_for(m));
        check(nr >= 1, "%s: nr(%zu) = 0", k.name, m);
        // 1..nr pixels, then whole tiles and the pieces after them (ops/conv/tiles.cc passes whole rows).
        std::vector<size_t> counts;
        for (size_t n = 1; n <= nr; ++n) counts.push_back(n);
        counts.insert(counts.end(), {nr + 1, 2 * nr + 3});
        for (size_t n : counts)
          for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; ++si)
            check_call(k, any, stride, m, n, shapes[si], int(m + n + si + any) % 8, ++seed);
      }
}

}  // namespace

int main() {
  int ran = 0, simd = 0;
  const KernelList<F32ConvKernel>* lists[] = {&f32_conv_direct_family().list(), &f32_conv_mgemm_family().list(), &f32_dwconv_family().list(),
                                              &f32_conv_dot_family().list()};
  for (const KernelList<F32ConvKernel>* list : lists)
    for (size_t ki = 0; ki < list->kernels.size(); ++ki) {
      const F32ConvKernel& k = *list->kernels[ki];
      const Isa isa = list->info[ki].level;
      if (!isa_supported(isa)) {
        std::printf("skip %s: this CPU lacks %s\n", k.name, isa_name(isa));
        continue;
      }
      std::printf("testing %s (%s, mr %d, wf %d)\n", k.name, list->family, k.mr, k.wf);
      const long failed_before = nnkern_test::failed();
      check_kernel(k);
      ++ran;
      simd += isa != Isa::scalar;
      std::printf("  %s: %s\n", k.name, nnkern_test::failed() == failed_before ? "ok" : "FAILED");
    }
  check(ran >= 3, "only %d f32_conv kernels ran", ran);
  std::printf("%d kernels, %d SIMD\n", ran, simd);
  return nnkern_test::finish();
}
