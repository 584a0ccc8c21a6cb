// Depthwise INT8 micro-kernel for AVX-512 VNNI (kernels/qdwconv.h): the AVX-512 kernel (avx512/qdwconv.cc)
// with the multiply-add fused: vpdpwssd on the int16 pairs (x, 0) x (w, sign(w)) of the zero-extended uint8
// input and the packed int32 weights (w within int16, the packer's are int8) adds x * w to the lane, exact
// modulo 2^32 (the non-saturating form; vpdpwssds and VPMADDUBSW are never used): one uop per 16 channels
// and tap instead of vpmaddwd + vpaddd. Two pixels per block, as there (vpdpwssd's latency wants the two
// independent chains; docs/performance.md: "QConv2d: depthwise").
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/qdwconv.h"

namespace nnkern {
namespace {

#define NNK_INLINE inline __attribute__((always_inline))
#include "kernels/inc/qgemm_zmm.inc"
#include "kernels/inc/qepilogue_vec.inc"
#include "kernels/inc/qdwconv_zmm.inc"

struct DwZmmVnni : DwZmmLoads {
  static NNK_INLINE V madd(V acc, V x, V w) { return _mm512_dpwssd_epi32(acc, x, w); }
};

#include "kernels/inc/qdwconv_tile.inc"

}  // namespace

extern const QDwconvKernel u8s8_dwconv_64c__avx512vnni = {"u8s8_dwconv_64c__avx512vnni", 64,
                                                          QDwconvTemplate<DwZmmVnni, 4, 2, 4>::run};

}  // namespace nnkern
