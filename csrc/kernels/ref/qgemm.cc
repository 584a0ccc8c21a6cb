// Scalar reference integer GEMM micro-kernels (u8 x s8 and s8 x s8, G = 4; s16 x s16, G = 2), direct and
// indirect (ks taps, zero row, b_offset: kernels/qgemm.h): the oracle for the tests and the fallback on any
// CPU. They also honour the in-kernel zero points (QEpilogue::x_zero,
// w_zero; zero for every other caller), so they are the oracle of the QNNPACK-style NEON kernels too. Same packed layout and epilogue as the SIMD kernels (kernels/qgemm.h);
// int32 arithmetic modulo 2^32 (done in uint32_t, where wrapping is defined), float epilogue with the
// same single-rounding fma, clamp and ties-to-even rounding, so every ISA gives bit-identical results.
#include <cmath>
#include <cstdint>

#include "kernels/qepilogue_ref.h"
#include "kernels/qgemm_list.h"

namespace nnkern {
namespace {

constexpr int kMR = 8, kNR = 4;

template <typename AElem, typename BElem, int G>
void ref_run(size_t m, size_t n, size_t k, size_t ks, const void* a_, const void* const* b, const void* zero,
             size_t b_offset, void* c, size_t ldc, const QEpilogue* ep) {
  const AElem* a = static_cast<const AElem*>(a_);
  const size_t kg = (k + G - 1) / G;  // groups per tap
  const size_t esz = qout_elem_size(ep->out);
  for (size_t j = 0; j < n; ++j) {
    uint8_t* cj = ep->c_rows ? static_cast<uint8_t*>(ep->c_rows[j]) : static_cast<uint8_t*>(c) + j * ldc * esz;
    for (size_t i = 0; i < m; ++i) {
      uint32_t acc = ep->c_in ? uint32_t(ep->c_in[j * ep->ld_in + i]) : 0u;
      const int32_t wz = ep->w_zero ? ep->w_zero[i] : 0;
      for (size_t t = 0; t < ks; ++t) {
        const void* e = b[t * kNR + j];
        const BElem* bj = static_cast<const BElem*>(e == zero ? zero : static_cast<const char*>(e) + b_offset);
        const AElem* at = a + t * kg * kMR * G;
        for (size_t p = 0; p < k; ++p)
          acc += uint32_t(int32_t(at[(p / G) * kMR * G + i * G + p % G]) - wz) * uint32_t(int32_t(bj[p]) - ep->x_zero);
      }
      if (ep->col_comp) acc += uint32_t(ep->col_comp[i]);
      if (ep->b_zero) acc -= uint32_t(ep->b_zero[i]) * uint32_t(ep->row_sum[j]);
      qepilogue_store_ref(ep, int32_t(acc), i, cj);
    }
  }
  if (ep->hook) ep->hook(ep->hook_ctx, QTile{ep->tile_i, ep->tile_j, m, n, ep->out, c, ldc, ep->c_rows});
}

}  // namespace

const QGemmKernel u8s8_gemm_8x4c4__scalar = {"u8s8_gemm_8x4c4__scalar", kMR, kNR, 4, ref_run<int8_t, uint8_t, 4>};
const QGemmKernel s8s8_gemm_8x4c4__scalar = {"s8s8_gemm_8x4c4__scalar", kMR, kNR, 4, ref_run<int8_t, int8_t, 4>,
                                             QKind::s8s8};
const QGemmKernel s16_gemm_8x4c2__scalar = {"s16_gemm_8x4c2__scalar", kMR, kNR, 2, ref_run<int16_t, int16_t, 2>,
                                            QKind::s16};

}  // namespace nnkern
