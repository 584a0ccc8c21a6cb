// FP32 GEMM micro-kernel for AArch64 NEON (ARMv8.0 baseline, -march=armv8-a): an 8x12 register tile
// with FMA by lane, the classic ARMv8 SGEMM shape that seed G2 compares against.
//
// Column-major terms (see kernels/f32_gemm.h): per k step p, the 8-float column A(0..7, p) is two
// q registers; the 12 values B(p, 0..11) are three q registers when the B columns are contiguous
// (b[j] == b[0] + j: the driver's NR-interleaved packed sliver), and each FMLA takes its B scalar as
// a lane of one of them (`fmla v.4s, v.4s, v.s[lane]`), so B costs 3 vector loads per 12 values.
//
// Register allocation (32 x 128-bit V registers), hot loop of the full tile:
//   24 accumulators   C(0..7, j), j = 0..11: two V registers (rows 0-3, rows 4-7) per column
//    2 A registers    A(0..3, p), A(4..7, p)
//    3 B registers    B(p, 0..3), B(p, 4..7), B(p, 8..11), consumed by lane (4 columns each)
//   = 29 live, 3 spare; 24 independent FMA chains cover 2 FMA pipes x 4-cycle latency (8 needed)
//   three times over. GPRs: A and B pointers, their strides, the K counter.
//
// Loads/stores per MAC (the arithmetic of seed G2), per k step: 8 + 12 = 20 floats loaded
// (5 vector loads: 2 for A, 3 for B) for 8 x 12 = 96 MACs (24 FMLA), so 20/96 = 0.208 loads/MAC
// (5/24 = 0.208 vector loads per FMLA). The 96 C values are stored once per tile (and loaded once
// if beta != 0): 96/(96 K) = 1/K per MAC, so for K = 256 the tile costs 0.208 + 0.004 = 0.212
// loads+stores per MAC (0.216 with beta), G2's "about 0.211" for the best ARMv8 8x12 GEMM.
//
// Inner loop as built (aarch64-linux-gnu-g++ 12.2 -O3 -march=armv8-a; tools/neon-loop-stats.py on
// the object), one iteration = 4 k steps of the full 8x12 tile (tile<12, kLanes>):
//   125 instructions: 96 FMLA (by element), 12 vector loads (4 LDP q for A, 4 LDP q + 4 LDR q for B
//   = 20 q registers), 8 pointer adds, 3 loop control, 6 MOV (GCC's register rotation; 4 in the
//   staged m < 8 copy of the loop); no stack access. 96 of 125 instructions (77%) are FMAs.
// The broadcast fallback (scattered B columns, n = 12) needs 203 per 4 steps: 96 FMLA, 8 LDP q + 48
// LD1R, 52 adds; also spill-free. Two things keep the loop spill-free and are load-bearing: the
// empty asm on the pointers at the end of each step and optimize("no-schedule-insns") on tile (GCC's
// first scheduler otherwise hoists the next steps' loads and runs out of V registers), and the A
// staging copy kept out of line (stage_panel).
//
// Plain and indirect forms (kernels/f32_gemm.h) are instances of the same template: kInd adds the loop
// over ks taps around the K loop (each tap's B pointers from the indirection buffer: the zero row as
// is, the others + offset; A packed, so read full width) and always uses the broadcast mode, since the
// taps' columns are separate pixels. kInd = false is the plain kernel as it was (the same loops, counted
// as above); the two are separate `if constexpr` branches because a shared tap loop around the plain
// path made GCC spill it (287 instructions, 65 stack accesses per 4 steps). The indirect loop of the
// full tile: 155 instructions per 4 steps, 96 FMLA, 8 LDP q + 48 LD1R (post-increment: b_stride is 1),
// no stack access.
//
// Tails, all instantiations of ONE template tile<kN, kMode, kInd>:
//   N: kN = 1..12, only b[0..n-1] are dereferenced. kMode kLanes (contiguous B, kN in {4, 8, 12}):
//      kN/4 vector loads of B per k step, FMA by lane. kMode kBroadcast (any other pointer set or kN):
//      one LD1R (load and replicate, like vbroadcastss) per B element, advanced by post-increment.
//   M: m == 8 reads A in place (two full vector loads per k). m < 8 copies A, kStageK steps at a time,
//      into a zero-padded 8-row stack panel first (A is never read past row m-1; NEON has no masked
//      loads), and the tile then runs the same full-width loop on that panel. C and the bias go
//      through an 8-row scratch copy, so they too are read/written only in rows 0..m-1.
//   K: a loop of 4 steps, then 1 step at a time (any k >= 0; the whole K stays in registers).
//   a_copy (seed O6): the panel rows 0..m-1 are copied first, then the tile reads the copy
//      (stride 8; lanes m..7 of the copy are never stored and only feed lanes that are not stored).
// The epilogue (alpha * acc, + beta * C, + bias, + residual, clamp) is applied once per tile, at store time, in
// the reference's order. vmaxq/vminq (FMAX/FMIN) propagate NaN, so a NaN result survives ReLU.
//
// One-definition rule: this file gets the NEON flags only; every helper is in an anonymous namespace
// (internal linkage) and no STL is used.
#include <arm_neon.h>

#include <cstddef>
#include <cstdint>

#include "kernels/f32_gemm_list.h"

#define NNK_INLINE inline __attribute__((always_inline))

namespace nnkern {
namespace {

constexpr int kMR = 8, kNR = 12;
constexpr size_t kStageK = 64;  // k steps per staged A chunk (an 8 x 64 float panel: 2 KiB of stack)

enum BMode : int { kBroadcast = 0, kLanes = 1 };

#include "kernels/inc/neon_static_for.inc"

// The B operand as the hot loop walks it: kLanes keeps one pointer to B(p, 0) (the columns follow it
// contiguously), kBroadcast one pointer per column. Each step advances them by b_stride.
template <int kN, int kMode>
struct BCursor {
  const float* p[kMode == kLanes ? 1 : kN];
};

// One k step: acc(:, j) += A(:, p) * B(p, j) for j < kN; advances a and the B cursor.
template <int kN, int kMode>
NNK_INLINE void step(float32x4_t (&acc)[kN][2], const float*& a, size_t a_stride, BCursor<kN, kMode>& b,
                     size_t b_stride) {
  const float32x4_t a0 = vld1q_f32(a), a1 = vld1q_f32(a + 4);
  a += a_stride;
  if constexpr (kMode == kLanes) {
    static_assert(kN % 4 == 0, "lane mode needs whole B vectors");
    float32x4_t vb[kN / 4];
    static_for<0, kN / 4>([&](auto q) { vb[q.value] = vld1q_f32(b.p[0] + 4 * q.value); });
    b.p[0] += b_stride;
    static_for<0, kN>([&](auto j) {
      constexpr int J = decltype(j)::value;
      acc[J][0] = vfmaq_laneq_f32(acc[J][0], a0, vb[J / 4], J % 4);
      acc[J][1] = vfmaq_laneq_f32(acc[J][1], a1, vb[J / 4], J % 4);
    });
  } else {
    static_for<0, kN>([&](auto j) {
      constexpr int J = decltype(j)::value;
      const float32x4_t vb = vld1q_dup_f32(b.p[J]);
      b.p[J] += b_stride;
      acc[J][0] = vfmaq_f32(acc[J][0], a0, vb);
      acc[J][1] = vfmaq_f32(acc[J][1], a1, vb);
    });
  }
  // The next step's loads depend on these opaque pointer values, so GCC's pre-allocation scheduler
  // cannot hoist them into this step: without this it loads up to 4 steps ahead, needs more than
  // 32 V registers and spills accumulators to the stack in the hot loop.
  __asm__("" : "+r"(a));
  static_for<0, (kMode == kLanes ? 1 : kN)>([&](auto j) { __asm__("" : "+r"(b.p[j.value])); });
}

// k steps over a full-width A (8 readable floats per step): 4 per iteration, then the remainder.
template <int kN, int kMode>
NNK_INLINE void run_k(float32x4_t (&acc)[kN][2], size_t k, const float* a, size_t a_stride, BCursor<kN, kMode>& b,
                      size_t b_stride) {
  for (; k >= 4; k -= 4) {
    step(acc, a, a_stride, b, b_stride);
    step(acc, a, a_stride, b, b_stride);
    step(acc, a, a_stride, b, b_stride);
    step(acc, a, a_stride, b, b_stride);
  }
  for (; k > 0; --k) step(acc, a, a_stride, b, b_stride);
}

// panel[p * 8 + i] = A(i, p) for i < m, 0 for m <= i < 8, p < kb. Not inlined: a copy loop inside the
// tile would compete with the 24 live accumulators for V registers (GCC then keeps them in memory).
__attribute__((noinline)) void stage_panel(float* panel, const float* a, size_t a_stride, size_t m, size_t kb) {
  for (size_t p = 0; p < kb; ++p) {
    const float* src = a + p * a_stride;
    float* dst = panel + p * kMR;
    size_t i = 0;
    for (; i < m; ++i) dst[i] = src[i];
    for (; i < size_t(kMR); ++i) dst[i] = 0.0f;
  }
}

template <int kN, int kMode, bool kInd>
__attribute__((noinline, flatten, optimize("no-schedule-insns"))) void tile(size_t m, size_t k, size_t ks, const float* a,
                                    size_t a_stride, bool a_full, const float* const* b, size_t b_stride,
                                    const float* zero, size_t b_offset, float* c, size_t ldc,
                                    const F32Epilogue* ep) {
  static_assert(!kInd || kMode == kBroadcast, "the taps' columns are separate pointers");
  float32x4_t acc[kN][2];
  static_for<0, kN>([&](auto j) { acc[j.value][0] = acc[j.value][1] = vdupq_n_f32(0.0f); });

  if constexpr (kInd) {  // A packed (read in place, full width), each tap's columns from the buffer
    for (size_t t = 0; t < ks; ++t, a += k * kMR) {
      BCursor<kN, kMode> bc;
      static_for<0, kN>([&](auto j) {
        const float* q = b[t * kNR + j.value];
        bc.p[j.value] = q == zero ? q : reinterpret_cast<const float*>(reinterpret_cast<const char*>(q) + b_offset);
      });
      run_k(acc, k, a, kMR, bc, 1);
    }
  } else {
    BCursor<kN, kMode> bc;
    static_for<0, (kMode == kLanes ? 1 : kN)>([&](auto j) { bc.p[j.value] = b[j.value]; });
    if (a_full) {
      run_k(acc, k, a, a_stride, bc, b_stride);
    } else {
      alignas(16) float panel[kStageK * kMR];
      for (size_t p0 = 0; p0 < k; p0 += kStageK) {
        const size_t kb = k - p0 < kStageK ? k - p0 : kStageK;
        stage_panel(panel, a + p0 * a_stride, a_stride, m, kb);
        run_k(acc, kb, panel, kMR, bc, b_stride);
      }
    }
  }

  // Epilogue in the reference's order: alpha * acc, + beta * C (read only if beta != 0), + bias, + residual,
  // clamp.
  // A partial tile (m < 8) goes through an 8-row scratch copy of C (and of the bias), so C and the
  // bias are read and written in rows 0..m-1 only and the vector code below stays full width.
  const bool partial = m < size_t(kMR);
  alignas(16) float scratch[kN * kMR];
  alignas(16) float bias8[kMR];
  float* cw[kN];  // column j of C (c_rows[j] or c + j * ldc)
  static_for<0, kN>([&](auto j) { cw[j.value] = f32_c_col(c, ldc, j.value, *ep); });
  const float* bias = ep->bias;
  if (partial) {
    for (size_t j = 0; j < size_t(kN); ++j) {
      for (size_t i = 0; i < size_t(kMR); ++i) scratch[j * kMR + i] = i < m && ep->beta != 0.0f ? cw[j][i] : 0.0f;
    }
    if (bias) {
      for (size_t i = 0; i < size_t(kMR); ++i) bias8[i] = i < m ? bias[i] : 0.0f;
      bias = bias8;
    }
  }
  float* const* cv = cw;  // where the vector code reads and writes column j: C, or its scratch copy
  float* scratch_cols[kN];
  if (partial) {
    static_for<0, kN>([&](auto j) { scratch_cols[j.value] = scratch + j.value * kMR; });
    cv = scratch_cols;
  }
  const float32x4_t valpha = vdupq_n_f32(ep->alpha);
  static_for<0, kN>([&](auto j) {
    acc[j.value][0] = vmulq_f32(valpha, acc[j.value][0]);
    acc[j.value][1] = vmulq_f32(valpha, acc[j.value][1]);
  });
  if (ep->beta != 0.0f) {
    const float32x4_t vbeta = vdupq_n_f32(ep->beta);
    static_for<0, kN>([&](auto j) {
      const float* cj = cv[j.value];
      acc[j.value][0] = vaddq_f32(acc[j.value][0], vmulq_f32(vbeta, vld1q_f32(cj)));
      acc[j.value][1] = vaddq_f32(acc[j.value][1], vmulq_f32(vbeta, vld1q_f32(cj + 4)));
    });
  }
  if (bias) {
    const float32x4_t bias0 = vld1q_f32(bias), bias1 = vld1q_f32(bias + 4);
    static_for<0, kN>([&](auto j) {
      acc[j.value][0] = vaddq_f32(acc[j.value][0], bias0);
      acc[j.value][1] = vaddq_f32(acc[j.value][1], bias1);
    });
  }
  if (ep->residual) {  // a partial tile reads rows 0..m-1 of it through a zero-padded copy
    alignas(16) float r8[kMR];
    static_for<0, kN>([&](auto j) {
      const float* r = ep->residual + j.value * ep->ldr;
      if (partial) {
        for (size_t i = 0; i < size_t(kMR); ++i) r8[i] = i < m ? r[i] : 0.0f;
        r = r8;
      }
      acc[j.value][0] = vaddq_f32(acc[j.value][0], vld1q_f32(r));
      acc[j.value][1] = vaddq_f32(acc[j.value][1], vld1q_f32(r + 4));
    });
  }
  if (ep->clamp) {
    const float32x4_t vmin = vdupq_n_f32(ep->clamp_min), vmax = vdupq_n_f32(ep->clamp_max);
    static_for<0, kN>([&](auto j) {
      acc[j.value][0] = vminq_f32(vmax, vmaxq_f32(vmin, acc[j.value][0]));
      acc[j.value][1] = vminq_f32(vmax, vmaxq_f32(vmin, acc[j.value][1]));
    });
  }
  static_for<0, kN>([&](auto j) {
    vst1q_f32(cv[j.value], acc[j.value][0]);
    vst1q_f32(cv[j.value] + 4, acc[j.value][1]);
  });
  if (partial)
    for (size_t j = 0; j < size_t(kN); ++j)
      for (size_t i = 0; i < m; ++i) cw[j][i] = scratch[j * kMR + i];
  if (ep->tile_hook) {
    alignas(16) float values[kN * kMR];
    static_for<0, kN>([&](auto j) {
      vst1q_f32(values + j.value * kMR, acc[j.value][0]);
      vst1q_f32(values + j.value * kMR + 4, acc[j.value][1]);
    });
    ep->tile_hook(ep->tile_ctx, F32Tile{ep->tile_i, ep->tile_j, m, size_t(kN), values, size_t(kMR)});
  }
}

using TileFn = void (*)(size_t, size_t, size_t, const float*, size_t, bool, const float* const*, size_t,
                        const float*, size_t, float*, size_t, const F32Epilogue*);

// n -> tile<n, kBroadcast, kInd>, by compile-time recursion (kN = kNR .. 1).
template <bool kInd, int kN = kNR>
NNK_INLINE TileFn pick_broadcast(size_t n) {
  if (n == size_t(kN)) return tile<kN, kBroadcast, kInd>;
  if constexpr (kN > 1) return pick_broadcast<kInd, kN - 1>(n);
  return nullptr;
}

void f32_gemm_8x12__neon_run(size_t m, size_t n, size_t k, const float* a, size_t a_stride, float* a_copy,
                             const float* const* b, size_t b_stride, float* c, size_t ldc, const F32Epilogue* ep) {
  if (m == 0) return;
  bool a_full = m == size_t(kMR);
  if (a_copy) {  // seed O6: copy the panel once, then compute from the copy (hot in L1)
    for (size_t p = 0; p < k; ++p)
      for (size_t i = 0; i < m; ++i) a_copy[p * kMR + i] = a[p * a_stride + i];
    a = a_copy;
    a_stride = kMR;
    a_full = true;  // 8 floats per step are inside the MR * k panel
  }
  if (n == 0) return;
  bool contiguous = true;
  for (size_t j = 1; j < n; ++j) contiguous = contiguous && b[j] == b[0] + j;
  TileFn fn;
  if (contiguous && n == 12) fn = tile<12, kLanes, false>;
  else if (contiguous && n == 8) fn = tile<8, kLanes, false>;
  else if (contiguous && n == 4) fn = tile<4, kLanes, false>;
  else fn = pick_broadcast<false>(n);
  fn(m, k, 1, a, a_stride, a_full, b, b_stride, nullptr, 0, c, ldc, ep);
}

void f32_gemm_8x12__neon_igemm(size_t m, size_t n, size_t k, size_t ks, const float* a, const float* const* b,
                               const float* zero, size_t b_offset, float* c, size_t ldc, const F32Epilogue* ep) {
  if (m == 0 || n == 0) return;
  // A is a packed panel (8 readable floats per step, by contract): the full-width loop reads it in place.
  pick_broadcast<true>(n)(m, k, ks, a, kMR, true, b, 1, zero, b_offset, c, ldc, ep);
}

}  // namespace

const F32GemmKernel f32_gemm_8x12__neon = {"f32_gemm_8x12__neon", kMR, kNR, f32_gemm_8x12__neon_run,
                                         f32_gemm_8x12__neon_igemm};

}  // namespace nnkern
