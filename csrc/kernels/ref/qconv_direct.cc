// Scalar reference direct convolution kernel (kernels/qconv_direct.h): the oracle for the tests and the kernel
// that runs the "direct" algorithm on CPUs without VNNI (auto never picks it there). int32 arithmetic modulo
// 2^32 in uint32_t, as vpdpbusd; the output stage is the reference GEMM's (kernels/qepilogue_ref.h).
#include <cstddef>
#include <cstdint>

#include "kernels/qconv_direct_list.h"
#include "kernels/qepilogue_ref.h"

namespace nnkern {
namespace {

void ref_conv_direct(size_t m, size_t n, const uint8_t* x, size_t x_pixel, size_t x_kh, size_t x_kw, size_t KH,
                     size_t KW, size_t icp, const int8_t* w, void* c, size_t ldc, const QEpilogue* ep) {
  const size_t esz = qout_elem_size(ep->out);
  for (size_t j = 0; j < n; ++j)
    for (size_t i = 0; i < m; ++i) {
      uint32_t acc = ep->col_comp ? uint32_t(ep->col_comp[i]) : 0u;
      for (size_t kh = 0; kh < KH; ++kh)
        for (size_t kw = 0; kw < KW; ++kw) {
          const uint8_t* xt = x + j * x_pixel + kh * x_kh + kw * x_kw;
          const int8_t* wt = w + (kh * KW + kw) * icp * kQConvDirectOcBlock;
          for (size_t p = 0; p < icp; ++p)
            acc += uint32_t(xt[p]) * uint32_t(int32_t(wt[p / 4 * kQConvDirectOcBlock * 4 + i * 4 + p % 4]));
        }
      qepilogue_store_ref(ep, int32_t(acc), i, static_cast<char*>(c) + j * ldc * esz);
    }
}

}  // namespace

extern const QConvDirectKernel u8s8_conv_direct_1x1c4__scalar = {"u8s8_conv_direct_1x1c4__scalar", 1, 1, false,
                                                                 ref_conv_direct};

}  // namespace nnkern
