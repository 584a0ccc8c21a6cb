// QLinearAdd / QLinearMul over contiguous operands of one shape (the ONNX plan's op, ops/graph/ops/quant.cc):
//   y[i] = T(rint(min(max(lo, f((a[i] - za) sa, (b[i] - zb) sb) / sc + zc), hi)))      f: + or *
// in float32 with exactly the op's operations (a correctly rounded division, no FMA contraction, rint as
// (v + 1.5 * 2^23) - 1.5 * 2^23 on the clamped |v| < 2^22): the same bits on every ISA as the op's own loop. A
// plain loop that each ISA's quantize.cc compiles under its flags (without -ftrapping-math: CMakeLists.txt), the
// compiler's vectors; AVX2 writes the same operations out (kernels/avx2/quantize.cc). Baseline header: no
// intrinsics; static, so each kernel file compiles its own copy.
#pragma once
#include <cstddef>
#include <cstdint>

namespace nnkern {

struct QBinaryParams {
  float sa, za, sb, zb, sc, zc, lo, hi;  // za, zb: the 8-bit zero points (whole numbers)
  bool mul, is_signed;
};
using QBinaryFn = void (*)(const void* a, const void* b, void* y, size_t n, const QBinaryParams& p);

template <typename T, bool kMul>
static void qbinary_loop(const T* __restrict a, const T* __restrict b, T* y, size_t n, const QBinaryParams& p) {
  const float sa = p.sa, za = p.za, sb = p.sb, zb = p.zb, sc = p.sc, zc = p.zc, lo = p.lo, hi = p.hi;
  for (size_t i = 0; i < n; ++i) {
    const float x = (float(a[i]) - za) * sa, z = (float(b[i]) - zb) * sb;
    float v = (kMul ? x * z : x + z) / sc + zc;
    v = lo < v ? v : lo;  // std::max(lo, v): NaN (a zero or NaN scale) becomes lo
    v = v < hi ? v : hi;  // std::min(v, hi)
    y[i] = T(int32_t((v + 12582912.0f) - 12582912.0f));
  }
}

// qbinary__<isa>: the kernel an ISA's quantize.cc defines at namespace nnkern scope (y may be a or b: in place),
// over `loop` (qbinary_loop, or an ISA's own template of the same signature).
#define NNK_QBINARY_KERNEL_WITH(isa, loop)                                                                  \
  void qbinary__##isa(const void* a, const void* b, void* y, size_t n, const QBinaryParams& p) {            \
    if (p.is_signed)                                                                                        \
      p.mul ? loop<int8_t, true>(static_cast<const int8_t*>(a), static_cast<const int8_t*>(b),              \
                                 static_cast<int8_t*>(y), n, p)                                             \
            : loop<int8_t, false>(static_cast<const int8_t*>(a), static_cast<const int8_t*>(b),             \
                                  static_cast<int8_t*>(y), n, p);                                           \
    else                                                                                                    \
      p.mul ? loop<uint8_t, true>(static_cast<const uint8_t*>(a), static_cast<const uint8_t*>(b),           \
                                  static_cast<uint8_t*>(y), n, p)                                           \
            : loop<uint8_t, false>(static_cast<const uint8_t*>(a), static_cast<const uint8_t*>(b),          \
                                   static_cast<uint8_t*>(y), n, p);                                         \
  }
#define NNK_QBINARY_KERNEL(isa) NNK_QBINARY_KERNEL_WITH(isa, qbinary_loop)

}  // namespace nnkern
