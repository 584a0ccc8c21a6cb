// Integer GEMM driver (u8/s8 x s8 and s16 x s16 -> s32): zero points, packing, blocking, threading and
// the fused requantization epilogue around the dispatched micro-kernels (kernels/qgemm.h).
// Row-major, like NumPy: C[M, N] = sum_k (A[m, k] - za) (B[k, n] - zb[n]).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/buffer.h"
#include "core/isa.h"
#include "kernels/qgemm.h"

namespace nnkern {

enum class QType : int { u8 = 0, s8 = 1, s16 = 2 };

// Every kernel's MR divides this: per-column arrays (QOutput's scale and bias) are padded to a multiple
// of it so a kernel may read whole vectors of them.
constexpr size_t kQPadN = 64;
inline size_t qgemm_padded_n(size_t n) { return (n + kQPadN - 1) / kQPadN * kQPadN; }

// What one ISA level provides. i8: the kernel of 8-bit operands (its kind says which: u8s8 or s8s8, with
// the driver converting the activations); nullptr: 8-bit operands are widened to int16 and run on the s16
// kernel (the exact method of the non-VNNI x86 levels, see kernels/avx2/qgemm.cc).
struct QGemmKernels {
  const QGemmKernel* i8;
  const QGemmKernel* s16;
  const QGemmKernel* i8_narrow = nullptr;  // for weights in [-64, 64] where i8 is null (weight_bits 7), if any
  const QGemvKernel* gemv = nullptr;  // u8 x s8 for M <= gemv->max_m straight from an unpacked B, if any
  const QGemmKernel* shallow = nullptr;  // the best 8-bit kernel below i8's level (i8's min_depth / min_k)
  const QGemmKernel* s16w8 = nullptr;  // int16 products from int8-packed weights, for 8-bit weights where i8 is null
  // The kernel that runs 8-bit weights widened to int16 (where i8 is null).
  const QGemmKernel& widened8() const { return s16w8 ? *s16w8 : *s16; }
};
const QGemmKernels* qgemm_kernels_for(Isa isa);  // nullptr if the level has none in this build
const QGemmKernels& qgemm_kernels();              // dispatched now
// The micro-kernel that runs 8-bit (bits = 8) or 16-bit operands at this cap, for a reduction of ks taps of
// k (the GEMM: ks = 1, k = K): the level's own kernel, or below its min_depth / min_k the shallow one.
// narrow_weights: every weight is in [-64, 64] (qgemm_narrow_weights), so a weight_bits 7 kernel may run.
const QGemmKernel& qgemm_kernel(int bits, size_t k = SIZE_MAX, size_t ks = 1, bool narrow_weights = false);
// Every one of the n weights is in [-64, 64].
bool qgemm_narrow_weights(const int8_t* w, size_t n);
// A kernel named by a caller (tests) for weights that are (not) narrow: std::invalid_argument if it is a
// weight_bits 7 kernel and they are not.
void qgemm_check_weights_fit(const QGemmKernel& k, bool narrow_weights);

// Test hook: force the K block of the packed GEMM (a multiple of the kernel's group; 0 = from the L1 size).
void set_qgemm_kc(size_t kc);
// Test hook: the loop order of prepacked GEMM tasks (ops/qgemm/driver.cc): -1 the kernel's, 0 panels outer,
// 1 rows outer for any kernel, with channel blocks of `block` (0: from the L2 size).
void set_qgemm_rows_outer(int v, size_t block = 0);

// The largest K for which every sum_k (a - a_zero)(b - b_zero) of 8-bit a (u8 or s8) and int8 b with
// |b - b_zero| <= b_dev fits int32 (nnkern.qgemm_max_k; symmetric int8 weights: b_dev = 128).
size_t qgemm_max_exact_k(QType a_type, int32_t a_zero, int32_t b_dev = 128);
// Throws std::invalid_argument (naming `op`) unless a_zero lies in a_type's range and K <= qgemm_max_exact_k:
// the accumulators wrap modulo 2^32 past that bound, so every packed layer and qgemm refuse it themselves.
void qgemm_check_exact(const char* op, QType a_type, int32_t a_zero, size_t K, int32_t b_dev = 128);

// Plain integer GEMM. Shapes are the caller's to check; 8-bit operands with zero points outside their ranges
// or K past qgemm_max_exact_k are refused (std::invalid_argument). int16 operands are the caller's to bound
// (qgemm16 checks K max|a - za| max|b - zb| from the data); the arithmetic is modulo 2^32.
struct QgemmArgs {
  size_t M = 0, N = 0, K = 0;
  QType a_type = QType::u8;   // u8 or s8 (with b s8), s16 (with b s16)
  const void* a = nullptr;    // M x K row-major, leading dimension lda (elements)
  size_t lda = 0;
  int32_t a_zero = 0;
  QType b_type = QType::s8;   // s8 or s16
  const void* b = nullptr;    // K x N row-major, leading dimension ldb (elements)
  size_t ldb = 0;
  const int32_t* b_zero = nullptr;  // [N] per column, or null: b_zero_scalar for every column
  int32_t b_zero_scalar = 0;
  int32_t* c = nullptr;       // M x N, leading dimension ldc
  size_t ldc = 0;
};
// algorithm: "auto" or an entry of the op's algorithm table (`_C.algorithms("qgemm")`): "gemv" (M <= 4 with a
// GEMV kernel), "pack_per_panel" (auto while B's rows fit a page), "pack_all"; std::invalid_argument if
// unknown or not applicable.
void qgemm(const QgemmArgs& args, const std::string& algorithm = "auto");

// The output stage of a packed layer (seed I12), per output column n (padded to the kernel's MR):
//   i32: C = acc (relu: max(acc, 0));  f32: C = fma(acc, scale[n], bias[n]) (relu: max(., 0));
//   u8/s8: C = rint(clamp(fma(acc, scale[n], bias[n]), lo, hi))  (relu folded into lo by the caller).
struct QOutput {
  QOut out = QOut::i32;
  void* c = nullptr;
  size_t ldc = 0;  // elements
  const float* scale = nullptr;
  const float* bias = nullptr;
  bool relu = false;
  float lo = 0.0f, hi = 0.0f;
};

// Symmetric int8 weights W[K, N] (zero point 0) packed once for the kernel dispatched at construction,
// with their column sums (for the activation zero point). Under another cap, calls repack per call.
class PackedQGemm {
 public:
  PackedQGemm(const int8_t* w, size_t K, size_t N, size_t ldw);
  // C = output(sum_k (X[m, k] - x_zero) W[k, n]), X uint8 or int8 (x_type), M x K with leading dim ldx.
  void run(size_t M, QType x_type, const void* x, size_t ldx, int32_t x_zero, const QOutput& o) const;
  size_t N() const { return N_; }
  size_t K() const { return K_; }
  const char* kernel_name() const { return kernel_->name; }

 private:
  const QGemmKernel* kernel_;
  size_t K_, N_;
  bool narrow_ = false;  // every weight in [-64, 64] (qgemm_narrow_weights)
  AlignedBuffer<int8_t> raw_;      // W itself, for a call under a different cap
  AlignedBuffer<uint8_t> packed_;  // all panels
  AlignedBuffer<int32_t> colsum_;  // [round_up(N, MR)]
};

}  // namespace nnkern
