// Every bf16_gemm micro-kernel of the list this CPU can run against the scalar reference bf16_gemm_reference, over
// every tail (m = 1..MR, n = 1..NR, kq = 0..9 pairs) and the epilogue variants: bit for bit on x86, within the
// float32 bound of the exact sum on NEON (BFDOT rounds a pair's sum once: kernels/bf16_gemm.h) and AMX (tdpbf16ps's
// order). Also checks that nothing outside the m x n tile of C is written. Built as test_bf16_gemm (the build's
// kernels, dispatch by the CPU) and, on x86-64, as test_bf16_gemm_emulated: the AVX-512 and AMX kernels' sources
// compiled over portable stand-ins of their intrinsics (emulated_amx.h, emulated_avx512.h), so that their tiles are
// checked on CPUs without AVX-512 or AMX too.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "harness.h"
#include "kernels/bf16.h"
#include "kernels/bf16_gemm_list.h"
#ifndef NNKERN_TEST_EMULATED_AVX512BF16
#include "core/kernel_family.h"
#endif

using namespace nnkern;
using nnkern_test::check;

namespace {

constexpr float kSentinel = -777.0f;

struct Case {
  const char* name;
  F32Epilogue ep;
  bool use_bias;
  // C's columns through c_rows, tile column j at column NR - 1 - j; B's rows out of order too (neighbours swapped:
  // not evenly spaced in memory)
  bool reversed_columns = false;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  F32Epilogue plain;
  out.push_back({"plain", plain, false});
  F32Epilogue full;
  full.alpha = 0.5f;
  full.beta = -1.25f;
  full.clamp = true;
  full.clamp_min = -0.25f;
  full.clamp_max = 0.75f;
  out.push_back({"alpha-beta-bias-clamp", full, true});
  F32Epilogue relu;
  relu.clamp = true;
  relu.clamp_min = 0.0f;
  relu.clamp_max = INFINITY;
  out.push_back({"bias-relu", relu, true});
  out.push_back({"bias-relu-c_rows", relu, true, true});
  return out;
}

// A bf16 in [-1, 1), or now and then a value that stresses the sums: large, tiny or exactly zero.
uint16_t draw(uint32_t& s) {
  const uint32_t r = nnkern_test::next_random(s);
  float v = nnkern_test::next_unit(s);
  if (r % 29 == 0) v *= 1024.0f;
  if (r % 31 == 0) v = 0.0f;
  return f32_to_bf16(v);
}

// Whether the tile m x n is checked at kq pairs: every tile up to 9 pairs; past them (the AMX kernel's whole
// 16-pair steps) the tails next to the vectors' and tiles' edges.
bool sampled(size_t m, size_t n, size_t kq, size_t MR, size_t NR) {
  const auto edge = [](size_t x, size_t r) { return x <= 2 || x == r || x == r - 1 || (x >= 15 && x <= 17); };
  return kq <= 9 || (edge(m, MR) && edge(n, NR));
}

void check_kernel(const Bf16GemmKernel& k, bool exact) {
  const size_t MR = size_t(k.mr), NR = size_t(k.nr), ldc = MR + 3;
  uint32_t s = 12345;
  for (const Case& cs : cases()) {
    for (size_t kq : {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17, 35}) {
      std::vector<uint16_t> a(std::max<size_t>(kq * 2 * MR, 1)), b(NR * (2 * kq + 1));
      for (auto& v : a) v = draw(s);
      for (auto& v : b) v = draw(s);
      // Each row's element past its kq pairs is a NaN: a kernel that reads beyond a row spreads it.
      for (size_t j = 0; j < NR; ++j) b[j * (2 * kq + 1) + 2 * kq] = 0x7fc0;
      // The panel in the kernel's groups of kgroup values of K (the reference reads it in pairs).
      const size_t g = size_t(k.kgroup), kpad = (2 * kq + g - 1) / g * g;
      std::vector<uint16_t> ak(std::max<size_t>(kpad * MR, 1), 0);
      for (size_t i = 0; i < MR; ++i)
        for (size_t kk = 0; kk < 2 * kq; ++kk)
          ak[(kk / g) * g * MR + g * i + kk % g] = a[(kk / 2) * 2 * MR + 2 * i + kk % 2];
      // The buffer column of tile column j (the mapping is its own inverse), and B's row.
      const auto col = [&](size_t j) { return cs.reversed_columns ? NR - 1 - j : j; };
      const auto brow = [&](size_t j) { return !cs.reversed_columns || (j % 2 == 0 && j + 1 == NR) ? j : j ^ 1; };
      std::vector<const uint16_t*> bp(NR);
      for (size_t j = 0; j < NR; ++j) bp[j] = b.data() + brow(j) * (2 * kq + 1);  // odd row pitch: unaligned pairs
      std::vector<float> bw(b.size());  // the same rows as float32 values, for a b_f32 kernel
      for (size_t i = 0; i < b.size(); ++i) bw[i] = bf16_to_f32(b[i]);
      std::vector<const void*> bk(NR);
      for (size_t j = 0; j < NR; ++j)
        bk[j] = k.b_f32 ? static_cast<const void*>(bw.data() + brow(j) * (2 * kq + 1)) : static_cast<const void*>(bp[j]);
      std::vector<float> bias(MR), c0(NR * ldc + 1);
      for (auto& v : bias) v = nnkern_test::next_unit(s);
      for (auto& v : c0) v = nnkern_test::next_unit(s);
      F32Epilogue ep = cs.ep;
      if (cs.use_bias) ep.bias = bias.data();
      for (size_t m = 1; m <= MR; ++m)
        for (size_t n = 1; n <= NR; ++n) {
          if (!sampled(m, n, kq, MR, NR)) continue;
          std::vector<float> want = c0, got = c0;
          for (size_t j = n; j < NR; ++j)
            std::fill(got.begin() + col(j) * ldc, got.begin() + (col(j) + 1) * ldc, kSentinel);
          std::vector<float> sentinel = got;
          std::vector<float*> want_rows(NR), got_rows(NR);
          for (size_t j = 0; j < NR; ++j) {
            want_rows[j] = want.data() + col(j) * ldc;
            got_rows[j] = got.data() + col(j) * ldc;
          }
          F32Epilogue want_ep = ep, got_ep = ep;
          if (cs.reversed_columns) {
            want_ep.c_rows = want_rows.data();
            got_ep.c_rows = got_rows.data();
          }
          bf16_gemm_reference(m, n, kq, MR, a.data(), bp.data(), want.data(), ldc, &want_ep);
          k.run(m, n, kq, ak.data(), bk.data(), got.data(), ldc, &got_ep);
          if (k.finish) k.finish();
          for (size_t jb = 0; jb < NR; ++jb)
            for (size_t i = 0; i < ldc; ++i) {
              const size_t j = col(jb), at = jb * ldc + i;
              if (j >= n || i >= m) {
                check(std::memcmp(&got[at], &sentinel[at], 4) == 0, "%s %s m=%zu n=%zu kq=%zu: wrote C(%zu, %zu)",
                      k.name, cs.name, m, n, kq, i, j);
                continue;
              }
              if (exact) {
                check(std::memcmp(&got[at], &want[at], 4) == 0, "%s %s m=%zu n=%zu kq=%zu: C(%zu, %zu) = %.9g, want %.9g",
                      k.name, cs.name, m, n, kq, i, j, got[at], want[at]);
              } else {
                double mag = 0.0;  // sum |a||b| of the element, for the bound
                for (size_t q = 0; q < 2 * kq; ++q)
                  mag += std::fabs(double(bf16_to_f32(a[(q / 2) * 2 * MR + 2 * i + q % 2])) * bf16_to_f32(bp[j][q]));
                const double bound = (2.0 * kq + 4) * std::ldexp(mag * std::fabs(ep.alpha), -24) + 1e-30 +
                                     std::ldexp(std::fabs(double(want[at])), -22);
                check(std::fabs(double(got[at]) - want[at]) <= bound, "%s %s m=%zu n=%zu kq=%zu: C(%zu, %zu) = %.9g, want %.9g",
                      k.name, cs.name, m, n, kq, i, j, got[at], want[at]);
              }
            }
        }
    }
  }
}

}  // namespace

int main() {
#ifdef NNKERN_TEST_EMULATED_AVX512BF16
  check_kernel(bf16_gemm_48x8__avx512bf16, true);
  check_kernel(bf16_gemm_32x8__avx512, true);
  check_kernel(bf16_gemm_32x32__amx, false);
#else
  const int ran = nnkern_test::for_each_runnable(bf16_gemm_family().list(), [](const Bf16GemmKernel& k, Isa level) {
    check_kernel(k, level != Isa::neonbf16 && level != Isa::amx);
  });
  check(ran >= 1, "no bf16_gemm kernel ran");
#endif
  return nnkern_test::finish();
}
