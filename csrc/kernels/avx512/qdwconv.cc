// Depthwise INT8 micro-kernel for AVX-512 (F/BW/DQ/VL; kernels/qdwconv.h): 16 channels per zmm, 64 per block
// (four accumulators) of two pixels, taps in the loop. uint8 inputs zero-extended to int32 lanes with vpmovzxbd; the
// product is one vpmaddwd on those lanes and the packed int32 weights: lane c holds the int16 pair
// (x, 0) x (w, sign(w)), so it yields x * w + 0 exactly (the contract keeps w within int16; the packer's are
// int8): 1 uop on port 0 where vpmulld takes 2 with a 10-cycle latency. Summed with vpaddd, exact modulo 2^32
// (VPMADDUBSW's saturating pair sum is never used).
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

struct DwZmm : DwZmmLoads {
  // acc + x * w for x in [0, 255] (high word 0) and w in int16: the high words' product is 0 * sign.
  static NNK_INLINE V madd(V acc, V x, V w) { return _mm512_add_epi32(acc, _mm512_madd_epi16(x, w)); }
};

#include "kernels/inc/qdwconv_tile.inc"

}  // namespace

// Two pixels per block: each tap's weights loaded once for both, two independent accumulator chains per
// vector (docs/performance.md: "QConv2d: depthwise").
extern const QDwconvKernel u8s8_dwconv_64c__avx512 = {"u8s8_dwconv_64c__avx512", 64,
                                                      QDwconvTemplate<DwZmm, 4, 2, 4>::run};

}  // namespace nnkern
