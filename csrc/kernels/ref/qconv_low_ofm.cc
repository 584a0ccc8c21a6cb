// Scalar reference low-output-channel convolution kernel (kernels/qconv_low_ofm.h): the oracle for the tests
// and the fallback on any CPU (the only kernel on aarch64). Reads exactly the IC bytes of each valid pixel;
// int32 arithmetic modulo 2^32 done in uint32_t; the output stage is the reference GEMM's
// (kernels/qepilogue_ref.h), so every ISA rounds identically.
#include <cstdint>
#include <cstring>

#include "kernels/qconv_low_ofm_list.h"
#include "kernels/qepilogue_ref.h"

namespace nnkern {
namespace {

void ref_conv_low_ofm(const QConvLowOfmRow& a) {
  const QEpilogue* ep = a.ep;
  const size_t esz = qout_elem_size(ep->out), G = (a.IC + 3) / 4;
  const uint8_t flip = a.flip ? 0x80 : 0, fill = uint8_t(uint8_t(a.x_fill) ^ flip);
  for (size_t j = 0; j < a.n; ++j)
    for (size_t o = 0; o < a.m; ++o) {
      uint32_t acc = ep->col_comp ? uint32_t(ep->col_comp[o]) : 0u;
      for (size_t r = 0; r < a.kh_n; ++r)
        for (size_t kw = 0; kw < a.KW; ++kw) {
          const ptrdiff_t ix = a.ix0 + ptrdiff_t(j * a.sw + kw * a.dw);
          const bool in = ix >= 0 && ix < ptrdiff_t(a.W);
          const uint8_t* x = in ? a.rows[r] + size_t(ix) * a.IC : nullptr;
          const int8_t* w = a.w + (r * a.KW + kw) * G * 16 + o * 4;
          for (size_t p = 0; p < a.IC; ++p)
            acc += uint32_t(in ? uint8_t(x[p] ^ flip) : fill) * uint32_t(int32_t(w[p / 4 * 16 + p % 4]));
        }
      // The stage writes element o of a 4-element scratch; copy it to its NHWC or planar place.
      alignas(4) uint8_t tmp[kQConvLowOfmMaxOc * 4];
      qepilogue_store_ref(ep, int32_t(acc), o, tmp);
      const size_t at = a.plane ? o * a.plane + j : j * a.m + o;
      std::memcpy(static_cast<char*>(a.c) + at * esz, tmp + o * esz, esz);
    }
}

}  // namespace

extern const QConvLowOfmKernel u8s8_conv_low_ofm_1x4c4__scalar = {"u8s8_conv_low_ofm_1x4c4__scalar", 1,
                                                                   ref_conv_low_ofm};

}  // namespace nnkern
