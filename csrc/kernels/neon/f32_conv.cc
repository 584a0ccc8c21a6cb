// FP32 direct, mGEMM, depthwise and dot convolution kernels for AArch64 NEON (ARMv8.0 Advanced SIMD, level neon;
// contract: kernels/f32_conv.h). The structure of the x86 template (kernels/inc/f32_conv_tile.inc): one tile<kNV, kN>
// per (channel vectors, pixels), pieces of 8, 4, 2 and 1 pixels below nr; but the inputs are used BY LANE, as
// mGEMM (Park, Bin, Lee, MobiSys 2022) designs it for ARMv8: each pixel's input channels c..c+3 are one 128-bit
// load and feed 4 lane steps (`fmla v.4s, v.4s, v.s[l]`), each step one input channel against its kNV weight
// vectors. Input channel counts not divisible by 4 finish with broadcasts (`ld1r`) of the last ic % 4 channels.
// As on x86, each output's summation order depends only on its own clipped window, never on the tile or piece it
// falls in nor on run / run_any (ops/conv/block.cc relies on it): no split accumulators for short tiles.
//
// Register budget (32 V registers of 4 floats; C3's formula, the broadcast now a 4-channel vector):
//   mGEMM 8 x {14, 8}, wf = 3 (the paper's blocking c_o = 8, w_o = 8, c_i = 4): per 4 input channels the
//     nr + 2 inputs that 3 adjacent kernel columns read (x_kw == x_pix) are loaded once, then each column and
//     lane takes v weight vectors: v nr accumulators + nr + 2 inputs + v weights: 2 x 8: 16 + 10 + 2 = 28
//     (the paper: 16 accumulators, 8 inputs and 2 weights, its w_f = 1 keeping the inputs held from one kernel
//     column to the next, which at W_fil = 3 is our chunk of 3 columns: the same 10 input loads per 4 channels);
//     1 x 14: 14 + 16 + 1 = 31. Its run_any twin: the same blocks and order, each column's inputs loaded for
//     it (any x_pix), direct's budget 8 x {15, 9}.
//   direct 8 x {15, 9}: the same by-lane step for one kernel column: v nr + nr + v <= 31: 15 + 15 + 1,
//     18 + 9 + 2. (Per 4 channels and tap: nr input loads + 4 v weight loads feed 4 v nr FMLA; v = 2, nr = 9:
//     17 / 72 = 0.24 loads per FMLA, against 1/v + 1/nr = 0.61 with a broadcast per channel.)
//   depthwise 16 x {24, 12, 8, 5}: channels in lanes, v nr accumulators + v weights + v inputs <= 31: 24 + 2,
//     24 + 4, 24 + 6, 20 + 8 (the AVX-512 kernel's shape at a quarter of the lanes).
//   dot 4 x {15, 10, 7, 6}: input channels in lanes, m nr accumulators + nr inputs + 1 weight vector <= 31:
//     15 + 15 + 1, 20 + 10 + 1, 21 + 7 + 1, 24 + 6 + 1; each output's lanes summed once (FADDP) at the end.
//
// Loads per MAC. tools/conv_loads_model.py counts floats moved between registers and cache per MAC; the paper
// counts an input vector load (4 channels, used by lane) as one operation and weights and outputs in floats: its
// "about 0.140" = 1/8 + 10/768 + 2/768 = 0.1406 at W_fil = 3, C_in = 256. Counted from the disassembly
// (tools/neon-loop-stats.py on the cross-built object, aarch64-linux-gnu-g++ 12.2 -O3 -march=armv8-a), hot loop
// of the full tile, no stack access in any loop of any tile; "+ out" adds the outputs' 2 / (C_in W_fil) at 256 x 3:
//   mGEMM 8x8, one iteration = 4 channels x 3 kernel columns: 235 insns, 192 FMLA (768 MACs), 23 load insns
//     (34 q: 10 inputs + 24 weights), 20 other. Paper's count (10 + 96) / 768 + out = 0.1406 (paper 0.140);
//     floats (40 + 96) / 768 + out = 0.1797 (the model's figure for this blocking; its unrestricted best,
//     w_o = 10, 0.1526); 0.12 load insns (0.18 q) per FMLA.
//   its twin 8x9, the same 4 x 3 step: 288 insns, 216 FMLA, 39 load insns (51 q: 27 inputs + 24 weights).
//   direct 8x9, 4 channels x 1 column: 96 insns, 72 FMLA (288 MACs), 13 load insns (17 q: 9 inputs + 8
//     weights), 11 other. Paper's count (9 + 32) / 288 + out = 0.1450; floats 68 / 288 + out = 0.2387; 0.18
//     load insns per FMLA. (The 8x12 GEMM: 0.2109 floats per MAC at K = 768.)
//   depthwise 16x5, one tap: 62 insns, 20 FMLA (80 MACs), 23 load insns (24 q: 4 weights + 20 inputs), 19
//     other: 1.2 floats per MAC before the outputs (no reduction over channels: every MAC takes a new input).
//   dot 4x6, 4 channels of one tap: 37 insns, 24 FMLA (96 MACs), 10 load insns (6 inputs + 4 weights), 3 other:
//     0.42 floats per MAC.
//
// Tails: m = 1..MR: the last channel vector's bias load and output store are lane loads / stores (NEON has no
// masked loads) of its r = m - 4 (v - 1) channels, so neither is touched past channel m; the weights are whole
// packed rows. Depthwise reads its inputs by channel, so its last vector's inputs are a broadcast of channel 0
// and lane loads of channels min(1, r - 1) and min(2, r - 1) (Tail): branch-free, never past channel m, lanes
// >= r (never stored) hold copies; a separate instantiation (kPart), so full blocks keep plain loads. Dot reads
// a tap's last ic % 4 input channels and weights the same way with lanes >= r cleared (they are summed).
// n = 1..nr: pieces of 8, 4, 2, 1. Kernel columns: mGEMM runs chunks of 3, then one column at a time for the
// kw_n % 3 left over. The epilogue adds the bias and clamps (FMAX / FMIN propagate NaN, as the scalar reference
// lets it through).
//
// Two things keep the hot loops spill-free and are load-bearing: the static_for bodies always_inline (else
// GCC inlines them late, SRA leaves the accumulator array in memory and the mGEMM loop stores all 16 every
// lane step) and optimize("no-schedule-insns") on the tiles (else the first scheduler hoists the inputs'
// loads ahead of their FMAs and runs out of registers, as in the NEON GEMM). The empty asm on pointers (xp, a
// column's xf) keeps GCC from holding one offset register per input, which spilled GPRs.
//
// auto_pick (kernels/f32_conv.h) is left true: not measured on ARM hardware (none here), but by the counts above
// mGEMM and direct issue 0.12-0.18 loads per FMLA against 0.58 for the 8x12 GEMM's indirect form (its broadcast
// mode: 56 loads per 96 FMLA), the reverse of AVX2, where auto keeps indirect.
//
// One-definition rule: this file gets the NEON flags only; everything here has internal linkage, no STL code.
#include <arm_neon.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/f32_conv_list.h"

#define NNK_INLINE inline __attribute__((always_inline))
#define NNK_INLINE_LAMBDA __attribute__((always_inline))  // on the static_for bodies (see the header)

namespace nnkern {
namespace {

constexpr int L = 4;  // floats per vector

#include "kernels/inc/neon_static_for.inc"

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

// The last r < 4 floats of a row, branch-free: a broadcast of p[0] and lane loads of p[min(1, r - 1)] and
// p[min(2, r - 1)], so nothing past p[r - 1] is read; lanes >= r hold copies (load), or zeros (load_zero: the lane
// mask clears them, for sums over the lanes).
struct Tail {
  size_t o1, o2;
  uint32x4_t keep;
  explicit Tail(size_t r) : o1(r > 1 ? 1 : r - 1), o2(r > 2 ? 2 : r - 1) {
    const uint32_t lanes[4] = {0, 1, 2, 3};
    keep = vcltq_u32(vld1q_u32(lanes), vdupq_n_u32(uint32_t(r)));
  }
  NNK_INLINE float32x4_t load(const float* p) const {
    return vld1q_lane_f32(p + o2, vld1q_lane_f32(p + o1, vld1q_dup_f32(p), 1), 2);
  }
  NNK_INLINE float32x4_t load_zero(const float* p) const {
    return vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(load(p)), keep));
  }
};

#include "kernels/inc/f32_conv_run.inc"

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

// The direct (kWF = 1) and mGEMM (kWF > 1, kReuse) kernels: kMR channels per packed block, kNRv pixels per tile at
// v channel vectors (0 past kMR / L). Per kernel row, chunks of kWF kernel columns, the input channels in blocks of
// 4 outside and the chunk's columns inside, then the leftover columns one by one; each block's 4 lanes in turn.
// kReuse: the chunk's columns share their input loads (x_kw == x_pix); kReuse false with kWF > 1 is an mGEMM
// kernel's run_any twin, the same order with each column's inputs loaded for it. Each output's summation order thus
// depends only on its own clipped window, never on the tile, the piece or run / run_any (ops/conv/block.cc
// relies on it): no split accumulators for the short tiles.
template <int kMR, int kWF, int kNR1, int kNR2, int kNR3, int kNR4, bool kReuse = (kWF > 1)>
struct ConvNeon {
  static constexpr int kMV = kMR / L;
  static_assert(kMR % L == 0 && kMV >= 1 && kMV <= kF32ConvMaxVectors, "MR must be 1-4 vectors");

  // The 4 lane steps of one block of input channels c..c+3 of one kernel column: lane l's kNV weight vectors
  // (channel c + l: w + l MR) against lane l of each pixel's input vector in[j].
  template <int kNV, int kN>
  NNK_INLINE static void lanes(float32x4_t (&acc)[kN][kNV], const float* w, const float32x4_t* in) {
    static_for<0, L>([&](auto l) NNK_INLINE_LAMBDA {
      constexpr int Ln = decltype(l)::value;
      float32x4_t wv[kNV];
      static_for<0, kNV>([&](auto v) NNK_INLINE_LAMBDA { wv[v.value] = vld1q_f32(w + Ln * kMR + v.value * L); });
      static_for<0, kN>([&](auto j) NNK_INLINE_LAMBDA {
        static_for<0, kNV>([&](auto v) NNK_INLINE_LAMBDA {
          constexpr int J = decltype(j)::value, V = decltype(v)::value;
          acc[J][V] = vfmaq_laneq_f32(acc[J][V], wv[V], in[J], Ln);
        });
      });
    });
  }

  // Input channels c..c+3 of kF adjacent kernel columns (w + f w_col, x + f x_kw). kReuse: the kN + kF - 1
  // pixels' 4-channel vectors loaded once (input j + f is pixel j's at column f); else each column's kN.
  template <int kNV, int kN, int kF>
  NNK_INLINE static void step4(float32x4_t (&acc)[kN][kNV], const float* xc, const float* wc, size_t xp, size_t x_kw,
                               size_t w_col) {
    asm("" : "+r"(xp));  // addresses xc + i * xp, not one pointer register per input (as the x86 template)
    if constexpr (kReuse || kF == 1) {
      float32x4_t in[kN + kF - 1];
      static_for<0, kN + kF - 1>([&](auto i) NNK_INLINE_LAMBDA { in[i.value] = vld1q_f32(xc + i.value * xp); });
      static_for<0, kF>([&](auto f) NNK_INLINE_LAMBDA { lanes<kNV, kN>(acc, wc + f.value * w_col, in + f.value); });
    } else {
      static_for<0, kF>([&](auto f) NNK_INLINE_LAMBDA {
        const float* xf = xc + f.value * x_kw;
        asm("" : "+r"(xf));  // the column's inputs from xf and xp, no offset register per (column, pixel)
        float32x4_t in[kN];
        static_for<0, kN>([&](auto j) NNK_INLINE_LAMBDA { in[j.value] = vld1q_f32(xf + j.value * xp); });
        lanes<kNV, kN>(acc, wc + f.value * w_col, in);
      });
    }
  }

  // One input channel (the ic % 4 tail) of kF adjacent kernel columns: broadcasts, shared as in step4.
  template <int kNV, int kN, int kF>
  NNK_INLINE static void step1(float32x4_t (&acc)[kN][kNV], const float* xc, const float* wc, size_t xp, size_t x_kw,
                               size_t w_col) {
    asm("" : "+r"(xp));
    static_for<0, kF>([&](auto f) NNK_INLINE_LAMBDA {
      constexpr int F = decltype(f)::value;
      const float* xf = kReuse ? xc + F * xp : xc + F * x_kw;
      asm("" : "+r"(xf));
      float32x4_t in[kN];
      static_for<0, kN>([&](auto j) NNK_INLINE_LAMBDA { in[j.value] = vld1q_dup_f32(xf + j.value * xp); });
      float32x4_t wv[kNV];
      static_for<0, kNV>([&](auto v) NNK_INLINE_LAMBDA { wv[v.value] = vld1q_f32(wc + F * w_col + v.value * L); });
      static_for<0, kN>([&](auto j) NNK_INLINE_LAMBDA {
        static_for<0, kNV>([&](auto v) NNK_INLINE_LAMBDA {
          constexpr int J = decltype(j)::value, V = decltype(v)::value;
          acc[J][V] = vfmaq_f32(acc[J][V], wv[V], in[J]);
        });
      });
    });
  }

  // All ic input channels of kF adjacent kernel columns starting at xc / wc.
  template <int kNV, int kN, int kF>
  NNK_INLINE static void columns(float32x4_t (&acc)[kN][kNV], const float* xc, const float* wc, size_t ic, size_t xp,
                                 size_t x_kw, size_t w_col) {
    size_t c = 0;
    for (; c + L <= ic; c += L) step4<kNV, kN, kF>(acc, xc + c, wc + c * kMR, xp, x_kw, w_col);
#pragma GCC unroll 1  // at most 3 channels: unrolled, GCC spills
    for (; c < ic; ++c) step1<kNV, kN, kF>(acc, xc + c, wc + c * kMR, xp, x_kw, w_col);
  }

  // A tile of kNV vectors x kN pixels.
  template <int kNV, int kN>
  __attribute__((optimize("no-schedule-insns"))) static void tile(const F32ConvArgs& a, const float* x, float* y) {
    float32x4_t acc[kN][kNV];
    static_for<0, kN>([&](auto j) NNK_INLINE_LAMBDA {
      static_for<0, kNV>([&](auto v) NNK_INLINE_LAMBDA { acc[j.value][v.value] = vdupq_n_f32(0.0f); });
    });
    const size_t ic = a.ic, xp = a.x_pix, x_kw = a.x_kw, w_col = ic * kMR;
    for (size_t kh = 0; kh < a.kh_n; ++kh) {
      const float* xr = x + kh * a.x_kh;
      const float* wr = a.w + kh * a.w_kh;
      size_t kw = 0;
      if constexpr (kWF > 1)
        for (; kw + kWF <= a.kw_n; kw += kWF)
          columns<kNV, kN, kWF>(acc, xr + kw * x_kw, wr + kw * w_col, ic, xp, x_kw, w_col);
      for (; kw < a.kw_n; ++kw) columns<kNV, kN, 1>(acc, xr + kw * x_kw, wr + kw * w_col, ic, xp, x_kw, w_col);
    }
    epilogue<kNV, kN>(acc, a, y);
  }

  static void run(const F32ConvArgs& a) { conv_run<ConvNeon, kMV, kNR1, kNR2, kNR3, kNR4, L>(a); }

  // A kernel without input reuse is its own run_any; an mGEMM kernel names its twin (same blocks, same order).
  static constexpr F32ConvKernel kernel(const char* name, bool auto_pick = true) {
    static_assert(!kReuse, "an mGEMM kernel needs its twin without input reuse: kernel_with<Twin>");
    return {name, kMR, L, 1, {kNR1, kNR2, kNR3, kNR4}, &run, {kNR1, kNR2, kNR3, kNR4}, &run, false, false, auto_pick};
  }
  template <class Twin>
  static constexpr F32ConvKernel kernel_with(const char* name, bool auto_pick = true) {
    static_assert(Twin::kMR_ == kMR && Twin::kWF_ == kWF && !Twin::kReuse_,
                  "the twin runs the same blocks in the same order, without input reuse");
    const F32ConvKernel twin = Twin::kernel("");
    return {name, kMR, L, kWF, {kNR1, kNR2, kNR3, kNR4}, &run,
            {twin.nr_any[0], twin.nr_any[1], twin.nr_any[2], twin.nr_any[3]}, twin.run_any, false, false, auto_pick};
  }
  static constexpr int kMR_ = kMR, kWF_ = kWF;
  static constexpr bool kReuse_ = kReuse;
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
    const Tail tail(a.m - (kNV - 1) * L);  // kPart: the last vector's r < 4 channels
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
            if (kPart && V == kNV - 1) {  // lanes >= r: copies, never stored
              in = tail.load(p);
            } else {
              in = vld1q_f32(p);
            }
            acc[J][V] = vfmaq_f32(acc[J][V], wv[V], in);
          });
        });
      }
    epilogue<kNV, kN>(acc, a, y);
  }

  // The tile for the call: a partial last vector (m % 4 != 0) takes the lane loads, full blocks plain loads.
  template <int kNV, int kN>
  static void tile(const F32ConvArgs& a, const float* x, float* y) {
    conv_tile_by_mask<DwconvNeon, kNV, kN, L>(a, x, y);
  }

  static void run(const F32ConvArgs& a) { conv_run<DwconvNeon, kMV, kNR1, kNR2, kNR3, kNR4, L>(a); }

  static constexpr F32ConvKernel kernel(const char* name) {
    return {name, kMR, L, 1, {kNR1, kNR2, kNR3, kNR4}, &run, {kNR1, kNR2, kNR3, kNR4}, &run, true, false, true};
  }
};

// The dot kernels (dot = true, seed C2): m <= kMR output channels x kNRm pixels, input channels in lanes (the
// last block of a tap's ic % 4 channels loaded with zeros above them, from both input and weights, which are the
// layer's own rows: never read past channel ic nor past row m), each output's 4 lanes summed once at the end
// (FADDP). Registers: m nr accumulators + nr inputs + 1 weight vector <= 31.
template <int kMR, int kNR1, int kNR2, int kNR3, int kNR4>
struct DotNeon {
  static_assert(kMR >= 1 && kMR <= kF32ConvMaxVectors, "1-4 channels");

  template <int kM, int kN, bool kPart>
  NNK_INLINE static void step(float32x4_t (&acc)[kN][kM], const float* xc, const float* wc, size_t xp, size_t w_oc,
                              const Tail& t) {
    float32x4_t in[kN];
    static_for<0, kN>([&](auto j) NNK_INLINE_LAMBDA {
      const float* p = xc + j.value * xp;
      in[j.value] = kPart ? t.load_zero(p) : vld1q_f32(p);
    });
    static_for<0, kM>([&](auto o) NNK_INLINE_LAMBDA {
      const float* q = wc + o.value * w_oc;
      const float32x4_t wv = kPart ? t.load_zero(q) : vld1q_f32(q);
      static_for<0, kN>([&](auto j) NNK_INLINE_LAMBDA {
        acc[j.value][o.value] = vfmaq_f32(acc[j.value][o.value], wv, in[j.value]);
      });
    });
  }

  template <int kM, int kN>
  __attribute__((optimize("no-schedule-insns"))) static void tile(const F32ConvArgs& a, const float* x, float* y) {
    float32x4_t acc[kN][kM];
    static_for<0, kN>([&](auto j) NNK_INLINE_LAMBDA {
      static_for<0, kM>([&](auto o) NNK_INLINE_LAMBDA { acc[j.value][o.value] = vdupq_n_f32(0.0f); });
    });
    const size_t ic = a.ic, full = ic / L * L, w_oc = a.w_oc;
    const Tail tail(ic - full);
    size_t xp = a.x_pix;
    for (size_t kh = 0; kh < a.kh_n; ++kh)
      for (size_t kw = 0; kw < a.kw_n; ++kw) {
        const float* xc = x + kh * a.x_kh + kw * a.x_kw;
        const float* wc = a.w + kh * a.w_kh + kw * ic;
        asm("" : "+r"(xp));
        for (size_t c = 0; c < full; c += L) step<kM, kN, false>(acc, xc + c, wc + c, xp, w_oc, tail);
        if (full < ic) step<kM, kN, true>(acc, xc + full, wc + full, xp, w_oc, tail);
      }
    static_for<0, kN>([&](auto j) NNK_INLINE_LAMBDA {  // constant indices: acc stays in registers
      static_for<0, kM>([&](auto o) NNK_INLINE_LAMBDA {
        float* p = y + j.value * a.y_pix + o.value;
        *p = f32_epilogue_scalar(vaddvq_f32(acc[j.value][o.value]), p, size_t(o.value), *a.ep);
      });
    });
  }

  static void run(const F32ConvArgs& a) { conv_run<DotNeon, kMR, kNR1, kNR2, kNR3, kNR4, 1>(a); }

  static constexpr F32ConvKernel kernel(const char* name) {
    return {name, kMR, 1, 1, {kNR1, kNR2, kNR3, kNR4}, &run, {kNR1, kNR2, kNR3, kNR4}, &run, false, true, true};
  }
};

using Direct = ConvNeon<8, 1, 15, 9, 0, 0>;
using MGemm = ConvNeon<8, 3, 14, 8, 0, 0>;
using MGemmTwin = ConvNeon<8, 3, 15, 9, 0, 0, false>;  // its run_any: mGEMM's order, direct's budget
using Dwconv = DwconvNeon<16, 24, 12, 8, 5>;
using DotConv = DotNeon<4, 15, 10, 7, 6>;

}  // namespace

const F32ConvKernel f32_conv_direct_8x9__neon = Direct::kernel("f32_conv_direct_8x9__neon");
const F32ConvKernel f32_conv_mgemm_8x8__neon = MGemm::kernel_with<MGemmTwin>("f32_conv_mgemm_8x8__neon");
const F32ConvKernel f32_dwconv_16x5__neon = Dwconv::kernel("f32_dwconv_16x5__neon");
const F32ConvKernel f32_conv_dot_4x6__neon = DotConv::kernel("f32_conv_dot_4x6__neon");

}  // namespace nnkern
