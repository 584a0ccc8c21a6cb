// bf16 GEMM micro-kernel contract (float32 precision "medium"), shared by every ISA. Baseline header: no intrinsics.
//
// Column-major terms, as kernels/f32_gemm.h: a kernel computes one tile
//   C(m x n) = epilogue(A(m x k) * B(k x n)),   m <= MR, n <= NR,
// from bf16 operands (kernels/bf16.h) with float32 accumulation. K runs in pairs (kq pairs, K = 2 kq; an odd K is
// padded with a zero pair member by the caller), the unit of vdpbf16ps, BFDOT and tdpbf16ps; the packed A holds
// groups of G = kgroup values of K per row (2: pairs; 4: BFMMLA's 2 x 4 blocks), zero-padded to whole groups:
//
//   A packed   a[t * G * MR + G * i + h] = A(i, G t + h)   (rows i >= m and k >= 2 kq are read: zero-padded)
//   B          b[j][2q + h] = B(2q + h, j)                 one pointer per column, kq pairs readable: bf16 bits
//                                                          (uint16_t), or where the kernel says b_f32, the float32
//                                                          values of those bf16 numbers (the fallback without bf16
//                                                          instructions then broadcasts them without unpacking)
//   C(i, j) = c[j * ldc + i], or ep->c_rows[j][i]
//
// Summation order, per pair q and in this order: acc += A(i, 2q+1) B(2q+1, j); acc += A(i, 2q) B(2q, j), each
// product exact in float32 (8-bit significands) and each sum rounded to nearest even: vdpbf16ps's definition in
// Intel's pseudo-code. The scalar reference and the AVX2 / AVX-512 fallbacks compute exactly this (the same bits);
// by that definition vdpbf16ps also reads bf16 denormals as zero and flushes denormal sums to zero (the avx512bf16
// kernel is checked against it through emulated intrinsics, tests/native/emulated_avx512.h, where the CPU lacks
// the instruction); the NEON BFDOT kernel adds each pair's two products before rounding (Arm's BFDOT, non-IEEE) and
// the AMX kernel sums in tdpbf16ps's order (the even product first, its pseudo-code; hardware may differ): those stay
// within the float32 GEMM bound of the exact sum of the bf16 products.
// The epilogue is F32Epilogue's (alpha, beta, bias, clamp, c_rows), in its order; the tile hook is not called.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/f32_gemm.h"

namespace nnkern {

using Bf16GemmUkernel = void (*)(size_t m, size_t n, size_t kq, const uint16_t* a, const void* const* b, float* c,
                                 size_t ldc, const F32Epilogue* ep);

struct Bf16GemmKernel {
  const char* name;
  int mr, nr;
  bool b_f32;  // B's rows hold float32 values (of bf16 numbers), not bf16 bits
  Bf16GemmUkernel run;
  // Called by the driver on the thread that ran a sequence of tiles, after the last one: the AMX kernel leaves its
  // tiles configured between calls and releases them here.
  void (*finish)() = nullptr;
  int kgroup = 2;  // G: values of K per row in a group of the packed A (2 or 4)
};

// The oracle (kernels/ref/bf16_gemm.cc, baseline code) for any tile size: a panel of mr rows in pairs (G = 2), B as
// bf16 bits.
void bf16_gemm_reference(size_t m, size_t n, size_t kq, size_t mr, const uint16_t* a, const uint16_t* const* b,
                         float* c, size_t ldc, const F32Epilogue* ep);

// The kernels are listed, with their ISA levels, in kernels/bf16_gemm_list.h; each is defined in
// csrc/kernels/<isa>/bf16_gemm.cc (compiled with that ISA's flags only).

}  // namespace nnkern
