// bf16 (float32 precision "medium"): array conversions and the packed GEMM over the bf16_gemm kernels
// (kernels/bf16_gemm.h), float32 or bf16 operands in, float32 out.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/buffer.h"
#include "kernels/bf16_gemm_list.h"

namespace nnkern {

// y[i] = bf16(x[i]) (round to nearest even, NaN kept NaN: kernels/bf16.h) and back (exact); threaded when large.
void f32_to_bf16_array(const float* x, uint16_t* y, size_t n);
void bf16_to_f32_array(const uint16_t* x, float* y, size_t n);

// A strided matrix operand: element (r, c) at data[r * rs + c * cs], or with row pointers at row_ptrs[r][c * cs] (an
// LSTM's input rows); float32 (rounded to bf16 where it is read) or bf16 bits.
struct Bf16Operand {
  const void* data = nullptr;
  const void* const* row_ptrs = nullptr;  // if set, row r starts at row_ptrs[r] (data and rs unused)
  bool is_bf16 = false;
  size_t rs = 0, cs = 0;
  // A row-major matrix with leading dimension ld, or its transpose (element (r, c) of op(M)).
  static Bf16Operand matrix(const float* data, size_t ld, bool trans = false);
  static Bf16Operand matrix(const uint16_t* bits, size_t ld, bool trans = false);
  const void* row(size_t r) const;         // where row r starts
  Bf16Operand from_row(size_t r0) const;   // the rows from r0 on
  float f32(size_t r, size_t c) const;
  uint16_t bits(size_t r, size_t c) const;  // the bf16 of (r, c): its bits, or the float32 rounded
};

// C[M, N] = epilogue(X[M, K] W^T) with W[N, K] packed once in the dispatched kernel's panels (a Linear layer's
// weight, or B of one matmul: W(n, k) = B(k, n)), X rounded to bf16 row by row per call. Every tile runs the
// whole K, so the bits depend on neither the thread count nor the blocking; under another ISA cap than at packing,
// a call repacks for that cap's kernel.
class PackedBf16Gemm {
 public:
  PackedBf16Gemm(const Bf16Operand& w, size_t N, size_t K);
  void run(size_t M, const Bf16Operand& x, float* c, size_t ldc, const F32Epilogue& ep) const;
  size_t N() const { return N_; }
  size_t K() const { return K_; }
  const char* kernel_name() const { return kernel_->name; }

 private:
  void pack(const Bf16GemmKernel& k, const Bf16Operand& w, AlignedBuffer<uint16_t>& out) const;
  const Bf16GemmKernel* kernel_;
  size_t N_, K_, kq_;
  AlignedBuffer<uint16_t> packed_;
};

// One-shot: C[M, N] = epilogue(op(A) op(B)) (the operands as strided views), B packed per call.
void bf16_gemm(size_t M, size_t N, size_t K, const Bf16Operand& a, const Bf16Operand& b, float* c, size_t ldc,
               const F32Epilogue& ep);

}  // namespace nnkern
