// FP32 direct, mGEMM and depthwise convolution kernels for AArch64 NEON (ARMv8.0 Advanced SIMD, level neon;
// contract: kernels/f32_conv.h). The structure of the x86 template (kernels/f32_conv_tile.inc): one tile<kNV, kN>
// per (channel vectors, pixels), pieces of 8, 4, 2 and 1 pixels below nr, split accumulators for the small tiles;
// but the inputs are used BY LANE, as mGEMM (Park, Bin, Lee, MobiSys 2022) designs it for ARMv8: each pixel's
// input channels c..c+3 are one 128-bit load and feed 4 lane steps (`fmla v.4s, v.4s, v.s[l]`), each step one
// input channel against its kNV weight vectors. Input channel counts not divisible by 4 finish with broadcasts
// (`ld1r`, vld1q_dup_f32) of the last ic % 4 channels.
//
// Register budget (32 V registers of 4 floats; C3's formula, the broadcast now a 4-channel vector):
//   mGEMM 8 x {14, 8}, wf = 3 (the paper's blocking c_o = 8, w_o = 8, c_i = 4): per 4 input channels the
//     nr + 2 inputs that 3 adjacent kernel columns read (x_kw == x_pix) are loaded once, then each column and
//     lane takes v weight vectors: v nr accumulators + nr + 2 inputs + v weights: 2 x 8: 16 + 10 + 2 = 28
//     (the paper: 16 accumulators, 8 inputs and 2 weights, its w_f = 1 keeping the inputs held from one kernel
//     column to the next, which at W_fil = 3 is our group of 3 columns); 1 x 14: 14 + 16 + 1 = 31.
//     Its run_any is the direct kernel below on the same 8-channel blocks.
//   direct 8 x {15, 9}: the same by-lane step for one kernel column: v nr + nr + v <= 31: 15 + 15 + 1,
//     18 + 9 + 2. At MR = 8 its packed blocks are mGEMM's, so it is also mGEMM's wf = 1 twin. (Per 4 channels
//     and tap: nr input loads + 4 v weight loads feed 4 v nr FMLA; v = 2, nr = 9: 17 / 72 = 0.24 loads per
//     FMLA, against 1/v + 1/nr = 0.61 with a broadcast per channel.)
//   depthwise 16 x {24, 12, 8, 5}: channels in lanes, v nr accumulators + v weights + v inputs <= 31: 24 + 2,
//     24 + 4, 24 + 6, 20 + 8 (the AVX-512 kernel's shape at a quarter of the lanes).
//
// Loads per MAC. tools/conv_loads_model.py counts floats moved between registers and cache per MAC; the paper
// counts an input vector load (4 channels, used by lane) as one operation and weights and outputs in floats: its
// "about 0.140" = 1/8 + 10/768 + 2/768 = 0.1406 at W_fil = 3, C_in = 256. Counted from the disassembly
// (tools/neon-loop-stats.py on the cross-built object, aarch64-linux-gnu-g++ 12.2 -O3 -march=armv8-a), hot loop
// of the full tile, no stack access in any of them; "+ out" adds the outputs' 2 / (C_in W_fil) at 256 x 3:
//   mGEMM 8x8, one iteration = 4 channels x 3 kernel columns: 240 insns, 192 FMLA (768 MACs), 30 load insns
//     (34 q: 10 inputs + 24 weights), 18 other. Paper's count (10 + 96) / 768 + out = 0.1406 (paper 0.140);
//     floats (40 + 96) / 768 + out = 0.1797 (the model's figure for this blocking; its unrestricted best,
//     w_o = 10, 0.1526); 0.156 load insns per FMLA.
//   direct 8x9, 4 channels x 1 column: 96 insns, 72 FMLA (288 MACs), 13 load insns (17 q: 9 inputs + 8
//     weights), 11 other. Paper's count (9 + 32) / 288 + out = 0.1450; floats 68 / 288 + out = 0.2387; 0.18
//     load insns per FMLA. (The 8x12 GEMM: 0.2109 floats per MAC at K = 768.)
//   depthwise 16x5, one tap: 62 insns, 20 FMLA (80 MACs), 23 load insns (24 q: 4 weights + 20 inputs), 19
//     other: 1.2 floats per MAC before the outputs (no reduction over channels: every MAC takes a new input).
//
// Tails: m = 1..MR: the last channel vector's bias load and output store are lane loads / stores (NEON has no
// masked loads) of its r = m - 4 (v - 1) channels, so neither is touched past channel m; the weights are whole
// packed rows. Depthwise reads its inputs by channel, so its last vector's inputs are a broadcast of channel 0
// and lane loads of channels min(1, r - 1) and min(2, r - 1): branch-free, never past channel m, and lanes >= r
// (never stored) hold copies (a separate instantiation, kPart, so that full blocks keep plain loads).
// n = 1..nr: pieces of 8, 4, 2, 1. Kernel columns: mGEMM runs groups of 3, then the 1-column step for the
// kw_n % 3 left over. The epilogue adds the bias and clamps (FMAX / FMIN propagate NaN, as the scalar reference
// lets it through).
//
// Two things keep the hot loops spill-free and are load-bearing: the static_for bodies always_inline (else
// GCC inlines them late, SRA leaves the accumulator array in memory and the mGEMM loop stores all 16 every
// lane step) and optimize("no-schedule-insns") on the tiles (else the first scheduler hoists the inputs'
// loads ahead of their FMAs and runs out of registers, as in the NEON GEMM).
//
// One-definition rule: this file gets the NEON flags only; everything here has internal linkage, no STL code.
#include <arm_neon.h>

#include <cstddef>
#include <cstdint>

#include "kernels/f32_conv_list.h"

#define NNK_INLINE inline __attribute__((always_inline))
#define NNK_INLINE_LAMBDA __attribute__((always_inline))  // on the static_for bodies: see tile

namespace nnkern {
namespace {

constexpr int L = 4;      // floats per vector
constexpr int kRegs = 32;  // vector registers

template <int I>
struct Int {
  static constexpr int value = I;
};

// f(Int<I>{}) for I = 0 .. kEnd-1, with I a constant expression (lane indices must be immediates).
template <int I, int kEnd, typename F>
NNK_INLINE void static_for(F&& f) {
  if constexpr (I < kEnd) {
    f(Int<I>{});
    static_for<I + 1, kEnd>(f);
  }
}

constexpr int cmin(int a, int b) { return a < b ? a : b; }
constexpr int cmax(int a, int b) { return a > b ? a : b; }

// Lanes [0, r) of p (r = 1..4), zero above: p[r..3] are never read.
NNK_INLINE float32x4_t load_partial(const float* p, int r) {
  if (r >= 4) return vld1q_f32(p);
  const float32x2_t lo = r == 1 ? vld1_lane_f32(p, vdup_n_f32(0.0f), 0) : vld1_f32(p);
  const float32x4_t v = vcombine_f32(lo, vdup_n_f32(0.0f));
  return r == 3 ? vld1q_lane_f32(p + 2, v, 2) : v;
}

// Lanes [0, r) of v to p (r = 1..4): p[r..3] are never written.
NNK_INLINE void store_partial(float* p, float32x4_t v, int r) {
  if (r >= 4) {
    vst1q_f32(p, v);
    return;
  }
  if (r == 1) {
    vst1q_lane_f32(p, v, 0);
    return;
  }
  vst1_f32(p, vget_low_f32(v));
  if (r == 3) vst1q_lane_f32(p + 2, v, 2);
}

// Pieces of a tile of n pixels: kNR at a time, then 8, 4, 2, 1 (never more than kNR).
template <int kNR, class Piece>
NNK_INLINE void pieces(size_t n, Piece&& piece) {
  size_t j = 0;
  while (n - j >= size_t(kNR)) j += piece(Int<kNR>{}, j);
  if constexpr (kNR > 8) while (n - j >= 8) j += piece(Int<8>{}, j);
  if constexpr (kNR > 4) if (n - j >= 4) j += piece(Int<4>{}, j);
  if constexpr (kNR > 2) if (n - j >= 2) j += piece(Int<2>{}, j);
  if constexpr (kNR > 1) if (n - j >= 1) j += piece(Int<1>{}, j);
}

// Bias (zero without one), + clamp, stored: the last vector's r = m - 4 (kNV - 1) lanes only.
template <int kNV, int kN>
NNK_INLINE void epilogue(float32x4_t (&acc)[kN][kNV], const F32ConvArgs& a, float* y) {
  const F32Epilogue& ep = *a.ep;
  const int r = int(a.m) - (kNV - 1) * L;
  float32x4_t bias[kNV];
  static_for<0, kNV>([&](auto v) NNK_INLINE_LAMBDA {
    constexpr int V = decltype(v)::value;
    const float* b = ep.bias + V * L;
    bias[V] = !ep.bias ? vdupq_n_f32(0.0f) : V == kNV - 1 ? load_partial(b, r) : vld1q_f32(b);
  });
  const float32x4_t lo = vdupq_n_f32(ep.clamp_min), hi = vdupq_n_f32(ep.clamp_max);
  static_for<0, kN>([&](auto j) NNK_INLINE_LAMBDA {
    static_for<0, kNV>([&](auto v) NNK_INLINE_LAMBDA {
      constexpr int J = decltype(j)::value, V = decltype(v)::value;
      float32x4_t t = vaddq_f32(acc[J][V], bias[V]);
      if (ep.clamp) t = vminq_f32(vmaxq_f32(t, lo), hi);  // FMAX / FMIN: a NaN stays NaN
      float* p = y + J * a.y_pix + V * L;
      if (V == kNV - 1)
        store_partial(p, t, r);
      else
        vst1q_f32(p, t);
    });
  });
}

// The direct (kWF = 1) and mGEMM (kWF > 1) kernels: kMR channels per packed block, kNRv pixels per tile at v
// channel vectors (0 past kMR / L).
template <int kMR, int kWF, int kNR1, int kNR2, int kNR3, int kNR4>
struct ConvNeon {
  static constexpr int kMV = kMR / L;
  static_assert(kMR % L == 0 && kMV >= 1 && kMV <= kF32ConvMaxVectors, "MR must be 1-4 vectors");

  // Input channels c..c+3 of kF adjacent kernel columns: the kN + kF - 1 pixels' 4-channel vectors loaded once,
  // then per column f and lane l the kNV weight vectors of channel c + l (w + f w_col + l MR) against lane l of
  // input j + f. Lane l accumulates into acc[l % kS] (split accumulators of the small tiles).
  template <int kNV, int kN, int kF, int kS>
  NNK_INLINE static void step4(float32x4_t (&acc)[kS][kN][kNV], const float* xc, const float* wc, size_t xp,
                               size_t w_col) {
    asm("" : "+r"(xp));  // addresses xc + i * xp, not one pointer register per input (as the x86 template)
    float32x4_t in[kN + kF - 1];
    static_for<0, kN + kF - 1>([&](auto i) NNK_INLINE_LAMBDA { in[i.value] = vld1q_f32(xc + i.value * xp); });
    static_for<0, kF>([&](auto f) NNK_INLINE_LAMBDA {
      static_for<0, L>([&](auto l) NNK_INLINE_LAMBDA {
        constexpr int F = decltype(f)::value, Ln = decltype(l)::value, S = Ln % kS;
        const float* w = wc + F * w_col + Ln * kMR;
        float32x4_t wv[kNV];
        static_for<0, kNV>([&](auto v) NNK_INLINE_LAMBDA { wv[v.value] = vld1q_f32(w + v.value * L); });
        static_for<0, kN>([&](auto j) NNK_INLINE_LAMBDA {
          static_for<0, kNV>([&](auto v) NNK_INLINE_LAMBDA {
            constexpr int J = decltype(j)::value, V = decltype(v)::value;
            acc[S][J][V] = vfmaq_laneq_f32(acc[S][J][V], wv[V], in[J + F], Ln);
          });
        });
      });
    });
  }

  // One input channel (the ic % 4 tail) of kF adjacent kernel columns: kN + kF - 1 broadcasts.
  template <int kNV, int kN, int kF>
  NNK_INLINE static void step1(float32x4_t (&acc)[kN][kNV], const float* xc, const float* wc, size_t xp,
                               size_t w_col) {
    asm("" : "+r"(xp));
    float32x4_t in[kN + kF - 1];
    static_for<0, kN + kF - 1>([&](auto i) NNK_INLINE_LAMBDA { in[i.value] = vld1q_dup_f32(xc + i.value * xp); });
    static_for<0, kF>([&](auto f) NNK_INLINE_LAMBDA {
      constexpr int F = decltype(f)::value;
      float32x4_t wv[kNV];
      static_for<0, kNV>([&](auto v) NNK_INLINE_LAMBDA { wv[v.value] = vld1q_f32(wc + F * w_col + v.value * L); });
      static_for<0, kN>([&](auto j) NNK_INLINE_LAMBDA {
        static_for<0, kNV>([&](auto v) NNK_INLINE_LAMBDA {
          constexpr int J = decltype(j)::value, V = decltype(v)::value;
          acc[J][V] = vfmaq_f32(acc[J][V], wv[V], in[J + F]);
        });
      });
    });
  }

  // All ic input channels of kF adjacent kernel columns starting at xc / wc.
  template <int kNV, int kN, int kF, int kS>
  NNK_INLINE static void columns(float32x4_t (&acc)[kS][kN][kNV], const float* xc, const float* wc, size_t ic,
                                 size_t xp, size_t w_col) {
    size_t c = 0;
    for (; c + L <= ic; c += L) step4<kNV, kN, kF, kS>(acc, xc + c, wc + c * kMR, xp, w_col);
#pragma GCC unroll 1  // at most 3 channels: unrolled, GCC spills
    for (; c < ic; ++c) step1<kNV, kN, kF>(acc[0], xc + c, wc + c * kMR, xp, w_col);
  }

  // A tile of kNV vectors x kN pixels. Below 8 accumulators (too few FMA chains for 2 pipes x 4 cycles: the
  // one-pixel edge tiles), kS copies of them, as many as the registers left beside inputs and weights hold, take
  // the lanes in turn and are summed at the end.
  template <int kNV, int kN>
  __attribute__((optimize("no-schedule-insns"))) static void tile(const F32ConvArgs& a, const float* x, float* y) {
    constexpr int kAcc = kNV * kN, kFree = kRegs - 1 - (kN + kWF - 1) - kNV;
    constexpr int kS = kAcc >= 8 ? 1 : cmin(L, cmax(1, cmin((8 + kAcc - 1) / kAcc, kFree / kAcc)));
    float32x4_t acc[kS][kN][kNV];
    static_for<0, kS>([&](auto s) NNK_INLINE_LAMBDA {
      static_for<0, kN>([&](auto j) NNK_INLINE_LAMBDA {
        static_for<0, kNV>([&](auto v) NNK_INLINE_LAMBDA { acc[s.value][j.value][v.value] = vdupq_n_f32(0.0f); });
      });
    });
    const size_t ic = a.ic, xp = a.x_pix, w_col = ic * kMR;
    for (size_t kh = 0; kh < a.kh_n; ++kh) {
      const float* xr = x + kh * a.x_kh;
      const float* wr = a.w + kh * a.w_kh;
      size_t kw = 0;
      if constexpr (kWF > 1)
        for (; kw + kWF <= a.kw_n; kw += kWF)
          columns<kNV, kN, kWF, kS>(acc, xr + kw * a.x_kw, wr + kw * w_col, ic, xp, w_col);
      for (; kw < a.kw_n; ++kw) columns<kNV, kN, 1, kS>(acc, xr + kw * a.x_kw, wr + kw * w_col, ic, xp, w_col);
    }
    static_for<1, kS>([&](auto s) NNK_INLINE_LAMBDA {
      static_for<0, kN>([&](auto j) NNK_INLINE_LAMBDA {
        static_for<0, kNV>([&](auto v) NNK_INLINE_LAMBDA {
          acc[0][j.value][v.value] = vaddq_f32(acc[0][j.value][v.value], acc[s.value][j.value][v.value]);
        });
      });
    });
    epilogue<kNV, kN>(acc[0], a, y);
  }

  template <int kNV, int kNR>
  static void run_vectors(const F32ConvArgs& a) {
    pieces<kNR>(a.n, [&](auto n, size_t j) NNK_INLINE_LAMBDA {
      tile<kNV, decltype(n)::value>(a, a.x + j * a.x_pix, a.y + j * a.y_pix);
      return size_t(decltype(n)::value);
    });
  }

  static void run(const F32ConvArgs& a) {
    switch ((a.m + L - 1) / L) {
      case 1: run_vectors<1, kNR1>(a); break;
      case 2: if constexpr (kMV >= 2) run_vectors<2, kNR2>(a); break;
      case 3: if constexpr (kMV >= 3) run_vectors<3, kNR3>(a); break;
      default: if constexpr (kMV >= 4) run_vectors<4, kNR4>(a); break;
    }
  }

  // A wf = 1 kernel is its own run_any; an mGEMM kernel names its wf = 1 twin on the same blocks.
  static constexpr F32ConvKernel kernel(const char* name) {
    static_assert(kWF == 1, "an mGEMM kernel needs its wf = 1 twin: kernel_with<Twin>");
    return {name, kMR, L, kWF, {kNR1, kNR2, kNR3, kNR4}, &run, {kNR1, kNR2, kNR3, kNR4}, &run};
  }
  template <class Twin>
  static constexpr F32ConvKernel kernel_with(const char* name) {
    static_assert(Twin::kMR_ == kMR && Twin::kWF_ == 1, "the twin runs the same blocks with wf = 1");
    const F32ConvKernel twin = Twin::kernel("");
    return {name, kMR, L, kWF, {kNR1, kNR2, kNR3, kNR4}, &run,
            {twin.nr_any[0], twin.nr_any[1], twin.nr_any[2], twin.nr_any[3]}, twin.run_any};
  }
  static constexpr int kMR_ = kMR, kWF_ = kWF;
};

// The depthwise kernels: kNV channel vectors x kNRv pixels, per tap one weight vector per channel vector and one
// input load per pixel and vector (channels in lanes). kPart: the last vector holds r < 4 channels, so its
// inputs are lane loads (never past channel m).
template <int kMR, int kNR1, int kNR2, int kNR3, int kNR4>
struct DwconvNeon {
  static constexpr int kMV = kMR / L;
  static_assert(kMR % L == 0 && kMV >= 1 && kMV <= kF32ConvMaxVectors, "MR must be 1-4 vectors");

  template <int kNV, int kN, bool kPart>
  __attribute__((optimize("no-schedule-insns"))) static void tile(const F32ConvArgs& a, const float* x, float* y) {
    float32x4_t acc[kN][kNV];
    static_for<0, kN>([&](auto j) NNK_INLINE_LAMBDA {
      static_for<0, kNV>([&](auto v) NNK_INLINE_LAMBDA { acc[j.value][v.value] = vdupq_n_f32(0.0f); });
    });
    const size_t r = a.m - (kNV - 1) * L, o1 = r > 1 ? 1 : r - 1, o2 = r > 2 ? 2 : r - 1;  // kPart: r < 4
    size_t xp = a.x_pix;
    for (size_t kh = 0; kh < a.kh_n; ++kh)
      for (size_t kw = 0; kw < a.kw_n; ++kw) {
        const float* xc = x + kh * a.x_kh + kw * a.x_kw;
        const float* wc = a.w + kh * a.w_kh + kw * kMR;
        asm("" : "+r"(xp));
        float32x4_t wv[kNV];
        static_for<0, kNV>([&](auto v) NNK_INLINE_LAMBDA { wv[v.value] = vld1q_f32(wc + v.value * L); });
        static_for<0, kN>([&](auto j) NNK_INLINE_LAMBDA {
          static_for<0, kNV>([&](auto v) NNK_INLINE_LAMBDA {
            constexpr int J = decltype(j)::value, V = decltype(v)::value;
            const float* p = xc + J * xp + V * L;
            float32x4_t in;
            if (kPart && V == kNV - 1) {  // lanes >= r repeat lane r - 1: in bounds, and never stored
              in = vld1q_lane_f32(p + o2, vld1q_lane_f32(p + o1, vld1q_dup_f32(p), 1), 2);
            } else {
              in = vld1q_f32(p);
            }
            acc[J][V] = vfmaq_f32(acc[J][V], wv[V], in);
          });
        });
      }
    epilogue<kNV, kN>(acc, a, y);
  }

  template <int kNV, int kNR>
  static void run_vectors(const F32ConvArgs& a) {
    const bool part = a.m % L != 0;
    pieces<kNR>(a.n, [&](auto n, size_t j) NNK_INLINE_LAMBDA {
      constexpr int N = decltype(n)::value;
      if (part)
        tile<kNV, N, true>(a, a.x + j * a.x_pix, a.y + j * a.y_pix);
      else
        tile<kNV, N, false>(a, a.x + j * a.x_pix, a.y + j * a.y_pix);
      return size_t(N);
    });
  }

  static void run(const F32ConvArgs& a) {
    switch ((a.m + L - 1) / L) {
      case 1: run_vectors<1, kNR1>(a); break;
      case 2: if constexpr (kMV >= 2) run_vectors<2, kNR2>(a); break;
      case 3: if constexpr (kMV >= 3) run_vectors<3, kNR3>(a); break;
      default: if constexpr (kMV >= 4) run_vectors<4, kNR4>(a); break;
    }
  }

  static constexpr F32ConvKernel kernel(const char* name) {
    return {name, kMR, L, 1, {kNR1, kNR2, kNR3, kNR4}, &run, {kNR1, kNR2, kNR3, kNR4}, &run, true};
  }
};

using Direct = ConvNeon<8, 1, 15, 9, 0, 0>;
using MGemm = ConvNeon<8, 3, 14, 8, 0, 0>;
using Dwconv = DwconvNeon<16, 24, 12, 8, 5>;

}  // namespace

const F32ConvKernel f32_conv_direct_8x9__neon = Direct::kernel("f32_conv_direct_8x9__neon");
const F32ConvKernel f32_conv_mgemm_8x8__neon = MGemm::kernel_with<Direct>("f32_conv_mgemm_8x8__neon");
const F32ConvKernel f32_dwconv_16x5__neon = Dwconv::kernel("f32_dwconv_16x5__neon");

}  // namespace nnkern
