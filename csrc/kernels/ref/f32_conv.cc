// The scalar direct convolution kernel and the oracle of kernels/f32_conv.h. Baseline code.
#include "kernels/f32_conv_list.h"

namespace nnkern {

namespace {

// The loop nest of the three formulas of kernels/f32_conv.h, taps in the kernels' order (kh, kw, c), one float32
// accumulator per output: they differ only in the channels reduced (ic of them; depthwise: the output's own) and
// where a weight lives (w_at(kh, kw, c, o)).
template <class WeightAt>
void conv_loops(const F32ConvArgs& a, bool depthwise, WeightAt w_at) {
  const size_t channels = depthwise ? 1 : a.ic;
  for (size_t j = 0; j < a.n; ++j)
    for (size_t o = 0; o < a.m; ++o) {
      float acc = 0.0f;
      for (size_t kh = 0; kh < a.kh_n; ++kh)
        for (size_t kw = 0; kw < a.kw_n; ++kw)
          for (size_t c = 0; c < channels; ++c)
            acc += a.x[j * a.x_pix + kh * a.x_kh + kw * a.x_kw + (depthwise ? o : c)] * a.w[w_at(kh, kw, c, o)];
      float* y = a.y + j * a.y_pix + o;
      *y = f32_epilogue_scalar(acc, y, o, *a.ep);
    }
}

}  // namespace

void f32_conv_reference(const F32ConvArgs& a, size_t MR) {
  conv_loops(a, false, [&](size_t kh, size_t kw, size_t c, size_t o) { return kh * a.w_kh + (kw * a.ic + c) * MR + o; });
}

void f32_dwconv_reference(const F32ConvArgs& a, size_t MR) {
  conv_loops(a, true, [&](size_t kh, size_t kw, size_t, size_t o) { return kh * a.w_kh + kw * MR + o; });
}

void f32_dotconv_reference(const F32ConvArgs& a) {
  conv_loops(a, false, [&](size_t kh, size_t kw, size_t c, size_t o) { return o * a.w_oc + kh * a.w_kh + kw * a.ic + c; });
}

namespace {
void dotconv_4x4(const F32ConvArgs& a) { f32_dotconv_reference(a); }
void dwconv_8x4(const F32ConvArgs& a) { f32_dwconv_reference(a, 8); }
void conv_8x4(const F32ConvArgs& a) { f32_conv_reference(a, 8); }
}  // namespace

// Not auto's choice (auto_pick false): the GEMM kernels' indirect form is faster than these plain loops.
const F32ConvKernel f32_conv_direct_8x4__scalar = {"f32_conv_direct_8x4__scalar", 8, 8, 1, {4, 0, 0, 0}, conv_8x4,
                                                    {4, 0, 0, 0}, conv_8x4, false, false, false};
const F32ConvKernel f32_conv_dot_4x4__scalar = {"f32_conv_dot_4x4__scalar", 4, 1, 1, {4, 4, 4, 4}, dotconv_4x4,
                                                {4, 4, 4, 4}, dotconv_4x4, false, true, false};
const F32ConvKernel f32_dwconv_8x4__scalar = {"f32_dwconv_8x4__scalar", 8, 8, 1, {4, 0, 0, 0}, dwconv_8x4,
                                              {4, 0, 0, 0}, dwconv_8x4, true};

}  // namespace nnkern
