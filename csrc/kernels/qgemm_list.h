// The integer GEMM micro-kernels of this build (core/kernel_list.h), one list for all four kinds: the
// prefix of a name is its kind (u8s8: uint8 activations x int8 weights; s8s8: int8 x int8, SDOT; s16: int16
// x int16; s16w8: int16 x int16 from int8 weights), then MRxNR, then cG, the K-group of its packed layout
// (XNNPACK's convention, kernels/qgemm.h).
// From this list: the declarations below, qgemm_kernels_for(Isa) and the "qgemm" registry entry
// (ops/qgemm/kernels.cc), the Python fixtures (nnkern._C.kernel_list("qgemm")) and the native tests.
// Order matters once: at a level with several 8-bit kernels the first one is dispatched (scalar: u8s8;
// s8s8_gemm_8x4c4__scalar is the oracle of the SDOT kernel). A level without an s16 kernel uses the best
// one below it (neondot, neoni8mm: the neon one); a level without an 8-bit kernel widens 8-bit data to
// int16 on its s16w8 kernel (avx2: int8 weights widened as loaded) or else its s16 one (avx512: VPMADDUBSW
// saturates), except for layers whose weights all fit 7 bits, which run the level's kernel of weight_bits 7
// (avx2: VPMADDUBSW cannot saturate on them); int16 weights (qgemm's s16 x s16) run on the s16 kernel.
#pragma once
#include "core/kernel_list.h"
#include "kernels/qgemm.h"

#define NNKERN_QGEMM_LIST(X)                                                                            \
  X(u8s8_gemm_8x4c4__scalar, scalar)                                                                    \
  X(s8s8_gemm_8x4c4__scalar, scalar)                                                                    \
  X(s16_gemm_8x4c2__scalar, scalar)                                                                     \
  NNKERN_AVX2(X(s16w8_gemm_16x6c2__avx2, avx2) X(s16_gemm_16x6c2__avx2, avx2) X(u8s8_gemm_16x6c4__avx2, avx2)) \
  NNKERN_AVXVNNI(X(u8s8_gemm_16x6c4__avxvnni, avxvnni) X(s16_gemm_16x6c2__avxvnni, avxvnni))            \
  NNKERN_AVX512(X(s16_gemm_64x6c2__avx512, avx512))                                                     \
  NNKERN_AVX512VNNI(X(u8s8_gemm_64x6c4__avx512vnni, avx512vnni) X(s16_gemm_64x6c2__avx512vnni, avx512vnni)) \
  NNKERN_AMX(X(u8s8_gemm_32x32c4__amx, amx))                                                            \
  NNKERN_NEON(X(u8s8_gemm_8x8c1__neon, neon) X(s16_gemm_8x8c1__neon, neon))                             \
  NNKERN_NEONDOT(X(s8s8_gemm_8x8c4__neondot, neondot))                                                  \
  NNKERN_NEONI8MM(X(u8s8_gemm_8x8c8__neoni8mm, neoni8mm))

// The small-M path of qgemm (kernels/qgemm.h, QGemvKernel): reads B unpacked, so no cG. A level without one
// uses the best one below it.
#define NNKERN_QGEMV_LIST(X)                                                                            \
  NNKERN_AVX2(X(u8s8_gemv_4x16__avx2, avx2))                                                            \
  NNKERN_AVX512VNNI(X(u8s8_gemv_12x64__avx512vnni, avx512vnni))

namespace nnkern {

#define NNKERN_QGEMM_DECLARE_(name, level) extern const QGemmKernel name;
NNKERN_QGEMM_LIST(NNKERN_QGEMM_DECLARE_)
#undef NNKERN_QGEMM_DECLARE_
#define NNKERN_QGEMV_DECLARE_(name, level) extern const QGemvKernel name;
NNKERN_QGEMV_LIST(NNKERN_QGEMV_DECLARE_)
#undef NNKERN_QGEMV_DECLARE_

// The families "qgemm" and "qgemv" (ops/qgemm/kernels.cc; dispatched through qgemm_kernels(), ops/qgemm/qgemm.h).
const KernelFamily<QGemmKernel>& qgemm_family();
const KernelFamily<QGemvKernel>& qgemv_family();

}  // namespace nnkern
