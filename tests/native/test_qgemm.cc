// Every integer GEMM micro-kernel this CPU can run (x86-64: VNNI / s16; aarch64 under qemu-user: the NEON
// widening, SDOT and USMMLA kernels) against the scalar reference of its kind, bit for bit:
//   every tile m = 1..MR, n = 1..NR; every k = 0 .. 4 inner-loop steps (all remainders);
//   data at the range ends (255 x -128, -128 x -128, ...) and random;
//   every epilogue: int32 (with ReLU, zero-point compensation, c_in partial sums), float32 (scale, bias,
//   ReLU), uint8 / int8 requantization (clamp, round half to even);
//   the in-kernel zero points of the QNNPACK-style kernels at their limits (x_zero 0 / 255,
//   w_zero -128 / 127);
//   nothing written outside the m x n tile; B rows read from exact-size allocations (no k tail overrun
//   can go unnoticed by ASan builds; the Python guard-page tests cover it under every build).
// Then the driver (ops/qgemm/qgemm.h) under each cap against an int64 reference: zero points, int8 / uint8
// activations, K blocks. Built for the host and cross-built for aarch64 (one ctest per QEMU CPU model).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "core/isa.h"
#include "harness.h"
#include "kernels/qgemm_list.h"
#include "ops/qgemm/qgemm.h"
#include "ops/qgemm/pack.h"
#include "core/kernel_family.h"

using namespace nnkern;
using nnkern_test::check;
using nnkern_test::next_random;

namespace {


const QGemmKernel& reference_of(QKind kind) {
  switch (kind) {
    case QKind::u8s8: return u8s8_gemm_8x4c4__scalar;
    case QKind::s8s8: return s8s8_gemm_8x4c4__scalar;
    default: return s16_gemm_8x4c2__scalar;
  }
}

constexpr size_t NR_MAX = 32;  // the widest NR of any kernel (AMX's 32 x 32)

// The tile sizes swept along a side of R: all of them, or for a large tile (more than 512 entries: AMX's
// 32 x 32, whose code changes at 16) 1, 2 and both sides of the half and of the end.
std::vector<size_t> tile_sizes(size_t R, bool large) {
  std::vector<size_t> v;
  for (size_t x = 1; x <= R; ++x)
    if (!large || x <= 2 || x + 1 >= R || (x + 1 >= R / 2 && x <= R / 2 + 1)) v.push_back(x);
  return v;
}

// Bytes of a packed weight (int16 for s16) and of an activation as the kernel reads it (int16 for s16 and s16w8).
size_t w_bytes(QKind kind) { return kind == QKind::s16 ? 2 : 1; }
size_t x_bytes(QKind kind) { return kind == QKind::s16 || kind == QKind::s16w8 ? 2 : 1; }

// W (MR x k, row-major, int64 values) packed for a kernel: a[(p / G) * MR * G + i * G + p % G].
std::vector<uint8_t> pack(const std::vector<int64_t>& w, size_t MR, size_t k, size_t G, QKind kind) {
  const size_t groups = (k + G - 1) / G, esz = w_bytes(kind);
  std::vector<uint8_t> out(std::max<size_t>(groups * MR * G, 1) * esz, 0);
  for (size_t i = 0; i < MR; ++i)
    for (size_t p = 0; p < k; ++p) {
      const size_t at = (p / G) * MR * G + i * G + p % G;
      if (esz == 1) out[at] = uint8_t(int8_t(w[i * k + p]));
      else {
        const int16_t v = int16_t(w[i * k + p]);
        std::memcpy(&out[2 * at], &v, 2);
      }
    }
  return out;
}

struct Data {
  int64_t w_lo, w_hi, x_lo, x_hi;  // value ranges of the operands
};

// The operands' ranges a kernel is exact for (a weight_bits 7 kernel: weights in [-64, 64]).
Data ranges(const QGemmKernel& k) {
  if (k.weight_bits == 7) return {-64, 64, 0, 255};
  switch (k.kind) {
    case QKind::u8s8: return {-128, 127, 0, 255};
    case QKind::s8s8: return {-128, 127, -128, 127};
    case QKind::s16w8: return {-128, 127, -32768, 32767};
    default: return {-32768, 32767, -32768, 32767};
  }
}

// Operand values: random, or at the range ends that give the largest products of either sign.
enum class Fill {
  random,
  max_pos,  // (w_lo, x_lo) when x is signed, (w_hi, x_hi) when it is not: the largest positive products
  max_neg,  // (w_lo, x_hi): the most negative products
  low_x,    // (w_lo, x_lo): with x_zero = 255, w_zero = 127 the in-kernel differences are (-255)(-255)
};

int64_t fill_value(Fill f, const Data& d, bool w, uint32_t& s) {
  const int64_t lo = w ? d.w_lo : d.x_lo, hi = w ? d.w_hi : d.x_hi;
  switch (f) {
    case Fill::random: return lo + int64_t(next_random(s) % uint32_t(hi - lo + 1));
    case Fill::max_pos: return d.x_lo < 0 ? lo : hi;
    case Fill::max_neg: return w ? lo : hi;
    default: return lo;
  }
}

struct EpilogueCase {
  const char* name;
  QOut out;
  bool comp, relu, scale, bias, c_in;
};

const EpilogueCase kCases[] = {
    {"i32", QOut::i32, false, false, false, false, false},
    {"i32-comp-relu", QOut::i32, true, true, false, false, false},
    {"i32-c_in", QOut::i32, false, false, false, false, true},
    {"f32-bias", QOut::f32, false, false, true, true, false},
    {"f32-comp-relu", QOut::f32, true, true, true, false, true},
    {"u8", QOut::u8, false, false, true, true, false},
    {"s8-comp-c_in", QOut::s8, true, false, true, true, true},
};

// Stores v as element p of an operand row: one byte, or an int16 (esz 2).
void put(uint8_t* row, size_t p, int64_t v, size_t esz) {
  if (esz == 1) row[p] = uint8_t(v);
  else {
    const int16_t v16 = int16_t(v);
    std::memcpy(row + 2 * p, &v16, 2);
  }
}

// One row of B (k values of `fill`) in its own exact-size allocation: ASan builds catch any read past it.
std::unique_ptr<uint8_t[]> make_row(size_t k, size_t esz, Fill fill, const Data& d, uint32_t& s) {
  std::unique_ptr<uint8_t[]> row(new uint8_t[std::max<size_t>(k * esz, 1)]);
  for (size_t p = 0; p < k; ++p) put(row.get(), p, fill_value(fill, d, false, s), esz);
  return row;
}

// W: MR x K, rows < m of `fill`, the rest zero (the panel's padding channels).
std::vector<int64_t> make_weights(size_t MR, size_t m, size_t K, Fill fill, const Data& d, uint32_t& s) {
  std::vector<int64_t> w(MR * K, 0);
  for (size_t i = 0; i < m; ++i)
    for (size_t p = 0; p < K; ++p) w[i * K + p] = fill_value(fill, d, true, s);
  return w;
}

size_t out_bytes(QOut out) { return out == QOut::i32 || out == QOut::f32 ? 4 : 1; }

// The epilogue's arrays (random, per-channel ones padded to 64 as the drivers do) and ec's QEpilogue on them
// (ldc: the row stride of c_in). Not copyable: ep points into the arrays.
struct EpilogueData {
  std::vector<int32_t> comp = std::vector<int32_t>(64), bzero = std::vector<int32_t>(64),
                       rsum = std::vector<int32_t>(NR_MAX), c_in;
  std::vector<float> scale = std::vector<float>(64), bias = std::vector<float>(64);
  QEpilogue ep;
  EpilogueData(const EpilogueCase& ec, size_t ldc, uint32_t& s) : c_in(NR_MAX * ldc) {
    for (auto& v : comp) v = int32_t(next_random(s) % 20001) - 10000;
    for (auto& v : bzero) v = int32_t(next_random(s) % 256) - 128;
    for (auto& v : rsum) v = int32_t(next_random(s) % 100001) - 50000;
    for (auto& v : c_in) v = int32_t(next_random(s));
    for (auto& v : scale) v = 1e-6f * float(1 + next_random(s) % 1000);
    for (auto& v : bias) v = float(int32_t(next_random(s) % 300) - 100);
    ep.out = ec.out;
    ep.relu = ec.relu;
    if (ec.comp) ep.col_comp = comp.data(), ep.b_zero = bzero.data(), ep.row_sum = rsum.data();
    if (ec.scale) ep.scale = scale.data();
    if (ec.bias) ep.bias = bias.data();
    ep.lo = ec.out == QOut::u8 ? 0.0f : -128.0f;
    ep.hi = ec.out == QOut::u8 ? 255.0f : 127.0f;
    if (ec.c_in) ep.c_in = c_in.data(), ep.ld_in = ldc;
  }
  EpilogueData(const EpilogueData&) = delete;
};

// The scalar reference of `kind` on the m x n tile of the K-deep product of w (MR x K) and the rows bp, in
// slices of its smaller tile (8 x 4), into c_ref (ldc apart, ep's output type).
void reference_tile(QKind kind, const std::vector<int64_t>& w, size_t m, size_t n, size_t K, const void* const* bp,
                    const QEpilogue& ep, uint8_t* c_ref, size_t ldc) {
  const QGemmKernel& ref = reference_of(kind);
  const size_t RMR = size_t(ref.mr), ob = out_bytes(ep.out);
  for (size_t i0 = 0; i0 < m; i0 += RMR) {
    const size_t mi = std::min(RMR, m - i0);
    std::vector<int64_t> wpad(RMR * K, 0);
    std::copy(w.begin() + i0 * K, w.begin() + (i0 + mi) * K, wpad.begin());
    const std::vector<uint8_t> a_ref = pack(wpad, RMR, K, size_t(ref.kgroup), ref.kind);
    for (size_t j0 = 0; j0 < n; j0 += size_t(ref.nr)) {
      const size_t nj = std::min(size_t(ref.nr), n - j0);
      QEpilogue e = ep;
      if (e.col_comp) e.col_comp += i0;
      if (e.b_zero) e.b_zero += i0;
      if (e.w_zero) e.w_zero += i0;
      if (e.scale) e.scale += i0;
      if (e.bias) e.bias += i0;
      if (e.row_sum) e.row_sum += j0;
      if (e.c_in) e.c_in += j0 * ldc + i0;
      ref.run(mi, nj, K, 1, a_ref.data(), bp + j0, nullptr, 0, c_ref + (j0 * ldc + i0) * ob, ldc, &e);
    }
  }
}

// One tile with `kernel` and with the reference of its kind; compares every output byte.
void check_tile(const QGemmKernel& kernel, size_t m, size_t n, size_t k, Fill fill, const EpilogueCase& ec,
                int32_t x_zero, const std::vector<int32_t>* w_zero, uint32_t seed) {
  const size_t MR = size_t(kernel.mr), esz = x_bytes(kernel.kind), ldc = MR + 3;
  const Data d = ranges(kernel);
  uint32_t s = seed;
  const std::vector<int64_t> w = make_weights(MR, m, k, fill, d, s);
  const std::vector<uint8_t> a = pack(w, MR, k, size_t(kernel.kgroup), kernel.kind);
  std::vector<std::unique_ptr<uint8_t[]>> rows(n);
  std::vector<const void*> bp(n);
  for (size_t j = 0; j < n; ++j) {
    rows[j] = make_row(k, esz, fill, d, s);
    bp[j] = rows[j].get();
  }
  EpilogueData ed(ec, ldc, s);
  QEpilogue& ep = ed.ep;
  if (kernel.zero_points_in_kernel) {
    ep.x_zero = x_zero;
    ep.w_zero = w_zero ? w_zero->data() : nullptr;
  }
  const size_t ob = out_bytes(ec.out);
  std::vector<uint8_t> c_got(NR_MAX * ldc * ob, 0xA5), c_ref(c_got);
  reference_tile(kernel.kind, w, m, n, k, bp.data(), ep, c_ref.data(), ldc);
  kernel.run(m, n, k, 1, a.data(), bp.data(), nullptr, 0, c_got.data(), ldc, &ep);
  const bool same = std::memcmp(c_got.data(), c_ref.data(), c_got.size()) == 0;
  if (!same) {
    size_t at = 0;
    while (c_got[at] == c_ref[at]) ++at;
    const size_t el = at / ob;
    check(false, "%s %s m=%zu n=%zu k=%zu fill=%d x_zero=%d w_zero=%s: first difference at C(%zu, %zu)%s",
          kernel.name, ec.name, m, n, k, int(fill), int(x_zero), w_zero ? "set" : "null", el % ldc, el / ldc,
          el % ldc >= m || el / ldc >= n ? " (outside the tile)" : "");
  } else {
    check(true, "tile");
  }
}

void test_kernel(const QGemmKernel& kernel) {
  const size_t MR = size_t(kernel.mr), NR = size_t(kernel.nr);
  const size_t step = size_t(std::max(kernel.kstep, kernel.kgroup));
  const bool large = MR * NR > 512;  // sampled: edge sizes to 2 steps deep, then every (m, n) at one k
  const size_t kmax = large ? 2 * step + 1 : 4 * step + step - 1;
  std::printf("testing %s (%zux%zu, G = %d, k step %zu%s)\n", kernel.name, MR, NR, kernel.kgroup, step,
              kernel.zero_points_in_kernel ? ", zero points in kernel" : "");
  const long failed_before = nnkern_test::failed();
  uint32_t seed = 7;
  std::vector<int32_t> wz_rand(64), wz_lo(64, -128), wz_hi(64, 127);
  for (auto& v : wz_rand) v = int32_t(next_random(seed) % 256) - 128;
  const size_t ncases = sizeof(kCases) / sizeof(kCases[0]);
  for (size_t k = 0; k <= kmax; ++k)
    for (size_t m : tile_sizes(MR, large))
      for (size_t n : tile_sizes(NR, large)) {
        const EpilogueCase& ec = kCases[(m + 3 * n + k) % ncases];
        check_tile(kernel, m, n, k, Fill::random, ec, 0, nullptr, ++seed);
        if (kernel.zero_points_in_kernel)
          check_tile(kernel, m, n, k, Fill::random, kCases[(m + n + 2 * k) % ncases], int32_t(next_random(seed) % 256),
                     &wz_rand, ++seed);
      }
  if (large)
    for (size_t m = 1; m <= MR; ++m)
      for (size_t n = 1; n <= NR; ++n) check_tile(kernel, m, n, step + 5, Fill::random, kCases[(m + 3 * n) % ncases], 0, nullptr, ++seed);
  // The extremes, every epilogue, full and partial tiles, long K (sums far beyond int16).
  for (size_t k : {kmax, size_t(1000), size_t(4 * step * 64 + 3)})
    for (const EpilogueCase& ec : kCases)
      for (size_t m : {size_t(1), MR - 1, MR})
        for (size_t n : {size_t(1), NR})
          for (Fill f : {Fill::max_pos, Fill::max_neg, Fill::low_x}) {
            check_tile(kernel, m, n, k, f, ec, 0, nullptr, ++seed);
            if (!kernel.zero_points_in_kernel) continue;
            // uint8 x int8 with zero points at the far ends: |x - x_zero| = |w - w_zero| = 255.
            if (f == Fill::max_pos) check_tile(kernel, m, n, k, f, ec, 0, &wz_lo, ++seed);   // (255)(255)
            if (f == Fill::max_neg) check_tile(kernel, m, n, k, f, ec, 0, &wz_hi, ++seed);   // (255)(-255)
            if (f == Fill::low_x) check_tile(kernel, m, n, k, f, ec, 255, &wz_hi, ++seed);   // (-255)(-255)
          }
  std::printf("  %s: %s\n", kernel.name, nnkern_test::failed() == failed_before ? "ok" : "FAILED");
}

// The indirect form (ks taps, zero row, b_offset; kernels/qgemm.h) against the plain reference on the taps
// concatenated: column j's K = ks * k values are its taps' rows in turn (the zero row's values for a padding
// tap), the weights' rows the taps' blocks in turn. The kernel writes through c_rows in reversed order and
// reports through the tile hook.
struct HookSeen {
  int calls = 0;
  QTile last{};
};

void seen(void* ctx, const QTile& t) {
  auto* h = static_cast<HookSeen*>(ctx);
  ++h->calls;
  h->last = t;
}

void check_indirect(const QGemmKernel& kernel, size_t m, size_t n, size_t k, size_t ks, uint32_t zero_mask, Fill fill,
                    const EpilogueCase& ec, int32_t x_zero, uint32_t seed) {
  const size_t MR = size_t(kernel.mr), NR = size_t(kernel.nr), G = size_t(kernel.kgroup), esz = x_bytes(kernel.kind);
  const size_t wsz = w_bytes(kernel.kind), K = ks * k, ldc = MR + 1, kg = (k + G - 1) / G;
  const Data d = ranges(kernel);
  uint32_t s = seed;
  // Weights: MR x K (rows beyond m zero); the kernel's panel is tap after tap, each padded to whole groups.
  const std::vector<int64_t> w = make_weights(MR, m, K, fill, d, s);
  std::vector<uint8_t> a(std::max<size_t>(ks * kg * G * MR, 1) * wsz, 0);
  for (size_t t = 0; t < ks; ++t) {
    std::vector<int64_t> wt(MR * k);
    for (size_t i = 0; i < MR; ++i)
      for (size_t p = 0; p < k; ++p) wt[i * k + p] = w[i * K + t * k + p];
    const std::vector<uint8_t> pt = pack(wt, MR, k, G, kernel.kind);
    std::memcpy(a.data() + t * kg * G * MR * wsz, pt.data(), kg * G * MR * wsz);
  }
  // The zero row (x_zero for the in-kernel zero points, else a value of the range) and one exact-size row per
  // real tap entry; the kernel sees them as pointer - b_offset.
  const int64_t zval = kernel.zero_points_in_kernel ? x_zero : fill_value(Fill::random, d, false, s);
  std::unique_ptr<uint8_t[]> zero(new uint8_t[std::max<size_t>(k * esz, 1)]);
  for (size_t p = 0; p < k; ++p) put(zero.get(), p, zval, esz);
  const size_t b_offset = 64 * 1024 + 3 * esz;
  std::vector<std::unique_ptr<uint8_t[]>> rows;
  std::vector<const void*> ind(ks * NR, reinterpret_cast<const void*>(uintptr_t(8)));  // j >= n: never read
  std::vector<std::vector<uint8_t>> flat(n, std::vector<uint8_t>(std::max<size_t>(K * esz, 1)));
  for (size_t t = 0; t < ks; ++t)
    for (size_t j = 0; j < n; ++j) {
      const bool pad = (zero_mask >> ((t * n + j) % 32)) & 1;
      const uint8_t* src = zero.get();
      if (!pad) {
        rows.push_back(make_row(k, esz, fill, d, s));
        src = rows.back().get();
        ind[t * NR + j] = reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(src) - b_offset);
      } else {
        ind[t * NR + j] = zero.get();
      }
      std::memcpy(flat[j].data() + t * k * esz, src, k * esz);
    }
  std::vector<const void*> fp(n);
  for (size_t j = 0; j < n; ++j) fp[j] = flat[j].data();
  EpilogueData ed(ec, ldc, s);
  QEpilogue& ep = ed.ep;
  if (kernel.zero_points_in_kernel) ep.x_zero = x_zero;
  const size_t ob = out_bytes(ec.out);
  std::vector<uint8_t> c_ref(NR_MAX * ldc * ob, 0xA5), c_got(c_ref), c_untouched(c_ref);
  reference_tile(kernel.kind, w, m, n, K, fp.data(), ep, c_ref.data(), ldc);  // on the flattened GEMM
  std::vector<void*> c_rows(n);
  for (size_t j = 0; j < n; ++j) c_rows[j] = c_got.data() + (n - 1 - j) * ldc * ob;
  ep.c_rows = c_rows.data();
  HookSeen hs;
  ep.hook = seen, ep.hook_ctx = &hs, ep.tile_i = 5 * m, ep.tile_j = 7 * n;
  kernel.run(m, n, k, ks, a.data(), ind.data(), zero.get(), b_offset, c_untouched.data(), ldc, &ep);
  bool same = true;
  for (size_t j = 0; j < NR_MAX && same; ++j) {
    const size_t from = j < n ? n - 1 - j : j;  // column j of c_got holds the kernel's column n - 1 - j
    same = std::memcmp(c_got.data() + j * ldc * ob, c_ref.data() + from * ldc * ob, ldc * ob) == 0;
  }
  for (uint8_t v : c_untouched) same = same && v == 0xA5;  // c itself is never written with c_rows
  check(same, "%s indirect %s m=%zu n=%zu k=%zu ks=%zu zero mask %08x fill=%d: differs from the flattened reference",
        kernel.name, ec.name, m, n, k, ks, zero_mask, int(fill));
  check(hs.calls == 1 && hs.last.i0 == 5 * m && hs.last.j0 == 7 * n && hs.last.m == m && hs.last.n == n &&
            hs.last.out == ec.out && hs.last.c == c_untouched.data() && hs.last.c_rows == c_rows.data(),
        "%s tile hook: %d calls, last (%zu, %zu) %zu x %zu", kernel.name, hs.calls, hs.last.i0, hs.last.j0, hs.last.m,
        hs.last.n);
}

void test_indirect(const QGemmKernel& kernel) {
  const size_t MR = size_t(kernel.mr), NR = size_t(kernel.nr);
  const size_t step = size_t(std::max(kernel.kstep, kernel.kgroup));
  const long failed_before = nnkern_test::failed();
  const size_t ncases = sizeof(kCases) / sizeof(kCases[0]);
  uint32_t seed = 11;
  // Every tail (m, n, k past the step) with ks and the zero pattern cycling; then ks 1..9 with all / none /
  // random zero taps at the extremes.
  const bool large = MR * NR > 512;
  for (size_t k = 1; k <= 2 * step + 1; ++k)
    for (size_t m : tile_sizes(MR, large))
      for (size_t n : tile_sizes(NR, large)) {
        const size_t ks = 1 + (m + n + k) % 9;
        const uint32_t mask = (m + k) % 3 == 0 ? 0u : next_random(seed);
        check_indirect(kernel, m, n, k, ks, mask, Fill::random, kCases[(m + 3 * n + k) % ncases], int32_t(next_random(seed) % 256), ++seed);
      }
  for (size_t ks = 1; ks <= 9; ++ks)
    for (uint32_t mask : {0u, ~0u, next_random(seed)})
      for (Fill f : {Fill::max_pos, Fill::max_neg, Fill::random})
        for (const EpilogueCase& ec : kCases)
          check_indirect(kernel, MR - (ks % 2), NR - (ks % 3 == 0), step + 3 + ks, ks, mask, f, ec,
                         f == Fill::max_pos ? 0 : 255, ++seed);
  std::printf("  %s indirect: %s\n", kernel.name, nnkern_test::failed() == failed_before ? "ok" : "FAILED");
}

// qgemm_pack_panel_taps (the convolutions' weight panels) against the layout of kernels/qgemm.h: tap t of
// channel i, k p at a[(t * kg + p / G) * MR * G + i * G + p % G], zero padding, and the column sums.
void test_pack_taps(const QGemmKernel& kernel) {
  const size_t MR = size_t(kernel.mr), G = size_t(kernel.kgroup), esz = w_bytes(kernel.kind);
  uint32_t s = 5;
  for (size_t K : {size_t(1), G + 1, 3 * G + 2})
    for (size_t ks : {size_t(1), size_t(4)})
      for (size_t nn : {size_t(1), MR}) {
        const size_t N = MR + 3, n0 = 2, kg = (K + G - 1) / G;
        std::vector<int8_t> w8(ks * K * N);
        std::vector<int16_t> w16(ks * K * N);
        for (size_t x = 0; x < w8.size(); ++x) w8[x] = int8_t(next_random(s)), w16[x] = int16_t(next_random(s));
        const bool s16 = kernel.kind == QKind::s16;
        std::vector<uint8_t> got(qgemm_panel_bytes(kernel, K, ks), 0xA5);
        std::vector<int32_t> cs(MR, 7);
        qgemm_pack_panel_taps(kernel, s16 ? QType::s16 : QType::s8, got.data(),
                              s16 ? static_cast<const void*>(w16.data()) : w8.data(), N, K, ks, K * N, n0, nn, cs.data());
        bool ok = got.size() == ks * kg * G * MR * esz;
        for (size_t t = 0; t < ks && ok; ++t)
          for (size_t i = 0; i < MR; ++i) {
            for (size_t p = 0; p < kg * G; ++p) {
              const size_t src = t * K * N + p * N + n0 + i;
              const int64_t want = i < nn && p < K ? (s16 ? w16[src] : w8[src]) : 0;
              const size_t at = (t * kg + p / G) * MR * G + i * G + p % G;
              int64_t v;
              if (s16) {
                int16_t v16;
                std::memcpy(&v16, &got[2 * at], 2);
                v = v16;
              } else {
                v = int8_t(got[at]);
              }
              ok = ok && v == want;
            }
          }
        for (size_t i = 0; i < MR && ok; ++i) {
          int64_t sum = 0;
          for (size_t t = 0; t < ks; ++t)
            for (size_t p = 0; p < K && i < nn; ++p) sum += s16 ? w16[t * K * N + p * N + n0 + i] : w8[t * K * N + p * N + n0 + i];
          ok = cs[i] == int32_t(sum);
        }
        check(ok, "qgemm_pack_panel_taps for %s K=%zu ks=%zu nn=%zu", kernel.name, K, ks, nn);
      }
}

// The driver under the current cap against int64: C = (A - za)(B - zb[n]).
void test_driver(Isa cap) {
  set_max_isa(cap);
  const QGemmKernel& k8 = qgemm_kernel(8);
  uint32_t s = 99;
  const size_t shapes[][3] = {{1, 1, 1}, {7, 9, 13}, {8, 8, 8}, {9, 17, 33}, {23, 70, 130}, {64, 33, 301}};
  for (const auto& sh : shapes)
    for (int variant = 0; variant < 4; ++variant) {
      const size_t M = sh[0], N = sh[1], K = sh[2];
      const bool s8 = variant & 1, col_zb = variant & 2;
      std::vector<uint8_t> a(M * K);
      std::vector<int8_t> b(K * N);
      std::vector<int32_t> zb(N), c(M * N);
      for (auto& v : a) v = uint8_t(next_random(s));
      for (auto& v : b) v = int8_t(next_random(s));
      for (auto& v : zb) v = int32_t(next_random(s) % 256) - 128;
      const int32_t za = s8 ? int32_t(next_random(s) % 256) - 128 : int32_t(next_random(s) % 256);
      QgemmArgs g;
      g.M = M, g.N = N, g.K = K;
      g.a_type = s8 ? QType::s8 : QType::u8;
      g.a = a.data(), g.lda = K, g.a_zero = za;
      g.b_type = QType::s8, g.b = b.data(), g.ldb = N;
      if (col_zb) g.b_zero = zb.data();
      else g.b_zero_scalar = zb[0];
      g.c = c.data(), g.ldc = N;
      for (size_t kc : {size_t(0), size_t(16)}) {  // whole K, and K blocks through the c_in partial sums
        set_qgemm_kc(kc);
        qgemm(g);
        bool ok = true;
        for (size_t i = 0; i < M && ok; ++i)
          for (size_t n = 0; n < N && ok; ++n) {
            int64_t want = 0;
            for (size_t p = 0; p < K; ++p) {
              const int64_t av = s8 ? int64_t(int8_t(a[i * K + p])) : int64_t(a[i * K + p]);
              want += (av - za) * (int64_t(b[p * N + n]) - (col_zb ? zb[n] : zb[0]));
            }
            ok = check(c[i * N + n] == int32_t(want), "driver cap %s (%s) %zux%zux%zu %s za=%d %s kc=%zu: C(%zu, %zu) = %d, want %lld",
                       isa_name(cap), k8.name, M, N, K, s8 ? "s8" : "u8", int(za), col_zb ? "zb per column" : "zb scalar",
                       kc, i, n, c[i * N + n], (long long)want);
          }
      }
      set_qgemm_kc(0);
    }
}

}  // namespace

int main() {
  // Every kernel of the list (kernels/qgemm_list.h) this CPU can run; the references are tested as the
  // oracle of the others (and the indirect form of each against the plain one of its reference).
  int tested = 0;
  nnkern_test::for_each_runnable(qgemm_family().list(), [&](const QGemmKernel& kern, Isa level) {
    if (level != Isa::scalar) test_kernel(kern), ++tested;
    test_indirect(kern);
    test_pack_taps(kern);
  });
  for (Isa cap : isa_levels())
    if (isa_supported(cap)) test_driver(cap);
  check(tested > 0 || isa_levels().size() == 1, "no SIMD integer GEMM kernel ran on this CPU");
  return nnkern_test::finish();
}
