// FP32 skinny-GEMM driver: GEMV (M = 1) and small-N shapes, on the kernels of kernels/f32_gemv.h.
// Routed from nnkern::sgemm and PackedF32Gemm::run (ops/gemm/gemm.cc); everything else keeps the
// register-tile driver.
#pragma once
#include <cstddef>

#include "core/isa.h"
#include "core/workspace.h"
#include "kernels/f32_gemv.h"
#include "ops/gemm/gemm.h"

namespace nnkern {

// The skinny paths of sgemm, entries of its algorithm table (ops/gemm/gemm.cc; routing in f32_gemv.cc):
// "dot" (C = A Bt^T with B^T packed once; A rows contiguous) and "rows" (M <= 3, each row y = x B streaming
// B; auto's choice for M == 1, and for M <= 3 where B's rows are a page or more apart).
// Up to how many outputs (C's columns) auto takes the dot path on kernel k: its dot_auto_n, or its dot width.
size_t dot_threshold(const F32GemvKernel& k);
bool sgemm_dot_applies(const SgemmArgs& g);
bool sgemm_dot_preferred(const SgemmArgs& g);
size_t sgemm_dot_workspace_bytes(const SgemmArgs& g);
void sgemm_run_dot(const SgemmArgs& g, const Workspace& ws);
bool sgemm_rows_applies(const SgemmArgs& g);
bool sgemm_rows_preferred(const SgemmArgs& g);
void sgemm_run_rows(const SgemmArgs& g);

// The kernel's rows_panels (kernels/f32_gemv.h), or rows once per panel where it has none: the same bits.
void rows_panels(const F32GemvKernel& gk, size_t np, size_t pw, size_t k, const float* x, const float* b,
                 size_t panel_stride, float* acc);

// y[N] = epilogue(x[K] W^T) with W in PackedF32Gemm's panel layout: K block pc (kb = min(kc, K - pc)
// rows) at packed + pc * m_padded, panel ip at + ip * mr * kb, W(ip * mr + i, pc + p) at [p * mr + i].
void gemv_packed_panels(const float* packed, size_t mr, size_t kc, size_t m_padded, size_t N, size_t K,
                        const float* x, float* y, const F32Epilogue& ep);

}  // namespace nnkern
