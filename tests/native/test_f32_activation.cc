// Every sigmoid / tanh kernel this CPU can run (the scalar reference and the set of each SIMD level: avx2 and
// avx512 on x86-64, neon on aarch64) against a float64 reference, for the contract of kernels/f32_activation.h:
//  1. Sweep: every 19th float32 bit pattern with |x| <= 20, each with both signs (1.17e8 inputs per kernel,
//     the interval boundaries of the minimax tables included): max abs error within the documented bound,
//     no output outside [0, 1] (tanh: [-1, 1]) and no NaN, tanh odd bit for bit. The float64 reference of a
//     block is computed once and shared by all kernels. Under NNKERN_TEST_QUICK=1 the sweep takes every
//     1009th pattern (2.2e6 inputs): tools/test-aarch64.sh sets it, because under qemu-user the full sweep
//     takes about 2 minutes per CPU model (a few seconds quick); the x86-64 host run keeps the 1.17e8-input
//     sweep (about 5 s on 2 threads).
//  2. Special values exactly: +-0, +-inf, NaN, +-1e30, -88, -89, -100, +-FLT_MAX, denormals.
//  3. Tails: every n in 0..150 at input offsets 0..3 gives the bits of the full-length run and writes nothing
//     outside [0, n); input and output end at a guard page, so reading or writing past n faults; in place too.
//     The streaming-store variants (avx2, avx512) must give the same bits as the regular kernels.
// Cross-built for aarch64, ctest runs it under qemu-user on cortex-a57 (plain NEON) and max; with
// EXPECT_FEATURES=neon=1 the NEON set must be among the sets tested.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/isa.h"
#include "core/threadpool.h"
#include "harness.h"
#include "ops/activation/activation.h"
#include "testing/guard.h"
#include "core/kernel_family.h"
#include "kernels/f32_activation_list.h"

using namespace nnkern;
using nnkern_test::check;

namespace {

const char* const kMethodNames[kActMethodCount] = {"minimax", "scalef", "accurate"};

uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

F32UnaryUkernel kernel_of(const F32ActivationKernels& k, bool tanh, int method) {
  return tanh ? k.tanh[method] : k.sigmoid[method];
}
const char* name_of(const F32ActivationKernels& k, bool tanh, int method) {
  return tanh ? k.tanh_names[method] : k.sigmoid_names[method];
}
double bound_of(bool tanh, int method) { return tanh ? kTanhMaxAbsError[method] : kSigmoidMaxAbsError[method]; }

double ref_sigmoid(double x) {
  const double e = std::exp(-std::fabs(x));
  return x >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}

// Per kernel (set, function, method): the worst error and its input, and the counts of violations.
struct Stat {
  double max_err = 0.0;
  float worst_x = 0.0f, worst_y = 0.0f;
  size_t out_of_range = 0, not_odd = 0;
};

void sweep(const std::vector<const F32ActivationKernels*>& sets, size_t stride) {
  constexpr size_t kBlock = 4096, kTaskBlocks = 32;
  const size_t per_sign = size_t(bits_of(20.0f)) / stride + 1;
  const size_t blocks = (per_sign + kBlock - 1) / kBlock, tasks = (blocks + kTaskBlocks - 1) / kTaskBlocks;
  const size_t n_stats = sets.size() * 2 * kActMethodCount;
  std::vector<Stat> part(tasks * n_stats);
  parallel_for(tasks, [&](size_t task) {
    std::vector<float> xs(2 * kBlock), ys(2 * kBlock);
    std::vector<double> ref_s(2 * kBlock), ref_t(2 * kBlock);
    Stat* st = &part[task * n_stats];
    for (size_t b = task * kTaskBlocks; b < blocks && b < (task + 1) * kTaskBlocks; ++b) {
      const size_t i0 = b * kBlock, len = per_sign - i0 < kBlock ? per_sign - i0 : kBlock;
      for (size_t i = 0; i < len; ++i) {  // x, -x adjacent: odd symmetry is checked pairwise
        const uint32_t bits = uint32_t((i0 + i) * stride);
        xs[2 * i] = from_bits(bits);
        xs[2 * i + 1] = from_bits(bits | 0x80000000u);
      }
      for (size_t i = 0; i < 2 * len; ++i) {
        ref_s[i] = ref_sigmoid(xs[i]);
        ref_t[i] = std::tanh(double(xs[i]));
      }
      for (size_t s = 0; s < sets.size(); ++s)
        for (int tanh = 0; tanh < 2; ++tanh)
          for (int m = 0; m < kActMethodCount; ++m) {
            Stat& r = st[(s * 2 + tanh) * kActMethodCount + m];
            kernel_of(*sets[s], tanh, m)(2 * len, xs.data(), ys.data());
            const double lo = tanh ? -1.0 : 0.0;
            const std::vector<double>& ref = tanh ? ref_t : ref_s;
            for (size_t i = 0; i < 2 * len; ++i) {
              const float y = ys[i];
              if (!(y >= lo && y <= 1.0)) ++r.out_of_range;  // NaN too
              const double err = std::fabs(double(y) - ref[i]);
              if (!(err <= r.max_err)) {
                r.max_err = std::isnan(err) ? INFINITY : err;
                r.worst_x = xs[i];
                r.worst_y = y;
              }
            }
            if (tanh)
              for (size_t i = 0; i < len; ++i)
                if (bits_of(ys[2 * i + 1]) != (bits_of(ys[2 * i]) ^ 0x80000000u)) ++r.not_odd;
          }
    }
  });
  std::printf("sweep: %zu inputs per kernel (every %zu-th float32 with |x| <= 20, both signs)\n", 2 * per_sign,
              stride);
  for (size_t s = 0; s < sets.size(); ++s)
    for (int tanh = 0; tanh < 2; ++tanh)
      for (int m = 0; m < kActMethodCount; ++m) {
        Stat total;
        for (size_t t = 0; t < tasks; ++t) {  // in task order: deterministic worst_x
          const Stat& r = part[t * n_stats + (s * 2 + tanh) * kActMethodCount + m];
          if (r.max_err > total.max_err) {
            total.max_err = r.max_err;
            total.worst_x = r.worst_x;
            total.worst_y = r.worst_y;
          }
          total.out_of_range += r.out_of_range;
          total.not_odd += r.not_odd;
        }
        const char* name = name_of(*sets[s], tanh, m);
        const double bound = bound_of(tanh, m);
        std::printf("  %-28s max abs error %.3e (bound %.1e) at x = %.9g (got %.9g)\n", name, total.max_err, bound,
                    total.worst_x, total.worst_y);
        check(total.max_err <= bound, "%s: max abs error %.3e at x = %.9g (got %.9g) exceeds %.1e", name,
              total.max_err, total.worst_x, total.worst_y, bound);
        check(total.out_of_range == 0, "%s: %zu outputs outside the range or NaN", name, total.out_of_range);
        check(total.not_odd == 0, "%s: tanh(-x) != -tanh(x) for %zu inputs", name, total.not_odd);
      }
}

void special_values(const F32ActivationKernels& k) {
  const float in[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 1e30f, -1e30f, -88.0f, -89.0f, -100.0f, 88.0f,
                      16.0f, -16.0f, 17.5f, -17.5f, 3.4e38f, -3.4e38f, 1e-45f, -1e-45f, 1.2e-38f, -1.2e-38f};
  constexpr size_t n = sizeof(in) / sizeof(in[0]);
  float y[n];
  for (int m = 0; m < kActMethodCount; ++m) {
    const char* s = k.sigmoid_names[m];
    k.sigmoid[m](n, in, y);
    check(y[0] == 0.5f && y[1] == 0.5f, "%s(+-0) = %.9g, %.9g, want 0.5", s, y[0], y[1]);
    check(y[2] == 1.0f, "%s(+inf) = %.9g, want 1", s, y[2]);
    check(bits_of(y[3]) == 0, "%s(-inf) = %.9g, want +0", s, y[3]);
    check(std::isnan(y[4]) && std::isnan(y[5]), "%s(NaN) = %.9g, %.9g, want NaN", s, y[4], y[5]);
    check(y[6] == 1.0f && y[7] == 0.0f, "%s(+-1e30) = %.9g, %.9g, want 1, 0", s, y[6], y[7]);
    for (size_t i = 0; i < n; ++i) {
      if (std::isnan(in[i])) continue;
      check(y[i] >= 0.0f && y[i] <= 1.0f && !std::signbit(y[i]), "%s(%.9g) = %.9g outside [+0, 1]", s, in[i], y[i]);
      check(std::fabs(double(y[i]) - ref_sigmoid(in[i])) <= kSigmoidMaxAbsError[m], "%s(%.9g) = %.9g, want %.9g", s,
            in[i], y[i], ref_sigmoid(in[i]));
    }
    const char* t = k.tanh_names[m];
    k.tanh[m](n, in, y);
    check(bits_of(y[0]) == 0 && bits_of(y[1]) == 0x80000000u, "%s(+-0) = %.9g, %.9g, want +0, -0", t, y[0], y[1]);
    check(y[2] == 1.0f && y[3] == -1.0f, "%s(+-inf) = %.9g, %.9g, want +-1", t, y[2], y[3]);
    check(std::isnan(y[4]) && std::isnan(y[5]), "%s(NaN) = %.9g, %.9g, want NaN", t, y[4], y[5]);
    check(y[6] == 1.0f && y[7] == -1.0f, "%s(+-1e30) = %.9g, %.9g, want +-1", t, y[6], y[7]);
    for (size_t i = 0; i < n; ++i) {
      if (std::isnan(in[i])) continue;
      check(std::fabs(double(y[i]) - std::tanh(double(in[i]))) <= kTanhMaxAbsError[m], "%s(%.9g) = %.9g, want %.9g", t,
            in[i], y[i], std::tanh(double(in[i])));
    }
  }
}

void tails(const F32ActivationKernels& k) {
  constexpr size_t kBase = 256, kMaxN = 150;  // past 2 x 64: the AVX-512 aligning head and body
  float base[kBase], full[kBase];
  uint32_t s = 12345;
  for (float& v : base) {  // deterministic values in [-12, 12) (an LCG, not the C++ library's RNG)
    v = float(nnkern_test::next_random(s)) / float(1u << 23) * 12.0f - 12.0f;
  }
  base[7] = NAN;
  base[8] = -INFINITY;
  base[9] = -0.0f;
  GuardedBuffer gx(kMaxN * 4 + 4 * 4), gy((kMaxN + 3) * 4);
  for (int tanh = 0; tanh < 2; ++tanh)
    for (int m = 0; m < kActMethodCount; ++m) {
      const F32UnaryUkernel fn = kernel_of(k, tanh, m);
      const F32UnaryUkernel stream = tanh ? k.tanh_stream[m] : k.sigmoid_stream[m];
      const char* name = name_of(k, tanh, m);
      fn(kBase, base, full);
      for (size_t off = 0; off < 4; ++off)
        for (size_t n = 0; n <= kMaxN; ++n) {
          // x[0, n) and y[0, n) end at a guard page; y has 3 sentinels in front.
          float* x = static_cast<float*>(gx.data()) + (gx.size() / 4 - n);
          float* yb = static_cast<float*>(gy.data()) + (gy.size() / 4 - n - 3);
          std::memcpy(x, base + off, n * 4);
          for (size_t i = 0; i < n + 3; ++i) yb[i] = -7.0f;
          fn(n, x, yb + 3);
          bool same = true;
          for (size_t i = 0; i < n; ++i) same = same && bits_of(yb[3 + i]) == bits_of(full[off + i]);
          check(same, "%s: n = %zu, offset %zu: tail result differs from the full-length run", name, n, off);
          check(yb[0] == -7.0f && yb[1] == -7.0f && yb[2] == -7.0f, "%s: n = %zu wrote before y", name, n);
          if (stream) {
            for (size_t i = 0; i < n + 3; ++i) yb[i] = -7.0f;
            stream(n, x, yb + 3);
            same = true;
            for (size_t i = 0; i < n; ++i) same = same && bits_of(yb[3 + i]) == bits_of(full[off + i]);
            check(same, "%s (streaming stores): n = %zu, offset %zu: result differs", name, n, off);
            check(yb[0] == -7.0f && yb[1] == -7.0f && yb[2] == -7.0f, "%s (streaming): n = %zu wrote before y",
                  name, n);
          }
          fn(n, x, x);  // in place
          same = true;
          for (size_t i = 0; i < n; ++i) same = same && bits_of(x[i]) == bits_of(full[off + i]);
          check(same, "%s: n = %zu, offset %zu: in-place result differs", name, n, off);
        }
    }
}

}  // namespace

int main() {
  const char* quick = std::getenv("NNKERN_TEST_QUICK");
  const bool is_quick = quick && *quick && std::strcmp(quick, "0") != 0;
  const size_t stride = is_quick ? 1009 : 19;

  std::vector<const F32ActivationKernels*> sets;
  bool have_neon = false;
  for (Isa isa : isa_levels()) {
    const F32ActivationKernels* k = f32_activation_family().at(isa);
    if (!k) continue;  // a level without kernels of its own (avxvnni, neondot, ...)
    if (!isa_supported(isa)) {
      std::printf("skip %s activation kernels: this CPU lacks %s\n", k->isa, isa_name(isa));
      continue;
    }
    check(std::strcmp(k->isa, isa_name(isa)) == 0, "level %s returned the %s kernels", isa_name(isa), k->isa);
    std::printf("testing the %s activation kernels\n", k->isa);
    sets.push_back(k);
    have_neon = have_neon || isa == Isa::neon;
  }
  if (nnkern_test::expected_feature("neon") == 1) check(have_neon, "the NEON activation kernels were not tested");
  check(sets.size() >= 2 || isa_levels().size() == 1, "no SIMD activation kernels ran on this CPU");

  for (const F32ActivationKernels* k : sets) {
    special_values(*k);
    tails(*k);
  }
  sweep(sets, stride);
  return nnkern_test::finish();
}
