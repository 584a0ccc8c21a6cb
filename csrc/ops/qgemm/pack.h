// Integer GEMM packing (the weights side, "A" in kernel terms, kernels/qgemm.h): panels of MR channels in
// the kernel's interleaved K-group layout, and the column sums that fold the activation zero point. Shared
// by the GEMM (ops/qgemm/qgemm.cc, the driver's per-task packing) and the convolutions (panels of ks taps).
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/checked.h"
#include "kernels/qgemm.h"
#include "ops/qgemm/qgemm.h"

namespace nnkern {

inline size_t qgemm_ceil_div(size_t a, size_t b) { return ceil_div(a, b); }
inline size_t qgemm_round_up(size_t x, size_t m) { return qgemm_ceil_div(x, m) * m; }
// Bytes of one packed weight: int16 for the s16 kernels, else int8 (s16w8's too).
inline size_t qgemm_a_elem_size(const QGemmKernel& k) { return k.kind == QKind::s16 ? 2 : 1; }
// Bytes of one activation as the kernel reads it: int16 for the kernels of int16 products (s16, s16w8).
inline bool qgemm_widens_x(const QGemmKernel& k) { return k.kind == QKind::s16 || k.kind == QKind::s16w8; }
inline size_t qgemm_x_elem_size(const QGemmKernel& k) { return qgemm_widens_x(k) ? 2 : 1; }
// Bytes of one packed panel of ks taps of K (each tap padded to whole groups).
inline size_t qgemm_panel_bytes(const QGemmKernel& k, size_t K, size_t ks = 1) {
  return size_t(k.mr) * ks * qgemm_round_up(K, size_t(k.kgroup)) * qgemm_a_elem_size(k);
}

// Bytes the owner of packed panels keeps readable past the last one so that a kernel with a kstep may read
// a tap's tail step whole (QEpilogue::k_padded): one MR x kstep step; 0 for the other kernels.
inline size_t qgemm_panel_slack(const QGemmKernel& k) {
  return k.kstep > k.kgroup ? size_t(k.mr) * size_t(k.kstep) * qgemm_a_elem_size(k) : 0;
}

// Groups [g0, g1) of one MR x round_up(K, G) panel of B (channels n0 .. n0 + nn - 1 of a K x N row-major
// matrix of b_type: int8, or int16 for the s16 kernels) in k's interleaved layout, zero-padded.
void qgemm_pack_groups(const QGemmKernel& k, QType b_type, void* dst, const void* b, size_t ldb, size_t K, size_t n0,
                       size_t nn, size_t g0, size_t g1);

// Column sums of rows [p0, p1) of B for channels n0 .. n0 + nn - 1, added into cs (modulo 2^32).
void qgemm_column_sums(QType b_type, uint32_t* cs, const void* b, size_t ldb, size_t p0, size_t p1, size_t n0,
                       size_t nn);

// Column sums of one packed panel (qgemm_panel_bytes(k, K) bytes, ks = 1), all MR channels, into cs (set, not
// added; padding sums to 0): the panel is contiguous and in L1 just after packing, where B's columns are a
// row apart.
void qgemm_panel_column_sums(const QGemmKernel& k, const void* panel, size_t K, uint32_t* cs);

// All of B (K x N) into panels (qgemm_panel_bytes apart), with the column sums (colsum != null, padded to
// the panels), in parallel row sweeps.
void qgemm_pack_all(const QGemmKernel& k, QType b_type, const void* b, size_t ldb, size_t K, size_t N,
                    uint8_t* packed, int32_t* colsum);

// The GEMMs' packed weights: all panels followed by qgemm_panel_slack zero bytes (QPlan::packed_slack), in a
// buffer of qgemm_packed_gemm_bytes.
inline size_t qgemm_packed_gemm_bytes(const QGemmKernel& k, size_t K, size_t N) {
  return qgemm_ceil_div(N, size_t(k.mr)) * qgemm_panel_bytes(k, K) + qgemm_panel_slack(k);
}
void qgemm_pack_gemm(const QGemmKernel& k, QType b_type, const void* b, size_t ldb, size_t K, size_t N,
                     uint8_t* packed, int32_t* colsum);

// One panel of ks taps for the indirect kernels: tap t's weights are the K x N matrix at
// b + t * tap_stride elements (row-major, leading dimension ldb); the panel holds channels n0 .. n0 + nn - 1
// of each tap in turn, each tap padded to whole groups (kernels/qgemm.h), qgemm_panel_bytes(k, K, ks) bytes.
// colsum (if not null, MR entries) gets the sums over all ks * K weights of each channel.
void qgemm_pack_panel_taps(const QGemmKernel& k, QType b_type, void* dst, const void* b, size_t ldb, size_t K,
                           size_t ks, size_t tap_stride, size_t n0, size_t nn, int32_t* colsum);

}  // namespace nnkern
