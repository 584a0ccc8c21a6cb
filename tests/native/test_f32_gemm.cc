// Every f32_gemm micro-kernel of the list this CPU can run, against the scalar reference
// f32_gemm_reference, over every tail: m = 1..MR, n = 0..NR, k = 0..3 unrolls, with A packed/strided,
// with and without the a_copy panel, B columns contiguous (the driver's packed sliver) or scattered, and
// the epilogue variants; then the indirect form (ks = 1..9 taps, zero rows, offset, c_rows, tile hook).
// Also checks that nothing outside the m x n tile of C and past the MR x k a_copy panel is written.
// Built for the host (x86-64: avx2, avx512) and cross-built for aarch64 (neon), run by ctest; on
// aarch64 under qemu-user with one QEMU_CPU model per ctest entry.
#include <cmath>
#include <cstdio>
#include <vector>

#include "core/isa.h"
#include "harness.h"
#include "kernels/f32_gemm_list.h"
#include "ops/gemm/gemm.h"
#include "core/kernel_family.h"

using namespace nnkern;
using nnkern_test::check;

namespace {

constexpr float kSentinel = -777.0f;
constexpr size_t kMaxK = 3 * 8 + 5;  // three 8-step unrolls plus every remainder

struct Case {
  const char* name;
  F32Epilogue ep;
  bool use_bias;
};


// C's starting values and the bias, drawn after the operands (the same draws in both forms), and the case's
// epilogue with that bias.
struct Outputs {
  std::vector<float> c0, bias;
  F32Epilogue ep;
  Outputs(size_t MR, size_t NR, size_t ldc, const Case& cs, uint32_t& s) : c0(NR * ldc), bias(MR), ep(cs.ep) {
    for (float& v : c0) v = nnkern_test::next_unit(s);
    for (float& v : bias) v = nnkern_test::next_unit(s);
    if (cs.use_bias) ep.bias = bias.data();
  }
};

// beta == 0: C must not be read, so NaN in the m x n tile must not leak. col(j): the column of C that holds
// tile column j, and the other way round (the identity or the reversal NR - 1 - j).
template <class Col>
void poison_tile(std::vector<float>& c, size_t m, size_t n, size_t ldc, const F32Epilogue& ep, Col col) {
  if (ep.beta != 0.0f) return;
  for (size_t j = 0; j < n; ++j)
    for (size_t i = 0; i < m; ++i) c[col(j) * ldc + i] = NAN;
}

// All NR columns of C: outside the m x n tile unchanged from c0; inside within twice the documented bound
// of a K-deep sum (both results are within it of the exact value), where mag(i, j) is the sum of the
// |products| of C(i, j); then extra(i, j, got) for each tile value. col as for poison_tile.
template <class Col, class Mag, class Extra>
bool compare_c(const char* what, const std::vector<float>& c_got, const std::vector<float>& c_ref,
               const std::vector<float>& c0, size_t m, size_t n, size_t NR, size_t ldc, size_t K,
               const F32Epilogue& ep, Col col, Mag mag, Extra extra) {
  bool ok = true;
  for (size_t jc = 0; jc < NR; ++jc) {
    for (size_t i = 0; i < ldc; ++i) {
      const float got = c_got[jc * ldc + i], want = c_ref[jc * ldc + i];
      const size_t j = col(jc);  // the tile column stored at column jc
      if (j >= n || i >= m) {
        ok = check(std::memcmp(&got, &c0[jc * ldc + i], 4) == 0, "%s: wrote C(%zu, %zu) outside the tile", what, i, jc) && ok;
        continue;
      }
      const double tol = 2.0 * ((2.0 * K + 4.0) * std::ldexp(1.0, -24) *
                                (std::fabs(ep.alpha) * mag(i, j) + std::fabs(ep.beta * c0[jc * ldc + i]) +
                                 (ep.bias ? std::fabs(ep.bias[i]) : 0.0))) + 1e-30;
      ok = check(std::fabs(double(got) - want) <= tol, "%s: C(%zu, %zu) = %.9g, reference %.9g (tol %.3g)", what, i, j,
                 got, want, tol) && ok;
      ok = extra(i, j, got) && ok;
    }
  }
  return ok;
}

// Runs one tile with `kernel` and with the reference and compares them.
void check_tile(const F32GemmKernel& kernel, size_t m, size_t n, size_t k, size_t a_stride, bool with_copy,
                bool scattered_b, const Case& cs, uint32_t seed) {
  const size_t MR = kernel.mr, NR = kernel.nr, ldc = MR + 3;
  uint32_t s = seed;
  std::vector<float> a(a_stride * k + MR, kSentinel);
  for (size_t p = 0; p < k; ++p)
    for (size_t i = 0; i < m; ++i) a[p * a_stride + i] = nnkern_test::next_unit(s);  // rows >= m stay sentinels
  // B: contiguous columns (b[j] = base + j, stride NR + 2) or scattered (each column its own place).
  const size_t b_stride = scattered_b ? 3 : NR + 2;
  std::vector<float> b((NR + 1) * (b_stride * k + NR + 1), kSentinel);
  std::vector<const float*> bp(NR);
  for (size_t j = 0; j < NR; ++j) bp[j] = scattered_b ? b.data() + (NR - 1 - j) * (b_stride * k + 1) : b.data() + j;
  for (size_t j = 0; j < n; ++j)
    for (size_t p = 0; p < k; ++p) const_cast<float*>(bp[j])[p * b_stride] = nnkern_test::next_unit(s);
  const Outputs out(MR, NR, ldc, cs, s);
  const F32Epilogue& ep = out.ep;
  const auto same_col = [](size_t j) { return j; };
  std::vector<float> c_ref = out.c0, c_got = out.c0;
  poison_tile(c_got, m, n, ldc, ep, same_col);
  std::vector<float> copy(MR * k + MR, kSentinel), copy_ref(MR * k + MR, kSentinel);
  f32_gemm_reference(m, n, k, 1, a.data(), a_stride, bp.data(), 0, b_stride, nullptr, 0, c_ref.data(), ldc, &ep);
  kernel.run(m, n, k, a.data(), a_stride, with_copy ? copy.data() : nullptr, bp.data(), b_stride, c_got.data(), ldc,
             &ep);

  char what[200];
  std::snprintf(what, sizeof what, "%s %s m=%zu n=%zu k=%zu a_stride=%zu copy=%d b=%s", kernel.name, cs.name, m, n, k,
                a_stride, int(with_copy), scattered_b ? "scattered" : "contiguous");
  const auto mag = [&](size_t i, size_t j) {
    double sum = 0.0;
    for (size_t p = 0; p < k; ++p) sum += std::fabs(double(a[p * a_stride + i]) * bp[j][p * b_stride]);
    return sum;
  };
  bool ok = compare_c(what, c_got, c_ref, out.c0, m, n, NR, ldc, k, ep, same_col, mag,
                      [](size_t, size_t, float) { return true; });
  if (with_copy) {
    for (size_t p = 0; p < k; ++p)
      for (size_t i = 0; i < m; ++i)
        ok = check(copy[p * MR + i] == a[p * a_stride + i], "%s: a_copy(%zu, %zu) wrong", what, i, p) && ok;
    for (size_t x = MR * k; x < copy.size(); ++x)
      ok = check(copy[x] == kSentinel, "%s: a_copy written past MR*k", what) && ok;
  }
  (void)ok;
}

// Records the tile hook's calls.
struct HookLog {
  int calls = 0;
  size_t tile_i = 0, tile_j = 0, m = 0, n = 0;
  std::vector<float> values;  // values[j * m + i]
  static void hook(void* ctx, const F32Tile& t) {
    HookLog& h = *static_cast<HookLog*>(ctx);
    ++h.calls;
    h.tile_i = t.tile_i, h.tile_j = t.tile_j, h.m = t.m, h.n = t.n;
    h.values.assign(t.m * t.n, 0.0f);
    for (size_t j = 0; j < t.n; ++j)
      for (size_t i = 0; i < t.m; ++i) h.values[j * t.m + i] = t.values[j * t.ld + i];
  }
};

// The indirect form: ks taps of k channels, a random set of zero-row taps (`zero_mask` bit t*NR+j, over
// all pointers), pointers shifted back by `shift` floats so that the kernel's byte offset brings them
// back, output through c_rows (scattered, reversed columns) or c + j * ldc, and the tile hook.
void check_igemm(const F32GemmKernel& kernel, size_t m, size_t n, size_t k, size_t ks, uint64_t zero_mask,
                 size_t shift, bool use_rows, bool use_hook, const Case& cs, uint32_t seed) {
  const size_t MR = kernel.mr, NR = kernel.nr, ldc = MR + 3;
  uint32_t s = seed;
  std::vector<float> a(MR * ks * k + MR);
  for (float& v : a) v = nnkern_test::next_unit(s);  // packed: all MR rows readable (rows >= m feed unstored lanes)
  // x: one column of k floats per (tap, column), 2 apart; the pointers in the buffer are `shift` back.
  const size_t col = k + 2;
  std::vector<float> x(shift + ks * NR * col + 1, kSentinel);
  std::vector<float> zero(k + 1, 0.0f);
  zero[k] = kSentinel;  // only k zeros are readable by contract
  std::vector<const float*> ind(ks * NR);
  for (size_t t = 0; t < ks; ++t)
    for (size_t j = 0; j < NR; ++j) {
      const size_t q = t * NR + j;
      if ((zero_mask >> (q % 64)) & 1) {
        ind[q] = zero.data();
      } else {
        float* p = x.data() + shift + q * col;
        for (size_t i = 0; i < k; ++i) p[i] = nnkern_test::next_unit(s);
        ind[q] = p - shift;
      }
    }
  const Outputs out(MR, NR, ldc, cs, s);
  const F32Epilogue& ep = out.ep;
  const auto store_col = [&](size_t j) { return use_rows ? NR - 1 - j : j; };  // c_rows: reversed columns
  std::vector<float> c_ref = out.c0, c_got = out.c0;
  std::vector<float*> rows_ref(n), rows_got(n);
  for (size_t j = 0; j < n; ++j) {
    rows_ref[j] = c_ref.data() + store_col(j) * ldc;
    rows_got[j] = c_got.data() + store_col(j) * ldc;
  }
  poison_tile(c_got, m, n, ldc, ep, store_col);
  HookLog log;
  F32Epilogue ep_ref = ep, ep_got = ep;
  ep_ref.c_rows = rows_ref.data();
  if (use_rows) ep_got.c_rows = rows_got.data();
  if (use_hook) {
    ep_got.tile_hook = &HookLog::hook;
    ep_got.tile_ctx = &log;
    ep_got.tile_i = 7 * seed;
    ep_got.tile_j = seed;
  }
  const size_t offset = shift * sizeof(float);
  f32_gemm_reference(m, n, k, ks, a.data(), MR, ind.data(), NR, 1, zero.data(), offset, nullptr, 0, &ep_ref);
  kernel.igemm(m, n, k, ks, a.data(), ind.data(), zero.data(), offset, c_got.data(), ldc, &ep_got);

  char what[200];
  std::snprintf(what, sizeof what, "%s igemm %s m=%zu n=%zu k=%zu ks=%zu zeros=%llx shift=%zu rows=%d hook=%d",
                kernel.name, cs.name, m, n, k, ks, (unsigned long long)(zero_mask), shift, int(use_rows),
                int(use_hook));
  const auto mag = [&](size_t i, size_t j) {
    double sum = 0.0;
    for (size_t t = 0; t < ks; ++t) {
      const float* q = ind[t * NR + j] == zero.data() ? zero.data() : ind[t * NR + j] + shift;
      for (size_t p = 0; p < k; ++p) sum += std::fabs(double(a[(t * k + p) * MR + i]) * q[p]);
    }
    return sum;
  };
  const auto hook_value = [&](size_t i, size_t j, float got) {
    if (!(use_hook && log.calls == 1 && log.m == m && log.n == n)) return true;
    return check(std::memcmp(&log.values[j * m + i], &got, 4) == 0, "%s: hook value (%zu, %zu) differs", what, i, j);
  };
  bool ok = compare_c(what, c_got, c_ref, out.c0, m, n, NR, ldc, ks * k, ep, store_col, mag, hook_value);
  if (use_hook)
    ok = check(log.calls == 1 && log.m == m && log.n == n && log.tile_i == 7 * seed && log.tile_j == seed,
               "%s: hook called %d times with tile (%zu, %zu) %zux%zu", what, log.calls, log.tile_i, log.tile_j, log.m,
               log.n) && ok;
  else
    ok = check(log.calls == 0, "%s: hook called without one", what) && ok;
  (void)ok;
}

uint64_t next_mask(uint32_t& s, int pattern) {
  if (pattern == 0) return 0;                  // no padding tap
  if (pattern == 1) return ~uint64_t(0);       // every tap the zero row
  uint64_t r = 0;
  for (int w = 0; w < 4; ++w) r = r << 16 | (nnkern_test::next_random(s) >> 8);
  return pattern == 2 ? r : r & (r >> 7);      // about half, or about a quarter zero
}

}  // namespace

int main() {
  F32Epilogue plain;
  F32Epilogue full;
  full.alpha = -1.5f;
  full.beta = 0.25f;
  F32Epilogue relu;
  relu.alpha = 2.0f;
  relu.clamp = true;
  relu.clamp_min = 0.0f;
  relu.clamp_max = INFINITY;
  F32Epilogue clamp_beta;
  clamp_beta.beta = 1.0f;
  clamp_beta.clamp = true;
  clamp_beta.clamp_min = -0.5f;
  clamp_beta.clamp_max = 0.5f;
  const Case cases[] = {{"plain", plain, false}, {"alpha-beta-bias", full, true}, {"bias-relu", relu, true},
                        {"beta-clamp", clamp_beta, false}};

  // Every kernel of the family's list (kernels/f32_gemm_list.h) this CPU can run, the scalar one too.
  int kernels = 0;
  const KernelList<F32GemmKernel>& list = f32_gemm_family().list();
  for (size_t ki = 0; ki < list.kernels.size(); ++ki) {
    const F32GemmKernel* kernel = list.kernels[ki];
    const Isa isa = list.info[ki].level;
    if (!isa_supported(isa)) {
      std::printf("skip %s: this CPU lacks %s\n", kernel->name, isa_name(isa));
      continue;
    }
    std::printf("testing %s (%dx%d)\n", kernel->name, kernel->mr, kernel->nr);
    ++kernels;
    const long failed_before = nnkern_test::failed();
    uint32_t seed = 1;
    for (size_t k = 0; k <= kMaxK; ++k)
      for (size_t m = 1; m <= size_t(kernel->mr); ++m)
        for (size_t n = 0; n <= size_t(kernel->nr); ++n)
          for (int variant = 0; variant < 4; ++variant) {
            // variant bits: strided A, a_copy; B layout and the epilogue rotate with the tile.
            const size_t a_stride = kernel->mr + (variant & 1 ? 5 : 0);
            const bool with_copy = variant & 2;
            const bool scattered = (m + n + k) % 2;
            check_tile(*kernel, m, n, k, a_stride, with_copy, scattered, cases[(m + 2 * n + k + variant) % 4], ++seed);
          }
    // The long-K staging path of partial tiles (m < MR copies A in chunks) and the full lane path.
    for (size_t k : {63, 64, 65, 130, 300})
      for (size_t m : {size_t(1), size_t(kernel->mr) - 1, size_t(kernel->mr)})
        for (bool scattered : {false, true})
          check_tile(*kernel, m, kernel->nr, k, kernel->mr + 1, false, scattered, cases[1], ++seed);
    // Indirect form: every m x n tail, k over the unrolls, ks = 1..9 taps, zero-row patterns (none, all,
    // random), nonzero offsets, c_rows and the hook rotating with the tile.
    uint32_t ms = 12345;
    for (size_t ks = 1; ks <= 9; ++ks)
      for (size_t k : {0, 1, 2, 3, 4, 5, 7, 8, 9, 12, 16, 17, 23})
        for (size_t m = 1; m <= size_t(kernel->mr); ++m)
          for (size_t n = 1; n <= size_t(kernel->nr); ++n) {
            const int v = int(m + n + k + ks);
            check_igemm(*kernel, m, n, k, ks, next_mask(ms, v % 4), (v % 3) * 5, v % 2, (v / 2) % 2,
                        cases[(m + 2 * n + k) % 4], ++seed);
          }
    std::printf("  %s: %s\n", kernel->name, nnkern_test::failed() == failed_before ? "ok" : "FAILED");
  }
  nnkern_test::check(kernels > 1 || list.kernels.size() == 1, "no SIMD f32_gemm kernel ran on this CPU");
  return nnkern_test::finish();
}
