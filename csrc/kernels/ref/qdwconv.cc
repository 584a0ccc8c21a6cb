// Scalar reference depthwise kernel (kernels/qdwconv.h): the oracle for the tests and the fallback on any
// CPU. int32 arithmetic modulo 2^32 done in uint32_t (where wrapping is defined); the output stage is the
// reference GEMM's (kernels/qepilogue_ref.h), so every ISA rounds identically.
#include <cstdint>

#include "kernels/qdwconv_list.h"
#include "kernels/qepilogue_ref.h"

namespace nnkern {
namespace {

void ref_dwconv(size_t channels, size_t pixels, size_t ks, const void* const* b, const void* zero, size_t b_offset,
                const int32_t* w, size_t cpad, void* c, size_t ldc, const QEpilogue* ep) {
  const size_t esz = qout_elem_size(ep->out);
  for (size_t p = 0; p < pixels; ++p, b += ks) {
    uint8_t* cp = static_cast<uint8_t*>(c) + p * ldc * esz;
    for (size_t ch = 0; ch < channels; ++ch) {
      uint32_t acc = ep->col_comp ? uint32_t(ep->col_comp[ch]) : 0u;
      for (size_t t = 0; t < ks; ++t) {
        const uint8_t* x = static_cast<const uint8_t*>(b[t] == zero ? zero : static_cast<const char*>(b[t]) + b_offset);
        acc += uint32_t(x[ch]) * uint32_t(w[t * cpad + ch]);
      }
      qepilogue_store_ref(ep, int32_t(acc), ch, cp);
    }
  }
}

}  // namespace

extern const QDwconvKernel u8s8_dwconv_1c__scalar = {"u8s8_dwconv_1c__scalar", 1, ref_dwconv};

}  // namespace nnkern
