// The scalar direct convolution kernel and the oracle of kernels/f32_conv.h. Baseline code.
#include "kernels/f32_conv_list.h"

namespace nnkern {

void f32_conv_reference(const F32ConvArgs& a, size_t MR) {
  for (size_t j = 0; j < a.n; ++j)
    for (size_t o = 0; o < a.m; ++o) {
      float acc = 0.0f;
      for (size_t kh = 0; kh < a.kh_n; ++kh)
        for (size_t kw = 0; kw < a.kw_n; ++kw)
          for (size_t c = 0; c < a.ic; ++c)
            acc += a.x[j * a.x_pix + kh * a.x_kh + kw * a.x_kw + c] * a.w[kh * a.w_kh + (kw * a.ic + c) * MR + o];
      float* y = a.y + j * a.y_pix + o;
      *y = f32_epilogue_scalar(acc, y, o, *a.ep);
    }
}

void f32_dwconv_reference(const F32ConvArgs& a, size_t MR) {
  for (size_t j = 0; j < a.n; ++j)
    for (size_t o = 0; o < a.m; ++o) {
      float acc = 0.0f;
      for (size_t kh = 0; kh < a.kh_n; ++kh)
        for (size_t kw = 0; kw < a.kw_n; ++kw)
          acc += a.x[j * a.x_pix + kh * a.x_kh + kw * a.x_kw + o] * a.w[kh * a.w_kh + kw * MR + o];
      float* y = a.y + j * a.y_pix + o;
      *y = f32_epilogue_scalar(acc, y, o, *a.ep);
    }
}

void f32_dotconv_reference(const F32ConvArgs& a) {
  for (size_t j = 0; j < a.n; ++j)
    for (size_t o = 0; o < a.m; ++o) {
      float acc = 0.0f;
      for (size_t kh = 0; kh < a.kh_n; ++kh)
        for (size_t kw = 0; kw < a.kw_n; ++kw)
          for (size_t c = 0; c < a.ic; ++c)
            acc += a.x[j * a.x_pix + kh * a.x_kh + kw * a.x_kw + c] * a.w[o * a.w_oc + kh * a.w_kh + kw * a.ic + c];
      float* y = a.y + j * a.y_pix + o;
      *y = f32_epilogue_scalar(acc, y, o, *a.ep);
    }
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
