// FP32 GEMM driver: blocking, packing and threading around the dispatched micro-kernel.
// Row-major, like NumPy: C[M, N] = epilogue(op(A)[M, K] op(B)[K, N]).
#pragma once
#include <cstddef>
#include <string>
#include <memory>

#include "core/buffer.h"
#include "core/isa.h"
#include "core/kernel_list.h"
#include "kernels/f32_gemm.h"

namespace nnkern {

// The kernels of this build, their dispatch: f32_gemm_family() (kernels/f32_gemm_list.h).

struct SgemmArgs {
  size_t M = 0, N = 0, K = 0;
  const float* a = nullptr;  // op(A) = trans_a ? A^T : A, A stored row-major with leading dimension lda
  size_t lda = 0;
  bool trans_a = false;
  const float* b = nullptr;
  size_t ldb = 0;
  bool trans_b = false;
  float* c = nullptr;
  size_t ldc = 0;
  F32Epilogue ep;  // alpha, beta, bias[N], residual R[M, N] (at residual[r * ldr + n]) and clamp, once per element
};

// Cache blocking. kc is the only block that changes results (the K summation order), so it never
// depends on the thread count: any thread count gives bit-identical results.
struct GemmBlocking {
  size_t kc, mc, nc;  // in the kernel's column-major terms: mc along A's rows (= N), nc along B's columns (= M)
};
// Loop order of the tiles (ops/gemm/gemm.cc): panel = seeds O6/O7 (an A panel in L1, B slivers streamed,
// copy-on-first-use), block = BLIS (an A block in L2, a B sliver in L1, deeper K blocks).
enum class GemmOrder { panel, block };
enum class BlockingMode { cache, fixed };
void set_blocking_mode(BlockingMode mode);  // fixed = seed O7's 256 / 4032 / 48; cache = from cache sizes
BlockingMode blocking_mode();
GemmOrder gemm_order(const F32GemmKernel& k, size_t M, size_t N);  // by the size of C against L2
GemmBlocking gemm_blocking(const F32GemmKernel& k, size_t K, GemmOrder order);

// algorithm: "auto" or an entry of the op's algorithm table (`_C.algorithms("sgemm")`): "dot" (small N, or
// M == 1 with B^T), "rows" (M <= 3), "tiles" (any shape); std::invalid_argument if unknown or not applicable.
void sgemm(const SgemmArgs& args, const std::string& algorithm = "auto");

// B packed once into the micro-kernel's panel layout (the weights of a Linear layer).
// Batch 1 (M == 1) reuses the same panels for a GEMV (ops/gemm/gemv.h gemv_packed_panels): each
// MR x kc panel is a contiguous block read row by row, so no second (row-major) copy is kept.
// Packed for the kernel dispatched at construction; under another cap, calls fall back to unpacking.
class PackedF32Gemm {
 public:
  // weight is W[N, K] row-major (torch.nn.Linear's layout): C = X W^T.
  PackedF32Gemm(const float* weight, size_t N, size_t K, size_t ldw);
  // C[M, N] = epilogue(X[M, K] W^T); x has leading dimension ldx.
  void run(size_t M, const float* x, size_t ldx, float* c, size_t ldc, const F32Epilogue& ep) const;
  size_t N() const { return N_; }
  size_t K() const { return K_; }
  const char* kernel_name() const { return kernel_->name; }

 private:
  void unpack(float* w) const;  // back to W[N, K]
  const F32GemmKernel* kernel_;
  size_t N_, K_, kc_, n_panels_;
  AlignedBuffer<float> packed_;
  AlignedBuffer<float> rows_;  // W itself for a few output features and a deep K (the dot path reads it), or none
};

}  // namespace nnkern
